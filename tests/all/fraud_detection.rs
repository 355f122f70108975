//! The fraud-detection example: keyed transactions, live rules on a
//! broadcast input, event-time ordering. The alerts are compared with ones
//! computed directly from the inputs, each transaction judged by the rule
//! versions in effect at its event time, at parallelism 1 and 3.

use super::example_copy::ExampleCopy;
use super::support::JobDir;
use serde_json::Value;
use std::collections::BTreeMap;
use weir_tests::artifacts::FRAUD_DETECTION;

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
    let example = ExampleCopy::new("fraud-detection");
    let expected = expected_alerts(&example.read("transactions.jsonl"), &example.read("rules.jsonl"));
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
    for p in ["1", "3"] {
        example.run("job.toml", &["--parallelism", p]);
        assert_eq!(sorted_lines(&example.take_output("alerts.txt")), expected, "parallelism {p}");
    }
}

/// Many accounts and rule changes (new versions, deletions, re-creations,
/// two versions at the same time): exactly the alerts computed directly, at
/// parallelism 1 and 3, however the two inputs interleave.
#[test]
fn alerts_follow_every_rule_version_by_event_time_at_parallelism_1_and_3() {
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
    let expected = expected_alerts(&tx, &rules);
    assert!(expected.len() > 50, "the data raises alerts: {}", expected.len());
    // Each rule version matters: judged by the first version of each rule
    // throughout, the alerts differ.
    let first_versions: String = rules.lines().take(4).map(|l| format!("{l}\n")).collect();
    assert_ne!(expected_alerts(&tx, &first_versions), expected);
    let job = std::fs::read_to_string(weir_tests::repo_root().join("guest-examples/fraud-detection/job.toml"))
        .unwrap()
        .replace("../../target/wasm/fraud_detection.wasm", FRAUD_DETECTION)
        .replace("path = \"output/alerts.txt\"", "path = \"alerts.txt\"");
    for p in [1u32, 3] {
        let dir = JobDir::new();
        dir.write("transactions.jsonl", &tx);
        dir.write("rules.jsonl", &rules);
        dir.write("job.toml", &job);
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
            "alerts per rule at p={p}: {:?} vs {:?}",
            by_rule(&got),
            by_rule(&expected)
        );
        assert_eq!(got, expected, "parallelism {p}");
    }
}
