//! Cluster mode's costs, against Apache Kafka on loopback with checkpoints
//! on moto (S3), with the real `host` binary and the word-count counter
//! keyed by the Kafka key. The input: `PARTITIONS` partitions, each with
//! `WEIR_BENCH_KEYS` records (default 20 000) of distinct keys of
//! `WEIR_BENCH_KEY_BYTES` bytes (default 1000), so each partition's state
//! is about keys x key bytes.
//!
//! 1. Overhead: the same input through the same job in single-process mode
//!    (source and counter at parallelism 3) and in cluster mode with one
//!    member (a copy of the job per partition), each timed from start until
//!    the output topic holds one record per input record.
//! 2. Failover: three members count the input; once all of it is counted
//!    and checkpointed, one member is SIGKILLed and a probe record goes to
//!    every partition. Timed from the kill until each probe's count is in
//!    the output: for the killed member's partition, that is the session
//!    running out, the group moving the partition, the new owner restoring
//!    its state from S3, reading the probe, checkpointing and publishing.
//!    From the kill on, a producer keeps every partition's input (and so
//!    the output topic) busy, as a live job's would be. `WEIR_BENCH_RUNS`
//!    (default 1) failovers, each with its own group, checkpoints and
//!    output topic over the same input.
//!
//! Run: `cargo bench -p weir-tests --bench cluster`. The markdown table
//! goes to stdout.

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::{Offset, TopicPartitionList};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weir_tests::artifacts::WORD_COUNT_COUNTER;
use weir_tests::bench::env_u64;
use weir_tests::kafka::{BulkProducer, KafkaBroker};
use weir_tests::{S3_BUCKET, S3Server};

const PARTITIONS: i32 = 3;
const SESSION: Duration = Duration::from_secs(6);

fn send(p: &BulkProducer, topic: &str, partition: i32, key: &[u8]) {
    p.send(BaseRecord::to(topic).partition(partition).key(key).payload(key));
}

/// `keys` records of distinct keys of `key_bytes` bytes to each partition.
fn produce_input(broker: &KafkaBroker, keys: u64, key_bytes: usize) {
    let p = broker.bulk_producer();
    for i in 0..keys {
        for part in 0..PARTITIONS {
            let key = format!("{part}-{i}-");
            let key = format!("{key}{}", "x".repeat(key_bytes.saturating_sub(key.len())));
            send(&p, "in", part, key.as_bytes());
        }
    }
    p.flush();
}

/// The records in `topic` so far (the sum of its partitions' high marks).
fn output_count(reader: &BaseConsumer, topic: &str) -> i64 {
    (0..PARTITIONS)
        .map(|p| reader.fetch_watermarks(topic, p, Duration::from_secs(10)).map_or(0, |(_, high)| high))
        .sum()
}

fn job(name: &str, cluster: bool, servers: &str, topic: &str) -> String {
    let (cluster, parallelism) = if cluster {
        (format!("[cluster]\nkind = \"kafka-group\"\nsession_timeout = \"{}s\"\n", SESSION.as_secs()), 1)
    } else {
        (String::new(), PARTITIONS)
    };
    format!(
        r#"
name = "{name}"

{cluster}
[checkpointing]
interval = "2s"

[state.checkpoints]
dir = "s3://{S3_BUCKET}/cluster-bench"

[[sources]]
id = "in"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "in"
parallelism = {parallelism}

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "in"
partition = "key"
parallelism = {parallelism}

[[sinks]]
id = "out"
kind = "kafka"
input = "counter"
bootstrap_servers = "{servers}"
topic = "{topic}"

[sinks.properties]
"queue.buffering.max.messages" = 1000000
"#
    )
}

/// `host run job.toml` in `dir`, its log in `log`.
fn spawn(dir: &Path, s3: &S3Server, log: &str) -> Child {
    Command::new(weir_tests::host_binary())
        .args(["run", "job.toml"])
        .current_dir(dir)
        .envs(s3.env())
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .env("WEIR_RUN_DIR", dir.join(".run"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(log)).unwrap())
        .spawn()
        .unwrap()
}

/// Seconds from `started` until `topic` holds `want` records; fails if
/// one of the `hosts` writing it exits first.
fn until_output(reader: &BaseConsumer, topic: &str, want: i64, started: Instant, hosts: &mut [Child]) -> f64 {
    while output_count(reader, topic) < want {
        assert!(started.elapsed() < Duration::from_secs(1800), "{topic}: no complete output in 30 minutes");
        for h in hosts.iter_mut() {
            if let Some(status) = h.try_wait().unwrap() {
                panic!("{topic}: a host exited ({status}) before the output was complete: see its log");
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    started.elapsed().as_secs_f64()
}

/// One run of the job over the whole input; seconds to complete output.
fn overhead_run(
    broker: &KafkaBroker,
    s3: &S3Server,
    reader: &BaseConsumer,
    name: &str,
    cluster: bool,
    want: i64,
) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic(name, PARTITIONS);
    std::fs::write(dir.path().join("job.toml"), job(name, cluster, &broker.bootstrap(), name)).unwrap();
    let started = Instant::now();
    let mut host = spawn(dir.path(), s3, "host.log");
    let secs = until_output(reader, name, want, started, std::slice::from_mut(&mut host));
    let _ = host.kill();
    let _ = host.wait();
    secs
}

/// The partitions a member's log says it owns: every one assigned and not
/// revoked since (cooperative assignment logs only what changes).
fn owned(log: &str) -> Vec<i32> {
    let listed = |line: &str| -> Vec<i32> {
        let list = line.rsplit_once("partitions=[").map_or("", |(_, r)| r.trim_end_matches(']'));
        list.split(',').filter_map(|p| p.trim().parse().ok()).collect()
    };
    let mut owned = std::collections::BTreeSet::new();
    for line in log.lines() {
        if line.contains("partitions assigned") {
            owned.extend(listed(line));
        } else if line.contains("partitions revoked") {
            for p in listed(line) {
                owned.remove(&p);
            }
        }
    }
    owned.into_iter().collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("cluster: bench");
        return;
    }
    let keys = env_u64("WEIR_BENCH_KEYS", 20_000);
    let key_bytes = env_u64("WEIR_BENCH_KEY_BYTES", 1000) as usize;
    let broker = KafkaBroker::start();
    let s3 = S3Server::start();
    broker.create_topic("in", PARTITIONS);
    let t = Instant::now();
    produce_input(&broker, keys, key_bytes);
    eprintln!("input: {} records in {:.1}s", keys * PARTITIONS as u64, t.elapsed().as_secs_f64());
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "bench-reader")
        .create()
        .unwrap();
    let want = (keys * PARTITIONS as u64) as i64;

    // `WEIR_BENCH_ONLY=failover` skips the overhead runs (for large state).
    let overhead = std::env::var("WEIR_BENCH_ONLY").map_or(true, |only| only != "failover");
    let (single, one_member) = if overhead {
        (
            overhead_run(&broker, &s3, &reader, "single", false, want),
            overhead_run(&broker, &s3, &reader, "member", true, want),
        )
    } else {
        (f64::NAN, f64::NAN)
    };

    let runs = env_u64("WEIR_BENCH_RUNS", 1);
    let failovers: Vec<Failover> =
        (1..=runs).map(|run| failover(&broker, &s3, &reader, &format!("failover-{run}"), want)).collect();

    if overhead {
        let records = want as f64;
        println!("| {PARTITIONS} partitions, {keys} keys of {key_bytes} B each | seconds | records/s | ratio |");
        println!("|---|---|---|---|");
        println!("| single process, parallelism {PARTITIONS} | {single:.1} | {:.0} | 1 |", records / single);
        println!(
            "| cluster mode, one member (a copy per partition) | {one_member:.1} | {:.0} | {:.2} |",
            records / one_member,
            single / one_member
        );
        println!();
    }
    for (run, f) in failovers.iter().enumerate() {
        f.print(run + 1);
    }
}

/// What one failover measured.
struct Failover {
    /// Seconds until the input was counted.
    counted: f64,
    /// The partitions the killed member owned.
    moved: Vec<i32>,
    /// Seconds from the kill until each partition's probe was counted.
    seen: Vec<Option<f64>>,
    /// The survivors' log lines after the kill that time the takeover.
    timeline: Vec<String>,
}

/// Three members count the input into `topic` under job `name`; one is
/// killed while the input keeps coming; when each partition's probe is
/// counted.
fn failover(broker: &KafkaBroker, s3: &S3Server, reader: &BaseConsumer, name: &str, want: i64) -> Failover {
    let dir = tempfile::tempdir().unwrap();
    let topic = name;
    broker.create_topic(topic, PARTITIONS);
    std::fs::write(dir.path().join("job.toml"), job(name, true, &broker.bootstrap(), topic)).unwrap();
    let started = Instant::now();
    let mut members: Vec<Child> = (0..3).map(|i| spawn(dir.path(), s3, &format!("member-{i}.log"))).collect();
    let counted = until_output(reader, topic, want, started, &mut members);
    std::thread::sleep(Duration::from_secs(6));
    let log = |i: usize| std::fs::read_to_string(dir.path().join(format!("member-{i}.log"))).unwrap_or_default();
    let victim = (0..3).find(|i| !owned(&log(*i)).is_empty()).expect("a member owns partitions");
    let moved = owned(&log(victim));
    // Read the output from here on.
    let tail: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "bench-tail")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        let (_, high) = tail.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap();
        tpl.add_partition_offset(topic, p, Offset::Offset(high)).unwrap();
    }
    tail.assign(&tpl).unwrap();
    let _ = members[victim].kill();
    let killed = Instant::now();
    // Input keeps coming to every partition, so the survivors keep the
    // output topic busy while the killed member's partitions move.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let (done, p) = (done.clone(), broker.bulk_producer());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                for part in 0..PARTITIONS {
                    send(&p, "in", part, format!("busy-{part}-{n}").as_bytes());
                }
                n += 1;
                // About 200 records a second a partition.
                std::thread::sleep(Duration::from_millis(5));
            }
            p.flush();
        })
    };
    let p = broker.bulk_producer();
    for part in 0..PARTITIONS {
        send(&p, "in", part, format!("probe-{part}").as_bytes());
    }
    p.flush();
    let mut seen: Vec<Option<f64>> = vec![None; PARTITIONS as usize];
    while seen.iter().any(Option::is_none) && killed.elapsed() < Duration::from_secs(300) {
        if let Some(Ok(m)) = tail.poll(Duration::from_millis(50)) {
            let text = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            if let Some(part) =
                text.strip_prefix("probe-").and_then(|r| r.split(' ').next()).and_then(|p| p.parse::<usize>().ok())
            {
                seen[part].get_or_insert(killed.elapsed().as_secs_f64());
            }
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();
    // The sink logs its first output once the publication is acknowledged,
    // a moment after a reader can see it.
    std::thread::sleep(Duration::from_secs(1));
    // What the survivors did after the kill, to tell where the time went.
    let kill_time = wall_clock_now(killed.elapsed());
    let steps = [
        "partitions assigned",
        "partitions revoked",
        "handed over",
        "claimed the job's commit log",
        "restoring",
        "state restored",
        "read the output back",
        "first checkpoint since the restore",
        "first output visible",
    ];
    let mut timeline: Vec<String> = (0..3)
        .filter(|i| *i != victim)
        .flat_map(|i| {
            log(i)
                .lines()
                .filter(|l| l.get(..26).is_some_and(|t| t >= kill_time.as_str()))
                .filter(|l| steps.iter().any(|s| l.contains(s)))
                .map(|l| format!("member-{i} {}", l.chars().take(240).collect::<String>()))
                .collect::<Vec<_>>()
        })
        .collect();
    timeline.sort_by(|a, b| a[9..].cmp(&b[9..]));
    for mut m in members {
        let _ = m.kill();
        let _ = m.wait();
    }
    Failover { counted, moved, seen, timeline }
}

impl Failover {
    fn print(&self, run: usize) {
        let Failover { counted, moved, seen, timeline } = self;
        println!(
            "Failover {run} (three members, {}s session, input kept coming; the input counted in {counted:.1}s):",
            SESSION.as_secs()
        );
        for (part, s) in seen.iter().enumerate() {
            let whose = if moved.contains(&(part as i32)) { "the killed member's" } else { "a survivor's" };
            match s {
                Some(s) => println!(
                    "- partition {part} ({whose}): its probe counted {s:.1}s after the kill, {:.1}s after the session ran out",
                    s - SESSION.as_secs_f64()
                ),
                None => println!("- partition {part} ({whose}): its probe not counted within 300 s"),
            }
        }
        println!("- the survivors after the kill:");
        for line in timeline.iter().take(80) {
            println!("  {line}");
        }
    }
}

/// The UTC time `ago` before now, as the members' log lines begin
/// (`2026-12-02T13:49:38.430858Z`).
fn wall_clock_now(ago: Duration) -> String {
    let at = std::time::SystemTime::now() - ago;
    humantime::format_rfc3339_micros(at).to_string()
}
