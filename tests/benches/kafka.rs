//! Kafka to counter to Kafka on Apache Kafka (KRaft, one node on
//! loopback), in one run on one broker and one input:
//! - the broker's own ceiling: one client producing the input, one
//!   consuming it;
//! - a plain rdkafka loop in this process: consume, count in a `HashMap`,
//!   produce `<key> <count>` per record;
//! - the real `host` running the word-count counter at parallelism 1 and 2
//!   in `delivery = "at-least-once"`, exactly-once publish-after-checkpoint
//!   and exactly-once `mode = "transactions"`, 1 s checkpoints;
//! - the same job on Apache Flink (`tests/benches/flink-kafka`: KafkaSource,
//!   a keyed count in `ValueState`, KafkaSink, HashMap backend, 1 s
//!   checkpoints) at parallelism 1 and 2, at-least-once and exactly-once.
//!
//! Every side reads the whole input topic from the earliest offset to the
//! latest and is timed from its start until its last output record is
//! acknowledged: for the host and for Flink, process start to exit (both
//! flush their producers before they exit). Each output topic is then read
//! back with `isolation.level = read_committed` and must hold one record
//! per input record, and each key's last count must be the key's number of
//! input records (counted as the input was made, not by code under test).
//!
//! Run: `cargo bench -p weir-tests --bench kafka`
//! Sizes: `WEIR_BENCH_RECORDS` (default 10 000 000), `WEIR_BENCH_KEYS`
//! (default 100 000), `WEIR_BENCH_VALUE_BYTES` (default 100). Without Flink:
//! `WEIR_BENCH_FLINK=0`. The markdown table goes to stdout, and to
//! `WEIR_BENCH_OUT` if set. Each host run's log goes to
//! `$WEIR_BENCH_LOGS/<topic>.log` if set, at `WEIR_BENCH_RUST_LOG`
//! (default `error`).

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use weir_tests::artifacts::WORD_COUNT_COUNTER;
use weir_tests::bench::env_u64;
use weir_tests::kafka::KafkaBroker;

const PARTITIONS: i32 = 6;

/// Produces `count` records to `in`, keyed `k<n>` for pseudo-random `n`
/// below `keys`, each value `value_bytes` long; each key's number of
/// records, and records/s.
fn produce_input(broker: &KafkaBroker, count: u64, keys: u64, value_bytes: usize) -> (HashMap<String, u64>, f64) {
    let p = broker.bulk_producer();
    let mut want: HashMap<String, u64> = HashMap::new();
    let started = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut value = Vec::with_capacity(value_bytes);
    for i in 0..count {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("k{}", x % keys);
        value.clear();
        value.extend_from_slice(format!("{key} {i} ").as_bytes());
        value.resize(value_bytes.max(value.len()), b'x');
        p.send(BaseRecord::to("in").key(key.as_bytes()).payload(&value));
        *want.entry(key).or_insert(0) += 1;
    }
    p.flush();
    (want, count as f64 / started.elapsed().as_secs_f64())
}

/// A consumer of every partition of `topic` from the start, reading
/// committed records only.
fn consumer(broker: &KafkaBroker, topic: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "bench")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    c
}

/// Reads `topic` to its end, calling `each` per record; records/s.
fn read_all(broker: &KafkaBroker, topic: &str, mut each: impl FnMut(&[u8], &[u8])) -> (u64, f64) {
    let c = consumer(broker, topic);
    let started = Instant::now();
    let (mut n, mut ends) = (0u64, std::collections::HashSet::new());
    while ends.len() < PARTITIONS as usize {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                ends.remove(&m.partition());
                each(m.key().unwrap_or(&[]), m.payload().unwrap_or(&[]));
                n += 1;
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                ends.insert(p);
            }
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            None => {}
        }
    }
    (n, n as f64 / started.elapsed().as_secs_f64())
}

/// Checks `topic` holds one `<key> <count>` record per input record and
/// each key's last count is its number of input records.
fn verify(broker: &KafkaBroker, topic: &str, want: &HashMap<String, u64>, count: u64) {
    let mut last: HashMap<String, u64> = HashMap::with_capacity(want.len());
    let (n, _) = read_all(broker, topic, |_, value| {
        let line = std::str::from_utf8(value).expect("utf-8 output");
        let (key, n) = line.rsplit_once(' ').expect("<key> <count>");
        let n: u64 = n.parse().expect("a count");
        let seen = last.entry(key.to_string()).or_insert(0);
        *seen = (*seen).max(n);
    });
    assert_eq!(n, count, "{topic}: one output record per input record");
    assert_eq!(last.len(), want.len(), "{topic}: every key");
    for (k, n) in want {
        assert_eq!(last.get(k), Some(n), "{topic}: key {k}'s last count");
    }
}

/// The plain loop: consume, count in a HashMap, produce `<key> <count>`
/// per record to `topic`; records/s.
fn plain_loop(broker: &KafkaBroker, topic: &str, count: u64) -> f64 {
    let c = consumer(broker, "in");
    let p = broker.bulk_producer();
    let started = Instant::now();
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    let (mut n, mut ends) = (0u64, std::collections::HashSet::new());
    let mut line = Vec::new();
    while ends.len() < PARTITIONS as usize {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                ends.remove(&m.partition());
                let key = m.key().unwrap();
                let v = counts.entry(key.to_vec()).or_insert(0);
                *v += 1;
                line.clear();
                line.extend_from_slice(key);
                line.push(b' ');
                line.extend_from_slice(v.to_string().as_bytes());
                p.send(BaseRecord::to(topic).key(key).payload(&line));
                n += 1;
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                ends.insert(p);
            }
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    p.flush();
    assert_eq!(n, count);
    count as f64 / started.elapsed().as_secs_f64()
}

/// How a Weir run delivers.
#[derive(Clone, Copy)]
enum WeirDelivery {
    AtLeastOnce,
    PublishAfterCheckpoint,
    Transactions,
}

impl WeirDelivery {
    fn options(self) -> &'static str {
        match self {
            WeirDelivery::AtLeastOnce => "delivery = \"at-least-once\"",
            WeirDelivery::PublishAfterCheckpoint => "delivery = \"exactly-once\"",
            WeirDelivery::Transactions => "delivery = \"exactly-once\"\nmode = \"transactions\"",
        }
    }

    fn name(self) -> &'static str {
        match self {
            WeirDelivery::AtLeastOnce => "at-least-once",
            WeirDelivery::PublishAfterCheckpoint => "exactly-once, publish-after-checkpoint",
            WeirDelivery::Transactions => "exactly-once, `mode = \"transactions\"`",
        }
    }
}

/// The host running the counter from `in` to `topic` at `parallelism`;
/// records/s from process start to exit (every record acknowledged by then).
fn weir(broker: &KafkaBroker, topic: &str, parallelism: u32, delivery: WeirDelivery, count: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let servers = broker.bootstrap();
    let checkpoints = format!("file://{}", dir.path().join("checkpoints").display());
    let options = delivery.options();
    let job = format!(
        r#"
name = "kafka-bench"
parallelism = {parallelism}

[checkpointing]
interval = "1s"

[state.checkpoints]
dir = "{checkpoints}"

[[sources]]
id = "in"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "in"
end = "latest"

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
{options}
"#
    );
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let started = Instant::now();
    let out = Command::new(weir_tests::host_binary())
        .args(["run", "job.toml"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .env("WEIR_RUN_DIR", dir.path().join(".run"))
        .env("RUST_LOG", std::env::var("WEIR_BENCH_RUST_LOG").unwrap_or("error".into()))
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    if let Ok(logs) = std::env::var("WEIR_BENCH_LOGS") {
        std::fs::write(format!("{logs}/{topic}.log"), &out.stderr).unwrap();
    }
    count as f64 / elapsed
}

/// Builds the Flink job (Maven, once); the directory of its jars.
fn flink_libs() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/flink-kafka/build.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(out.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap().trim())
}

/// Flink running the same job from `in` to `topic`; records/s from JVM
/// start to exit, and Flink's own job runtime in ms.
fn flink(
    libs: &std::path::Path,
    broker: &KafkaBroker,
    topic: &str,
    parallelism: u32,
    exactly_once: bool,
    count: u64,
) -> (f64, u64) {
    let started = Instant::now();
    let out = Command::new("java")
        .args(["-Xmx4g", "-cp", &format!("{}/*", libs.display()), "dev.weir.bench.FlinkKafkaCount"])
        .args(["--bootstrap", &broker.bootstrap(), "--input", "in", "--output", topic])
        .args(["--parallelism", &parallelism.to_string(), "--checkpoint-interval-ms", "1000"])
        .args(["--delivery", if exactly_once { "exactly-once" } else { "at-least-once" }])
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "flink: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let net = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("net_runtime_ms="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (count as f64 / elapsed, net)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("kafka: bench");
        return;
    }
    let count = env_u64("WEIR_BENCH_RECORDS", 10_000_000);
    let keys = env_u64("WEIR_BENCH_KEYS", 100_000);
    let value_bytes = env_u64("WEIR_BENCH_VALUE_BYTES", 100) as usize;
    let with_flink = env_u64("WEIR_BENCH_FLINK", 1) != 0;
    let libs = with_flink.then(flink_libs);
    let broker = KafkaBroker::start_with(&[("log.retention.bytes", "-1"), ("log.segment.bytes", "536870912")]);
    broker.create_topic("in", PARTITIONS);
    eprintln!("producing {count} records of {value_bytes} bytes over up to {keys} keys, {PARTITIONS} partitions");
    let (want, produced) = produce_input(&broker, count, keys, value_bytes);
    let (read, consumed) = read_all(&broker, "in", |_, _| {});
    assert_eq!(read, count);
    eprintln!("broker: produce {produced:.0}/s, consume {consumed:.0}/s");

    let mut rows: Vec<(String, f64)> = Vec::new();
    let run = |rows: &mut Vec<(String, f64)>, name: String, topic: &str, rate: f64| {
        eprintln!("{name}: {rate:.0}/s");
        verify(&broker, topic, &want, count);
        rows.push((name, rate));
    };
    broker.create_topic("plain-out", PARTITIONS);
    let plain = plain_loop(&broker, "plain-out", count);
    run(&mut rows, "plain rdkafka loop: consume, count in a `HashMap`, produce".into(), "plain-out", plain);
    let mut weir_rates = HashMap::new();
    for parallelism in [1u32, 2] {
        for delivery in [WeirDelivery::AtLeastOnce, WeirDelivery::PublishAfterCheckpoint, WeirDelivery::Transactions] {
            let topic = format!("weir-p{parallelism}-{}", delivery as u8);
            broker.create_topic(&topic, PARTITIONS);
            let rate = weir(&broker, &topic, parallelism, delivery, count);
            weir_rates.insert((parallelism, delivery as u8), rate);
            run(&mut rows, format!("Weir p{parallelism}, {}", delivery.name()), &topic, rate);
        }
    }
    let mut flink_rates = HashMap::new();
    if let Some(libs) = &libs {
        for parallelism in [1u32, 2] {
            for exactly_once in [false, true] {
                let topic = format!("flink-p{parallelism}-{exactly_once}");
                broker.create_topic(&topic, PARTITIONS);
                let (rate, net) = flink(libs, &broker, &topic, parallelism, exactly_once, count);
                flink_rates.insert((parallelism, exactly_once), rate);
                let guarantee = if exactly_once { "`EXACTLY_ONCE`" } else { "`AT_LEAST_ONCE`" };
                run(&mut rows, format!("Flink p{parallelism}, {guarantee} (job runtime {net} ms)"), &topic, rate);
            }
        }
    }

    let mut table = format!(
        "| {count} records of {value_bytes} B, {} keys, {PARTITIONS} partitions | records/s | over the plain loop |\n|---|---|---|\n\
         | broker: one client producing the input | {produced:.0} | |\n\
         | broker: one client consuming it | {consumed:.0} | |\n",
        want.len()
    );
    for (name, rate) in &rows {
        table += &format!("| {name} | {rate:.0} | {:.2} |\n", rate / plain);
    }
    table += "\n| parallelism | exactly-once over at-least-once: publish-after-checkpoint | transactions | Weir over Flink: at-least-once | exactly-once (transactions) | exactly-once (publish-after-checkpoint) |\n|---|---|---|---|---|---|\n";
    for parallelism in [1u32, 2] {
        let w = |d: WeirDelivery| weir_rates[&(parallelism, d as u8)];
        let alo = w(WeirDelivery::AtLeastOnce);
        let pac = w(WeirDelivery::PublishAfterCheckpoint);
        let txn = w(WeirDelivery::Transactions);
        let over = |rate: f64, eo: bool| {
            flink_rates.get(&(parallelism, eo)).map_or("-".to_string(), |f| format!("{:.2}", rate / f))
        };
        table += &format!(
            "| {parallelism} | {:.2} | {:.2} | {} | {} | {} |\n",
            pac / alo,
            txn / alo,
            over(alo, false),
            over(txn, true),
            over(pac, true)
        );
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
