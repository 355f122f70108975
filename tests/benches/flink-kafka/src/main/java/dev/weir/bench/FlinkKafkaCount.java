package dev.weir.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.WebOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaSinkBuilder;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The Apache Flink side of Weir's Kafka benchmark.
 *
 * <p>The same pipeline as Weir's Kafka word-count counter, so the two can be compared on the same
 * broker: read every partition of the input topic from the earliest offset up to the latest offset
 * as of start (a bounded source, so the job ends when the input is consumed), key each record by
 * its Kafka record key (the word, UTF-8), keep a count per key in keyed state, and for every input
 * record write {@code "<key> <count>"} to the output topic, keyed by the key.
 *
 * <p>Runtime: an in-process MiniCluster ({@code createLocalEnvironment}), HashMap state backend,
 * exactly-once checkpointing every {@code --checkpoint-interval-ms} to a filesystem checkpoint
 * directory (under a per-run temp directory, deleted at the end with Flink's other local files,
 * unless {@code --checkpoint-dir} is given), and a Kafka sink in exactly-once (transactions committed on checkpoints) or
 * at-least-once mode. Restarts are disabled: any failure ends the run with a non-zero exit.
 *
 * <p>Prints one line when the job has finished: {@code flink-kafka-count elapsed_ms=<ms of
 * env.execute()> net_runtime_ms=<Flink's job runtime> ...}; exits non-zero on failure.
 */
public final class FlinkKafkaCount {

    private static final String USAGE =
            "usage: FlinkKafkaCount --bootstrap HOST:PORT --input TOPIC --output TOPIC"
                    + " [--parallelism 1] [--delivery exactly-once|at-least-once]"
                    + " [--checkpoint-interval-ms 1000] [--checkpoint-dir DIR]"
                    + " [--transaction-timeout-ms 60000]";

    private FlinkKafkaCount() {}

    public static void main(String[] args) {
        int code;
        try {
            code = run(args);
        } catch (Throwable t) {
            System.err.println("flink-kafka-count failed:");
            t.printStackTrace();
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        // Kafka client and Flink threads may linger after the job; the exit code is the result.
        System.exit(code);
    }

    private static int run(String[] argv) throws Exception {
        Map<String, String> args = parseArgs(argv);
        if (args == null) {
            System.err.println(USAGE);
            return 2;
        }
        String bootstrap = required(args, "bootstrap");
        String input = required(args, "input");
        String output = required(args, "output");
        int parallelism = Integer.parseInt(args.getOrDefault("parallelism", "1"));
        long checkpointMs = Long.parseLong(args.getOrDefault("checkpoint-interval-ms", "1000"));
        String txTimeoutMs = args.getOrDefault("transaction-timeout-ms", "60000");
        DeliveryGuarantee delivery;
        switch (args.getOrDefault("delivery", "exactly-once")) {
            case "exactly-once":
                delivery = DeliveryGuarantee.EXACTLY_ONCE;
                break;
            case "at-least-once":
                delivery = DeliveryGuarantee.AT_LEAST_ONCE;
                break;
            default:
                throw new IllegalArgumentException(
                        "--delivery must be exactly-once or at-least-once\n" + USAGE);
        }
        if (parallelism < 1 || checkpointMs < 10) {
            throw new IllegalArgumentException(
                    "--parallelism must be >= 1 and --checkpoint-interval-ms >= 10");
        }

        requireTopics(bootstrap, input, output);

        // Everything Flink writes locally (checkpoints unless --checkpoint-dir, the RPC system's
        // extracted jar, MiniCluster working dirs, REST uploads) goes under one directory per run,
        // deleted at the end, so runs leave nothing behind in the temp directory.
        Path runDir = Files.createTempDirectory("weir-flink-kafka-");
        try {
            return runJob(args, bootstrap, input, output, parallelism, checkpointMs, txTimeoutMs,
                    delivery, runDir);
        } finally {
            deleteRecursively(runDir);
        }
    }

    private static int runJob(Map<String, String> args, String bootstrap, String input,
            String output, int parallelism, long checkpointMs, String txTimeoutMs,
            DeliveryGuarantee delivery, Path runDir) throws Exception {
        Path checkpointDir = args.containsKey("checkpoint-dir")
                ? Paths.get(args.get("checkpoint-dir")).toAbsolutePath()
                : runDir.resolve("checkpoints");
        Files.createDirectories(checkpointDir);
        Path tmpDir = Files.createDirectories(runDir.resolve("tmp"));
        Path webDir = Files.createDirectories(runDir.resolve("web"));

        Configuration conf = new Configuration();
        conf.set(CoreOptions.TMP_DIRS, tmpDir.toString());
        conf.set(WebOptions.TMP_DIR, webDir.toString());
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, checkpointDir.toUri().toString());
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(checkpointMs));
        conf.set(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingMode.EXACTLY_ONCE);
        // A benchmark run fails rather than restarting (Flink would otherwise retry forever).
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "disable");
        // The MiniCluster's REST endpoint (there is no web UI on the classpath): loopback, any port.
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.ADDRESS, "127.0.0.1");
        conf.set(RestOptions.BIND_PORT, "0");

        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);

        KafkaSource<String> source =
                KafkaSource.<String>builder()
                        .setBootstrapServers(bootstrap)
                        .setTopics(input)
                        .setGroupId("weir-bench-flink-" + output)
                        .setStartingOffsets(OffsetsInitializer.earliest())
                        .setBounded(OffsetsInitializer.latest())
                        .setDeserializer(new RecordKey())
                        .build();

        KafkaSinkBuilder<Tuple2<String, String>> sinkBuilder =
                KafkaSink.<Tuple2<String, String>>builder()
                        .setBootstrapServers(bootstrap)
                        .setDeliveryGuarantee(delivery)
                        .setRecordSerializer(new KeyedLine(output));
        if (delivery == DeliveryGuarantee.EXACTLY_ONCE) {
            sinkBuilder
                    .setTransactionalIdPrefix(
                            "weir-bench-flink-" + output + "-" + System.currentTimeMillis())
                    .setProperty("transaction.timeout.ms", txTimeoutMs);
        }

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source")
                .keyBy(key -> key, Types.STRING)
                .process(new CountPerKey())
                .name("count")
                .sinkTo(sinkBuilder.build())
                .name("kafka-sink");

        long started = System.nanoTime();
        JobExecutionResult result = env.execute("flink-kafka-count " + input + " -> " + output);
        long elapsedMs = (System.nanoTime() - started) / 1_000_000;

        System.out.println(
                "flink-kafka-count elapsed_ms=" + elapsedMs
                        + " net_runtime_ms=" + result.getNetRuntime()
                        + " parallelism=" + parallelism
                        + " delivery=" + args.getOrDefault("delivery", "exactly-once")
                        + " checkpoint_interval_ms=" + checkpointMs);
        return 0;
    }

    /**
     * Fails fast, before the timed part, when the broker cannot be reached or a topic is missing
     * (the job itself would wait on metadata for a minute and more).
     */
    private static void requireTopics(String bootstrap, String... topics) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(p)) {
            admin.describeTopics(List.of(topics)).allTopicNames().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException(
                    "cannot describe topics " + List.of(topics) + " on " + bootstrap
                            + " (broker down or topic missing?)", e);
        }
    }

    /** The Kafka record key (UTF-8) is the word; the value is not used. */
    static final class RecordKey implements KafkaRecordDeserializationSchema<String> {
        private static final long serialVersionUID = 1L;

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<String> out)
                throws IOException {
            byte[] key = record.key();
            out.collect(key == null ? "" : new String(key, StandardCharsets.UTF_8));
        }

        @Override
        public TypeInformation<String> getProducedType() {
            return Types.STRING;
        }
    }

    /** A count per key in a {@code ValueState<Long>}; emits (key, "key count") per record. */
    static final class CountPerKey
            extends KeyedProcessFunction<String, String, Tuple2<String, String>> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(
                String key, Context ctx, Collector<Tuple2<String, String>> out) throws Exception {
            Long previous = count.value();
            long next = previous == null ? 1L : previous + 1L;
            count.update(next);
            out.collect(Tuple2.of(key, key + " " + next));
        }
    }

    /** Record key = the key's UTF-8 bytes, value = "key count" UTF-8; the producer partitions by key. */
    static final class KeyedLine implements KafkaRecordSerializationSchema<Tuple2<String, String>> {
        private static final long serialVersionUID = 1L;
        private final String topic;

        KeyedLine(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(
                Tuple2<String, String> element, KafkaSinkContext context, Long timestamp) {
            return new ProducerRecord<>(
                    topic,
                    element.f0.getBytes(StandardCharsets.UTF_8),
                    element.f1.getBytes(StandardCharsets.UTF_8));
        }
    }

    /** {@code --name value} pairs; null (usage) on a malformed list or {@code --help}. */
    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || argv[i].equals("--help") || i + 1 >= argv.length) {
                return null;
            }
            String name = argv[i].substring(2);
            switch (name) {
                case "bootstrap":
                case "input":
                case "output":
                case "parallelism":
                case "delivery":
                case "checkpoint-interval-ms":
                case "checkpoint-dir":
                case "transaction-timeout-ms":
                    args.put(name, argv[i + 1]);
                    break;
                default:
                    System.err.println("unknown argument --" + name);
                    return null;
            }
        }
        return args;
    }

    private static String required(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing --" + name + "\n" + USAGE);
        }
        return value;
    }

    /**
     * Best effort: Flink may still be removing its own files under {@code dir} while this runs, so
     * vanished entries are skipped and the walk is retried; never fails the run.
     */
    private static void deleteRecursively(Path dir) {
        for (int attempt = 0; attempt < 5 && Files.exists(dir); attempt++) {
            try {
                Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                    @Override
                    public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                        deleteIfExists(file);
                        return FileVisitResult.CONTINUE;
                    }

                    @Override
                    public FileVisitResult visitFileFailed(Path file, IOException e) {
                        return FileVisitResult.CONTINUE;
                    }

                    @Override
                    public FileVisitResult postVisitDirectory(Path d, IOException e) {
                        deleteIfExists(d);
                        return FileVisitResult.CONTINUE;
                    }
                });
            } catch (IOException | RuntimeException e) {
                // retried below
            }
            if (Files.exists(dir)) {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    private static void deleteIfExists(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            // a directory Flink is still writing to: the next attempt gets it
        }
    }
}
