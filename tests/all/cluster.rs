//! Cluster mode against a real Kafka-protocol broker (tansu) on loopback:
//! several `host run` processes share one job through a consumer group,
//! each running the partitions the group gives it; a killed member's
//! partitions resume elsewhere from their checkpoints, a member that joins
//! takes some over, and the output stays exactly-once. Jobs cluster mode
//! cannot partition are refused before anything runs.

use super::checkpoints::spawn;
use super::support::{JobDir, final_counts};
use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};
use weir_tests::artifacts::{WORD_COUNT_COUNTER, WORD_COUNT_TOKENIZER};
use weir_tests::kafka::{KafkaBroker, ONE_RECORD_BATCHES};

/// `count` words over a vocabulary of 200, deterministic from `seed`.
fn words(count: usize, seed: u64) -> Vec<String> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("v{}", x % 200)
        })
        .collect()
}

/// The cluster job: the counter keyed by the Kafka key, straight from the
/// source, every `rate` records a second per partition.
fn cluster_job(dir: &JobDir, broker: &KafkaBroker, rate: u32, session: &str) {
    let servers = broker.bootstrap();
    let ck = format!("file://{}", dir.path().join("checkpoints").display());
    dir.write(
        "job.toml",
        format!(
            r#"
name = "wc-cluster"

[cluster]
kind = "kafka-group"
session_timeout = "{session}"

[checkpointing]
interval = "300ms"

[state.checkpoints]
dir = "{ck}"

[[sources]]
id = "words"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "words"
end = "latest"
records_per_second = {rate}

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "words"
partition = "key"

[[sinks]]
id = "out"
kind = "kafka"
input = "counter"
bootstrap_servers = "{servers}"
topic = "counts"

[sinks.properties]
"batch.num.messages" = {ONE_RECORD_BATCHES}
"#
        ),
    );
}

/// The output so far as `word n` lines, partition by partition.
fn output(broker: &KafkaBroker) -> String {
    broker.consume_all("counts").iter().map(|r| format!("{}\n", String::from_utf8_lossy(&r.payload))).collect()
}

/// The latest count of each word in `text`, tolerating what is not there yet.
fn latest(text: &str) -> BTreeMap<String, u64> {
    text.lines().filter_map(|l| l.rsplit_once(' ')).map(|(w, n)| (w.to_string(), n.parse().unwrap_or(0))).collect()
}

/// Waits until the output holds every word's final count.
fn wait_complete(broker: &KafkaBroker, want: &BTreeMap<String, u64>, members: &mut [Child]) {
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        let got = latest(&output(broker));
        if &got == want {
            return;
        }
        for m in members.iter_mut() {
            if let Ok(Some(status)) = m.try_wait() {
                let mut err = String::new();
                std::io::Read::read_to_string(m.stderr.as_mut().unwrap(), &mut err).unwrap();
                panic!("a member exited ({status}) before the output was complete:\n{err}");
            }
        }
        let missing = want.iter().filter(|(w, n)| got.get(*w) != Some(n)).count();
        assert!(Instant::now() < until, "the output is still missing {missing} of {} words' final counts", want.len());
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn kill(member: &mut Child) -> String {
    let _ = member.kill();
    let _ = member.wait();
    let mut err = String::new();
    std::io::Read::read_to_string(member.stderr.as_mut().unwrap(), &mut err).unwrap();
    err
}

#[test]
fn members_share_the_partitions_and_a_killed_members_partitions_resume_elsewhere_exactly() {
    let broker = KafkaBroker::start();
    broker.create_topic("words", 6);
    broker.create_topic("counts", 3);
    let input = words(9000, 71);
    let records: Vec<(Option<&[u8]>, &[u8])> = input.iter().map(|w| (Some(w.as_bytes()), w.as_bytes())).collect();
    broker.produce("words", &records);
    let mut want = BTreeMap::new();
    for w in &input {
        *want.entry(w.clone()).or_insert(0u64) += 1;
    }
    let dir = JobDir::new();
    // 1500 records a partition at 100 a second: about 15 s of input.
    cluster_job(&dir, &broker, 100, "6s");
    let mut members: Vec<Child> = (0..3).map(|_| spawn(&dir, &[], &[])).collect();
    // Once output flows, one member dies; the group gives its partitions to
    // the others once its session times out.
    let until = Instant::now() + Duration::from_secs(60);
    while output(&broker).is_empty() {
        assert!(Instant::now() < until, "no output within a minute");
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(2));
    let first = kill(&mut members.remove(0));
    assert!(first.contains("partitions assigned"), "the killed member ran partitions:\n{first}");
    // A new member joins mid-run and takes some partitions over.
    members.push(spawn(&dir, &[], &[]));
    wait_complete(&broker, &want, &mut members);
    let logs: Vec<String> = members.iter_mut().map(kill).collect();
    // Exactly-once: each word's updates are 1, 2, ..., n, none repeated.
    assert_eq!(final_counts(&output(&broker)), want);
    // The killed member's partitions ran elsewhere: six partitions, more
    // than one member ran some, and some ran on more than one member.
    let ran = |log: &str| log.contains("partitions assigned");
    assert!(logs.iter().filter(|l| ran(l)).count() >= 2, "{logs:#?}");
    let checkpoints: Vec<String> = std::fs::read_dir(dir.path().join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut copies = checkpoints.clone();
    copies.sort();
    assert_eq!(copies, (0..6).map(|p| format!("wc-cluster-p{p}")).collect::<Vec<_>>());
}

#[test]
fn a_job_cluster_mode_cannot_partition_is_refused_with_the_reason() {
    let dir = JobDir::new();
    let base = |extra: &str, operators: &str, sink: &str| {
        format!(
            r#"
name = "wc-refused"

[cluster]
kind = "kafka-group"

{extra}

[[sources]]
id = "lines"
kind = "kafka"
bootstrap_servers = "127.0.0.1:1"
topic = "lines"

{operators}

{sink}
"#
        )
    };
    let checkpoints = format!(
        "[checkpointing]\ninterval = \"1s\"\n\n[state.checkpoints]\ndir = \"file://{}/ck\"",
        dir.path().display()
    );
    let keyed_after_tokenizer = format!(
        r#"[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key""#
    );
    let counter = format!(
        r#"[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "lines"
partition = "key""#
    );
    let kafka_sink = "[[sinks]]\nid = \"out\"\nkind = \"kafka\"\ninput = \"counter\"\nbootstrap_servers = \"127.0.0.1:1\"\ntopic = \"counts\"";
    let file_sink = "[[sinks]]\nid = \"out\"\nkind = \"file\"\ninput = \"counter\"\npath = \"out.txt\"";
    for (job, says) in [
        (
            base(&checkpoints, &keyed_after_tokenizer, kafka_sink),
            "operator 'counter' is keyed on the output of 'tokenizer', whose keys are not the Kafka keys of topic 'lines'",
        ),
        (base(&checkpoints, &counter, file_sink), "sink 'out' is a file sink"),
        (base("", &counter, kafka_sink), "it takes no checkpoints"),
        (
            base("[checkpointing]\ninterval = \"1s\"", &counter, kafka_sink),
            "state.checkpoints.dir is not set; every member must reach the checkpoints",
        ),
        (
            base(&checkpoints, &counter, kafka_sink).replace("kind = \"kafka-group\"", "kind = \"zookeeper\""),
            "kind = \"zookeeper\"",
        ),
    ] {
        dir.write("job.toml", &job);
        let err = dir.fails();
        assert!(err.contains(says), "wanted {says:?} in:\n{err}");
        assert!(err.contains("job.toml"), "the error names the file:\n{err}");
    }
}
