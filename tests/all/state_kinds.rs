//! Every keyed state kind and operator list state, through the Rust SDK and
//! the WIT, end to end; and state misuse reported with operator and state.

use super::support::JobDir;
use std::collections::BTreeMap;
use weir_tests::artifacts::STATE_KINDS;

/// (user, amount) records: `ann` has more than two pages of list values.
fn records() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut x: u64 = 7;
    for i in 0..1200u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let user = if i % 2 == 0 { "ann".to_string() } else { format!("user{}", (x >> 33) % 40) };
        out.push((user, (x >> 40) % 1000));
    }
    out
}

fn job(dir: &JobDir, parallelism: u32, misuse: &str) {
    job_on(dir, parallelism, misuse, "hashmap");
}

fn job_on(dir: &JobDir, parallelism: u32, misuse: &str, backend: &str) {
    let lines: String = records().iter().map(|(u, a)| format!("{{\"user\": \"{u}\", \"amount\": {a}}}\n")).collect();
    dir.write("input.jsonl", lines);
    dir.write(
        "job.toml",
        format!(
            r#"name = "kinds"
parallelism = {parallelism}
state.backend = "{backend}"

[[sources]]
id = "tx"
kind = "file"
path = "input.jsonl"
format = "jsonl"
key_field = "user"

[[operators]]
uid = "kinds"
module = "{STATE_KINDS}"
input = "tx"
partition = "key"
params = {{ misuse = "{misuse}" }}

[[sinks]]
id = "out"
kind = "file"
input = "kinds"
path = "out.txt"
"#
        ),
    );
}

/// The line the operator must emit after `amounts` (one user's amounts so far).
fn expected_line(user: &str, amounts: &[u64]) -> String {
    let sum: u64 = amounts.iter().sum();
    let even = amounts.iter().filter(|a| *a % 2 == 0).count() as u64;
    let odd = amounts.len() as u64 - even;
    // Map entries iterate in the order of their encoded keys: postcard writes a
    // string's length first, so "odd" (3) sorts before "even" (4).
    let mut entries: Vec<(String, u64)> = Vec::new();
    if odd > 0 {
        entries.push(("odd".into(), odd));
    }
    if even > 0 {
        entries.push(("even".into(), even));
    }
    let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    format!(
        "{user} n={} sum-of-list={sum} total={sum} mean={:.2} keys={} parity={:?} last={}",
        amounts.len(),
        sum as f64 / amounts.len() as f64,
        keys.join("+"),
        entries,
        amounts.last().unwrap()
    )
}

#[test]
fn every_state_kind_round_trips_at_parallelism_1_and_3_on_both_backends() {
    let mut history: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (user, amount) in records() {
        let h = history.entry(user.clone()).or_default();
        h.push(amount);
        expected.entry(user.clone()).or_default().push(expected_line(&user, h));
    }
    assert!(history["ann"].len() > 512, "ann's list spans several pages");
    for (backend, p) in [("hashmap", 1u32), ("hashmap", 3), ("rocksdb", 1), ("rocksdb", 3)] {
        let dir = JobDir::new();
        job_on(&dir, p, "", backend);
        dir.succeeds(&[]);
        let out = dir.read("out.txt");
        let mut per_user: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut seen_total = 0u64;
        let mut subtask_lines = 0;
        for line in out.lines() {
            if let Some(rest) = line.strip_prefix("subtask ") {
                seen_total += rest.split(" saw ").nth(1).unwrap().parse::<u64>().unwrap();
                subtask_lines += 1;
            } else {
                let user = line.split(' ').next().unwrap().to_string();
                per_user.entry(user).or_default().push(line.to_string());
            }
        }
        assert_eq!(per_user, expected, "{backend}, parallelism {p}: every line, in order per user");
        assert_eq!(subtask_lines, p, "one end-of-input line per subtask");
        assert_eq!(seen_total, records().len() as u64, "operator state counted every record once");
    }
}

#[test]
fn registering_a_name_as_another_kind_names_the_state() {
    let dir = JobDir::new();
    job(&dir, 1, "kind-mismatch");
    let err = dir.fails();
    assert!(
        err.contains("operator 'kinds' (subtask 0 of 1) failed in open: state 'total': kind mismatch: state 'total' is already registered as reducing, not value"),
        "{err}"
    );
}

#[test]
fn registering_outside_open_is_refused() {
    let dir = JobDir::new();
    job(&dir, 1, "late-register");
    let err = dir.fails();
    assert!(err.contains("operator 'kinds'") && err.contains("failed on input record 1"), "{err}");
    assert!(err.contains("states are registered only in open (state 'late' was registered outside open)"), "{err}");
}

#[test]
fn keyed_state_without_a_current_key_names_the_state() {
    let dir = JobDir::new();
    job(&dir, 1, "no-key");
    let err = dir.fails();
    assert!(
        err.contains("operator 'kinds' (subtask 0 of 1) failed in end-of-input: state 'total': no current key"),
        "{err}"
    );
}

#[test]
fn a_timer_without_a_current_key_is_refused() {
    let dir = JobDir::new();
    job(&dir, 1, "timer-no-key");
    let err = dir.fails();
    assert!(err.contains("operator 'kinds' (subtask 0 of 1) failed in end-of-input: timer: no current key"), "{err}");
}
