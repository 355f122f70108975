package dev.weir.bench;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Test utility for the Flink side of the Kafka benchmark (not part of the measured job): creates
 * topics, produces keyed input, and checks the job's output with a {@code read_committed} consumer.
 *
 * <pre>
 *   Tool create-topic BOOTSTRAP TOPIC PARTITIONS
 *   Tool produce BOOTSTRAP TOPIC RECORDS KEYS [VALUE_BYTES=100]   keys k&lt;i mod KEYS&gt;
 *   Tool verify BOOTSTRAP INPUT OUTPUT
 * </pre>
 *
 * {@code verify} passes when the output holds exactly one record per input record and, for every
 * key, the values {@code "<key> 1"} .. {@code "<key> n"} in that order, n being the key's number of
 * input records.
 */
public final class Tool {
    private Tool() {}

    public static void main(String[] args) throws Exception {
        int code;
        if (args.length >= 4 && args[0].equals("create-topic")) {
            code = createTopic(args[1], args[2], Integer.parseInt(args[3]));
        } else if ((args.length == 5 || args.length == 6) && args[0].equals("produce")) {
            int valueBytes = args.length == 6 ? Integer.parseInt(args[5]) : 100;
            code = produce(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]), valueBytes);
        } else if (args.length == 4 && args[0].equals("verify")) {
            code = verify(args[1], args[2], args[3]);
        } else {
            System.err.println(
                    "usage: Tool create-topic BOOTSTRAP TOPIC PARTITIONS\n"
                            + "       Tool produce BOOTSTRAP TOPIC RECORDS KEYS [VALUE_BYTES]\n"
                            + "       Tool verify BOOTSTRAP INPUT OUTPUT");
            code = 2;
        }
        System.exit(code);
    }

    private static int createTopic(String bootstrap, String topic, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
        System.out.println("created " + topic + " partitions=" + partitions);
        return 0;
    }

    private static int produce(String bootstrap, String topic, long records, long keys, int valueBytes)
            throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(256 * 1024));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        long started = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long i = 0; i < records; i++) {
                String key = "k" + (i % keys);
                StringBuilder value = new StringBuilder(valueBytes).append(key).append(' ').append(i).append(' ');
                while (value.length() < valueBytes) {
                    value.append('x');
                }
                producer.send(new ProducerRecord<>(
                        topic,
                        key.getBytes(StandardCharsets.UTF_8),
                        value.toString().getBytes(StandardCharsets.UTF_8)));
            }
            producer.flush();
        }
        double secs = (System.nanoTime() - started) / 1e9;
        System.out.printf("produced %d records to %s in %.2f s (%.0f records/s)%n",
                records, topic, secs, records / secs);
        return 0;
    }

    /** Reads a topic from the start to its (last stable) end offset. */
    interface Visitor {
        void accept(ConsumerRecord<byte[], byte[]> record);
    }

    private static long readAll(String bootstrap, String topic, Visitor visitor) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long n = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.nanoTime() + Duration.ofMinutes(5).toNanos();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp) < end.get(tp)) {
                        done = false;
                        break;
                    }
                }
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("timed out reading " + topic);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    visitor.accept(r);
                    n++;
                }
            }
        }
        return n;
    }

    private static int verify(String bootstrap, String input, String output) {
        Map<String, long[]> expected = new HashMap<>();
        long inputs = readAll(bootstrap, input, r -> {
            String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
            expected.computeIfAbsent(key, k -> new long[1])[0]++;
        });
        Map<String, long[]> seen = new HashMap<>();
        List<String> errors = new ArrayList<>();
        long[] bad = {0};
        long outputs = readAll(bootstrap, output, r -> {
            String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
            String value = new String(r.value(), StandardCharsets.UTF_8);
            int space = value.lastIndexOf(' ');
            long[] last = seen.computeIfAbsent(key, k -> new long[1]);
            long count = -1;
            if (space >= 0 && value.substring(0, space).equals(key)) {
                try {
                    count = Long.parseLong(value.substring(space + 1));
                } catch (NumberFormatException e) {
                    count = -1;
                }
            }
            if (count != last[0] + 1) {
                bad[0]++;
                if (errors.size() < 10) {
                    errors.add("key " + key + ": got \"" + value + "\" after count " + last[0]
                            + " (partition " + r.partition() + " offset " + r.offset() + ")");
                }
            }
            last[0] = Math.max(last[0], count);
        });
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            long[] got = seen.get(e.getKey());
            long n = got == null ? 0 : got[0];
            if (n != e.getValue()[0]) {
                bad[0]++;
                if (errors.size() < 20) {
                    errors.add("key " + e.getKey() + ": last count " + n + ", input count " + e.getValue()[0]);
                }
            }
        }
        for (String key : seen.keySet()) {
            if (!expected.containsKey(key)) {
                bad[0]++;
                if (errors.size() < 30) {
                    errors.add("key " + key + " is in the output but not in the input");
                }
            }
        }
        boolean ok = bad[0] == 0 && inputs == outputs;
        System.out.println("verify " + (ok ? "ok" : "FAILED") + ": input_records=" + inputs
                + " output_records=" + outputs + " keys=" + expected.size() + " problems=" + bad[0]);
        errors.forEach(System.out::println);
        return ok ? 0 : 1;
    }
}
