//! Steering a running `host run` from a test, through its control API as a
//! user would: start it, wait for progress, stop it with a savepoint, wait
//! for its end; and the keyed-count job (the generator into the word-count
//! counter, into a transactional file sink) that savepoint tests restore
//! under other settings.

use super::support::JobDir;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};
use weir_host::connectors::generator::key_of;
use weir_tests::{artifacts, host_command};

/// `host run job.toml <args>` in the background; its stderr goes to
/// `run.log` in the job directory (a pipe nobody reads could fill up and
/// stall the host).
pub fn start(dir: &JobDir, args: &[&str]) -> Child {
    let mut all = vec!["run", "job.toml"];
    all.extend_from_slice(args);
    let log = std::fs::File::create(dir.path().join("run.log")).unwrap();
    host_command(dir.path(), &all).stdout(Stdio::null()).stderr(Stdio::from(log)).spawn().unwrap()
}

/// Waits for the background run to end: (success, its stderr).
pub fn finish(mut child: Child, dir: &JobDir) -> (bool, String) {
    let status = child.wait().unwrap();
    (status.success(), dir.read("run.log"))
}

/// `host <args>` in the job directory, to completion.
pub fn host(dir: &JobDir, args: &[&str]) -> Output {
    host_command(dir.path(), args).output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits until job `job` answers `host status` and its sinks wrote
/// something.
pub fn wait_progress(dir: &JobDir, job: &str) {
    // Generous: a Python or JavaScript component compiles first.
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until {
        let out = host(dir, &["status", job, "--json"]);
        if out.status.success() {
            let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if s["records_written"].as_u64().unwrap_or(0) > 0 {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("job '{job}' never showed progress; its log:\n{}", dir.read("run.log"));
}

/// `host savepoint <job> --stop` on a job started with [`start`]: waits for
/// the run to end and returns the savepoint's location.
pub fn stop_with_savepoint(dir: &JobDir, job: &str, child: Child) -> String {
    wait_progress(dir, job);
    let out = host(dir, &["savepoint", job, "--stop"]);
    assert!(out.status.success(), "savepoint --stop: {}\nthe job's log:\n{}", text(&out.stderr), dir.read("run.log"));
    let location = text(&out.stdout).trim().to_string();
    let (ok, err) = finish(child, dir);
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

/// Every published line of the transactional sink in `out/`, part files in
/// name order.
pub fn published(dir: &JobDir) -> String {
    let mut names: Vec<_> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("part-"))
        .collect();
    names.sort();
    names.iter().map(|n| std::fs::read_to_string(dir.path().join("out").join(n)).unwrap()).collect()
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
