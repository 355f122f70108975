//! Kafka in and out, against Apache Kafka on
//! loopback: word count from a topic to a topic, exactly-once through
//! SIGKILL crash loops and a broker outage, at-least-once without loss,
//! restores at another parallelism, and the errors a user meets.

use super::checkpoints::{checkpointing, crash_loop, seed};

use super::support::{JobDir, counts_by_key, final_counts};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use weir_tests::artifacts::{WORD_COUNT_COUNTER, WORD_COUNT_TOKENIZER};
use weir_tests::host_command;
use weir_tests::kafka::{Consumed, KafkaBroker};

/// `lines` lines of text over a vocabulary of 300 words, deterministic.
pub(super) fn lines(count: usize, seed: u64) -> Vec<String> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            (0..8)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("w{}", x % 300)
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Each word's count, computed directly.
pub(super) fn expected(lines: &[String]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in lines {
        for w in l.split_whitespace() {
            *m.entry(w.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// Produces `lines` to a new topic `words` of 4 partitions, keyless (so
/// they spread over every partition).
pub(super) fn produce_lines(broker: &KafkaBroker, lines: &[String]) {
    broker.create_topic("words", 4);
    broker.create_topic("counts", 3);
    let records: Vec<(Option<&[u8]>, &[u8])> = lines.iter().map(|l| (None, l.as_bytes())).collect();
    broker.produce("words", &records);
}

/// A broker holding `count` lines (from `seed`) in topic `words`, and each
/// word's count, computed directly.
pub(super) fn broker_with_lines(count: usize, seed: u64) -> (KafkaBroker, BTreeMap<String, u64>) {
    let input = lines(count, seed);
    let broker = KafkaBroker::start();
    produce_lines(&broker, &input);
    (broker, expected(&input))
}

/// The word-count job from topic `words` (read to its end) to topic
/// `counts`, with `sink` options and `settings` tables.
pub(super) fn kafka_job(dir: &JobDir, broker: &KafkaBroker, parallelism: u32, sink: &str, settings: &str) {
    kafka_job_with(dir, broker, parallelism, "", sink, settings)
}

/// As [`kafka_job`], with `source` options too.
pub(super) fn kafka_job_with(
    dir: &JobDir,
    broker: &KafkaBroker,
    parallelism: u32,
    source: &str,
    sink: &str,
    settings: &str,
) {
    let servers = broker.bootstrap();
    dir.write(
        "job.toml",
        format!(
            r#"
name = "wc-kafka"
parallelism = {parallelism}
{settings}

[[sources]]
id = "lines"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "words"
end = "latest"
{source}

[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"
partition = "rebalance"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "out"
kind = "kafka"
input = "counter"
bootstrap_servers = "{servers}"
topic = "counts"
{sink}

"#
        ),
    );
}

/// `[checkpointing]` every 100 ms into `dir`'s `checkpoints/`, savepoints
/// beside them, then `extra`.
pub(super) fn checkpoints_in(dir: &JobDir, extra: &str) -> String {
    let ck = format!("file://{}", dir.path().join("checkpoints").display());
    checkpointing(&ck, "") + &format!("\n[state.savepoints]\ndir = \"{ck}\"\n{extra}\n")
}

/// Runs the job in `dir` until it wrote something, stops it with a
/// savepoint, and returns where the savepoint is.
fn run_then_stop_with_savepoint(dir: &JobDir) -> String {
    let child = dir.start(&[]);
    wait_for_output(dir, "wc-kafka");
    let out = host_command(dir.path(), &["savepoint", "wc-kafka", "--stop"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The payloads of `records` as lines, partition by partition: each word
/// goes to one partition, so its updates are in order.
pub(super) fn as_lines(records: &[Consumed]) -> String {
    records.iter().map(|r| format!("{}\n", String::from_utf8_lossy(&r.payload))).collect()
}

#[test]
fn word_count_from_kafka_to_kafka_is_exact_at_parallelism_1_and_3() {
    let input = lines(3000, 11);
    let want = expected(&input);
    for p in [1, 3] {
        let broker = KafkaBroker::start();
        produce_lines(&broker, &input);
        let dir = JobDir::new();
        kafka_job(&dir, &broker, p, "", "");
        let err = dir.succeeds(&[]);
        assert!(err.contains("job 'wc-kafka' finished"), "{err}");
        assert_exact(&broker, &want, &format!("parallelism {p}"));
        let out = broker.consume_all("counts");
        // Keyed by word, with the sink's provenance headers.
        for r in &out {
            let word = String::from_utf8_lossy(&r.payload).split(' ').next().unwrap().to_string();
            assert_eq!(r.key.as_deref(), Some(word.as_bytes()));
            assert!(r.headers.iter().any(|(k, v)| k == "weir-sink" && v == b"wc-kafka/out/0"), "{:?}", r.headers);
        }
    }
}

#[test]
fn sigkill_crash_loop_from_kafka_to_kafka_is_exactly_once() {
    let (broker, want) = broker_with_lines(40_000, 5);
    let dir = JobDir::new();
    // Paced to about 4 s a whole run: unpaced, Apache Kafka feeds the job
    // so fast a run may end before any kill or checkpoint.
    let pace = "records_per_second = 5000";
    kafka_job_with(&dir, &broker, 2, pace, "", &checkpoints_in(&dir, "[pipeline]\nbatch_size = 64"));
    let run = crash_loop(&dir, &[], seed());
    run.assert_recovered(2);
    assert_exact(&broker, &want, &format!("WEIR_TEST_SEED={}", run.seed));
}

/// `host status <job> --json` until the job wrote something.
pub(super) fn wait_for_output(dir: &JobDir, job: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        let out = host_command(dir.path(), &["status", job, "--json"]).output().unwrap();
        if out.status.success() {
            let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if s["records_written"].as_u64().unwrap_or(0) > 0 {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("job {job} never showed output");
}

#[test]
fn a_crash_in_the_middle_of_publishing_is_repaired_by_the_restore() {
    let (broker, want) = broker_with_lines(5000, 21);
    let dir = JobDir::new();
    kafka_job(&dir, &broker, 2, "", &checkpoints_in(&dir, "[pipeline]\nbatch_size = 64"));
    // The first held batch stops half published.
    let out =
        host_command(dir.path(), &["run", "job.toml"]).env("WEIR_CRASH_AT", "kafka.publish-half").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("crashing at kafka.publish-half"), "{err}");
    let partial = broker.consume_all("counts").len();
    assert!(partial > 0, "half the first batch was published before the crash");
    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains("published the output the restored checkpoint held"), "{err}");
    let already: u64 = err
        .split("already_there=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the restore says how much had arrived:\n{err}"));
    assert!(already > 0, "half a batch had arrived before the crash:\n{err}");
    assert_exact(&broker, &want, "");
}

#[test]
fn at_least_once_through_a_crash_loop_loses_nothing() {
    let (broker, want) = broker_with_lines(30_000, 9);
    let dir = JobDir::new();
    let settings = checkpoints_in(&dir, "[pipeline]\nbatch_size = 64");
    // Paced, as the exactly-once crash loop.
    kafka_job_with(&dir, &broker, 2, "records_per_second = 4000", "delivery = \"at-least-once\"", &settings);
    let run = crash_loop(&dir, &[], seed());
    run.assert_recovered(2);
    // Every update of every word is there at least once (repeats are
    // allowed), and the last is the full count.
    let out = broker.consume_all("counts");
    for (word, seen) in counts_by_key(&as_lines(&out)) {
        let n = want[&word];
        assert_eq!(seen.iter().max(), Some(&n), "word {word} (WEIR_TEST_SEED={})", run.seed);
        let distinct: BTreeSet<u64> = seen.into_iter().collect();
        assert_eq!(distinct, (1..=n).collect(), "word {word}: an update is missing (WEIR_TEST_SEED={})", run.seed);
    }
    assert_eq!(counts_by_key(&as_lines(&out)).len(), want.len());
}

#[test]
fn a_broker_that_hangs_for_seconds_mid_run_loses_and_repeats_nothing() {
    // Frozen (SIGSTOP) for 4 s while the job reads and publishes, then
    // let go. The source's client gives up on a request after 1.5 s, so
    // it drops its connections and connects again; the sink's waits.
    let (broker, want) = broker_with_lines(1500, 34);
    let dir = JobDir::new();
    let source = "records_per_second = 300\n[sources.properties]\n\"socket.timeout.ms\" = 1500";
    kafka_job_with(&dir, &broker, 2, source, "", &checkpoints_in(&dir, ""));
    let mut child = dir.start(&[]);
    wait_for_output(&dir, "wc-kafka");
    broker.freeze();
    std::thread::sleep(Duration::from_secs(4));
    assert!(child.try_wait().unwrap().is_none(), "the job was still running while the broker hung");
    broker.thaw();
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    // librdkafka says when it gives up on requests (facility REQTMOUT).
    assert!(err.contains("REQTMOUT"), "the source's client timed out requests while the broker hung:\n{err}");
    assert_exact(&broker, &want, &err);
}

/// The final counts in `counts` are `want`, word by word.
pub(super) fn assert_exact(broker: &KafkaBroker, want: &BTreeMap<String, u64>, log: &str) {
    let got = final_counts(&as_lines(&broker.consume_all("counts")));
    let diff: Vec<_> = want.iter().filter(|(k, n)| got.get(*k) != Some(n)).map(|(k, n)| (k, n, got.get(k))).collect();
    assert!(diff.is_empty() && got.len() == want.len(), "(word, wanted, got): {diff:?}\n{log}");
}

#[test]
fn a_savepoint_restores_into_more_source_subtasks_exactly() {
    let (broker, want) = broker_with_lines(8000, 44);
    let dir = JobDir::new();
    let settings = checkpoints_in(&dir, "");
    kafka_job_with(&dir, &broker, 1, "records_per_second = 500", "", &settings);
    let location = run_then_stop_with_savepoint(&dir);
    let before = broker.consume_all("counts").len();
    assert!(before > 0 && (before as u64) < want.values().sum::<u64>(), "stopped part-way: {before} updates");
    // Three source subtasks now share the four partitions.
    kafka_job_with(&dir, &broker, 3, "", "", &settings);
    let err = dir.succeeds(&["--from-savepoint", &location]);
    assert!(err.contains("lines                       3"), "three source subtasks:\n{err}");
    assert_exact(&broker, &want, "");
}

#[test]
fn a_savepoint_the_job_goes_on_from_publishes_nothing_so_a_crash_after_it_repeats_nothing() {
    // Checkpoints an hour apart: after the run's first, at its start, only
    // the savepoint could publish, and after the kill `--resume` goes back
    // to that first checkpoint.
    let (broker, want) = broker_with_lines(2000, 61);
    let dir = JobDir::new();
    let ck = format!("file://{}", dir.path().join("checkpoints").display());
    let settings = format!(
        "[checkpointing]\ninterval = \"1h\"\n\n[state.checkpoints]\ndir = \"{ck}\"\n\n[state.savepoints]\ndir = \"{ck}\"\n"
    );
    // About 7 s of input. One source subtask: keyless lines need not reach
    // every partition, and a subtask with none ends at once, after which
    // the job takes no more savepoints.
    kafka_job_with(&dir, &broker, 1, "records_per_second = 300", "", &settings);
    let mut child = dir.start(&[]);
    wait_for_output(&dir, "wc-kafka");
    let out = host_command(dir.path(), &["savepoint", "wc-kafka"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Publishing would have begun as the savepoint completed, before the
    // command heard of it; a second is ample for a record to arrive.
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "the job went on after the savepoint");
    let early = broker.consume_all("counts");
    assert!(early.is_empty(), "published at the savepoint: {}", as_lines(&early));
    child.kill().unwrap();
    child.wait().unwrap();
    let err = dir.succeeds(&["--resume"]);
    assert_exact(&broker, &want, &err);
}

#[test]
fn a_record_from_kafka_reaches_the_guest_with_its_key_and_timestamp() {
    let broker = KafkaBroker::start();
    broker.create_topic("words", 2);
    broker.create_topic("counts", 2);
    // Each record keyed by its word; the Kafka timestamp is event time.
    let records: Vec<(Option<&[u8]>, &[u8])> =
        [b"apple".as_slice(), b"pear", b"apple"].iter().map(|w| (Some(*w), *w)).collect();
    broker.produce("words", &records);
    let dir = JobDir::new();
    let servers = broker.bootstrap();
    dir.write(
        "job.toml",
        format!(
            r#"
name = "keyed"

[[sources]]
id = "words"
kind = "kafka"
bootstrap_servers = "{servers}"
topic = "words"
end = "latest"
timestamp = "kafka"

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

"#
        ),
    );
    dir.succeeds(&[]);
    let input = broker.consume_all("words");
    let out = broker.consume_all("counts");
    // The counter needs the key (it fails on a record without one) and
    // passes the input's timestamp on.
    let mut got: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> =
        out.iter().map(|r| (r.key.clone().unwrap(), r.payload.clone(), r.timestamp)).collect();
    got.sort();
    let stamp =
        |w: &[u8]| input.iter().filter(|r| r.key.as_deref() == Some(w)).map(|r| r.timestamp).collect::<Vec<_>>();
    let (apple, pear) = (stamp(b"apple"), stamp(b"pear"));
    let mut want = vec![
        (b"apple".to_vec(), b"apple 1".to_vec(), apple[0]),
        (b"apple".to_vec(), b"apple 2".to_vec(), apple[1]),
        (b"pear".to_vec(), b"pear 1".to_vec(), pear[0]),
    ];
    want.sort();
    assert_eq!(got, want);
    assert!(apple[0].is_some_and(|t| t > 1_700_000_000_000), "Kafka stamped the input: {apple:?}");
}

#[test]
fn kafka_errors_name_what_is_wrong() {
    let broker = KafkaBroker::start();
    broker.create_topic("words", 2);
    broker.create_topic("counts", 1);
    let dir = JobDir::new();

    // Nothing listens on the port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    kafka_job_with(&dir, &broker, 1, "request_timeout = \"2s\"", "", "");
    let job = dir.read("job.toml");
    dir.write("job.toml", job.replacen(&broker.bootstrap(), &format!("127.0.0.1:{closed}"), 1));
    let err = dir.fails();
    assert!(err.contains(&format!("source 'lines': Kafka at 127.0.0.1:{closed} did not answer within 2s")), "{err}");

    // A topic that does not exist.
    kafka_job(&dir, &broker, 1, "", "");
    dir.write("job.toml", dir.read("job.toml").replace("topic = \"words\"", "topic = \"nope\""));
    let err = dir.fails();
    assert!(err.contains("topic 'nope' does not exist on") && err.contains("create_topic = true"), "{err}");

    // A librdkafka property that does not exist; transactions without
    // checkpoints, or with a timeout the checkpoints would outlast.
    kafka_job(&dir, &broker, 1, "", "");
    dir.write("job.toml", dir.read("job.toml") + "\"no.such.thing\" = 1\n");
    let err = dir.fails();
    assert!(err.contains("sink 'out'") && err.contains("no.such.thing"), "{err}");
    kafka_job(&dir, &broker, 1, "mode = \"transactions\"", "");
    let err = dir.fails();
    assert!(err.contains("sink 'out': mode = \"transactions\" commits at checkpoints: add [checkpointing]"), "{err}");
    let slow = checkpoints_in(&dir, "").replace("interval = \"100ms\"", "interval = \"2m\"");
    kafka_job(&dir, &broker, 1, "mode = \"transactions\"\ntransaction_timeout = \"1m\"", &slow);
    let err = dir.fails();
    assert!(err.contains("transaction_timeout = 1m is not longer than the checkpoint interval (2m)"), "{err}");

    // A parallel file source.
    dir.write("in.txt", "a\n");
    dir.write(
        "job.toml",
        "name = \"x\"\n[[sources]]\nid = \"f\"\nkind = \"file\"\npath = \"in.txt\"\nparallelism = 2\n[[sinks]]\nid = \"o\"\nkind = \"discard\"\ninput = \"f\"\n",
    );
    let err = dir.fails();
    assert!(
        err.contains("source 'f': parallelism = 2, but a file source reads its input in order in one subtask"),
        "{err}"
    );
}

#[test]
fn a_topic_with_fewer_partitions_than_the_savepoint_is_refused() {
    let input = lines(2000, 2);
    let first = KafkaBroker::start();
    produce_lines(&first, &input);
    let dir = JobDir::new();
    let settings = checkpoints_in(&dir, "");
    kafka_job_with(&dir, &first, 1, "records_per_second = 100", "", &settings);
    let location = run_then_stop_with_savepoint(&dir);
    // The same topic names on another cluster, `words` with 2 partitions.
    let second = KafkaBroker::start();
    second.create_topic("words", 2);
    second.create_topic("counts", 3);
    kafka_job(&dir, &second, 1, "", &settings);
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok, "{err}");
    assert!(err.contains("topic 'words' has 2 partitions, but the checkpoint has an offset for partition"), "{err}");
}

#[test]
fn a_restore_finds_held_output_in_a_batch_its_first_read_back_begins_inside() {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use weir_host::connectors::kafka::held::{BATCH_HEADER, Held, HeldRecord, SEQ_HEADER, SINK_HEADER, published};
    // 2000 records of others, then 50 of this sink subtask's held batch
    // in one batch of the log, then 1000 of others: the read back begins
    // 1024 records before the end, inside the held batch, where a broker
    // that indexes its log by batch may return nothing of that batch.
    let broker = KafkaBroker::start();
    broker.create_topic("out", 1);
    let others = |n: usize| (0..n).map(|i| format!("other {i}")).collect::<Vec<_>>();
    let first = others(2000);
    broker.produce("out", &first.iter().map(|v| (None, v.as_bytes())).collect::<Vec<_>>());
    let (ident, nonce) = (b"job/out/0".as_slice(), 0x5eed_u64);
    let mut held = Held { checkpoint: 7, nonce, ..Held::default() };
    let batched: BaseProducer =
        broker.config().set("linger.ms", "200").set("batch.num.messages", "1000").create().unwrap();
    for seq in 0..50u64 {
        let value = format!("held {seq}");
        held.push(&HeldRecord { partition: 0, key: None, payload: value.as_bytes(), timestamp: None });
        let (nonce, seq) = (nonce.to_be_bytes(), seq.to_be_bytes());
        let headers = OwnedHeaders::new()
            .insert(Header { key: SINK_HEADER, value: Some(ident) })
            .insert(Header { key: BATCH_HEADER, value: Some(&nonce[..]) })
            .insert(Header { key: SEQ_HEADER, value: Some(&seq[..]) });
        batched
            .send(BaseRecord::<[u8], [u8]>::to("out").partition(0).payload(value.as_bytes()).headers(headers))
            .unwrap();
    }
    batched.flush(Duration::from_secs(10)).unwrap();
    let last = others(1000);
    broker.produce("out", &last.iter().map(|v| (None, v.as_bytes())).collect::<Vec<_>>());
    let records = broker.consume_all("out");
    let held_at: Vec<i64> = records.iter().filter(|r| r.payload.starts_with(b"held")).map(|r| r.offset).collect();
    assert_eq!(held_at, (2000..2050).collect::<Vec<_>>(), "the held records' offsets");

    let consumer = read_back_consumer(&broker);
    let arrived =
        published(&consumer, "out", std::slice::from_ref(&held), ident, Duration::from_secs(20), &|| false).unwrap();
    let missing: Vec<u64> = (0..50).filter(|seq| !arrived.contains(0, nonce, *seq)).collect();
    assert!(
        missing.is_empty(),
        "held records the read back did not find (a restore would send them twice): {missing:?}"
    );
    assert!(!arrived.contains(0, nonce + 1, 0) && !arrived.contains(1, nonce, 0));
}

#[test]
fn a_read_back_that_is_cancelled_stops_at_once_however_much_it_has_left_to_read() {
    use weir_host::connectors::kafka::held::{Held, HeldRecord, published};
    use weir_host::runtime::error::ConnectorError;
    // An output partition of 3 M records of others and none of the held
    // batch's: the read back reads all of it, backwards to the log's
    // start. A member whose partition is revoked meanwhile cancels it, and
    // must answer the group long before such a read would end.
    let broker = KafkaBroker::start();
    broker.create_topic("out", 1);
    let p = broker.bulk_producer();
    for i in 0..3_000_000u32 {
        p.send(rdkafka::producer::BaseRecord::<[u8], [u8]>::to("out").partition(0).payload(&i.to_be_bytes()[..]));
    }
    p.flush();
    let mut held = Held { checkpoint: 3, nonce: 0xcafe, ..Held::default() };
    held.push(&HeldRecord { partition: 0, key: None, payload: b"never sent", timestamp: None });
    let read_back = |cancel_after: Option<Duration>| {
        let consumer = read_back_consumer(&broker);
        let began = Instant::now();
        let cancelled = || cancel_after.is_some_and(|after| began.elapsed() >= after);
        let result =
            published(&consumer, "out", std::slice::from_ref(&held), b"job/out/0", Duration::from_secs(30), &cancelled);
        (result, began.elapsed())
    };
    let (whole, full) = read_back(None);
    let arrived = whole.unwrap();
    assert!(!arrived.contains(0, 0xcafe, 0), "the held record was never sent");
    // However fast this machine reads, the cancel comes a tenth of the way
    // in, and the read ends within half a second of it.
    let cancel_at = full / 10;
    let (cut, took) = read_back(Some(cancel_at));
    assert!(matches!(cut, Err(ConnectorError::Cancelled)), "the cancelled read back: {:?}", cut.map(|_| ()));
    assert!(
        took < cancel_at + Duration::from_millis(500),
        "the read back of 3 M records takes {full:?}; cancelled after {cancel_at:?}, it ended after {took:?}"
    );
}

/// A consumer as the Kafka sink's read-back makes one, on `broker`.
fn read_back_consumer(broker: &KafkaBroker) -> weir_host::connectors::kafka::KafkaConsumer {
    let options = weir_host::connectors::kafka::ClusterOptions {
        bootstrap_servers: broker.bootstrap(),
        request_timeout: None,
        create_topic: false,
        partitions: None,
        properties: Default::default(),
    };
    options.create(&[("enable.partition.eof", "true".into()), ("group.id", "readback".into())]).unwrap()
}
