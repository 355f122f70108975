//! The fraud-detection example: keyed transactions, live rules on a
//! broadcast input, event-time ordering; the same alerts at any parallelism.

use super::support::JobDir;
use weir_tests::artifacts::FRAUD_DETECTION;
use weir_tests::repo_root;

fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn the_example_flags_exactly_the_expected_transactions() {
    let root = repo_root();
    let dir = root.join("guest-examples/fraud-detection");
    for p in ["1", "3"] {
        let output = weir_tests::run_example(&dir.join("job.toml"), &["--parallelism", p]);
        assert!(output.status.success(), "{}", weir_tests::stderr(&output));
        let alerts = std::fs::read_to_string(dir.join("output/alerts.txt")).unwrap();
        // Worked out by hand from rules.jsonl and transactions.jsonl: t2 under
        // the first version of the rule; t9 under the second (t8 is no longer
        // large enough); t11 under the rule added at 150 s; nothing after the
        // first rule is deleted, and t5 is judged before t4 although it
        // arrives after it.
        assert_eq!(
            sorted_lines(&alerts),
            vec![
                "ALERT rule=small-then-large account=A tx=t2 amount=700 small_at=1000",
                "ALERT rule=small-then-large account=A tx=t9 amount=1200 small_at=101000",
                "ALERT rule=tiny-then-any account=C tx=t11 amount=150 small_at=160000",
            ],
            "parallelism {p}"
        );
    }
}

/// Many accounts and rule changes: the alerts do not depend on parallelism
/// or on how the two inputs interleave.
#[test]
fn alerts_are_the_same_at_parallelism_1_and_3() {
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
        let ts = r * 40_000;
        rules.push_str(&format!(
            "{{\"ts\": {ts}, \"rule\": \"r{}\", \"small\": {}, \"large\": {}, \"window_ms\": {}}}\n",
            r % 4,
            2 + next(8),
            500 + next(1000),
            5_000 + next(60_000)
        ));
    }
    let mut results = Vec::new();
    for p in [1u32, 3] {
        let dir = JobDir::new();
        dir.write("transactions.jsonl", &tx);
        dir.write("rules.jsonl", &rules);
        let job = std::fs::read_to_string(repo_root().join("guest-examples/fraud-detection/job.toml"))
            .unwrap()
            .replace("../../target/wasm/fraud_detection.wasm", FRAUD_DETECTION)
            .replace("path = \"output/alerts.txt\"", "path = \"alerts.txt\"");
        dir.write("job.toml", job);
        dir.succeeds(&["--parallelism", &p.to_string()]);
        results.push(sorted_lines(&dir.read("alerts.txt")));
    }
    assert!(results[0].len() > 50, "the data raises alerts: {}", results[0].len());
    assert_eq!(results[0], results[1]);
}
