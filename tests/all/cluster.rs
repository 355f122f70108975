//! Cluster mode against Apache Kafka on loopback:
//! several `host run` processes share one job through a consumer group,
//! each running the partitions the group gives it; a killed member's
//! partitions resume elsewhere from their checkpoints, a member that joins
//! takes some over, and a member paused past its session commits and
//! publishes nothing for the partitions it lost; the output stays
//! exactly-once. A rolling swap changes the module of every partition with
//! its state carried over, and a partition that moves afterwards goes on
//! with the new module. Jobs cluster mode cannot partition are refused
//! before anything runs.

use super::metrics::scrape;
use super::support::{JobDir, final_counts};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use weir_tests::artifacts::{WORD_COUNT_COUNTER, WORD_COUNT_COUNTER_V2, WORD_COUNT_TOKENIZER};
use weir_tests::host_command;
use weir_tests::kafka::KafkaBroker;

/// `count` words over a vocabulary of 200, deterministic from `seed`.
pub(super) fn words(count: usize, seed: u64) -> Vec<String> {
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

/// A broker whose topic `words` (`partitions` partitions) holds `input`,
/// each record keyed by its word, and an empty topic `counts`; each word's
/// count, computed directly.
fn broker_with_words(partitions: i32, counts: i32, input: Vec<String>) -> (KafkaBroker, BTreeMap<String, u64>) {
    let broker = KafkaBroker::start();
    broker.create_topic("words", partitions);
    broker.create_topic("counts", counts);
    let records: Vec<(Option<&[u8]>, &[u8])> = input.iter().map(|w| (Some(w.as_bytes()), w.as_bytes())).collect();
    broker.produce("words", &records);
    let mut want = BTreeMap::new();
    for w in input {
        *want.entry(w).or_insert(0u64) += 1;
    }
    (broker, want)
}

/// The cluster job: the counter keyed by the Kafka key, straight from the
/// source, every `rate` records a second per partition.
pub(super) fn cluster_job(dir: &JobDir, broker: &KafkaBroker, rate: u32, session: &str) {
    let counter =
        format!("uid = \"counter\"\nmodule = \"{WORD_COUNT_COUNTER}\"\ninput = \"words\"\npartition = \"key\"");
    cluster_job_with(dir, broker, rate, session, &[&counter]);
}

/// A cluster job reading topic `words` (every `rate` records a second per
/// partition) through `operators` (each the body of an `[[operators]]`
/// entry; the last is `counter`) into topic `counts`.
fn cluster_job_with(dir: &JobDir, broker: &KafkaBroker, rate: u32, session: &str, operators: &[&str]) {
    let servers = broker.bootstrap();
    let ck = format!("file://{}", dir.path().join("checkpoints").display());
    let operators: String = operators.iter().map(|o| format!("[[operators]]\n{o}\n\n")).collect();
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

{operators}
[[sinks]]
id = "out"
kind = "kafka"
input = "counter"
bootstrap_servers = "{servers}"
topic = "counts"

"#
        ),
    );
}

/// The output so far as `word n` lines, partition by partition (version
/// 2 of the counter writes `word=n`).
pub(super) fn output(broker: &KafkaBroker) -> String {
    broker
        .consume_all("counts")
        .iter()
        .map(|r| format!("{}\n", String::from_utf8_lossy(&r.payload).replace('=', " ")))
        .collect()
}

/// The output records of the first word whose updates are not 1..=n,
/// with where they are and which batch of which sink wrote them.
fn repeated_word_records(broker: &KafkaBroker) -> String {
    let records = broker.consume_all("counts");
    let word = |r: &weir_tests::kafka::Consumed| {
        let text = String::from_utf8_lossy(&r.payload).replace('=', " ");
        text.rsplit_once(' ').map(|(w, n)| (w.to_string(), n.to_string()))
    };
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (w, n) in records.iter().filter_map(word) {
        seen.entry(w).or_default().push(n.parse().unwrap_or(0));
    }
    let Some(bad) = seen.iter().find(|(_, n)| n.iter().enumerate().any(|(i, n)| *n != i as u64 + 1)).map(|(w, _)| w)
    else {
        return "none".into();
    };
    let header = |r: &weir_tests::kafka::Consumed, k: &str| {
        r.headers.iter().find(|(h, _)| h == k).map(|(_, v)| v.clone()).unwrap_or_default()
    };
    records
        .iter()
        .filter(|r| word(r).is_some_and(|(w, _)| &w == bad))
        .map(|r| {
            format!(
                "{}/{} {} sink={} batch={:02x?} seq={:02x?}\n",
                r.partition,
                r.offset,
                String::from_utf8_lossy(&r.payload),
                String::from_utf8_lossy(&header(r, "weir-sink")),
                header(r, "weir-batch"),
                header(r, "weir-seq")
            )
        })
        .collect()
}

/// The highest count of each word in `text` so far.
fn latest(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (w, n) in text.lines().filter_map(|l| l.rsplit_once(' ')) {
        let n: u64 = n.parse().unwrap_or(0);
        counts.entry(w.to_string()).and_modify(|m: &mut u64| *m = (*m).max(n)).or_insert(n);
    }
    counts
}

/// One `host run job.toml` process. Its log goes to a file, so that a
/// long run never blocks on a full pipe.
pub(super) struct Member {
    child: Child,
    log: PathBuf,
}

impl Member {
    pub(super) fn start(dir: &JobDir) -> Member {
        let n = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("member-"))
            .count();
        let log = dir.path().join(format!("member-{n}.log"));
        let child = host_command(dir.path(), &["run", "job.toml"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start host");
        Member { child, log }
    }

    pub(super) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its log once it exited by itself.
    pub(super) fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        Some(format!("({status}) {}", std::fs::read_to_string(&self.log).unwrap_or_default()))
    }

    /// Kills it; its log.
    pub(super) fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A member outlives no test, failed ones included.
impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the output holds every word's final count.
pub(super) fn wait_complete(broker: &KafkaBroker, want: &BTreeMap<String, u64>, members: &mut [Member]) {
    wait_complete_or(broker, want, members, &String::new)
}

/// [`wait_complete`], with `explain` saying more when it fails.
fn wait_complete_or(
    broker: &KafkaBroker,
    want: &BTreeMap<String, u64>,
    members: &mut [Member],
    explain: &dyn Fn() -> String,
) {
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        let got = latest(&output(broker));
        if &got == want {
            return;
        }
        for m in members.iter_mut() {
            if let Some(log) = m.exited() {
                panic!("a member exited before the output was complete: {log}");
            }
        }
        let wrong: Vec<_> = want.iter().filter(|(w, n)| got.get(*w) != Some(n)).collect();
        if Instant::now() > until {
            let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
            let some: Vec<String> =
                wrong.iter().take(5).map(|(w, n)| format!("{w}: want {n}, got {:?}", got.get(*w))).collect();
            panic!(
                "the output is still missing {} of {} words' final counts ({some:?}); the first repeated word:\n{}\n{}\nmembers:\n{}",
                wrong.len(),
                want.len(),
                repeated_word_records(broker),
                explain(),
                logs.join("\n----\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn members_share_the_partitions_and_a_killed_members_partitions_resume_elsewhere_exactly() {
    let (broker, want) = broker_with_words(6, 3, words(9000, 71));
    let dir = JobDir::new();
    // 1500 records a partition at 100 a second: about 15 s of input.
    cluster_job(&dir, &broker, 100, "6s");
    let mut members: Vec<Member> = (0..3).map(|_| Member::start(&dir)).collect();
    // Once output flows, one member dies; the group gives its partitions to
    // the others once its session times out.
    let until = Instant::now() + Duration::from_secs(60);
    while output(&broker).is_empty() {
        assert!(Instant::now() < until, "no output within a minute");
        std::thread::sleep(Duration::from_millis(300));
    }
    // Cooperative assignment moves partitions to the later members in a
    // second round: wait until every member has claimed some.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let owners: BTreeSet<String> = log_owners(&dir).into_values().collect();
        if members.iter().all(|m| owners.iter().any(|o| o.starts_with(&format!("member {} on", m.id())))) {
            break;
        }
        assert!(Instant::now() < until, "not every member claimed partitions within a minute: {owners:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let killed = format!("member {} on", members[0].id());
    // What a run killed mid-checkpoint leaves, planted in the partitions of
    // the member about to die under ids of its claims: a checkpoint
    // without `_metadata`, a shared file nothing references, and a
    // complete checkpoint above anything its claim commits (as one whose
    // commit was refused, the owner dying before deleting it: a copy of
    // the partition's latest `_metadata`). The claims that take the
    // partitions over must delete all three.
    let mut planted: Vec<PathBuf> = Vec::new();
    for (p, log) in commit_logs(&dir) {
        let Some((seq, _, owner)) = log.iter().rev().find(|(_, kind, _)| kind == "claim") else { continue };
        if !owner.starts_with(&killed) || !log.last().is_some_and(|e| e.2.starts_with(&killed)) {
            continue;
        }
        let copy = dir.path().join(format!("checkpoints/wc-cluster-p{p}"));
        for file in [copy.join("chk-999999999/counter-0/state"), copy.join("shared/counter-0/unused.sst")] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, b"left by a run that died").unwrap();
            planted.push(file);
        }
        let latest = std::fs::read_dir(&copy)
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("chk-")?.parse::<u64>().ok())
            .filter(|id| copy.join(format!("chk-{id}/_metadata")).is_file())
            .max();
        if let Some(id) = latest {
            let refused = copy.join(format!("chk-{}/_metadata", (seq + 1) * 1_000_000_000 - 1));
            std::fs::create_dir_all(refused.parent().unwrap()).unwrap();
            std::fs::copy(copy.join(format!("chk-{id}/_metadata")), &refused).unwrap();
            planted.push(refused);
        }
    }
    assert!(!planted.is_empty(), "the member to kill owns partitions: {:?}", log_owners(&dir));
    assert!(planted.iter().any(|f| f.ends_with("_metadata")), "no complete checkpoint to copy: {planted:?}");
    let first = members.remove(0).kill();
    let killed_at = Instant::now();
    assert!(first.contains("partitions assigned"), "the killed member ran partitions:\n{first}");
    // Its partitions move to the survivors, whose copies claim them.
    let until = Instant::now() + Duration::from_secs(90);
    while log_owners(&dir).values().any(|o| o.starts_with(&killed)) {
        if Instant::now() > until {
            let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
            panic!("the killed member's partitions never moved: {:?}\n{logs:#?}", log_owners(&dir));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("the killed member's partitions were claimed elsewhere {:?} after the kill", killed_at.elapsed());
    // Mid-run, `host status` gives each partition's committed offset and
    // its lag behind the broker's end offset.
    let status = host_command(dir.path(), &["status", "job.toml", "--json"]).output().unwrap();
    let warnings = String::from_utf8_lossy(&status.stderr).into_owned();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    for entry in status["partitions"].as_array().unwrap() {
        let (end, lag) = (entry["end"].as_i64().unwrap(), entry["lag"].as_i64());
        if entry["input_ended"] == true {
            continue;
        }
        let offset = entry["offset"].as_i64().unwrap_or_else(|| panic!("no offset: {status:#}\n{warnings}"));
        // 0 is a committed offset too: a copy that claimed its partition
        // just now may complete its first checkpoint before its first record.
        assert!((0..=end).contains(&offset), "{status:#}");
        assert_eq!(lag, Some(end - offset), "{status:#}");
    }
    // A new member joins mid-run and takes some partitions over.
    members.push(Member::start(&dir));
    wait_complete(&broker, &want, &mut members);
    // `host status` on the job file shows who has each partition, from the
    // commit logs: members alive now, never the killed one.
    let status = host_command(dir.path(), &["status", "job.toml", "--json"]).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let warnings = String::from_utf8_lossy(&status.stderr).into_owned();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let alive: Vec<String> = members.iter().map(|m| format!("member {} on", m.id())).collect();
    let partitions = status["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 6, "{status:#}");
    for (p, entry) in partitions.iter().enumerate() {
        assert_eq!(entry["partition"], p as i64, "{status:#}");
        let owner = entry["owner"].as_str().unwrap_or_default();
        assert!(
            alive.iter().any(|a| owner.starts_with(a)),
            "partition {p} owned by {owner:?}, not a live member: {status:#}"
        );
        assert!(entry["checkpoint"].as_u64().is_some(), "{status:#}");
        // All of the input is counted and published: every partition's
        // latest checkpoint came after its input ended.
        assert_eq!(entry["input_ended"], true, "partition {p}: {status:#}\n{warnings}");
    }
    let ends: i64 = partitions.iter().map(|e| e["end"].as_i64().unwrap()).sum();
    assert_eq!(ends, 9000, "every word is in one partition: {status:#}");
    let text = host_command(dir.path(), &["status", "job.toml"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("cluster job 'wc-cluster' (group 'weir-cluster-wc-cluster'): 6 partitions of topic 'words'"),
        "{text}"
    );
    let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
    for log in &logs {
        for line in log
            .lines()
            .filter(|l| l.contains("joins again") || l.contains("partitions assigned") || l.contains("revoked"))
        {
            eprintln!("{line}");
        }
    }
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
    // The claims after the kill deleted what the dead member's runs left:
    // the planted files, and every unfinished checkpoint numbered in the
    // range of one of its claims (nothing else writes there: it is dead).
    let left: Vec<&PathBuf> = planted.iter().filter(|f| f.exists()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for (p, log) in commit_logs(&dir) {
        let copy = dir.path().join(format!("checkpoints/wc-cluster-p{p}"));
        let claims: Vec<u64> =
            log.iter().filter(|(_, kind, owner)| kind == "claim" && owner.starts_with(&killed)).map(|e| e.0).collect();
        for entry in std::fs::read_dir(&copy).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_prefix("chk-").and_then(|n| n.parse::<u64>().ok()) else { continue };
            let dead = claims.iter().any(|seq| id > seq * 1_000_000_000 && id <= (seq + 1) * 1_000_000_000);
            assert!(
                !dead || entry.path().join("_metadata").exists(),
                "{} unfinished, of the dead member",
                entry.path().display()
            );
        }
    }
}

#[test]
fn a_keyed_operator_on_another_operators_output_reads_a_repartition_topic_exactly_once_across_a_kill() {
    // Lines keyed by their number: one word's records are in every
    // partition, so the counter must read them through a repartition topic.
    let broker = KafkaBroker::start();
    broker.create_topic("words", 4);
    broker.create_topic("counts", 2);
    let vocabulary = words(12_000, 29);
    let mut rest = vocabulary.as_slice();
    let mut lines = Vec::new();
    for i in 0.. {
        let n = (1 + i % 5).min(rest.len());
        if n == 0 {
            break;
        }
        lines.push((format!("l{i}"), rest[..n].join(" ")));
        rest = &rest[n..];
    }
    let records: Vec<(Option<&[u8]>, &[u8])> = lines.iter().map(|(k, l)| (Some(k.as_bytes()), l.as_bytes())).collect();
    broker.produce("words", &records);
    let mut want = BTreeMap::new();
    for w in &vocabulary {
        *want.entry(w.clone()).or_insert(0u64) += 1;
    }
    let dir = JobDir::new();
    // About 1000 lines a partition at 60 a second: some 17 s of input.
    let tokenizer = format!("uid = \"tokenizer\"\nmodule = \"{WORD_COUNT_TOKENIZER}\"\ninput = \"words\"");
    let counter =
        format!("uid = \"counter\"\nmodule = \"{WORD_COUNT_COUNTER}\"\ninput = \"tokenizer\"\npartition = \"key\"");
    cluster_job_with(&dir, &broker, 60, "6s", &[&tokenizer, &counter]);
    let mut members: Vec<Member> = (0..3).map(|_| Member::start(&dir)).collect();
    let until = Instant::now() + Duration::from_secs(60);
    while output(&broker).is_empty() {
        assert!(
            Instant::now() < until,
            "no output within a minute:\n{:#?}",
            members.iter_mut().map(Member::kill).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(2));
    let first = members.remove(0).kill();
    assert!(first.contains("partitions assigned"), "the killed member ran partitions:\n{first}");
    // Each tokenizer copy writes one record per word of its partition's lines.
    let mut per_copy: BTreeMap<String, usize> = BTreeMap::new();
    for r in broker.consume_all("words") {
        let copy = format!("wc-cluster-p{}/counter-repartition/0", r.partition);
        *per_copy.entry(copy).or_default() += String::from_utf8_lossy(&r.payload).split(' ').count();
    }
    let report = || format!("{}\nthe killed member:\n{first}", repartition_report(&broker, &per_copy));
    wait_complete_or(&broker, &want, &mut members, &report);
    let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
    // Exactly once through the repartition topic (one record per word) and
    // to the output (each word's updates 1..n).
    let repartitioned = broker.consume_all("wc-cluster-counter-repartition");
    assert_eq!(repartitioned.len(), vocabulary.len(), "records in the repartition topic\n{}\n{logs:#?}", report());
    assert_eq!(final_counts(&output(&broker)), want);
    // Both parts ran as copies per partition, each checkpointing on its own.
    let mut copies: Vec<String> = std::fs::read_dir(dir.path().join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    copies.sort();
    let mut expected: Vec<String> = (0..4).map(|p| format!("wc-cluster-p{p}")).collect();
    expected.extend((0..4).map(|p| format!("wc-cluster-counter-p{p}")));
    expected.sort();
    assert_eq!(copies, expected);
}

/// What the repartition topic holds against `per_copy` (records each
/// tokenizer copy should have written): each copy's count, and every
/// record that is there twice (same copy, batch and index).
fn repartition_report(broker: &KafkaBroker, per_copy: &BTreeMap<String, usize>) -> String {
    let header = |r: &weir_tests::kafka::Consumed, k: &str| {
        r.headers.iter().find(|(h, _)| h == k).map(|(_, v)| v.clone()).unwrap_or_default()
    };
    let records = broker.consume_all("wc-cluster-counter-repartition");
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    // (copy, batch, index) to where each such record is.
    type Place = (i32, i64);
    let mut seen: BTreeMap<(String, Vec<u8>, Vec<u8>), Vec<Place>> = BTreeMap::new();
    for r in &records {
        let copy = String::from_utf8_lossy(&header(r, "weir-sink")).into_owned();
        *got.entry(copy.clone()).or_default() += 1;
        seen.entry((copy, header(r, "weir-batch"), header(r, "weir-seq"))).or_default().push((r.partition, r.offset));
    }
    let mut out = format!("repartition topic: {} records; per copy got {got:?}, want {per_copy:?}\n", records.len());
    for ((copy, batch, seq), at) in seen.iter().filter(|(_, at)| at.len() > 1).take(10) {
        out += &format!("twice: {copy} batch={batch:02x?} seq={seq:02x?} at {at:?}\n");
    }
    out
}

/// Sends `signal` (`-STOP`, `-CONT`) to `member`.
pub(super) fn signal(member: &Member, signal: &str) {
    let ok = std::process::Command::new("kill").args([signal, &member.id().to_string()]).status().unwrap();
    assert!(ok.success(), "kill {signal}");
}

/// Each partition's commit log: (number, kind, owner) in order.
pub(super) fn commit_logs(dir: &JobDir) -> BTreeMap<i32, Vec<(u64, String, String)>> {
    let mut logs = BTreeMap::new();
    let Ok(copies) = std::fs::read_dir(dir.path().join("checkpoints")) else { return logs };
    for copy in copies.flatten() {
        let name = copy.file_name().to_string_lossy().into_owned();
        let Some(p) = name.strip_prefix("wc-cluster-p").and_then(|p| p.parse().ok()) else { continue };
        let Ok(entries) = std::fs::read_dir(copy.path().join("_commits")) else { continue };
        let mut log: Vec<(u64, String, String)> = entries
            .flatten()
            .filter_map(|e| {
                let seq = e.file_name().to_string_lossy().parse().ok()?;
                let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok()?;
                Some((seq, v["kind"].as_str()?.to_string(), v["owner"].as_str()?.to_string()))
            })
            .collect();
        log.sort();
        logs.insert(p, log);
    }
    logs
}

/// Who wrote the last entry of each partition's commit log.
pub(super) fn log_owners(dir: &JobDir) -> BTreeMap<i32, String> {
    commit_logs(dir).into_iter().filter_map(|(p, log)| Some((p, log.last()?.2.clone()))).collect()
}

#[test]
fn a_member_paused_past_its_session_commits_nothing_for_the_partitions_it_lost() {
    let (broker, want) = broker_with_words(4, 2, words(8000, 97));
    let dir = JobDir::new();
    // 2000 records a partition at 80 a second: about 25 s of input.
    cluster_job(&dir, &broker, 80, "6s");
    let mut zombie = Member::start(&dir);
    let paused = format!("member {} on", zombie.id());
    // The first member takes every partition, and commits for them.
    let until = Instant::now() + Duration::from_secs(60);
    while !(log_owners(&dir).len() == 4 && log_owners(&dir).values().all(|o| o.starts_with(&paused))) {
        if Instant::now() > until {
            panic!(
                "the first member never committed for all four partitions: {:?}\n{}",
                log_owners(&dir),
                zombie.kill()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut other = Member::start(&dir);
    // Once the group gave the other member some partitions, the first one
    // freezes: past its session, the group gives them all to the other,
    // whose copies claim each partition's commit log.
    let until = Instant::now() + Duration::from_secs(60);
    while log_owners(&dir).values().all(|o| o.starts_with(&paused)) {
        assert!(Instant::now() < until, "the second member never took a partition: {:?}", log_owners(&dir));
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(&zombie, "-STOP");
    let until = Instant::now() + Duration::from_secs(90);
    while log_owners(&dir).values().any(|o| o.starts_with(&paused)) {
        if Instant::now() > until {
            signal(&zombie, "-CONT");
            let log = broker.log();
            panic!(
                "the paused member's partitions never moved: {:?}\nsurvivor:\n{}\nbroker (tail):\n{}",
                log_owners(&dir),
                other.kill(),
                &log[log.len().saturating_sub(6000)..]
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Let the survivor make progress on them, then wake the paused one:
    // whatever it commits now for those partitions is refused.
    std::thread::sleep(Duration::from_secs(2));
    signal(&zombie, "-CONT");
    // Woken, it rejoins the group as a new member and may be given
    // partitions again (claiming them anew).
    let mut members = [zombie, other];
    wait_complete(&broker, &want, &mut members);
    let [mut zombie, mut other] = members;
    let woken = zombie.kill();
    let survivor = other.kill();
    let out = output(&broker);
    if std::panic::catch_unwind(|| final_counts(&out)).is_err() {
        let brief = |log: &str| {
            log.lines()
                .filter(|l| !l.contains("checkpoint complete") && !l.contains("CONFWARN") && !l.contains("dashboard"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "not exactly-once; the records of the first repeated word:\n{}\npaused member:\n{}\n----\nsurvivor:\n{}",
            repeated_word_records(&broker),
            brief(&woken),
            brief(&survivor)
        );
    }
    assert_eq!(final_counts(&out), want);
    // In every partition's log, each commit follows its writer's own claim
    // or commit: nobody committed after another member claimed.
    for (p, log) in commit_logs(&dir) {
        assert!(log.windows(2).all(|w| w[0].0 + 1 == w[1].0), "partition {p}: a gap in {log:?}");
        for w in log.windows(2) {
            assert!(w[1].1 == "claim" || w[1].2 == w[0].2, "partition {p}: {:?} committed after {:?}", w[1], w[0]);
        }
    }
    let moved = commit_logs(&dir).values().flatten().filter(|e| e.1 == "claim").count();
    assert!(moved >= 6, "four first claims and at least two takeovers: {:#?}", commit_logs(&dir));
    assert!(
        woken.contains("can no longer commit checkpoints") || woken.contains("partitions revoked"),
        "the paused member learnt it lost its partitions:\n{woken}"
    );
}

#[test]
fn a_swap_through_the_job_file_changes_every_partitions_module_and_moved_partitions_keep_it() {
    let (broker, want) = broker_with_words(4, 2, words(12000, 53));
    let dir = JobDir::new();
    // 3000 records a partition at 100 a second: about 30 s of input.
    cluster_job(&dir, &broker, 100, "6s");
    let mut members: Vec<Member> = (0..2).map(|_| Member::start(&dir)).collect();
    // `host swap job.toml` swaps the copies that run on this machine; the
    // group may be settling, so it is asked again until all four swapped.
    let until = Instant::now() + Duration::from_secs(90);
    let swapped_at = loop {
        let out =
            host_command(dir.path(), &["swap", "job.toml", "--operator", "counter", "--module", WORD_COUNT_COUNTER_V2])
                .output()
                .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() && said.contains("in partitions [0, 1, 2, 3] of 'wc-cluster' on this machine") {
            assert_eq!(said.matches("paused").count(), 4, "{said}");
            break commit_logs(&dir);
        }
        if Instant::now() > until {
            let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
            panic!("no swap of all four partitions within 90 s; last: {said}\n{logs:#?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    member_endpoint_shows_the_group(&dir);
    // Every partition commits a checkpoint after the swap (which names the
    // new module); then a third member joins and partitions move.
    let until = Instant::now() + Duration::from_secs(60);
    while !(0..4).all(|p| commit_logs(&dir)[&p].len() >= swapped_at[&p].len() + 2) {
        assert!(Instant::now() < until, "no checkpoint after the swap: {:?}", commit_logs(&dir));
        std::thread::sleep(Duration::from_millis(100));
    }
    members.push(Member::start(&dir));
    // Once it runs partitions, the first member is stopped with SIGTERM, as
    // Kubernetes stops a pod: it hands its partitions over, leaves the
    // group and exits 0, and the others take them on.
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&members[2].log).unwrap_or_default().contains("partitions assigned") {
        assert!(Instant::now() < until, "the third member was never given partitions");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut stopped = members.remove(0);
    signal(&stopped, "-TERM");
    let until = Instant::now() + Duration::from_secs(30);
    let first = loop {
        if let Some(log) = stopped.exited() {
            break log;
        }
        assert!(Instant::now() < until, "the member did not leave within 30 s of SIGTERM:\n{}", stopped.kill());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(first.starts_with("(exit status: 0)"), "{first}");
    assert!(first.contains("cancelled: handing the partitions over and leaving the group"), "{first}");
    wait_complete(&broker, &want, &mut members);
    let mut logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
    logs.insert(0, first);
    assert!(logs[2].contains("partitions assigned"), "the third member took partitions:\n{}", logs[2]);
    // The members that gave partitions up took a checkpoint to hand them over.
    assert!(
        logs.iter().any(|l| l.contains("handed over at a checkpoint just completed")),
        "no hand-over checkpoint:\n{logs:#?}"
    );
    // Exactly-once across the swap and the moves, each word's updates in
    // order, and no version-1 update of a word after a version-2 one.
    assert_eq!(final_counts(&output(&broker)), want);
    let mut switched = BTreeSet::new();
    for r in broker.consume_all("counts") {
        let line = String::from_utf8_lossy(&r.payload).into_owned();
        match line.split_once('=') {
            Some((w, _)) => {
                switched.insert(w.to_string());
            }
            None => {
                let w = line.split_once(' ').unwrap().0;
                assert!(!switched.contains(w), "version 1 counted {w} after version 2 did: {line}");
            }
        }
    }
    // The input went on for seconds after the swap: every word's last update
    // came from version 2, over the counts version 1 had kept.
    assert_eq!(switched.len(), want.len(), "words that version 2 counted");
}

/// Checks the endpoint a member serves under the job's name (the member
/// that started first has it) once the group has settled with partitions
/// on that member: `host status <job>` shows the whole group, each
/// partition held by one member, and the partitions that member runs; its
/// `/metrics` has one series per partition it runs, the partition as
/// subtask index.
fn member_endpoint_shows_the_group(dir: &JobDir) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let out = host_command(dir.path(), &["status", "wc-cluster", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let group = &status["cluster"];
        assert_eq!(group["partitions"].as_array().map(Vec::len), Some(4), "{status:#}");
        let members = group["members"].as_array().unwrap();
        let mut held: Vec<i64> =
            members.iter().flat_map(|m| m["partitions"].as_array().unwrap()).map(|p| p.as_i64().unwrap()).collect();
        held.sort();
        let me = format!("member {} on", status["pid"]);
        let mine: BTreeSet<String> = members
            .iter()
            .filter(|m| m["member"].as_str().unwrap().starts_with(&me))
            .flat_map(|m| m["partitions"].as_array().unwrap())
            .map(|p| p.to_string())
            .collect();
        let here: BTreeSet<String> = group["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| !p["here"].is_null())
            .map(|p| p["partition"].to_string())
            .collect();
        let counter = status["nodes"].as_array().unwrap().iter().find(|n| n["id"] == "counter");
        let parallelism = counter.and_then(|c| c["parallelism"].as_u64());
        // Settled: each partition held by one member, this one running
        // exactly the partitions it holds.
        if held == [0, 1, 2, 3] && !mine.is_empty() && mine == here && parallelism == Some(mine.len() as u64) {
            let run: serde_json::Value = serde_json::from_str(&dir.read(".run/wc-cluster.json")).unwrap();
            let samples = scrape(run["port"].as_u64().unwrap() as u16, run["token"].as_str().unwrap());
            let series: BTreeSet<String> = samples
                .iter()
                .filter(|s| s.0 == "weir_task_numRecordsIn" && s.1["task_name"] == "counter")
                .map(|s| s.1["subtask_index"].clone())
                .collect();
            if series == mine {
                return;
            }
        }
        assert!(Instant::now() < until, "the member's endpoint never showed a settled group: {status:#}");
        std::thread::sleep(Duration::from_millis(300));
    }
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
    let across_a_cut = format!(
        r#"[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"

[[operators]]
uid = "keyed"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
inputs = [{{ from = "keyed", partition = "rebalance" }}, {{ from = "lines", partition = "rebalance" }}]"#
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
            base(&checkpoints, &across_a_cut, kafka_sink),
            "operator 'counter' reads from both sides of a repartition topic",
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
        (
            // The default session is 10 s: output must be delivered within 5 s.
            base(&checkpoints, &counter, &format!("{kafka_sink}\nflush_timeout = \"6s\"")),
            "sink 'out' sets flush_timeout = \"6s\"; in cluster mode it must be at most half of [cluster] session_timeout (5s)",
        ),
        (
            base(&checkpoints, &counter, &format!("{kafka_sink}\n[sinks.properties]\n\"enable.idempotence\" = true")),
            "sink 'out' sets properties.enable.idempotence; in cluster mode Weir sets it",
        ),
    ] {
        dir.write("job.toml", &job);
        let err = dir.fails();
        assert!(err.contains(says), "wanted {says:?} in:\n{err}");
        assert!(err.contains("job.toml"), "the error names the file:\n{err}");
    }
}
