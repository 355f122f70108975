//! Live module swaps (`host swap`) end to end on the savepoint tests' job
//! (the generator into the word-count counter, a transactional file sink):
//! a swap to version 2 that migrates every count, a module rebuilt at the
//! same path, swaps refused before they change anything, a module that
//! changes state (operator state in `open`, counts in `migrate-value`) and
//! then fails, so the rollback must put every byte back, on each backend,
//! and a resume after a committed swap, which must run the swapped module
//! over its migrated state (where that module is kept, and what a resume
//! does when its copy is gone or altered: `swapped_modules.rs`). Output is
//! checked line by line against the generator's stream computed directly.

use super::savepoints::{RECORDS, expected, wait_for_checkpoint_after, write_job};
use super::support::{JobDir, final_counts, text};
use std::process::Output;
use weir_tests::artifacts;

/// `host swap` on the running counter job; returns the command's output.
fn swap_to(dir: &JobDir, module: &str) -> Output {
    dir.host(&["swap", "sp", "--operator", "counter", "--module", module])
}

#[test]
fn a_live_swap_to_version_2_migrates_the_state_and_loses_or_repeats_nothing() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = swap_to(&dir, artifacts::WORD_COUNT_COUNTER_V2);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.contains("operator 'counter' now runs") && said.contains("paused"), "{said}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let (v1, v2) = assert_swapped_once(&dir.published());
    assert!(v1 > 0 && v2 > 0, "both versions wrote: {v1} v1 lines, {v2} v2 lines");
}

#[test]
fn a_module_rebuilt_at_the_same_path_is_what_a_swap_runs() {
    let dir = JobDir::new();
    write_job(&dir, 1, "hashmap", 15_000);
    let module = dir.path().join("counter.wasm");
    std::fs::copy(artifacts::WORD_COUNT_COUNTER, &module).unwrap();
    let job = dir.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, &module.display().to_string());
    dir.write("job.toml", job);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    // The same path, new bytes: the compiled-module cache is keyed by
    // content, so the swap must run version 2, not the cached version 1.
    std::fs::copy(artifacts::WORD_COUNT_COUNTER_V2, &module).unwrap();
    let out = swap_to(&dir, &module.display().to_string());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let all = dir.published();
    assert!(all.lines().any(|l| l.contains('=')), "version 2 never ran");
    assert_eq!(final_counts(&all.replace('=', " ")), expected());
}

#[test]
fn a_failed_swap_rolls_back_and_the_old_module_goes_on() {
    let dir = JobDir::new();
    write_job(&dir, 2, "rocksdb", 8_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    // Traps in open.
    let out = swap_to(&dir, artifacts::OPEN_TRAP);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("failed in open") && err.contains("keeps running its old module"), "{err}");
    // Declares `count` as a map.
    let out = swap_to(&dir, artifacts::COUNT_AS_MAP);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("'count'") && err.contains("map"), "{err}");
    // Not a component at all.
    dir.write("junk.wasm", b"not wasm");
    let out = swap_to(&dir, &dir.path().join("junk.wasm").display().to_string());
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("cannot load the new module"), "{}", text(&out.stderr));
    let (ok, err) = dir.finish(child);
    assert!(ok, "the job survives failed swaps: {err}");
    let all = dir.published();
    assert!(!all.contains('='), "only version 1 ever ran");
    assert_eq!(all.lines().count() as u64, RECORDS);
    assert_eq!(final_counts(&all), expected());
}

/// Asserts that `all` is the counter's output across one swap from version
/// 1 (`word n`) to version 2 (`word=n`): one line per record, every word
/// counting on across the swap, no version-1 line after a word's first
/// version-2 line. Returns (version-1 lines, version-2 lines).
pub fn assert_swapped_once(all: &str) -> (usize, usize) {
    let v1 = all.lines().filter(|l| l.contains(' ')).count();
    let v2 = all.lines().filter(|l| l.contains('=')).count();
    assert_eq!((v1 + v2) as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all.replace('=', " ")), expected());
    let mut switched = std::collections::HashSet::new();
    for line in all.lines() {
        if let Some((k, _)) = line.split_once('=') {
            switched.insert(k.to_string());
        } else {
            let k = line.split_once(' ').unwrap().0;
            assert!(!switched.contains(k), "v1 output for {k} after its v2 output");
        }
    }
    (v1, v2)
}

/// What `host inspect` lists in `uri`: operators and their states.
fn counter_states(dir: &JobDir, uri: &str) -> String {
    let out = dir.host(&["inspect", uri]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn a_swap_that_changed_state_before_failing_rolls_back_every_byte() {
    for backend in ["hashmap", "rocksdb", "rocksdb-incremental"] {
        let dir = JobDir::new();
        write_job(&dir, 2, backend, 8_000);
        let child = dir.start(&[]);
        dir.wait_for_output("sp");
        // Adds to a new operator list state in open, then rewrites three
        // counts (+1,000,000) in migrate-value before failing.
        let out = swap_to(&dir, artifacts::SWAP_SPOILER);
        assert!(!out.status.success(), "{backend}: the swap must fail");
        let err = text(&out.stderr);
        assert!(err.contains("migrate-value") && err.contains("keeps running its old module"), "{backend}: {err}");
        // A savepoint after the rollback: only the old module's state.
        let out = dir.host(&["savepoint", "sp"]);
        assert!(out.status.success(), "{backend}: {}", text(&out.stderr));
        let said = text(&out.stdout) + &text(&out.stderr);
        let location = said.split_whitespace().find(|w| w.starts_with("file://")).expect("the savepoint's location");
        let states = counter_states(&dir, location.trim_end_matches(['.', ',', ')']));
        // The old module's state at its own version; nothing the spoiler
        // registered or rewrote.
        assert!(states.contains("state 'count': value v1") && !states.contains("spoiled"), "{backend}: {states}");
        let (ok, err) = dir.finish(child);
        assert!(ok, "{backend}: the job survives the failed swap: {err}");
        // No count jumped by a million, none was lost or repeated.
        let all = dir.published();
        assert!(!all.contains('='), "{backend}: only version 1 ever ran");
        assert_eq!(all.lines().count() as u64, RECORDS, "{backend}");
        assert_eq!(final_counts(&all), expected(), "{backend}");
    }
}

/// Starts the counter job, swaps it to version 2 (a copy of the component
/// at `dir/v2.wasm`), waits for a checkpoint after the swap and kills the
/// job; returns the swap's savepoint id.
fn swap_then_kill(dir: &JobDir) -> u64 {
    write_job(dir, 2, "rocksdb", 8_000);
    let module = dir.path().join("v2.wasm");
    std::fs::copy(artifacts::WORD_COUNT_COUNTER_V2, &module).unwrap();
    let mut child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = swap_to(dir, &module.display().to_string());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&dir.host(&["status", "sp", "--json"]).stdout).unwrap();
    let swapped_at = status["latest_checkpoint"].as_u64().unwrap_or(0);
    wait_for_checkpoint_after(dir, swapped_at + 1);
    child.kill().unwrap();
    child.wait().unwrap();
    swapped_at
}

#[test]
fn a_resume_after_a_committed_swap_runs_the_swapped_module_over_its_state() {
    let dir = JobDir::new();
    swap_then_kill(&dir);
    let out = weir_tests::run_host(dir.path(), &["run", "job.toml", "--resume"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("resuming with the module swapped in while the job ran"), "{err}");
    // Version 2 ran after the resume, over counts version 1 kept and
    // version 2 migrated: every word counts on, exactly once.
    let (v1, v2) = assert_swapped_once(&dir.published());
    assert!(v1 > 0 && v2 > 0, "{v1} v1 lines, {v2} v2 lines");
}
