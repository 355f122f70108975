//! What recording costs and how fast a replay runs: the word-count counter
//! over `WEIR_BENCH_RECORDS` generated records (default 4 000 000, 100 000
//! keys, unpaced) at parallelism 1 on the hashmap backend, checkpoints
//! every 500 ms to a local directory, into a discarding sink. The same job
//! runs with and without `replay = { record = true }`, alternating, three
//! times each (`WEIR_BENCH_ROUNDS`), in one run of the real `host` binary;
//! then `host replay` runs the counter from the first checkpoint of the last
//! recorded run to the end of input. Bytes recorded per input record are
//! the recordings' files on disk over the records they hold.
//!
//! Run: `cargo bench -p weir-tests --bench replay`. The markdown table goes
//! to stdout, and to `WEIR_BENCH_OUT` if set.

use std::path::Path;
use weir_tests::bench::{env_u64, median};
use weir_tests::{artifacts, elapsed_secs, host_command, run_quiet};

fn job(dir: &Path, records: u64, record: bool) -> String {
    format!(
        r#"name = "replaybench"
parallelism = 1
state.backend = "hashmap"

[state.checkpoints]
dir = "file://{root}/ck"

[checkpointing]
interval = "500ms"
retained = 100000

[[sources]]
id = "gen"
kind = "generator"
count = {records}
keys = 100000
seed = 3

[[operators]]
uid = "counter"
module = "{module}"
input = "gen"
partition = "key"
{replay}

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#,
        root = dir.display(),
        module = artifacts::WORD_COUNT_COUNTER,
        replay = if record { "replay = { record = true, max_segment = \"1GiB\" }" } else { "" },
    )
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() { bytes_under(&e.path()) } else { e.metadata().unwrap().len() }
        })
        .sum()
}

fn main() {
    let records = env_u64("WEIR_BENCH_RECORDS", 4_000_000);
    let rounds = env_u64("WEIR_BENCH_ROUNDS", 3);
    let (mut plain, mut recorded) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..rounds {
        for record in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("job.toml"), job(dir.path(), records, record)).unwrap();
            let secs = elapsed_secs(&run_quiet(dir.path()));
            if record {
                recorded.push(records as f64 / secs);
                last = Some(dir);
            } else {
                plain.push(records as f64 / secs);
            }
        }
    }
    let dir = last.expect("at least one round");
    let d = dir.path();
    let recorded_bytes = bytes_under(&d.join("ck/replaybench/recordings"));
    let mut ids: Vec<u64> = std::fs::read_dir(d.join("ck/replaybench"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .collect();
    ids.sort();
    let first = ids[0];
    let chk = format!("ck/replaybench/chk-{first}");
    let out = host_command(d, &["replay", &chk, "--operator", "counter", "--json", "--check"])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let replayed = r["records_in"].as_u64().unwrap();
    let replay_rate = replayed as f64 / (r["elapsed_ms"].as_u64().unwrap() as f64 / 1e3);
    let (without, with) = (median(plain.clone()), median(recorded.clone()));
    let show = |v: &[f64]| v.iter().map(|r| format!("{:.2}", r / 1e6)).collect::<Vec<_>>().join(", ");
    let mut table = String::new();
    table.push_str(&format!(
        "Counter at parallelism 1, hashmap, {records} records over 100 000 keys, unpaced, checkpoints every 500 ms, {rounds} runs each, alternating.\n\n"
    ));
    table.push_str("| | records/s (median) | runs (M records/s) | ratio to unrecorded |\n|---|---|---|---|\n");
    table.push_str(&format!("| unrecorded | {without:.0} | {} | 1.00 |\n", show(&plain)));
    table.push_str(&format!("| recorded | {with:.0} | {} | {:.2} |\n", show(&recorded), with / without));
    table.push_str(&format!(
        "| `host replay` from chk-{first} to the end ({replayed} records, identical: {}) | {replay_rate:.0} | | {:.2} |\n",
        r["identical"],
        replay_rate / without
    ));
    table.push_str(&format!(
        "\nRecorded: {recorded_bytes} bytes for {replayed} input records ({:.1} bytes per record, input and output: each record is a word and the counter emits `word count` for it).\n",
        recorded_bytes as f64 / replayed as f64
    ));
    print!("{table}");
    if let Ok(path) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(path, &table).unwrap();
    }
}
