//! Kafka partitions as the source sees them, on Apache Kafka: partitions
//! added to the input topic mid-run (CreatePartitions) are found and read
//! from their start, exactly once; with event time, each partition has its
//! own watermark and the source's is their minimum (as Flink's KafkaSource
//! does per split), so a partition far ahead makes no other partition's
//! records late, and a partition with nothing to read does not hold event
//! time back once `pipeline.idle_timeout` passes.

use super::kafka::{assert_exact, checkpoints_in, expected, kafka_job_with, lines};

use super::support::JobDir;
use std::time::{Duration, Instant};
use weir_tests::artifacts::TIMER_PROBE;
use weir_tests::host_command;
use weir_tests::kafka::{Consumed, KafkaBroker, Stamped};

/// Keyless `lines` as records for [`KafkaBroker::produce_to`].
fn records(lines: &[String]) -> Vec<Stamped<'_>> {
    lines.iter().map(|l| (None, l.as_bytes(), None)).collect()
}

/// Polls `done` on `topic`'s committed records every 300 ms until it holds
/// or `limit` passes; the last read.
fn wait_until(broker: &KafkaBroker, topic: &str, limit: Duration, done: impl Fn(&[Consumed]) -> bool) -> Vec<Consumed> {
    let until = Instant::now() + limit;
    loop {
        let read = broker.consume_all(topic);
        if done(&read) || Instant::now() > until {
            return read;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn partitions_added_to_the_input_topic_mid_run_are_read_from_their_start_exactly_once() {
    let broker = KafkaBroker::start();
    broker.create_topic("words", 2);
    broker.create_topic("counts", 3);
    let before = lines(3000, 41);
    let after = lines(3000, 43);
    broker.produce_to("words", 0, &records(&before[..1500]));
    broker.produce_to("words", 1, &records(&before[1500..]));
    let dir = JobDir::new();
    // Never ends by itself (the usual job's end = "latest" taken out);
    // looks for new partitions every second.
    let source = "end = \"never\"\ndiscovery_interval = \"1s\"";
    kafka_job_with(&dir, &broker, 2, source, "", &checkpoints_in(&dir, ""));
    let job = dir.read("job.toml").replace("end = \"latest\"\n", "");
    dir.write("job.toml", job);
    let mut child = dir.start(&[]);
    let first = expected(&before);
    let total: u64 = first.values().sum();
    let read = wait_until(&broker, "counts", Duration::from_secs(60), |r| r.len() as u64 >= total);
    assert_eq!(read.len() as u64, total, "the first two partitions' output");
    // Two partitions more, each with records written before the source
    // found it: all of them are read, not only what arrives later.
    broker.add_partitions("words", 4);
    broker.produce_to("words", 2, &records(&after[..1500]));
    broker.produce_to("words", 3, &records(&after[1500..]));
    let all: Vec<String> = before.iter().chain(&after).cloned().collect();
    let want = expected(&all);
    let total: u64 = want.values().sum();
    let read = wait_until(&broker, "counts", Duration::from_secs(60), |r| r.len() as u64 >= total);
    if read.len() as u64 != total {
        let _ = child.kill();
        let (_, log) = dir.finish(child);
        panic!("{} of {total} output records after partitions were added:\n{log}", read.len());
    }
    let out = host_command(dir.path(), &["savepoint", "wc-kafka", "--stop"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (ok, log) = dir.finish(child);
    assert!(ok, "{log}");
    assert!(log.contains("new partitions"), "the source said it found partitions:\n{log}");
    assert_exact(&broker, &want, &log);
}

/// `text[i]` keyed `key`, stamped `ts[i]`, for [`KafkaBroker::produce_to`].
fn with_stamps<'a>(text: &'a [String], ts: &[i64], key: &'static [u8]) -> Vec<Stamped<'a>> {
    text.iter().zip(ts).map(|(v, t)| (Some(key), v.as_bytes(), Some(*t))).collect()
}

/// The probe's lines as (kind, time): `record <t>` and `timer <t>`.
fn probe_lines(read: &[Consumed]) -> Vec<(String, i64)> {
    read.iter()
        .map(|r| {
            let line = String::from_utf8_lossy(&r.payload).into_owned();
            let (kind, t) = line.rsplit_once(' ').unwrap_or_else(|| panic!("probe line {line:?}"));
            (kind.to_string(), t.parse().unwrap_or_else(|_| panic!("probe line {line:?}")))
        })
        .collect()
}

#[test]
fn each_partition_has_its_own_watermark_and_an_empty_partition_goes_idle() {
    // Partition 0 (`ahead`) starts 10 minutes of event time after partition
    // 1 (`behind`); each is in order within itself, as in Kafka a partition
    // is. Partition 2 gets nothing.
    const N: i64 = 300;
    let (ahead, behind) = (0, 1);
    let broker = KafkaBroker::start();
    broker.create_topic("events", 3);
    broker.create_topic("probe", 1);
    let stamps = |base: i64| (1..=N).map(|i| base + i * 1000).collect::<Vec<i64>>();
    let (fast, slow) = (stamps(600_000), stamps(0));
    let payloads = |ts: &[i64]| ts.iter().map(|t| t.to_string()).collect::<Vec<String>>();
    let (fast_text, slow_text) = (payloads(&fast), payloads(&slow));
    broker.produce_to("events", ahead, &with_stamps(&fast_text, &fast, b"a"));
    broker.produce_to("events", behind, &with_stamps(&slow_text, &slow, b"b"));
    let servers = broker.bootstrap();
    let dir = JobDir::new();
    // Paced, so the two partitions' records interleave over about 6 s;
    // never ends, so only event time can fire the timers.
    dir.write(
        "job.toml",
        format!(
            r#"
name = "skew"

[pipeline]
batch_size = 1
idle_timeout = "2s"

[[sources]]
id = "events"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "events"
timestamp = "kafka"
end = "never"
records_per_second = 100

[[operators]]
uid = "probe"
module = "{TIMER_PROBE}"
input = "events"
partition = "key"
params = {{ domain = "event" }}

[[sinks]]
id = "out"
kind = "kafka"
input = "probe"
bootstrap_servers = "{servers}"
topic = "probe"
delivery = "at-least-once"
"#
        ),
    );
    let mut child = dir.start(&[]);
    // Every `behind` timer but the last fires while the job runs: the
    // empty partition went idle, and `ahead` is past them all. (The
    // watermark trails the largest time by one ms, as Flink's; the last
    // would need `behind` to go idle while `ahead` is not, and by then both
    // have sent everything: all partitions idle, event time stays put.)
    let last_behind = *slow.last().unwrap();
    let second_last = slow[slow.len() - 2];
    let read = wait_until(&broker, "probe", Duration::from_secs(60), |r| {
        probe_lines(r).iter().any(|(k, t)| k == "timer" && *t == second_last)
    });
    let _ = child.kill();
    let (_, log) = dir.finish(child);
    let seen = probe_lines(&read);
    let fired: Vec<i64> = seen.iter().filter(|(k, _)| k == "timer").map(|(_, t)| *t).collect();
    assert!(
        fired.contains(&second_last),
        "the slow partition's timers never fired (the empty partition not idle?):\n{seen:?}\n{log}"
    );
    // No record came after a timer at or past its time: the watermark
    // never passed a record still to come from either partition.
    let mut high = i64::MIN;
    for (kind, t) in &seen {
        match kind.as_str() {
            "timer" => high = high.max(*t),
            "record" => assert!(*t > high, "record {t} came after the timer at {high} fired: it was late\n{log}"),
            other => panic!("probe line kind {other}"),
        }
    }
    // Timers fire in event-time order, each once, and none of `ahead`'s
    // fired while `behind` held event time below them: the watermark was
    // the minimum, not the maximum, of the two.
    let mut sorted = fired.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(fired, sorted, "timers in order, once each");
    let records_behind = seen.iter().filter(|(k, t)| k == "record" && *t <= last_behind).count();
    assert_eq!(records_behind as i64, N, "every record of the slow partition");
    let behind_fired = fired.iter().filter(|t| **t <= last_behind).count() as i64;
    assert!(behind_fired >= N - 1, "a timer per slow record: {behind_fired} of {N}");
    // `ahead`'s timers fire only after every one of `behind`'s.
    if let Some(first_ahead) = fired.iter().position(|t| *t > last_behind) {
        assert!(fired[..first_ahead].contains(&last_behind), "{fired:?}");
    }
}
