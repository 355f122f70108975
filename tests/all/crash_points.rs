//! A crash at every step that matters (`WEIR_CRASH_AT`, see
//! `host/src/crash_point.rs`), as a power cut or `kill -9` at exactly that
//! moment: storing state on file:// and on S3, committing a checkpoint, the
//! final checkpoint, writing a savepoint and stopping with one, the sink's
//! publish renames, retention, a swap between prepare and commit and in its
//! rollback. After each: every checkpoint left is whole (`host inspect`
//! reads every file it names) and `--resume` ends with exactly-once output.
//! And a run that started from a savepoint or an older checkpoint and died
//! before its first checkpoint: `--resume` goes on from where it started,
//! withdrawing none of the output it published.

use crate::checkpoints::{
    Job, checkpointing, committed, completed_ids, files_of_incremental_checkpoints, nothing_left_behind, spawn,
    write_job,
};
use crate::support::{JobDir, PATIENCE, final_counts, wait_until};
use std::collections::BTreeMap;
use weir_tests::{S3_BUCKET, S3Server, artifacts, host_command};

/// The word-count job of `checkpoints.rs` on `backend`, checkpoints every
/// 100 ms into `ck` (file:// in the job's directory unless given), every
/// snapshot a file of its own, savepoints into `sp/`.
fn job(dir: &JobDir, backend: &'static str, ck: Option<String>, extra: &str) -> BTreeMap<String, u64> {
    let root = dir.path().display();
    let ck = ck.unwrap_or_else(|| format!("file://{root}/ck"));
    let settings = checkpointing(&ck, extra)
        + &format!("inline_threshold = \"0B\"\n\n[state.savepoints]\ndir = \"file://{root}/sp\"\n");
    let mut job = Job::new(settings, 3000);
    job.backend = backend;
    write_job(dir, &job, 9000, None)
}

/// Asserts that `err` is the log of a run that crashed at `point`.
fn crashed_at(point: &str, success: bool, err: &str) {
    let name = point.split(':').next().unwrap();
    assert!(!success, "the run should have crashed at {point}:\n{err}");
    assert!(err.contains(&format!("crashing at {name}")), "{err}");
}

/// Every checkpoint `host checkpoints` lists for the job is whole: `host
/// inspect` reads and checks every file it names. Returns how many.
fn every_checkpoint_is_whole(dir: &JobDir, env: &[(&'static str, String)]) -> usize {
    let out = host_command(dir.path(), &["checkpoints", "job.toml"]).envs(env.iter().cloned()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let Some(location) = text.lines().find_map(|l| l.strip_prefix("checkpoints in ")) else { return 0 };
    let mut whole = 0;
    for row in text.lines().skip(2) {
        let id = row.split_whitespace().next().unwrap();
        assert!(row.contains("complete"), "a checkpoint left unusable: {row}");
        let uri = format!("{location}/chk-{id}");
        let inspected = host_command(dir.path(), &["inspect", &uri]).envs(env.iter().cloned()).output().unwrap();
        assert!(inspected.status.success(), "{uri}: {}", String::from_utf8_lossy(&inspected.stderr));
        whole += 1;
    }
    whole
}

/// Runs the job to a crash at `point`, then checks what is left and that
/// `--resume` ends exactly once.
fn crash_run_resume(dir: &JobDir, expected: &BTreeMap<String, u64>, point: &str, env: &[(&'static str, String)]) {
    let out = host_command(dir.path(), &["run", "job.toml"])
        .envs(env.iter().cloned())
        .env("WEIR_CRASH_AT", point)
        .output()
        .unwrap();
    crashed_at(point, out.status.success(), &String::from_utf8_lossy(&out.stderr));
    let whole = every_checkpoint_is_whole(dir, env);
    assert!(whole >= 1, "no checkpoint was completed before the crash at {point}: nothing to resume from");
    resume_exactly_once(dir, expected, env);
}

fn resume_exactly_once(dir: &JobDir, expected: &BTreeMap<String, u64>, env: &[(&'static str, String)]) {
    let out = host_command(dir.path(), &["run", "job.toml", "--resume"]).envs(env.iter().cloned()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the resumed run failed:\n{err}");
    let output = committed(dir.path());
    assert!(!output.contains('='), "only the job file's module ran");
    assert_eq!(&final_counts(&output), expected, "{err}");
    // On file://, whatever the crash left is gone: retained = 1 keeps the
    // final checkpoint and the one the run resumed from.
    if dir.path().join("ck/eo").is_dir() {
        let kept = nothing_left_behind(dir);
        assert!(kept.len() <= 2, "checkpoints {kept:?} kept:\n{err}");
    }
}

#[test]
fn a_crash_while_storing_a_hashmap_snapshot_loses_nothing() {
    let dir = JobDir::new();
    let expected = job(&dir, "hashmap", None, "");
    crash_run_resume(&dir, &expected, "storage.object-written:5", &[]);
}

#[test]
fn a_crash_while_uploading_to_s3_loses_nothing() {
    let s3 = S3Server::start();
    // Incremental RocksDB stores a few files per subtask and checkpoint.
    for (backend, point) in
        [("hashmap", "storage.object-written:7"), ("rocksdb-incremental", "storage.object-written:30")]
    {
        let dir = JobDir::new();
        let ck = format!("s3://{S3_BUCKET}/crash-upload-{backend}");
        let extra = format!("\n[state.checkpoints.s3]\nendpoint = \"{}\"\n", s3.endpoint());
        let expected = job(&dir, backend, Some(ck), "");
        let text = dir.read("job.toml").replace("[state.savepoints]", &format!("{extra}\n[state.savepoints]"));
        dir.write("job.toml", text);
        crash_run_resume(&dir, &expected, point, &s3.env());
    }
}

#[test]
fn a_crash_between_uploading_shared_files_and_the_metadata_loses_nothing() {
    let dir = JobDir::new();
    let expected = job(&dir, "rocksdb-incremental", None, "retained = 1");
    crash_run_resume(&dir, &expected, "upload.shared-file:6", &[]);
    let (checkpoints, _) = files_of_incremental_checkpoints(&dir);
    assert!(checkpoints >= 1);
}

#[test]
fn a_crash_after_the_metadata_before_tasks_hear_of_it_loses_nothing() {
    for backend in ["hashmap", "rocksdb-incremental"] {
        let dir = JobDir::new();
        let expected = job(&dir, backend, None, "retained = 1");
        crash_run_resume(&dir, &expected, "checkpoint.metadata-written:3", &[]);
    }
}

#[test]
fn a_crash_while_retention_deletes_leaves_the_kept_checkpoints_whole() {
    for (backend, point) in [
        ("hashmap", "delete.metadata-deleted:2"),
        ("rocksdb-incremental", "delete.metadata-deleted:2"),
        ("rocksdb-incremental", "retention.shared-file-deleted:2"),
    ] {
        let dir = JobDir::new();
        let expected = job(&dir, backend, None, "retained = 1");
        crash_run_resume(&dir, &expected, point, &[]);
    }
}

#[test]
fn a_crash_before_or_between_the_sinks_publish_renames_loses_nothing() {
    // The counter at parallelism 2 feeds one sink; each checkpoint
    // publishes what it covers: crash before the renames, and after one.
    for point in ["sink.publishing:3", "sink.published:2"] {
        let dir = JobDir::new();
        let expected = job(&dir, "hashmap", None, "");
        crash_run_resume(&dir, &expected, point, &[]);
    }
}

#[test]
fn a_crash_during_the_final_checkpoint_loses_nothing() {
    for backend in ["hashmap", "rocksdb"] {
        let dir = JobDir::new();
        let expected = job(&dir, backend, None, "");
        crash_run_resume(&dir, &expected, "checkpoint.final", &[]);
    }
}

/// Waits until the running job `eo` reports written records.
fn wait_for_records_written(dir: &JobDir) {
    dir.wait_for_output("eo");
}

/// Starts the job with a crash armed at `point`, waits until it has
/// written output, and runs the control command `args` against it, which
/// should crash the job there.
fn crash_on_command(dir: &JobDir, point: &str, args: &[&str]) {
    let child = spawn(dir, &[], &[("WEIR_CRASH_AT", point.to_string())]);
    wait_for_records_written(dir);
    // The command's own answer is lost with the job.
    let _ = host_command(dir.path(), args).output().unwrap();
    // Both pipes drained while waiting: a full stderr pipe cannot stall it.
    let out = child.wait_with_output().unwrap();
    crashed_at(point, out.status.success(), &String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_crash_while_writing_a_savepoint_loses_nothing_and_leaves_no_savepoint() {
    let dir = JobDir::new();
    let expected = job(&dir, "hashmap", None, "");
    crash_on_command(&dir, "storage.piece-written", &["savepoint", "eo"]);
    // Half a savepoint: files but no _metadata. Nothing reads it as one.
    for e in std::fs::read_dir(dir.path().join("sp")).unwrap() {
        let sp = e.unwrap().path();
        assert!(!sp.join("_metadata").exists(), "{} committed", sp.display());
        let uri = format!("file://{}", sp.display());
        let out = host_command(dir.path(), &["inspect", &uri]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(every_checkpoint_is_whole(&dir, &[]) >= 1);
    resume_exactly_once(&dir, &expected, &[]);
}

#[test]
fn a_crash_after_a_stop_savepoint_commits_leaves_it_whole_and_the_job_resumable() {
    let dir = JobDir::new();
    let expected = job(&dir, "rocksdb", None, "");
    crash_on_command(&dir, "savepoint.committed", &["savepoint", "eo", "--stop"]);
    let savepoints: Vec<_> = std::fs::read_dir(dir.path().join("sp")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(savepoints.len(), 1);
    let uri = format!("file://{}", savepoints[0].display());
    let out = host_command(dir.path(), &["inspect", &uri]).output().unwrap();
    assert!(out.status.success(), "the committed savepoint is whole: {}", String::from_utf8_lossy(&out.stderr));
    assert!(every_checkpoint_is_whole(&dir, &[]) >= 1);
    resume_exactly_once(&dir, &expected, &[]);
}

#[test]
fn a_crash_between_a_swaps_prepare_and_commit_loses_nothing() {
    for backend in ["hashmap", "rocksdb-incremental"] {
        let dir = JobDir::new();
        let expected = job(&dir, backend, None, "");
        let args = ["swap", "eo", "--operator", "counter", "--module", artifacts::WORD_COUNT_COUNTER_V2];
        crash_on_command(&dir, "swap.prepared", &args);
        assert!(every_checkpoint_is_whole(&dir, &[]) >= 1);
        resume_exactly_once(&dir, &expected, &[]);
    }
}

#[test]
fn a_crash_during_a_swaps_rollback_loses_nothing() {
    for backend in ["hashmap", "rocksdb-incremental"] {
        let dir = JobDir::new();
        let expected = job(&dir, backend, None, "");
        // Fails in open: every subtask rolls back.
        let args = ["swap", "eo", "--operator", "counter", "--module", artifacts::OPEN_TRAP];
        crash_on_command(&dir, "swap.rolling-back", &args);
        assert!(every_checkpoint_is_whole(&dir, &[]) >= 1);
        resume_exactly_once(&dir, &expected, &[]);
    }
}

/// The published part files, by name.
fn published_files(dir: &JobDir) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir.path().join("out")) else { return BTreeMap::new() };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("part-"))
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

/// Waits until the job has completed a checkpoint and written output.
fn wait_for_checkpoint_and_output(dir: &JobDir) {
    wait_until("a completed checkpoint and published output", PATIENCE, || {
        !completed_ids(dir).is_empty() && !published_files(dir).is_empty()
    });
}

/// `--resume` after `seen` was published: it succeeds, withdraws nothing,
/// leaves every file of `seen` as it was, and the output is exactly once.
fn resume_keeps_what_was_published(dir: &JobDir, expected: &BTreeMap<String, u64>, seen: &BTreeMap<String, String>) {
    let listed = host_command(dir.path(), &["checkpoints", "job.toml"]).output().unwrap();
    let note = String::from_utf8_lossy(&listed.stderr);
    assert!(listed.status.success() && note.contains("completed no checkpoint since"), "{note}");
    let out = host_command(dir.path(), &["run", "job.toml", "--resume"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the resumed run failed:\n{err}");
    assert!(!err.contains("withdrawing"), "published output was withdrawn:\n{err}");
    assert!(err.contains("completed no checkpoint since; continuing from it"), "{err}");
    let now = published_files(dir);
    for (name, text) in seen {
        assert_eq!(now.get(name), Some(text), "{name}, published before the resume, changed:\n{err}");
    }
    assert_eq!(&final_counts(&committed(dir.path())), expected, "{err}");
    nothing_left_behind(dir);
}

#[test]
fn a_run_from_a_savepoint_that_dies_after_publishing_its_pending_output_resumes_from_it() {
    let dir = JobDir::new();
    let expected = job(&dir, "hashmap", None, "");
    // Run 0 checkpoints, then dies stopping with a savepoint, after the
    // savepoint committed but before the sink published what it covers.
    let child = spawn(&dir, &[], &[("WEIR_CRASH_AT", "savepoint.committed".to_string())]);
    wait_for_checkpoint_and_output(&dir);
    let _ = host_command(dir.path(), &["savepoint", "eo", "--stop"]).output().unwrap();
    let out = child.wait_with_output().unwrap();
    crashed_at("savepoint.committed", out.status.success(), &String::from_utf8_lossy(&out.stderr));
    // Run 1 publishes, as it restores, what the savepoint had pending, and
    // dies right after, before a checkpoint of its own.
    from_savepoint_crash_then_resume(&dir, &expected, "sink.published:1");
}

/// Runs the job from its one savepoint to a crash at `point`, before a
/// checkpoint of its own, then checks that `--resume` keeps what was
/// published and ends exactly once.
fn from_savepoint_crash_then_resume(dir: &JobDir, expected: &BTreeMap<String, u64>, point: &str) {
    let savepoint = only_savepoint(dir);
    let before = completed_ids(dir);
    let out = host_command(dir.path(), &["run", "job.toml", "--from-savepoint", &savepoint])
        .env("WEIR_CRASH_AT", point)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    crashed_at(point, out.status.success(), &err);
    assert_eq!(completed_ids(dir), before, "the run from the savepoint completed a checkpoint:\n{err}");
    let seen = published_files(dir);
    resume_keeps_what_was_published(dir, expected, &seen);
}

/// The savepoint in `sp/`, as a URI.
fn only_savepoint(dir: &JobDir) -> String {
    let savepoints: Vec<_> = std::fs::read_dir(dir.path().join("sp")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(savepoints.len(), 1, "{savepoints:?}");
    format!("file://{}", savepoints[0].display())
}

/// Runs the job with `args` and no checkpoint due within the run (as after
/// a restore of one of its checkpoints), and kills it once it has written
/// output. Returns its log.
fn kill_before_its_first_checkpoint(dir: &JobDir, args: &[&str]) -> String {
    let job_file = dir.read("job.toml");
    dir.write("job.toml", job_file.replace("interval = \"100ms\"", "interval = \"1h\""));
    let before = completed_ids(dir);
    let mut child = spawn(dir, args, &[]);
    wait_for_records_written(dir);
    child.kill().unwrap();
    let err = String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).into_owned();
    assert_eq!(completed_ids(dir), before, "the run completed a checkpoint:\n{err}");
    dir.write("job.toml", job_file);
    err
}

#[test]
fn a_run_from_a_savepoint_that_dies_in_its_first_checkpoint_resumes_from_it() {
    let dir = JobDir::new();
    let expected = job(&dir, "hashmap", None, "");
    // Run 0 checkpoints, then stops with a savepoint, publishing what the
    // savepoint covers; its checkpoints stay, older than the savepoint.
    let child = spawn(&dir, &[], &[]);
    wait_for_checkpoint_and_output(&dir);
    let out = host_command(dir.path(), &["savepoint", "eo", "--stop"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ran = child.wait_with_output().unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    // Run 1 checkpoints at once (its state is in a savepoint, not in its
    // checkpoint directory) and dies storing the first snapshot of that
    // checkpoint (the first object written is the record of where it
    // started).
    from_savepoint_crash_then_resume(&dir, &expected, "storage.object-written:2");
}

#[test]
fn a_run_from_an_older_checkpoint_killed_before_its_first_checkpoint_resumes_from_it() {
    let dir = JobDir::new();
    let expected = job(&dir, "hashmap", None, "retained = 10");
    let out = host_command(dir.path(), &["run", "job.toml"])
        .env("WEIR_CRASH_AT", "checkpoint.metadata-written:5")
        .output()
        .unwrap();
    crashed_at("checkpoint.metadata-written:5", out.status.success(), &String::from_utf8_lossy(&out.stderr));
    let before = completed_ids(&dir);
    assert!(before.len() >= 4, "{before:?}");
    // Run 1 goes back to the second checkpoint, which withdraws the output
    // of the later ones.
    let uri = format!("file://{}/ck/eo/chk-{}", dir.path().display(), before[1]);
    let err = kill_before_its_first_checkpoint(&dir, &["--from-checkpoint", &uri]);
    assert!(err.contains("withdrawing output published after checkpoint"), "going back withdraws:\n{err}");
    let seen = published_files(&dir);
    resume_keeps_what_was_published(&dir, &expected, &seen);
}
