//! The fraud-detection example: keyed transactions, live rules on a
//! broadcast input, event-time ordering. The alerts are compared with ones
//! computed directly from the inputs, each transaction judged by the rule
//! versions in effect at its event time, at parallelism 1 and 3, across a
//! kill and resume, and from a savepoint; for the Rust detector and its
//! Python twin (guest-examples/fraud-detection-py), whose state layout is
//! the same, so a savepoint of one restores into the other.

use super::example_copy::ExampleCopy;
use super::support::{JobDir, text};
use serde_json::Value;
use std::collections::BTreeMap;
use weir_tests::artifacts::FRAUD_DETECTION;

/// The detector in each language: (name, component).
fn detectors() -> [(&'static str, String); 2] {
    [("Rust", FRAUD_DETECTION.to_string()), ("Python", weir_tests::script_guest("fraud_detection_py_detector"))]
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// (small, large, window_ms) of a rule version; `None` deletes the rule.
type Version = Option<(u64, u64, i64)>;

/// The alerts, sorted, computed directly from the two jsonl inputs: every
/// transaction of an account in event-time order (input order among equal
/// times), judged by each rule's latest version at or before its time (the
/// later line among versions at the same time). A rule flags a transaction
/// above `large` at most `window_ms` after the account's last transaction
/// below `small` judged while that rule was in effect.
fn expected_alerts(transactions: &str, rules: &str) -> Vec<String> {
    let json = |l: &str| -> Value { serde_json::from_str(l).unwrap() };
    let mut versions: BTreeMap<String, Vec<(i64, Version)>> = BTreeMap::new();
    for r in rules.lines().map(json) {
        let v = if r["delete"] == Value::Bool(true) {
            None
        } else {
            Some((r["small"].as_u64().unwrap(), r["large"].as_u64().unwrap(), r["window_ms"].as_i64().unwrap()))
        };
        versions.entry(r["rule"].as_str().unwrap().to_string()).or_default().push((r["ts"].as_i64().unwrap(), v));
    }
    // A stable sort keeps input order among versions of the same time.
    for v in versions.values_mut() {
        v.sort_by_key(|(t, _)| *t);
    }
    let mut by_account: BTreeMap<String, Vec<(i64, String, u64)>> = BTreeMap::new();
    for t in transactions.lines().map(json) {
        by_account.entry(t["account"].as_str().unwrap().to_string()).or_default().push((
            t["ts"].as_i64().unwrap(),
            t["id"].as_str().unwrap().to_string(),
            t["amount"].as_u64().unwrap(),
        ));
    }
    let mut alerts = Vec::new();
    for (account, mut txs) in by_account {
        txs.sort_by_key(|(t, _, _)| *t);
        let mut last_small: BTreeMap<&str, i64> = BTreeMap::new();
        for (at, id, amount) in &txs {
            for (rule, vs) in &versions {
                let Some((small, large, window)) = vs.iter().rev().find(|(t, _)| t <= at).and_then(|(_, v)| *v) else {
                    continue;
                };
                if *amount > large
                    && let Some(small_at) = last_small.get(rule.as_str())
                    && at - small_at <= window
                {
                    alerts.push(format!(
                        "ALERT rule={rule} account={account} tx={id} amount={amount} small_at={small_at}"
                    ));
                }
                if *amount < small {
                    last_small.insert(rule, *at);
                }
            }
        }
    }
    alerts.sort();
    alerts
}

#[test]
fn the_example_flags_exactly_the_expected_transactions() {
    let rust = ExampleCopy::new("fraud-detection");
    let python = ExampleCopy::with_siblings("fraud-detection-py", &["fraud-detection"]);
    let expected = expected_alerts(&rust.read("transactions.jsonl"), &rust.read("rules.jsonl"));
    // The direct computation agrees with the example worked out by hand: t2
    // under the first version of the rule; t9 under the second (t8 is no
    // longer large enough); t11 under the rule added at 150 s; nothing after
    // the first rule is deleted, and t5 is judged before t4 although it
    // arrives after it.
    assert_eq!(
        expected,
        vec![
            "ALERT rule=small-then-large account=A tx=t2 amount=700 small_at=1000",
            "ALERT rule=small-then-large account=A tx=t9 amount=1200 small_at=101000",
            "ALERT rule=tiny-then-any account=C tx=t11 amount=150 small_at=160000",
        ]
    );
    for (name, example) in [("Rust", &rust), ("Python", &python)] {
        for p in ["1", "3"] {
            example.run("job.toml", &["--parallelism", p]);
            assert_eq!(sorted_lines(&example.take_output("alerts.txt")), expected, "{name} at parallelism {p}");
        }
    }
}

/// Many accounts and rule changes (new versions, deletions, re-creations,
/// two versions at the same time), as (transactions, rules) jsonl.
fn many_transactions_and_rules() -> (String, String) {
    let mut x: u64 = 5;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut tx = String::new();
    let mut t = 0i64;
    for i in 0..5000 {
        t += next(300) as i64;
        let amount = if next(3) == 0 { next(10) } else { next(2000) };
        tx.push_str(&format!(
            "{{\"ts\": {t}, \"account\": \"acct{}\", \"id\": \"t{i}\", \"amount\": {amount}}}\n",
            next(50)
        ));
    }
    let mut rules = String::new();
    for r in 0..40i64 {
        // Every fifth update deletes its rule (a later one re-creates it);
        // every seventh is followed by a second version of the same rule at
        // the same time, which wins.
        let ts = r * 40_000;
        let rule = format!("r{}", r % 4);
        if r % 5 == 4 {
            rules.push_str(&format!("{{\"ts\": {ts}, \"rule\": \"{rule}\", \"delete\": true}}\n"));
            continue;
        }
        for _ in 0..1 + u64::from(r % 7 == 6) {
            rules.push_str(&format!(
                "{{\"ts\": {ts}, \"rule\": \"{rule}\", \"small\": {}, \"large\": {}, \"window_ms\": {}}}\n",
                2 + next(8),
                500 + next(1000),
                5_000 + next(60_000)
            ));
        }
    }
    (tx, rules)
}

/// The example's job file for `module`, reading the jsonl files beside it.
/// `checkpointed` (the job's directory) adds checkpoints every 200 ms under
/// it, paced sources (the rules
/// outlast the transactions: once a source ended no checkpoint is taken)
/// and an exactly-once sink.
fn job_for(module: &str, checkpointed: Option<&std::path::Path>) -> String {
    let job = std::fs::read_to_string(weir_tests::repo_root().join("guest-examples/fraud-detection/job.toml"))
        .unwrap()
        .replace("../../target/wasm/fraud_detection.wasm", module)
        .replace("path = \"output/alerts.txt\"", "path = \"alerts.txt\"");
    let Some(root) = checkpointed else { return job };
    let root = root.display();
    let job = job
        .replace(
            "kind = \"file\"\ninput = \"detector\"\npath = \"alerts.txt\"",
            "kind = \"transactional-file\"\ninput = \"detector\"\ndir = \"out\"",
        )
        .replace("max_out_of_orderness = \"1s\"", "max_out_of_orderness = \"1s\"\nrecords_per_second = 1000")
        .replace("path = \"rules.jsonl\"", "path = \"rules.jsonl\"\nrecords_per_second = 5");
    assert!(job.contains("transactional-file") && job.matches("records_per_second").count() == 2, "{job}");
    // The tables go after the job's top-level keys (name, parallelism).
    let tables = format!(
        "[checkpointing]\ninterval = \"200ms\"\n\n[state.checkpoints]\ndir = \"file://{root}/ck\"\n\n[state.savepoints]\ndir = \"file://{root}/sp\"\n\n[[sources]]"
    );
    job.replacen("[[sources]]", &tables, 1)
}

/// A directory with the many transactions and rules and the job for `module`.
pub(super) fn job_dir(module: &str, checkpointed: bool) -> JobDir {
    let (tx, rules) = many_transactions_and_rules();
    let dir = JobDir::new();
    dir.write("transactions.jsonl", &tx);
    dir.write("rules.jsonl", &rules);
    let job = job_for(module, checkpointed.then_some(dir.path()));
    dir.write("job.toml", job);
    dir
}

pub(super) fn expected_for(dir: &JobDir) -> Vec<String> {
    expected_alerts(&dir.read("transactions.jsonl"), &dir.read("rules.jsonl"))
}

/// Many accounts and rule changes: exactly the alerts computed directly,
/// at parallelism 1 and 3, however the two inputs interleave.
#[test]
fn alerts_follow_every_rule_version_by_event_time_at_parallelism_1_and_3() {
    let (tx, rules) = many_transactions_and_rules();
    let expected = expected_alerts(&tx, &rules);
    assert!(expected.len() > 50, "the data raises alerts: {}", expected.len());
    // Each rule version matters: judged by the first version of each rule
    // throughout, the alerts differ.
    let first_versions: String = rules.lines().take(4).map(|l| format!("{l}\n")).collect();
    assert_ne!(expected_alerts(&tx, &first_versions), expected);
    for (name, module) in detectors() {
        for p in [1u32, 3] {
            let dir = job_dir(&module, false);
            dir.succeeds(&["--parallelism", &p.to_string()]);
            let got = sorted_lines(&dir.read("alerts.txt"));
            let by_rule = |v: &[String]| {
                let mut m: BTreeMap<String, usize> = BTreeMap::new();
                for a in v {
                    *m.entry(a.split(' ').nth(1).unwrap().to_string()).or_default() += 1;
                }
                m
            };
            assert_eq!(
                got.len(),
                expected.len(),
                "{name}: alerts per rule at p={p}: {:?} vs {:?}",
                by_rule(&got),
                by_rule(&expected)
            );
            assert_eq!(got, expected, "{name} at parallelism {p}");
        }
    }
}

/// The published alerts of a transactional sink, sorted.
pub(super) fn published(dir: &JobDir) -> Vec<String> {
    let out = dir.path().join("out");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().file_name().into_string().unwrap()).collect())
        .unwrap_or_default();
    names.retain(|n| n.starts_with("part-"));
    names.sort();
    sorted_lines(&names.iter().map(|n| std::fs::read_to_string(out.join(n)).unwrap()).collect::<String>())
}

/// Waits until the running job completed `checkpoints` checkpoints.
fn wait_for_checkpoints(dir: &JobDir, checkpoints: u64) {
    let what = format!("checkpoint {checkpoints}");
    dir.wait_for_status("fraud-detection", &what, |s| s["latest_checkpoint"].as_u64().unwrap_or(0) >= checkpoints);
}

/// How far the transactions had been read at a checkpoint or savepoint.
fn transactions_position(location: &std::path::Path) -> u64 {
    let meta = std::fs::read_to_string(location.join("_metadata")).unwrap();
    let json: Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    json["sources"]["transactions"].as_u64().unwrap()
}

#[test]
fn a_killed_detector_resumes_with_exactly_the_expected_alerts() {
    for (name, module) in detectors() {
        let dir = job_dir(&module, true);
        let expected = expected_for(&dir);
        let mut child = dir.start(&[]);
        wait_for_checkpoints(&dir, 3);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut done: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir.path().join("ck/fraud-detection"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("_metadata").is_file())
            .map(|p| (p.file_name().unwrap().to_str().unwrap().trim_start_matches("chk-").parse().unwrap(), p))
            .collect();
        done.sort();
        let (_, latest) = done.pop().expect("a completed checkpoint");
        let at = transactions_position(&latest);
        let total = dir.read("transactions.jsonl").len() as u64;
        assert!(at > 0 && at < total, "{name}: killed mid-stream, at byte {at} of {total}");
        let err = dir.succeeds(&["--resume"]);
        let id = latest.file_name().unwrap().to_str().unwrap();
        assert!(err.contains(id), "{name}: resumed from the latest checkpoint, {id}:\n{err}");
        assert_eq!(published(&dir), expected, "{name}: the alerts across the kill, each once");
    }
}

#[test]
fn a_savepoint_of_the_rust_detector_restores_into_the_python_detector() {
    let [(_, rust), (_, python)] = detectors();
    let dir = job_dir(&rust, true);
    let expected = expected_for(&dir);
    let child = dir.start(&[]);
    wait_for_checkpoints(&dir, 2);
    let out = dir.host(&["savepoint", "fraud-detection", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let at = transactions_position(std::path::Path::new(location.trim_start_matches("file://")));
    assert!(at > 0 && at < dir.read("transactions.jsonl").len() as u64, "stopped mid-stream, at byte {at}");
    // The rules (broadcast), the waiting transactions and each account's
    // last small transaction (keyed maps), and the pending timers, read by
    // the Python detector at parallelism 3.
    dir.write(
        "job.toml",
        job_for(&python, Some(dir.path()))
            .replace("records_per_second = 1000", "")
            .replace("records_per_second = 5", ""),
    );
    dir.succeeds(&["--from-savepoint", &location, "--parallelism", "3"]);
    assert_eq!(published(&dir), expected, "the alerts before and after the savepoint, each once");
}
