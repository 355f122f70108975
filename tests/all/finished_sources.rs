//! Checkpoints after a source finished (Flink's FLIP-147): a job with a
//! short bounded input beside a long one keeps checkpointing, and its
//! exactly-once sink keeps publishing, after the short one ended; a kill
//! after that resumes with the finished source still finished (it reads
//! nothing again, not even lines added to its file since); a savepoint
//! taken then restores exactly; and the fraud example with its rules
//! (broadcast) ending first keeps checkpointing and resumes exactly.
//!
//! The job: a jsonl file of `SHORT` keyed records (read at once) and a
//! generator paced to run for several seconds, both keyed into the
//! word-count counter, into a transactional file sink. The expected counts
//! are computed from the two inputs directly.

use super::checkpoints::{committed, spawn};
use super::support::{JobDir, PATIENCE, final_counts, text, wait_until};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::Duration;
use weir_host::connectors::generator::key_of;
use weir_tests::artifacts;

/// Records of the short input (a file, read at once).
const SHORT: u64 = 3_000;
/// Records of the long input (the generator), and its pace: six seconds.
const LONG: u64 = 12_000;
const RATE: u64 = 2_000;
const KEYS: u64 = 300;
const SEED: u64 = 7;

/// The short input's word for record `i`: the generator's key space, so
/// both inputs update the same keys.
fn short_word(i: u64) -> String {
    ((i * 7) % KEYS).to_string()
}

/// Writes the inputs and the job (job name `fs`); returns each key's count
/// over both inputs.
fn write_job(dir: &JobDir) -> BTreeMap<String, u64> {
    let root = dir.path().display();
    let short: String = (0..SHORT).map(|i| format!("{{\"word\": \"{}\", \"n\": {i}}}\n", short_word(i))).collect();
    dir.write("short.jsonl", short);
    dir.write(
        "job.toml",
        format!(
            r#"name = "fs"
parallelism = 2

[checkpointing]
interval = "200ms"
retained = 1000

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "short"
kind = "file"
path = "short.jsonl"
format = "jsonl"
key_field = "word"

[[sources]]
id = "long"
kind = "generator"
count = {LONG}
keys = {KEYS}
seed = {SEED}
records_per_second = {RATE}

[[operators]]
uid = "counter"
module = "{counter}"
inputs = [
    {{ from = "short", partition = "key" }},
    {{ from = "long", partition = "key" }},
]

[[sinks]]
id = "out"
kind = "transactional-file"
input = "counter"
dir = "out"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
    let mut counts = BTreeMap::new();
    for i in 0..SHORT {
        *counts.entry(short_word(i)).or_default() += 1;
    }
    for i in 0..LONG {
        *counts.entry(key_of(SEED, i, KEYS).to_string()).or_default() += 1;
    }
    counts
}

/// Every complete checkpoint of job `job` under `ck/`, by id: its
/// `_metadata`'s JSON. A checkpoint deleted while it is read is left out.
fn checkpoints(dir: &Path, job: &str) -> BTreeMap<u64, Value> {
    let Ok(entries) = std::fs::read_dir(dir.join("ck").join(job)) else { return BTreeMap::new() };
    entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let id: u64 = name.strip_prefix("chk-")?.parse().ok()?;
            let meta = std::fs::read_to_string(dir.join("ck").join(job).join(&name).join("_metadata")).ok()?;
            Some((id, serde_json::from_str(meta.split_once('\n')?.1).ok()?))
        })
        .collect()
}

/// Whether `_metadata` records source `id` as finished.
fn finished(meta: &Value, id: &str) -> bool {
    meta["finished_sources"].as_array().is_some_and(|a| a.iter().any(|s| s == id))
}

/// The ids of checkpoints that record source `id` as finished, the job's
/// final checkpoint left out.
fn after_end(dir: &Path, job: &str, id: &str) -> Vec<u64> {
    checkpoints(dir, job)
        .into_iter()
        .filter(|(_, m)| finished(m, id) && m["finished"] == false)
        .map(|(c, _)| c)
        .collect()
}

/// Published lines of the sink so far (part files only, in name order).
fn published_lines(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.join("out")) else { return 0 };
    let mut names: Vec<String> = entries.map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.retain(|n| n.starts_with("part-"));
    names.iter().map(|n| std::fs::read_to_string(dir.join("out").join(n)).map_or(0, |t| t.lines().count())).sum()
}

/// Whether `child` still runs.
fn running(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

#[test]
fn checkpoints_complete_and_output_is_published_after_one_source_finished() {
    let dir = JobDir::new();
    let expected = write_job(&dir);
    let mut child = spawn(&dir, &[], &[]);
    wait_until("a checkpoint taken after the short input ended", PATIENCE, || {
        !after_end(dir.path(), "fs", "short").is_empty()
    });
    let first = after_end(dir.path(), "fs", "short")[0];
    let published_then = published_lines(dir.path());
    let meta = &checkpoints(dir.path(), "fs")[&first];
    let short_len = dir.read("short.jsonl").len() as u64;
    assert_eq!(meta["sources"]["short"].as_u64(), Some(short_len), "chk-{first}: the short input was read to its end");
    // More checkpoints after it while the long input still runs, and the
    // output they cover is published.
    wait_until("three checkpoints after the short input ended, and more output published", PATIENCE, || {
        let later = checkpoints(dir.path(), "fs");
        let mid_stream = later
            .iter()
            .filter(|(id, m)| **id > first && finished(m, "short") && m["sources"]["long"].as_u64() < Some(LONG))
            .count();
        mid_stream >= 3 && published_lines(dir.path()) > published_then
    });
    assert!(running(&mut child), "the long input still runs: these checkpoints were taken mid-stream");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert_eq!(final_counts(&committed(dir.path())), expected, "every record once");
}

#[test]
fn a_kill_after_one_source_finished_resumes_exactly_with_that_source_still_finished() {
    let dir = JobDir::new();
    let expected = write_job(&dir);
    let mut child = spawn(&dir, &[], &[]);
    // The short input ended, and a checkpoint completed after the first that says so.
    wait_until("two checkpoints taken after the short input ended", PATIENCE, || {
        after_end(dir.path(), "fs", "short").len() >= 2
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let all = checkpoints(dir.path(), "fs");
    let (latest, meta) = all.last_key_value().expect("a complete checkpoint");
    assert!(finished(meta, "short"), "chk-{latest} records the short input as finished: {meta}");
    let at = meta["sources"]["long"].as_u64().unwrap();
    assert!(at < LONG, "killed mid-stream: the long input at {at} of {LONG}");
    // A line added to the finished input after the kill: a finished source
    // stays finished and reads nothing again.
    let mut short = dir.read("short.jsonl");
    short.push_str("{\"word\": \"late\", \"n\": -1}\n");
    dir.write("short.jsonl", short);
    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains(&format!("chk-{latest}")), "resumed from chk-{latest}:\n{err}");
    // final_counts checks each key's updates are 1..=n: a record of the
    // finished input counted twice, or one lost, fails it.
    assert_eq!(final_counts(&committed(dir.path())), expected, "every record once across the kill");
}

#[test]
fn a_savepoint_while_one_source_finished_and_another_runs_restores_exactly() {
    let dir = JobDir::new();
    let expected = write_job(&dir);
    let child = spawn(&dir, &[], &[]);
    // The short input emitted every record (as `host status` counts them),
    // and its end followed: the long one has seconds left.
    wait_until("the short input read to its end", PATIENCE, || {
        let out = dir.host(&["status", "fs", "--json"]);
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let nodes = s["nodes"].as_array().cloned().unwrap_or_default();
        nodes.iter().any(|n| n["id"] == "short" && n["records_out"].as_u64() == Some(SHORT))
    });
    std::thread::sleep(Duration::from_millis(500));
    let out = dir.host(&["savepoint", "fs", "--stop"]);
    assert!(out.status.success(), "a savepoint while the long input runs: {}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    let (ok, err) = dir.finish(child);
    assert!(ok && err.contains(&format!("stopped with savepoint {location}")), "{err}");
    let meta = std::fs::read_to_string(Path::new(location.trim_start_matches("file://")).join("_metadata")).unwrap();
    let meta: Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    assert!(finished(&meta, "short"), "the savepoint records the short input as finished: {meta}");
    let at = meta["sources"]["long"].as_u64().unwrap();
    assert!(at < LONG, "stopped mid-stream: the long input at {at} of {LONG}");
    dir.succeeds(&["--from-savepoint", &location]);
    assert_eq!(final_counts(&committed(dir.path())), expected, "every record once across the savepoint");
}

#[test]
fn the_fraud_example_keeps_checkpointing_after_its_rules_end_and_resumes_exactly() {
    // The example's shape with the rules (broadcast) read at once and the
    // transactions paced over five seconds.
    let dir = super::fraud_detection::job_dir(artifacts::FRAUD_DETECTION, true);
    let job = dir
        .read("job.toml")
        .replace("records_per_second = 5", "")
        .replace("interval = \"200ms\"", "interval = \"200ms\"\nretained = 1000");
    assert!(job.contains("retained = 1000") && job.matches("records_per_second").count() == 1, "{job}");
    dir.write("job.toml", job);
    let expected = super::fraud_detection::expected_for(&dir);
    let mut child = spawn(&dir, &[], &[]);
    wait_until("two checkpoints taken after the rules ended", PATIENCE, || {
        after_end(dir.path(), "fraud-detection", "rules").len() >= 2
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let all = checkpoints(dir.path(), "fraud-detection");
    let (latest, meta) = all.last_key_value().expect("a complete checkpoint");
    let at = meta["sources"]["transactions"].as_u64().unwrap();
    let total = dir.read("transactions.jsonl").len() as u64;
    assert!(
        finished(meta, "rules") && at < total,
        "chk-{latest}: rules finished, transactions at byte {at} of {total}"
    );
    // The rules live on in the detector's broadcast state; the finished
    // rules input sends nothing again.
    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains(&format!("chk-{latest}")), "resumed from chk-{latest}:\n{err}");
    assert_eq!(super::fraud_detection::published(&dir), expected, "the alerts across the kill, each once");
}
