//! How the group moves partitions in cluster mode, on Apache Kafka.
//! Cooperative rebalancing: with three members running, a fourth joins and
//! later one leaves (SIGTERM); only the partitions that change owner stop
//! and restore, every other partition's copy runs on and its output never
//! pauses, and the output stays exactly-once. The pauses are measured on
//! the broker's clock (the output topic stamps records with their append
//! time). Partitions added to the input topic mid-run are assigned and
//! read, exactly once.

use super::cluster::{Member, cluster_job, commit_logs, output, signal, wait_complete, words};
use super::support::{JobDir, counts_by_key};
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use weir_tests::kafka::{KafkaBroker, Stamped};

/// How many claims each partition's commit log holds.
fn claims(dir: &JobDir) -> BTreeMap<i32, usize> {
    commit_logs(dir).into_iter().map(|(p, log)| (p, log.iter().filter(|e| e.1 == "claim").count())).collect()
}

/// Waits until every one of `members` has claimed a partition (the last
/// claim in some commit log is its).
fn wait_all_claimed(dir: &JobDir, members: &mut [Member]) {
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let owners: Vec<String> = commit_logs(dir)
            .into_values()
            .filter_map(|log| log.iter().rev().find(|e| e.1 == "claim").map(|e| e.2.clone()))
            .collect();
        if members.iter().all(|m| owners.iter().any(|o| o.starts_with(&format!("member {} on", m.id())))) {
            return;
        }
        if Instant::now() > until {
            let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
            panic!("not every member claimed partitions within 90 s: {owners:?}\n{}", logs.join("\n----\n"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn a_member_joining_and_one_leaving_move_only_the_partitions_that_change_owner() {
    const PARTITIONS: i32 = 6;
    let input = words(18_000, 83);
    let broker = KafkaBroker::start();
    broker.create_topic("words", PARTITIONS);
    broker.create_topic_with("counts", 3, &[("message.timestamp.type", "LogAppendTime")]);
    let records: Vec<(Option<&[u8]>, &[u8])> = input.iter().map(|w| (Some(w.as_bytes()), w.as_bytes())).collect();
    broker.produce("words", &records);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for w in &input {
        *want.entry(w.clone()).or_insert(0) += 1;
    }
    // Each word's input partition, as the log has it.
    let partition_of: BTreeMap<String, i32> = broker
        .consume_all("words")
        .iter()
        .map(|r| (String::from_utf8_lossy(&r.payload).into_owned(), r.partition))
        .collect();
    let dir = JobDir::new();
    // About 3000 records a partition at 100 a second: 30 s of input.
    cluster_job(&dir, &broker, 100, "6s");
    let mut members: Vec<Member> = (0..3).map(|_| Member::start(&dir)).collect();
    wait_all_claimed(&dir, &mut members);
    std::thread::sleep(Duration::from_secs(2));
    let steady = claims(&dir);
    let joined_at = now_ms();
    members.push(Member::start(&dir));
    wait_all_claimed(&dir, &mut members);
    std::thread::sleep(Duration::from_secs(2));
    // One of the first three leaves: it hands its partitions over and
    // leaves the group, which moves them at once.
    let mut leaving = members.remove(1);
    signal(&leaving, "-TERM");
    let until = Instant::now() + Duration::from_secs(60);
    let left = loop {
        if let Some(log) = leaving.exited() {
            break log;
        }
        assert!(Instant::now() < until, "the member did not leave within a minute:\n{}", leaving.kill());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(left.starts_with("(exit status: 0)"), "the member left cleanly: {left}");
    let left_at = now_ms();
    wait_complete(&broker, &want, &mut members);
    let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
    let after = claims(&dir);

    // Every word's updates 1..n, once each.
    for (word, seen) in counts_by_key(&output(&broker)) {
        assert_eq!(seen, (1..=want[&word]).collect::<Vec<_>>(), "word {word}'s updates");
    }
    // The partitions that kept their owner through the join and the leave
    // were never claimed again: their copies ran on.
    let unmoved: Vec<i32> = (0..PARTITIONS).filter(|p| steady.get(p) == after.get(p)).collect();
    let moved = PARTITIONS as usize - unmoved.len();
    assert!(moved >= 2, "the joining member took partitions and the leaving one's moved: {steady:?} -> {after:?}");
    assert!(!unmoved.is_empty(), "no partition kept its owner: {steady:?} -> {after:?}\n{}", logs.join("\n----\n"));
    // Their output never paused: the longest gap between appends of their
    // words' updates from the join until their input ran out.
    let mut times: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in broker.consume_all("counts") {
        let line = String::from_utf8_lossy(&r.payload).into_owned();
        let word = line.rsplit_once(' ').map(|(w, _)| w.to_string()).unwrap_or_default();
        times.entry(partition_of[&word]).or_default().push(r.timestamp.expect("append time"));
    }
    let gap = |p: i32| {
        let mut t: Vec<i64> = times[&p].iter().copied().filter(|t| *t >= joined_at).collect();
        t.sort();
        t.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
    };
    let report: Vec<String> = (0..PARTITIONS)
        .map(|p| format!("p{p} {} longest gap {} ms", if unmoved.contains(&p) { "kept" } else { "moved" }, gap(p)))
        .collect();
    eprintln!("join at {joined_at}, leave done at {left_at}: {report:?}");
    for p in &unmoved {
        // Output goes out at each 300 ms checkpoint; a stop and restore
        // (what an eager rebalance does to every partition) is seconds.
        assert!(gap(*p) < 4000, "partition {p} kept its owner but its output paused: {report:?}");
    }
}

#[test]
fn partitions_added_to_the_input_topic_are_assigned_and_read_exactly_once() {
    let broker = KafkaBroker::start();
    broker.create_topic("words", 2);
    broker.create_topic("counts", 2);
    let before = words(4000, 89);
    let keyed: Vec<(Option<&[u8]>, &[u8])> = before.iter().map(|w| (Some(w.as_bytes()), w.as_bytes())).collect();
    broker.produce("words", &keyed);
    let dir = JobDir::new();
    cluster_job(&dir, &broker, 400, "6s");
    // An unbounded read: a copy for a new partition may start before the
    // records below reach it, and a bounded one would end at that empty
    // partition's end.
    let job = dir.path().join("job.toml");
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("end = \"latest\"\n"), "{text}");
    std::fs::write(&job, text.replace("end = \"latest\"\n", "")).unwrap();
    let mut members: Vec<Member> = (0..2).map(|_| Member::start(&dir)).collect();
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for w in &before {
        *want.entry(w.clone()).or_insert(0) += 1;
    }
    wait_complete(&broker, &want, &mut members);
    // Two partitions more, holding words of their own (each word in one
    // partition, as keyed records are): the group sees them within its
    // metadata refresh and gives them to the members, whose copies read
    // them from their start.
    broker.add_partitions("words", 4);
    let after: Vec<String> = (0..3000u64).map(|i| format!("n{}", (i * 7919) % 150)).collect();
    let partition = |w: &str| 2 + (w[1..].parse::<i32>().unwrap() % 2);
    for p in [2, 3] {
        let records: Vec<Stamped<'_>> =
            after.iter().filter(|w| partition(w) == p).map(|w| (Some(w.as_bytes()), w.as_bytes(), None)).collect();
        broker.produce_to("words", p, &records);
    }
    for w in &after {
        *want.entry(w.clone()).or_insert(0) += 1;
    }
    wait_complete(&broker, &want, &mut members);
    let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
    for (word, seen) in counts_by_key(&output(&broker)) {
        assert_eq!(seen, (1..=want[&word]).collect::<Vec<_>>(), "word {word}'s updates");
    }
    let claimed = commit_logs(&dir);
    assert!(
        claimed.contains_key(&2) && claimed.contains_key(&3),
        "copies for the new partitions: {:?}\n{}",
        claimed.keys(),
        logs.join("\n----\n")
    );
}

#[test]
fn a_killed_members_partitions_produce_output_soon_after_its_session_ends_while_the_output_topic_is_busy() {
    const PARTITIONS: i32 = 6;
    const SESSION_MS: i64 = 6000;
    let input = words(30_000, 101);
    let broker = KafkaBroker::start();
    broker.create_topic("words", PARTITIONS);
    // The output topic: every member writes to it the whole time, so a
    // read back that waited for its end would wait for the input's end.
    broker.create_topic_with("counts", 3, &[("message.timestamp.type", "LogAppendTime")]);
    let records: Vec<(Option<&[u8]>, &[u8])> = input.iter().map(|w| (Some(w.as_bytes()), w.as_bytes())).collect();
    broker.produce("words", &records);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for w in &input {
        *want.entry(w.clone()).or_insert(0) += 1;
    }
    let partition_of: BTreeMap<String, i32> = broker
        .consume_all("words")
        .iter()
        .map(|r| (String::from_utf8_lossy(&r.payload).into_owned(), r.partition))
        .collect();
    let dir = JobDir::new();
    // About 5000 records a partition at 100 a second: 50 s of input.
    cluster_job(&dir, &broker, 100, "6s");
    let mut members: Vec<Member> = (0..3).map(|_| Member::start(&dir)).collect();
    wait_all_claimed(&dir, &mut members);
    std::thread::sleep(Duration::from_secs(3));
    let victim = format!("member {} on", members[0].id());
    let lost: Vec<i32> = commit_logs(&dir)
        .into_iter()
        .filter(|(_, log)| log.iter().rev().find(|e| e.1 == "claim").is_some_and(|e| e.2.starts_with(&victim)))
        .map(|(p, _)| p)
        .collect();
    assert!(!lost.is_empty(), "the member to kill owns partitions");
    let killed_at = now_ms();
    let killed_log = members.remove(0).kill();
    wait_complete(&broker, &want, &mut members);
    let logs: Vec<String> = members.iter_mut().map(Member::kill).collect();
    for (word, seen) in counts_by_key(&output(&broker)) {
        assert_eq!(seen, (1..=want[&word]).collect::<Vec<_>>(), "word {word}'s updates");
    }
    // The first output of each lost partition after the kill, on the
    // broker's clock.
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    for r in broker.consume_all("counts") {
        let line = String::from_utf8_lossy(&r.payload).into_owned();
        let word = line.rsplit_once(' ').map(|(w, _)| w.to_string()).unwrap_or_default();
        let (p, t) = (partition_of[&word], r.timestamp.expect("append time"));
        if lost.contains(&p) && t > killed_at {
            let e = first.entry(p).or_insert(t);
            *e = (*e).min(t);
        }
    }
    let after: Vec<(i32, i64)> = lost.iter().map(|p| (*p, first.get(p).map_or(i64::MAX, |t| t - killed_at))).collect();
    let phases = takeover_phases(&logs, &lost);
    eprintln!("the killed member's partitions' first output, ms after the kill: {after:?}\n{phases}");
    for (p, ms) in &after {
        assert!(
            *ms <= SESSION_MS + 10_000,
            "partition {p} produced nothing for {ms} ms after the kill (session {SESSION_MS} ms): {after:?}\n{phases}\nkilled:\n{killed_log}\nmembers:\n{}",
            logs.join("\n----\n")
        );
    }
}

/// The lines of the survivors' `logs` that time each phase of taking
/// `partitions` over: the rebalance heard, the claim, finding the
/// checkpoint, the tasks started, the read-back, the first checkpoint and
/// the first output.
fn takeover_phases(logs: &[String], partitions: &[i32]) -> String {
    const PHASES: [&str; 7] = [
        "claimed the job's commit log",
        "restoring",
        "job started",
        "read the output back",
        "published the output the restored checkpoint held",
        "first checkpoint since the restore",
        "first output visible",
    ];
    let copies: Vec<String> = partitions.iter().map(|p| format!("copy{{partition={p}}}")).collect();
    logs.iter()
        .flat_map(|log| log.lines())
        .filter(|l| {
            l.contains("partitions assigned")
                || (copies.iter().any(|c| l.contains(c.as_str())) && PHASES.iter().any(|p| l.contains(p)))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
