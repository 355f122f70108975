//! Broadcast input and broadcast state: every subtask receives every
//! broadcast record, the replicas end equal, and writes outside
//! `process-broadcast` are refused.

use super::support::JobDir;
use std::collections::BTreeMap;
use weir_tests::artifacts::BROADCAST_RULES;

fn commands() -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..300 {
        out.push(format!("set r{} v{i}", i % 37));
        if i % 7 == 0 {
            out.push(format!("del r{}", (i * 3) % 37));
        }
        if i == 150 {
            out.push("clear".into());
        }
    }
    out
}

fn expected_rules() -> String {
    let mut m: BTreeMap<String, String> = BTreeMap::new();
    for c in commands() {
        let w: Vec<&str> = c.split(' ').collect();
        match w[0] {
            "set" => {
                m.insert(w[1].into(), w[2].into());
            }
            "del" => {
                m.remove(w[1]);
            }
            _ => m.clear(),
        }
    }
    // Keys iterate in the order of their encoded bytes: postcard writes the
    // length first, so shorter names come first.
    let mut entries: Vec<(String, String)> = m.into_iter().collect();
    entries.sort_by(|a, b| (a.0.len(), &a.0).cmp(&(b.0.len(), &b.0)));
    entries.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

fn job(dir: &JobDir, parallelism: u32, misuse: &str) {
    dir.write("rules.txt", commands().join("\n") + "\n");
    let names: String = (0..500).map(|i| format!("r{}\n", i % 40)).collect();
    dir.write("names.txt", names);
    dir.write(
        "job.toml",
        format!(
            r#"name = "broadcast"
parallelism = {parallelism}

[[sources]]
id = "names"
kind = "file"
path = "names.txt"

[[sources]]
id = "rules"
kind = "file"
path = "rules.txt"

[[operators]]
uid = "lookup"
module = "{BROADCAST_RULES}"
inputs = [{{ from = "names", partition = "rebalance" }}, {{ from = "rules", partition = "broadcast" }}]
params = {{ misuse = "{misuse}" }}

[[sinks]]
id = "out"
kind = "file"
input = "lookup"
path = "out.txt"
"#
        ),
    );
}

#[test]
fn every_subtask_sees_every_broadcast_record() {
    let expected = expected_rules();
    assert!(!expected.is_empty());
    for p in [1u32, 3] {
        let dir = JobDir::new();
        job(&dir, p, "");
        let err = dir.succeeds(&[]);
        let out = dir.read("out.txt");
        let replicas: Vec<&str> = out.lines().filter(|l| l.starts_with("subtask ")).collect();
        assert_eq!(replicas.len(), p as usize, "{out}");
        for r in &replicas {
            assert_eq!(r.split_once(" rules: ").unwrap().1, expected, "parallelism {p}");
        }
        let answers = out.lines().filter(|l| l.contains(" => ")).count();
        assert_eq!(answers, 500, "every main record answered once");
        // The operator received every broadcast record once per subtask.
        let commands = commands().len() as u64;
        let line = err.lines().find(|l| l.contains("operator   lookup")).unwrap();
        let records_in: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert_eq!(records_in, 500 + commands * u64::from(p), "{err}");
    }
}

#[test]
fn writing_broadcast_state_outside_process_broadcast_is_refused() {
    let dir = JobDir::new();
    job(&dir, 1, "write");
    let err = dir.fails();
    assert!(err.contains("operator 'lookup' (subtask 0 of 1) failed on input record"), "{err}");
    assert!(
        err.contains("state 'rules': read-only here: broadcast state 'rules' is written only in process-broadcast"),
        "{err}"
    );
}

#[test]
fn an_operator_needs_a_main_input() {
    let dir = JobDir::new();
    job(&dir, 1, "");
    let only_broadcast = dir.read("job.toml").replace(
        r#"inputs = [{ from = "names", partition = "rebalance" }, { from = "rules", partition = "broadcast" }]"#,
        r#"inputs = [{ from = "rules", partition = "broadcast" }]"#,
    );
    dir.write("job.toml", only_broadcast);
    let err = dir.fails();
    assert!(err.contains("operator 'lookup': every input is partition = \"broadcast\""), "{err}");
}
