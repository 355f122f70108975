//! Steering a running `host run` from a test, through its control API as a
//! user would: start it, wait for progress, stop it with a savepoint, wait
//! for its end; and the keyed-count job (the generator into the word-count
//! counter, into a transactional file sink) that savepoint tests restore
//! under other settings.

use super::support::{JobDir, text};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use weir_host::connectors::generator::key_of;
use weir_tests::artifacts;

/// `host savepoint <job> --stop` on a job started with [`start`]: waits for
/// the run to end and returns the savepoint's location.
pub fn stop_with_savepoint(dir: &JobDir, job: &str, child: Child) -> String {
    dir.wait_for_output(job);
    let out = dir.host(&["savepoint", job, "--stop"]);
    assert!(out.status.success(), "savepoint --stop: {}\nthe job's log:\n{}", text(&out.stderr), dir.read("run.log"));
    let location = text(&out.stdout).trim().to_string();
    let (ok, err) = dir.finish(child);
    assert!(ok, "the stopped run failed:\n{err}");
    assert!(err.contains(&format!("stopped with savepoint {location}")), "{err}");
    location
}

/// The local directory of a `file://` location.
pub fn local(location: &str) -> PathBuf {
    PathBuf::from(location.strip_prefix("file://").unwrap_or_else(|| panic!("not file://: {location}")))
}

/// The JSON of a checkpoint's or savepoint's `_metadata` (after its
/// header line).
pub fn metadata(location: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(local(location).join("_metadata")).unwrap();
    serde_json::from_str(text.split_once('\n').unwrap().1).unwrap()
}

/// The keyed-count job: `name`, `records` from the generator (seed 3,
/// `keys` keys) at `rate` records per second into the counter, by key,
/// into a transactional file sink in `out/`; `settings` go before the
/// graph (top-level keys first). Checkpoints every 100 ms under `ck/`.
pub fn write_counter_job(dir: &JobDir, name: &str, records: u64, keys: u64, rate: u64, settings: &str) {
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "{name}"
{settings}

[checkpointing]
interval = "100ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "gen"
kind = "generator"
count = {records}
keys = {keys}
seed = 3
records_per_second = {rate}

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "transactional-file"
input = "counter"
dir = "out"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
}

/// Each key's count in the first `n` records of the counter job's stream.
pub fn counts_of_first(n: u64, keys: u64) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for i in 0..n {
        *m.entry(key_of(3, i, keys).to_string()).or_default() += 1;
    }
    m
}
