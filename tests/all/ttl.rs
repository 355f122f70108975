//! State TTL end to end: a value written with a time-to-live is read back
//! while fresh and is gone after it expired, in processing time. The source
//! is paced (`records_per_second`) so that time passes between records; the
//! margins (1.5 s either side of the 2 s TTL) keep the test steady on a busy
//! machine.

use super::support::JobDir;
use weir_tests::artifacts::TTL_PROBE;

#[test]
fn values_and_map_entries_expire_after_their_ttl() {
    expire_on("hashmap");
}

/// On RocksDB, expired entries are dropped by compaction, not by accesses;
/// reads must still never return them.
#[test]
fn values_and_map_entries_expire_after_their_ttl_on_rocksdb() {
    expire_on("rocksdb");
}

fn expire_on(backend: &str) {
    let dir = JobDir::new();
    let mut lines = vec![
        r#"{"k": "a", "op": "set", "v": "1"}"#.to_string(), // t = 0
        r#"{"k": "a", "op": "get"}"#.to_string(),           // t = 0.5 s: fresh
    ];
    for _ in 0..6 {
        lines.push(r#"{"k": "b", "op": "get"}"#.to_string()); // time passes
    }
    lines.push(r#"{"k": "a", "op": "get"}"#.to_string()); // t = 3.5 s: expired
    lines.push(r#"{"k": "a", "op": "set", "v": "2"}"#.to_string());
    lines.push(r#"{"k": "a", "op": "get"}"#.to_string()); // fresh again
    dir.write("probe.jsonl", lines.join("\n") + "\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "ttl"
[state.backend]
type = "{backend}"

[[sources]]
id = "commands"
kind = "file"
path = "probe.jsonl"
format = "jsonl"
key_field = "k"
records_per_second = 2

[[operators]]
uid = "probe"
module = "{TTL_PROBE}"
input = "commands"
partition = "key"
params = {{ ttl_ms = 2000 }}

[[sinks]]
id = "out"
kind = "file"
input = "probe"
path = "out.txt"
"#
        ),
    );
    dir.succeeds(&[]);
    let out: Vec<String> = dir.read("out.txt").lines().filter(|l| l.starts_with("a ")).map(str::to_string).collect();
    assert_eq!(out, vec!["a value=1 map=1", "a value=none map=none", "a value=2 map=2"]);
}
