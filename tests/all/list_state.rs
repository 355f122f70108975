//! List state in Python and JavaScript operators: the `lister` guests
//! (guest-examples/list-state-py, list-state-js) append each record to its
//! key's list and emit the whole list. A savepoint taken mid-stream by one
//! language restores into the other, and the two runs together emit
//! exactly what one uninterrupted run would (both SDKs encode elements as
//! postcard strings).

use super::live_job::{metadata, stop_with_savepoint};
use super::support::JobDir;
use std::collections::BTreeMap;
use weir_tests::script_guest;

const RECORDS: usize = 2000;

/// The input lines: record `i` has key `k<i mod 13>`.
fn input() -> Vec<String> {
    (0..RECORDS).map(|i| format!("{{\"k\":\"k{}\",\"i\":{i}}}", i % 13)).collect()
}

fn write_job(dir: &JobDir, module: &str, rate: u32) {
    let root = dir.path().display();
    dir.write("input.jsonl", input().join("\n") + "\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "lists"

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "lines"
kind = "file"
path = "input.jsonl"
format = "jsonl"
key_field = "k"
records_per_second = {rate}

[[operators]]
uid = "lister"
module = "{module}"
input = "lines"
partition = "key"

[[sinks]]
id = "out"
kind = "transactional-file"
input = "lister"
dir = "out"
"#
        ),
    );
}

/// What the lister emits over the whole input, in order: for each record,
/// its key and every payload of that key so far.
fn expected() -> String {
    let mut lists: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut out = String::new();
    for (i, line) in input().into_iter().enumerate() {
        let key = format!("k{}", i % 13);
        let list = lists.entry(key.clone()).or_default();
        list.push(line);
        out.push_str(&format!("{key} {}\n", list.join(",")));
    }
    out
}

fn savepoint_restores_into(first: &str, second: &str) {
    let dir = JobDir::new();
    write_job(&dir, &script_guest(first), 100);
    let location = stop_with_savepoint(&dir, "lists", dir.start(&[]));
    let position = metadata(&location)["sources"]["lines"].as_u64().unwrap();
    let size = input().iter().map(|l| l.len() as u64 + 1).sum::<u64>();
    assert!(position > 0 && position < size, "taken mid-stream: byte {position} of {size}");
    write_job(&dir, &script_guest(second), 1_000_000);
    dir.succeeds(&["--from-savepoint", &location]);
    let all = dir.published();
    assert_eq!(all.lines().count(), RECORDS, "one line per record");
    assert_eq!(all, expected(), "{first}, then {second} from the savepoint");
}

#[test]
fn a_python_list_state_savepoint_restores_into_javascript() {
    savepoint_restores_into("list_state_py_lister", "list_state_js_lister");
}

#[test]
fn a_javascript_list_state_savepoint_restores_into_python() {
    savepoint_restores_into("list_state_js_lister", "list_state_py_lister");
}
