//! Where swapped modules live (issue #47, finding 2): a module swapped in
//! while the job ran is kept in the job's checkpoint directory under its
//! SHA-256 (`modules/<sha256>.wasm`), and `--resume` and `host replay` load
//! a module named by a stored file only from there, only with the bytes
//! `_metadata` records. Driven on the savepoint tests' counter job (the
//! generator into the word-count counter, a transactional file sink),
//! whose output is checked against the generator's stream computed
//! directly; version 2 of the counter writes `word=n` where version 1
//! writes `word n`, so the output says which module ran.

use super::savepoints::{RECORDS, expected, wait_for_checkpoint_after, write_job};
use super::support::{JobDir, final_counts, text};
use super::swaps::assert_swapped_once;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use weir_tests::{artifacts, run_host};

/// SHA-256 of `bytes`, as lowercase hex.
fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of the file at `path`.
fn sha256_of(path: impl AsRef<Path>) -> String {
    sha256(&std::fs::read(path).unwrap())
}

/// Where the job `sp` keeps the module with SHA-256 `sha`.
fn stored(dir: &JobDir, sha: &str) -> PathBuf {
    dir.path().join(format!("ck/sp/modules/{sha}.wasm"))
}

/// The counter job at parallelism 2 on RocksDB, every checkpoint kept.
fn write_kept_job(dir: &JobDir) {
    write_job(dir, 2, "rocksdb", 8_000);
    let job = dir.read("job.toml").replace("interval = \"200ms\"", "interval = \"200ms\"\nretained = 1000");
    dir.write("job.toml", job);
}

/// Ids of the job's checkpoints with a `_metadata`, in order.
fn checkpoint_ids(dir: &JobDir) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(dir.path().join("ck/sp"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .filter(|id| dir.path().join(format!("ck/sp/chk-{id}/_metadata")).is_file())
        .collect();
    ids.sort();
    ids
}

/// Checkpoint `id`'s `_metadata` as JSON (the header line dropped).
fn read_metadata(dir: &JobDir, id: u64) -> Value {
    let bytes = std::fs::read(dir.path().join(format!("ck/sp/chk-{id}/_metadata"))).unwrap();
    let newline = bytes.iter().position(|&b| b == b'\n').unwrap();
    serde_json::from_slice(&bytes[newline + 1..]).unwrap()
}

/// Writes `m` as checkpoint `m.id` of job `sp`, with a valid header and
/// checksum: what an attacker who can write the directory writes.
fn write_metadata(dir: &JobDir, m: &Value) {
    let chk = dir.path().join(format!("ck/sp/chk-{}", m["id"]));
    std::fs::create_dir_all(&chk).unwrap();
    std::fs::set_permissions(&chk, std::fs::Permissions::from_mode(0o700)).unwrap();
    let body = serde_json::to_vec_pretty(m).unwrap();
    let mut file = format!("WEIRMETA 1 {:08x}\n", crc32fast::hash(&body)).into_bytes();
    file.extend_from_slice(&body);
    std::fs::write(chk.join("_metadata"), file).unwrap();
}

/// Starts the kept counter job, swaps the counter to version 2 (copied to
/// `dir/v2.wasm`) after a swap to a module that traps in `open` failed,
/// waits for a checkpoint after the swap and kills the job.
fn swap_then_kill(dir: &JobDir) {
    write_kept_job(dir);
    let module = dir.path().join("v2.wasm");
    std::fs::copy(artifacts::WORD_COUNT_COUNTER_V2, &module).unwrap();
    let mut child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["swap", "sp", "--operator", "counter", "--module", artifacts::OPEN_TRAP]);
    assert!(!out.status.success(), "a module that traps in open is refused");
    let out = dir.host(&["swap", "sp", "--operator", "counter", "--module", &module.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: Value = serde_json::from_slice(&dir.host(&["status", "sp", "--json"]).stdout).unwrap();
    wait_for_checkpoint_after(dir, status["latest_checkpoint"].as_u64().unwrap_or(0) + 1);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_resume_runs_the_swapped_module_from_the_store_after_its_file_is_gone() {
    let dir = JobDir::new();
    swap_then_kill(&dir);
    let v2 = std::fs::read(artifacts::WORD_COUNT_COUNTER_V2).unwrap();
    let copy = stored(&dir, &sha256(&v2));
    // The swap kept the module's bytes, private, under their hash, and the
    // checkpoints after it name that copy.
    assert_eq!(std::fs::read(&copy).unwrap(), v2);
    assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o600);
    let last = *checkpoint_ids(&dir).last().unwrap();
    let entry = &read_metadata(&dir, last)["swapped"]["counter"];
    assert_eq!(entry["stored"], format!("modules/{}.wasm", sha256(&v2)), "{entry}");
    // The refused module was kept too (before the tasks refused it).
    let trap = stored(&dir, &sha256_of(artifacts::OPEN_TRAP));
    assert!(trap.is_file());
    // The store is not taken for a damaged checkpoint.
    let out = dir.host(&["checkpoints", "job.toml"]);
    assert!(out.status.success() && !text(&out.stdout).contains("unusable"), "{}", text(&out.stdout));

    // Where the user had the module, it is gone.
    std::fs::remove_file(dir.path().join("v2.wasm")).unwrap();
    let out = run_host(dir.path(), &["run", "job.toml", "--resume"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("resuming with the module swapped in while the job ran, from the job's module store"),
        "{err}"
    );
    // Version 2 ran after the resume, over the counts version 1 kept:
    // every word counts on, exactly once.
    let (v1_lines, v2_lines) = assert_swapped_once(&dir.published());
    assert!(v1_lines > 0 && v2_lines > 0, "{v1_lines} v1 lines, {v2_lines} v2 lines");
    // The resume deleted the module no checkpoint names, and kept the one
    // they name.
    assert!(!trap.exists(), "{} is named by no checkpoint", trap.display());
    assert_eq!(std::fs::read(&copy).unwrap(), v2);
}

#[test]
fn a_crafted_metadata_naming_another_component_does_not_run_it() {
    let dir = JobDir::new();
    write_kept_job(&dir);
    dir.succeeds(&[]);
    let published_before = dir.published();
    assert_eq!(final_counts(&published_before), expected(), "the run itself is exact");
    let ids = checkpoint_ids(&dir);
    let middle = read_metadata(&dir, ids[ids.len() / 2]);
    assert_eq!(middle["finished"], false);
    let v1 = sha256_of(artifacts::WORD_COUNT_COUNTER);
    let v2 = sha256_of(artifacts::WORD_COUNT_COUNTER_V2);
    // A checkpoint newer than any, whose state is a middle checkpoint's,
    // saying the counter runs another component (version 2, a guest of
    // this repository, at its real path, with its real hashes), each way
    // of naming it: by path only (what the earlier version wrote), by the
    // store's name with no copy there, by a path out of the store.
    let entries = [
        json!({ "path": artifacts::WORD_COUNT_COUNTER_V2, "sha256": v2, "replaced_sha256": v1 }),
        json!({ "path": artifacts::WORD_COUNT_COUNTER_V2, "sha256": v2, "replaced_sha256": v1,
                "stored": format!("modules/{v2}.wasm") }),
        json!({ "path": artifacts::WORD_COUNT_COUNTER_V2, "sha256": v2, "replaced_sha256": v1,
                "stored": format!("../../../{}", artifacts::WORD_COUNT_COUNTER_V2) }),
    ];
    let why = ["keeps no copy of it", &format!("modules/{v2}.wasm is missing"), "_metadata is invalid"];
    for (entry, why) in entries.iter().zip(why) {
        let mut crafted = middle.clone();
        crafted["id"] = json!(ids.last().unwrap() + 100);
        crafted["swapped"] = json!({ "counter": entry });
        write_metadata(&dir, &crafted);
        let err = dir.succeeds(&["--resume"]);
        let id = format!("checkpoint={}", ids.last().unwrap() + 100);
        assert!(err.contains("checkpoint is unusable; trying the one before") && err.contains(&id), "{err}");
        assert!(err.contains(why), "expected {why:?}:\n{err}");
        // It went back to the job's own final checkpoint: version 2 never
        // ran, the output is the run's, byte for byte.
        assert!(err.contains("already finished"), "{err}");
        assert_eq!(dir.published(), published_before);
    }
}

#[test]
fn an_altered_stored_module_falls_back_to_the_checkpoint_before_the_swap_exactly_once() {
    let dir = JobDir::new();
    swap_then_kill(&dir);
    let ids = checkpoint_ids(&dir);
    let before_swap: Vec<u64> =
        ids.iter().copied().filter(|&id| read_metadata(&dir, id).get("swapped").is_none()).collect();
    let after_swap = ids.len() - before_swap.len();
    assert!(!before_swap.is_empty() && after_swap > 0, "checkpoints {ids:?}, before the swap {before_swap:?}");
    assert!(dir.published().contains('='), "version 2 published output before the kill");
    // Another component's bytes under version 2's name.
    let copy = stored(&dir, &sha256_of(artifacts::WORD_COUNT_COUNTER_V2));
    std::fs::copy(artifacts::WORD_COUNT_COUNTER, &copy).unwrap();
    let out = run_host(dir.path(), &["run", "job.toml", "--resume"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Every checkpoint after the swap names the altered copy: each is
    // passed over, saying why, down to the last one before the swap.
    let passed = err.matches("checkpoint is unusable; trying the one before").count();
    assert_eq!(passed, after_swap, "{err}");
    assert!(err.contains("holds other bytes") && err.contains("it was altered"), "{err}");
    let restored = before_swap.last().unwrap();
    assert!(err.contains(&format!("/chk-{restored} ")), "restored from chk-{restored}:\n{err}");
    assert!(!err.contains("resuming with the module swapped in"), "{err}");
    // Output published after that checkpoint was withdrawn, and version 1
    // wrote it again: one line per record, every count exact, no line of
    // version 2 left.
    let all = dir.published();
    assert!(!all.contains('='), "version 2's output was withdrawn");
    assert_eq!(all.lines().count() as u64, RECORDS);
    assert_eq!(final_counts(&all), expected());
    // Named outright, a checkpoint after the swap is refused, not run on
    // what the store holds under version 2's name.
    let uri = format!("file://{}/ck/sp/chk-{}", dir.path().display(), ids.last().unwrap());
    let out = run_host(dir.path(), &["run", "job.toml", "--from-checkpoint", &uri]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("loaded only from the job's module store") && err.contains("holds other bytes"), "{err}");
    assert_eq!(dir.published(), all, "nothing ran");
}

/// `host replay` of the counter from checkpoint `id`, with `args`: (exit
/// success, the JSON report if one was printed, stderr).
fn replay(dir: &JobDir, id: u64, args: &[&str]) -> (bool, Option<Value>, String) {
    let chk = format!("ck/sp/chk-{id}");
    let mut all = vec!["replay", chk.as_str(), "--operator", "counter", "--json"];
    all.extend_from_slice(args);
    let out = dir.host(&all);
    (out.status.success(), serde_json::from_slice(&out.stdout).ok(), text(&out.stderr))
}

#[test]
fn replay_runs_the_module_that_ran_from_the_store_and_refuses_other_bytes() {
    let dir = JobDir::new();
    write_job(&dir, 1, "hashmap", 15_000);
    // The job file's module at a path of the directory, recorded.
    let module = dir.path().join("counter.wasm");
    std::fs::copy(artifacts::WORD_COUNT_COUNTER, &module).unwrap();
    let job = dir
        .read("job.toml")
        .replace(artifacts::WORD_COUNT_COUNTER, &module.display().to_string())
        .replace("partition = \"key\"", "partition = \"key\"\nreplay = { record = true }")
        .replace("interval = \"200ms\"", "interval = \"200ms\"\nretained = 1000");
    dir.write("job.toml", job);
    dir.succeeds(&[]);
    let ids = checkpoint_ids(&dir);
    let middle = ids[ids.len() / 2];
    let v1 = sha256_of(artifacts::WORD_COUNT_COUNTER);
    assert_eq!(read_metadata(&dir, middle)["recorded"]["counter"]["sha256"], v1.as_str());

    // The file the recording names is now version 2: the replay still runs
    // the bytes that ran, from the store, and reproduces the output.
    std::fs::copy(artifacts::WORD_COUNT_COUNTER_V2, &module).unwrap();
    let (ok, report, err) = replay(&dir, middle, &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!((r["identical"].as_bool(), r["module_sha256"].as_str()), (Some(true), Some(v1.as_str())), "{r:#}");
    assert_eq!(r["recorded_sha256"], v1.as_str());
    assert!(r["records_out"].as_u64().unwrap() > 0, "{r:#}");

    // The user's own --module runs as given, and the report says it is not
    // the module that ran.
    let (ok, report, err) = replay(&dir, middle, &["--module", &module.display().to_string()]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["identical"], false, "{r:#}");
    assert_eq!(r["module_sha256"], sha256_of(artifacts::WORD_COUNT_COUNTER_V2).as_str());
    assert_eq!(r["recorded_sha256"], v1.as_str());

    // The stored copy altered: refused, naming it, non-zero exit.
    std::fs::copy(artifacts::WORD_COUNT_COUNTER_V2, stored(&dir, &v1)).unwrap();
    let (ok, report, err) = replay(&dir, middle, &[]);
    assert!(!ok && report.is_none(), "{err}");
    assert!(err.contains("holds other bytes") && err.contains(&v1) && err.contains("--module"), "{err}");
    // Gone: refused too.
    std::fs::remove_file(stored(&dir, &v1)).unwrap();
    let (ok, _, err) = replay(&dir, middle, &[]);
    assert!(!ok && err.contains("is missing"), "{err}");
    // A checkpoint that names no module (as the earlier version wrote
    // them): the replay does not fall back to the path the recording names.
    let mut old = read_metadata(&dir, middle);
    old.as_object_mut().unwrap().remove("recorded");
    write_metadata(&dir, &old);
    let (ok, _, err) = replay(&dir, middle, &[]);
    assert!(!ok && err.contains("does not record which module") && err.contains("--module"), "{err}");
}
