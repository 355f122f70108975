//! Savepoints of a job on incremental RocksDB checkpoints: the savepoint
//! holds canonical snapshots (never RocksDB files, unlike the job's own
//! checkpoints), and restores exactly into the hashmap backend and into
//! RocksDB.

use super::live_job::{counts_of_first, metadata, stop_with_savepoint, write_counter_job};
use super::support::{JobDir, counts_by_key, final_counts};

const RECORDS: u64 = 60_000;
const KEYS: u64 = 300;
const INCREMENTAL: &str = "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true";

/// The counter's handle types in one completed checkpoint of the job, if
/// one is there (retention may delete a checkpoint while it is read).
fn a_checkpoints_handle_types(dir: &JobDir, job: &str) -> Option<Vec<String>> {
    for entry in std::fs::read_dir(dir.path().join("ck").join(job)).ok()? {
        let path = entry.ok()?.path();
        if !path.file_name()?.to_string_lossy().starts_with("chk-") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path.join("_metadata")) else { continue };
        let meta: serde_json::Value = serde_json::from_str(text.split_once('\n')?.1).ok()?;
        return Some(types_of(&meta));
    }
    None
}

/// The handle types (`inline`, `file`, `rocksdb`) of the counter's subtasks.
fn types_of(meta: &serde_json::Value) -> Vec<String> {
    meta["operators"]["counter"]["subtasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_savepoint_of_incremental_rocksdb_is_canonical_and_restores_exactly_into_hashmap_and_rocksdb() {
    let dir = JobDir::new();
    write_counter_job(&dir, "inc", RECORDS, KEYS, 8_000, &format!("parallelism = 2\n{INCREMENTAL}"));
    let child = dir.start(&[]);
    dir.wait_for_output("inc");
    // The job really checkpoints incrementally: its checkpoints hold
    // RocksDB files.
    let types = dir.wait_until("a completed checkpoint", || a_checkpoints_handle_types(&dir, "inc"));
    assert_eq!(types, ["rocksdb", "rocksdb"], "the job's checkpoints hold RocksDB files");

    let location = stop_with_savepoint(&dir, "inc", child);
    let types = types_of(&metadata(&location));
    assert!(types.iter().all(|t| t == "inline" || t == "file"), "a savepoint holds canonical snapshots: {types:?}");
    let position = metadata(&location)["sources"]["gen"].as_u64().unwrap();
    assert!(position > 0 && position < RECORDS, "taken mid-stream: {position}");
    let before = dir.published();
    assert_eq!(before.lines().count() as u64, position, "one line per record up to the savepoint");
    assert_eq!(final_counts(&before), counts_of_first(position, KEYS));

    // Into each backend, at another parallelism, in a fresh directory:
    // every key counts on from its count at the savepoint to its total.
    let total = counts_of_first(RECORDS, KEYS);
    let at_savepoint = counts_of_first(position, KEYS);
    for backend in ["state.backend = \"hashmap\"", "state.backend = \"rocksdb\"", INCREMENTAL] {
        let fresh = JobDir::new();
        write_counter_job(&fresh, "inc", RECORDS, KEYS, 1_000_000, &format!("parallelism = 3\n{backend}"));
        fresh.succeeds(&["--from-savepoint", &location]);
        let after = fresh.published();
        assert_eq!(after.lines().count() as u64, RECORDS - position, "{backend}: one line per record after it");
        for (k, updates) in counts_by_key(&after) {
            let from = at_savepoint.get(&k).copied().unwrap_or(0) + 1;
            assert_eq!(updates, (from..=total[&k]).collect::<Vec<_>>(), "{backend}: key {k}");
        }
    }
}
