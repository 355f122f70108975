//! Changing `max_parallelism` (the number of key groups) across savepoints,
//! beyond the 128 → 64 case: 64 → 256 → 128 at parallelisms 2, 3 and 1.
//! Every keyed entry must be re-hashed into the key group its key has
//! under the new count (checked key group by key group with
//! `host inspect --key-groups`), and the three runs together must count
//! every record exactly once.

use super::live_job::{counts_of_first, metadata, stop_with_savepoint, write_counter_job};
use super::support::{JobDir, final_counts, text};
use std::collections::BTreeMap;
use weir_host::state::key_group::{key_group_of_hash, key_hash};

const RECORDS: u64 = 60_000;
const KEYS: u64 = 400;

fn settings(max_parallelism: u32, parallelism: u32) -> String {
    format!("max_parallelism = {max_parallelism}\nparallelism = {parallelism}")
}

/// Keys per key group, as `host inspect --key-groups` prints them for
/// state `count` of the counter (summed over subtasks).
fn inspected_key_groups(dir: &JobDir, location: &str) -> BTreeMap<u16, u64> {
    let out = dir.host(&["inspect", location, "--key-groups"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let mut groups = BTreeMap::new();
    for line in shown.lines() {
        // "    key group    17: 3 keys, 45 B"
        let Some(rest) = line.trim().strip_prefix("key group") else { continue };
        let (g, rest) = rest.split_once(':').unwrap();
        let n: u64 = rest.trim().split(' ').next().unwrap().parse().unwrap();
        *groups.entry(g.trim().parse::<u16>().unwrap()).or_default() += n;
    }
    assert!(!groups.is_empty(), "no key groups shown:\n{shown}");
    groups
}

/// Keys per key group out of `max_parallelism` groups, from the formula of
/// docs/job-file.md (xxh3_64 of the key bytes, modulo the group count).
fn expected_key_groups<'a>(keys: impl Iterator<Item = &'a String>, max_parallelism: u32) -> BTreeMap<u16, u64> {
    let mut groups = BTreeMap::new();
    for k in keys {
        *groups.entry(key_group_of_hash(key_hash(k.as_bytes()), max_parallelism)).or_default() += 1;
    }
    groups
}

/// The source position a savepoint recorded: the records its state covers.
fn position(location: &str) -> u64 {
    let p = metadata(location)["sources"]["gen"].as_u64().unwrap();
    assert!(p > 0 && p < RECORDS, "taken mid-stream: position {p}");
    p
}

#[test]
fn savepoints_restore_across_64_256_and_128_key_groups_with_every_key_in_its_new_group() {
    let dir = JobDir::new();
    let job = "rehash";

    // 64 key groups at parallelism 2, stopped with a savepoint mid-stream.
    write_counter_job(&dir, job, RECORDS, KEYS, 8_000, &settings(64, 2));
    let first = stop_with_savepoint(&dir, job, dir.start(&[]));
    assert_eq!(metadata(&first)["max_parallelism"], 64);
    let covered = position(&first);
    let keys_then = counts_of_first(covered, KEYS);
    assert_eq!(inspected_key_groups(&dir, &first), expected_key_groups(keys_then.keys(), 64));

    // Restored into 256 key groups at parallelism 3, stopped again.
    write_counter_job(&dir, job, RECORDS, KEYS, 8_000, &settings(256, 3));
    let second = stop_with_savepoint(&dir, job, dir.start(&["--from-savepoint", &first]));
    assert!(dir.read("run.log").contains("re-hashed"), "{}", dir.read("run.log"));
    assert_eq!(metadata(&second)["max_parallelism"], 256);
    let covered2 = position(&second);
    assert!(covered2 > covered, "the second run went on from the first: {covered} then {covered2}");
    let keys_then = counts_of_first(covered2, KEYS);
    let groups = inspected_key_groups(&dir, &second);
    assert!(groups.keys().any(|&g| g >= 128), "groups past 127 are used with 256 of them: {groups:?}");
    assert_eq!(groups, expected_key_groups(keys_then.keys(), 256));

    // Restored into 128 key groups at parallelism 1, to the end.
    write_counter_job(&dir, job, RECORDS, KEYS, 1_000_000, &settings(128, 1));
    let err = dir.succeeds(&["--from-savepoint", &second]);
    assert!(err.contains("re-hashed"), "{err}");

    // Every key's updates over the three runs are 1, 2, ..., its count in
    // the whole stream: nothing lost or counted twice at either change.
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all), counts_of_first(RECORDS, KEYS));
}

/// The source position of a completed checkpoint of job `job` under `ck/`
/// that covers some records, if there is one yet (retention may delete a
/// checkpoint while it is read).
fn a_checkpoint_past_the_start(dir: &JobDir, job: &str) -> Option<u64> {
    for entry in std::fs::read_dir(dir.path().join("ck").join(job)).ok()? {
        let Ok(text) = std::fs::read_to_string(entry.ok()?.path().join("_metadata")) else { continue };
        let meta: serde_json::Value = serde_json::from_str(text.split_once('\n')?.1).ok()?;
        if let Some(p) = meta["sources"]["gen"].as_u64().filter(|&p| p > 0) {
            return Some(p);
        }
    }
    None
}

#[test]
fn a_killed_incremental_rocksdb_job_resumes_into_512_key_groups_at_the_same_parallelism() {
    // At the same parallelism with unchanged key groups a subtask would
    // take over its RocksDB files as they are; with other key groups every
    // key must be re-hashed instead.
    let dir = JobDir::new();
    let job = "resume-kg";
    let backend = "parallelism = 2\nstate.backend.type = \"rocksdb\"\nstate.backend.incremental = true";
    write_counter_job(&dir, job, RECORDS, KEYS, 8_000, &format!("max_parallelism = 128\n{backend}"));
    let mut child = dir.start(&[]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while a_checkpoint_past_the_start(&dir, job).is_none() {
        assert!(std::time::Instant::now() < until, "no checkpoint completed; log:\n{}", dir.read("run.log"));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dir.read("run.log").contains("finished in"), "killed mid-stream:\n{}", dir.read("run.log"));

    write_counter_job(&dir, job, RECORDS, KEYS, 1_000_000, &format!("max_parallelism = 512\n{backend}"));
    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains("max_parallelism = 128, the job has 512") && err.contains("re-hashed"), "{err}");
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record, none lost or repeated");
    assert_eq!(final_counts(&all), counts_of_first(RECORDS, KEYS));
}
