//! Kafka to counter to Kafka on loopback, against tansu: the real `host`
//! running the word-count counter between two topics (at-least-once, and
//! exactly-once with 1 s checkpoints), beside a plain rdkafka loop in this
//! process that consumes the same topic, counts in a `HashMap` and
//! produces `<key> <count>` per record, in the same run; and the broker's
//! own limit: producing the input, and reading it back.
//!
//! Every producer writes one record per batch, as tansu 0.6.0 needs (see
//! `docs/kafka.md`), so the broker is the limit here, not Weir; the ratio
//! says how much of what the broker allows each side gets.
//!
//! Run: `cargo bench -p weir-tests --bench kafka`
//! Sizes: `WEIR_BENCH_RECORDS` (default 200 000), `WEIR_BENCH_KEYS`
//! (default 1 M; fewer distinct keys show up when records are fewer). The
//! markdown table goes to stdout, and to `WEIR_BENCH_OUT` if set.

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};
use weir_tests::artifacts::WORD_COUNT_COUNTER;
use weir_tests::kafka::KafkaBroker;

const PARTITIONS: i32 = 4;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// Produces `count` records keyed `k<i mod keys>` (pseudo-random order);
/// records/s.
fn produce_input(broker: &KafkaBroker, count: u64, keys: u64) -> f64 {
    let p = broker.bulk_producer();
    let started = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..count {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("k{}", x % keys);
        p.send(BaseRecord::to("in").key(key.as_bytes()).payload(key.as_bytes()));
    }
    p.flush();
    count as f64 / started.elapsed().as_secs_f64()
}

/// A consumer of every partition of `topic` from the start.
fn consumer(broker: &KafkaBroker, topic: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "bench")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Offset(0)).unwrap();
    }
    c.assign(&tpl).unwrap();
    c
}

/// Reads `topic` to its end; records/s.
fn read_back(broker: &KafkaBroker, topic: &str, count: u64) -> f64 {
    let c = consumer(broker, topic);
    let started = Instant::now();
    let (mut n, mut ends) = (0u64, 0);
    while ends < PARTITIONS {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => n += 1,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => ends += 1,
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    assert_eq!(n, count);
    count as f64 / started.elapsed().as_secs_f64()
}

/// The plain loop: consume, count in a HashMap, produce `<key> <count>`
/// per record to `native-out`; records/s.
fn native(broker: &KafkaBroker, count: u64) -> f64 {
    let c = consumer(broker, "in");
    let p = broker.bulk_producer();
    let started = Instant::now();
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    let (mut n, mut ends) = (0u64, 0);
    let mut line = Vec::new();
    while ends < PARTITIONS {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let key = m.key().unwrap();
                let v = counts.entry(key.to_vec()).or_insert(0);
                *v += 1;
                line.clear();
                line.extend_from_slice(key);
                line.push(b' ');
                line.extend_from_slice(v.to_string().as_bytes());
                p.send(BaseRecord::to("native-out").key(key).payload(&line));
                n += 1;
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => ends += 1,
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    p.flush();
    assert_eq!(n, count);
    count as f64 / started.elapsed().as_secs_f64()
}

/// The host running the counter from `in` to `topic` with `delivery`;
/// records/s from start to exit (every record acknowledged by then).
fn weir(broker: &KafkaBroker, topic: &str, delivery: &str, count: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let servers = broker.bootstrap();
    let job = format!(
        r#"
name = "kafka-bench"

[checkpointing]
interval = "1s"

[[sources]]
id = "in"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "in"
end = "latest"
parallelism = 1

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "in"
partition = "key"

[[sinks]]
id = "out"
kind = "kafka"
input = "counter"
bootstrap_servers = "{servers}"
topic = "{topic}"
delivery = "{delivery}"

"queue.buffering.max.messages" = 1000000
"#
    );
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let started = Instant::now();
    let out = Command::new(weir_tests::host_binary())
        .args(["run", "job.toml"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .env("WEIR_RUN_DIR", dir.path().join(".run"))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    count as f64 / elapsed
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("kafka: bench");
        return;
    }
    let count = env_u64("WEIR_BENCH_RECORDS", 200_000);
    let keys = env_u64("WEIR_BENCH_KEYS", 1_000_000);
    let broker = KafkaBroker::start();
    for (topic, partitions) in
        [("in", PARTITIONS), ("native-out", PARTITIONS), ("alo-out", PARTITIONS), ("eo-out", PARTITIONS)]
    {
        broker.create_topic(topic, partitions);
    }
    eprintln!("producing {count} records over up to {keys} keys");
    let produced = produce_input(&broker, count, keys);
    let read = read_back(&broker, "in", count);
    eprintln!("broker: produce {produced:.0}/s, read {read:.0}/s");
    let plain = native(&broker, count);
    eprintln!("plain rdkafka loop: {plain:.0}/s");
    let alo = weir(&broker, "alo-out", "at-least-once", count);
    eprintln!("weir at-least-once: {alo:.0}/s");
    let eo = weir(&broker, "eo-out", "exactly-once", count);
    eprintln!("weir exactly-once: {eo:.0}/s");
    let table = format!(
        "| {count} records, {keys} keys, 4 partitions | records/s | ratio |\n|---|---|---|\n\
         | broker: produce the input (one client) | {produced:.0} | |\n\
         | broker: read it back (one client) | {read:.0} | |\n\
         | plain rdkafka loop: consume, count in a `HashMap`, produce | {plain:.0} | 1 |\n\
         | Weir, `delivery = \"at-least-once\"` (host start to exit) | {alo:.0} | **{:.2}** |\n\
         | Weir, `delivery = \"exactly-once\"`, 1 s checkpoints | {eo:.0} | **{:.2}** (over at-least-once: {:.2}) |\n",
        alo / plain,
        eo / plain,
        eo / alo,
    );
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
