//! Live rescale (`host rescale`) end to end on the savepoint tests' job
//! (the paced generator into the word-count counter, keyed, with
//! checkpoints every 200 ms into a transactional file sink): the counter
//! goes from 2 subtasks to 3 while the job runs, the process is killed with
//! SIGKILL, resumed, rescaled from 2 to 1, killed again and resumed to the
//! end, on the hashmap backend and on incremental RocksDB. Every word's
//! updates must read exactly 1, 2, ..., n in the published output, and the
//! final counts must equal the generator's stream counted directly; a
//! record lost, repeated or reordered per key at a rescale's barrier fails
//! the test. Requests that cannot be carried out are refused with the
//! reason and change nothing. A rescale of the whole job changes every
//! operator it can, one after another, and names those a forward edge
//! keeps as they are; an operator's own `max_parallelism` caps both.

use super::savepoints::{RECORDS, expected, wait_for_checkpoint_after, write_job};
use super::support::{JobDir, final_counts, text};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// `host rescale sp --operator <uid> -p <p>`.
fn rescale(dir: &JobDir, uid: &str, p: &str) -> Output {
    dir.host(&["rescale", "sp", "--operator", uid, "-p", p])
}

fn status(dir: &JobDir) -> serde_json::Value {
    let out = dir.host(&["status", "sp", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The counter's parallelism as `host status` shows it.
fn counter_parallelism(dir: &JobDir) -> u64 {
    let s = status(dir);
    let nodes = s["nodes"].as_array().expect("nodes");
    nodes.iter().find(|n| n["id"] == "counter").expect("the counter")["parallelism"].as_u64().unwrap()
}

/// The checkpoint whose barrier a rescale took effect at, as `host rescale`
/// said it.
pub fn rescaled_at(said: &str) -> u64 {
    said.split("at checkpoint ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no checkpoint id in {said:?}"))
}

/// Rescales the running counter to `p` and checks what the command said;
/// then waits for a checkpoint after the rescale's own and kills the job.
fn rescale_then_kill(dir: &JobDir, mut child: Child, from: u32, p: u32) {
    let out = rescale(dir, "counter", &p.to_string());
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("rescaled 'counter' from {from} to {p} subtasks")), "{said}");
    let at = rescaled_at(&said);
    assert_eq!(counter_parallelism(dir), u64::from(p));
    wait_for_checkpoint_after(dir, at);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

#[test]
fn live_rescales_with_a_kill_after_each_keep_every_count_exact() {
    for backend in ["hashmap", "rocksdb-incremental"] {
        let dir = JobDir::new();
        write_job(&dir, 2, backend, 5_000);
        let child = dir.start(&[]);
        dir.wait_for_output("sp");
        rescale_then_kill(&dir, child, 2, 3);
        let before = dir.published().lines().count() as u64;
        assert!(before < RECORDS, "{backend}: killed mid-run, {before} lines published");
        // The job file still says 2: a resume runs 2 subtasks over the
        // state 3 wrote.
        let child = dir.start(&["--resume"]);
        dir.wait_for_output("sp");
        assert_eq!(counter_parallelism(&dir), 2, "{backend}");
        rescale_then_kill(&dir, child, 2, 1);
        let out = weir_tests::run_host(dir.path(), &["run", "job.toml", "--resume"]);
        assert!(out.status.success(), "{backend}: {}", text(&out.stderr));
        let all = dir.published();
        assert_eq!(all.lines().count() as u64, RECORDS, "{backend}: one output line per record");
        assert_eq!(final_counts(&all), expected(), "{backend}");
    }
}

#[test]
fn rescales_back_to_back_on_rocksdb_take_whole_databases_as_they_are_and_keep_counts_exact() {
    // 2 -> 3 leaves each new subtask with parts of the old databases; 3 -> 1
    // then takes every database whole, open, as the old subtasks gave it
    // up. The one subtask writes on into them, checkpoints them and is
    // killed; the resume restores what it wrote.
    for backend in ["rocksdb", "rocksdb-incremental"] {
        let dir = JobDir::new();
        write_job(&dir, 2, backend, 5_000);
        let child = dir.start(&[]);
        dir.wait_for_output("sp");
        let out = rescale(&dir, "counter", "3");
        assert!(out.status.success(), "{backend}: {}", text(&out.stderr));
        rescale_then_kill(&dir, child, 3, 1);
        let before = dir.published().lines().count() as u64;
        assert!(before < RECORDS, "{backend}: killed mid-run, {before} lines published");
        let out = weir_tests::run_host(dir.path(), &["run", "job.toml", "--resume"]);
        assert!(out.status.success(), "{backend}: {}", text(&out.stderr));
        let all = dir.published();
        assert_eq!(all.lines().count() as u64, RECORDS, "{backend}: one output line per record");
        assert_eq!(final_counts(&all), expected(), "{backend}");
    }
}

#[test]
fn a_kill_right_after_a_rescale_resumes_from_the_checkpoint_the_rescale_took() {
    // No periodic checkpoint comes between the rescale and the kill, so the
    // resume restores the checkpoint taken at the rescale's barrier: the
    // parts the old subtasks stored as they handed their state over (on
    // RocksDB without increments, the very snapshot they handed over).
    for backend in ["hashmap", "rocksdb", "rocksdb-incremental"] {
        let dir = JobDir::new();
        write_job(&dir, 2, backend, 5_000);
        let job = std::fs::read_to_string(dir.path().join("job.toml")).unwrap();
        dir.write("job.toml", job.replace(r#"interval = "200ms""#, r#"interval = "1h""#));
        let mut child = dir.start(&[]);
        dir.wait_for_output("sp");
        let out = rescale(&dir, "counter", "3");
        let said = text(&out.stdout) + &text(&out.stderr);
        assert!(out.status.success(), "{backend}: {said}");
        let at = rescaled_at(&said);
        // `host rescale` answers once the new subtasks run; the rescale's
        // checkpoint completes a moment later (the old subtasks' uploads
        // wait for the take-over). The kill comes as soon as it is.
        wait_for_checkpoint_after(&dir, at - 1);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let before = dir.published().lines().count() as u64;
        assert!(before > 0 && before < RECORDS, "{backend}: {before} lines published at the rescale's checkpoint");
        let out = weir_tests::run_host(dir.path(), &["run", "job.toml", "--resume"]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{backend}: {err}");
        assert!(
            err.contains(&format!("chk-{at}")),
            "{backend}: resumed from the rescale's checkpoint chk-{at}:\n{err}"
        );
        let all = dir.published();
        assert_eq!(all.lines().count() as u64, RECORDS, "{backend}: one output line per record");
        assert_eq!(final_counts(&all), expected(), "{backend}");
    }
}

#[test]
fn a_rescale_that_cannot_be_done_is_refused_with_the_reason_and_changes_nothing() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 8_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    for (uid, p, says) in [
        ("counter", "129", "128 key groups"),
        ("counter", "0", "0 subtasks"),
        ("counter", "2", "already runs on 2 subtasks"),
        ("nothing", "2", "no operator 'nothing'"),
    ] {
        let out = rescale(&dir, uid, p);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{uid} -p {p} must be refused");
        assert!(err.contains(says), "{uid} -p {p}: {err}");
    }
    assert_eq!(counter_parallelism(&dir), 2);
    // The job goes on, rescaled once, to the end.
    let out = rescale(&dir, "counter", "4");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, err) = finish_within(&dir, child, Duration::from_secs(120));
    assert!(ok, "{err}");
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS);
    assert_eq!(final_counts(&all), expected());
}

/// `host rescale eo --operator <uid> -p <p>` on the tokenizer-counter
/// pipeline; a refusal fails the test with the job's log.
fn rescale_pipeline(dir: &JobDir, child: &mut Child, uid: &str, p: u32) {
    let out = dir.host(&["rescale", "eo", "--operator", uid, "-p", &p.to_string()]);
    if !out.status.success() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{uid} -p {p}: {}\njob log:\n{}", text(&out.stderr), dir.read("run.log"));
    }
}

#[test]
fn rescaling_each_operator_of_a_pipeline_in_turn_keeps_counts_exact_in_both_checkpoint_modes() {
    use super::checkpoints::{Job, committed, write_job as write_pipeline};
    for mode in ["exactly-once", "at-least-once"] {
        let dir = JobDir::new();
        let ck = format!("file://{}", dir.path().join("ck").display());
        let checkpointing = format!(
            "[checkpointing]\ninterval = \"200ms\"\nmode = \"{mode}\"\n\n[state.checkpoints]\ndir = \"{ck}\"\n"
        );
        // The tokenizer reads lines with rebalance and feeds the counter
        // keyed: rescaling it switches an operator's output and input,
        // rescaling the counter an operator's and a sink's.
        let want = write_pipeline(&dir, &Job::new(checkpointing, 4_000), 30_000, None);
        let mut child = dir.start(&[]);
        dir.wait_for_output("eo");
        for (uid, p) in [("tokenizer", 3), ("counter", 1), ("tokenizer", 1), ("counter", 3)] {
            rescale_pipeline(&dir, &mut child, uid, p);
        }
        let (ok, err) = finish_within(&dir, child, Duration::from_secs(120));
        assert!(ok, "{mode}: {err}");
        assert_eq!(final_counts(&committed(dir.path())), want, "{mode}");
    }
}

/// The parallelism of each of the job's nodes, as `host status` shows it.
fn parallelism_of(dir: &JobDir, job: &str) -> std::collections::BTreeMap<String, u64> {
    let out = dir.host(&["status", job, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = s["nodes"].as_array().expect("nodes");
    nodes.iter().map(|n| (n["id"].as_str().unwrap().to_string(), n["parallelism"].as_u64().unwrap())).collect()
}

#[test]
fn a_whole_job_rescale_changes_every_operator_it_can_and_says_which_stay() {
    use super::checkpoints::{Job, committed, write_job as write_pipeline};
    let checkpointing = |dir: &JobDir| {
        let ck = format!("file://{}", dir.path().join("ck").display());
        format!("[checkpointing]\ninterval = \"200ms\"\n\n[state.checkpoints]\ndir = \"{ck}\"\n")
    };
    // lines -rebalance-> tokenizer -key-> counter -> sink, all at 2: both
    // operators change, each at its own barrier, up and then down. The
    // input lasts 15 s, for the rescales to come before its end on a
    // loaded machine.
    let dir = JobDir::new();
    let want = write_pipeline(&dir, &Job::new(checkpointing(&dir), 2_000), 30_000, None);
    let child = dir.start(&[]);
    dir.wait_for_output("eo");
    for (p, from) in [(3, 2), (1, 3)] {
        let out = dir.host(&["rescale", "eo", "-p", &p.to_string()]);
        let said = text(&out.stdout);
        assert!(out.status.success(), "-p {p}: {}", text(&out.stderr));
        for uid in ["tokenizer", "counter"] {
            assert!(said.contains(&format!("rescaled '{uid}' from {from} to {p} subtasks")), "-p {p}: {said}");
        }
        let now = parallelism_of(&dir, "eo");
        assert_eq!((now["tokenizer"], now["counter"], now["lines"]), (p, p, 1), "-p {p}: {now:?}");
    }
    // Nothing left to change, or more subtasks than key groups: refused
    // with the reason, nothing changed.
    for (p, says) in [("1", "no operator can change to 1 subtasks"), ("129", "128 key groups")] {
        let out = dir.host(&["rescale", "eo", "-p", p]);
        assert!(!out.status.success(), "-p {p} must be refused");
        assert!(text(&out.stderr).contains(says), "-p {p}: {}", text(&out.stderr));
    }
    let now = parallelism_of(&dir, "eo");
    assert_eq!((now["tokenizer"], now["counter"]), (1, 1), "{now:?}");
    let (ok, err) = finish_within(&dir, child, Duration::from_secs(120));
    assert!(ok, "{err}");
    assert_eq!(final_counts(&committed(dir.path())), want);

    // tokenizer -forward-> flaky: the two stay paired, the counter changes.
    let dir = JobDir::new();
    let job = Job { trap_once: true, ..Job::new(checkpointing(&dir), 2_000) };
    let want = write_pipeline(&dir, &job, 30_000, None);
    let child = dir.start(&[]);
    dir.wait_for_output("eo");
    let out = dir.host(&["rescale", "eo", "-p", "3"]);
    let (said, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{err}");
    assert!(said.contains("rescaled 'counter' from 2 to 3 subtasks"), "{said}");
    assert_eq!(said.matches("rescaled").count(), 1, "{said}");
    assert!(err.contains("'tokenizer' stays on 2 subtasks: joined to 'flaky' by a forward edge"), "{err}");
    assert!(err.contains("'flaky' stays on 2 subtasks: joined to 'tokenizer' by a forward edge"), "{err}");
    let now = parallelism_of(&dir, "eo");
    assert_eq!((now["tokenizer"], now["flaky"], now["counter"]), (2, 2, 3), "{now:?}");
    let (ok, err) = finish_within(&dir, child, Duration::from_secs(120));
    assert!(ok, "{err}");
    assert_eq!(final_counts(&committed(dir.path())), want);
}

#[test]
fn an_operators_own_max_parallelism_caps_its_rescales_and_the_jobs_parallelism() {
    use super::checkpoints::{Job, committed, write_job as write_pipeline};
    let dir = JobDir::new();
    let ck = format!("file://{}", dir.path().join("ck").display());
    let checkpointing = format!("[checkpointing]\ninterval = \"200ms\"\n\n[state.checkpoints]\ndir = \"{ck}\"\n");
    let want = write_pipeline(&dir, &Job::new(checkpointing, 2_000), 30_000, None);
    let job = dir.read("job.toml");
    let capped = |extra: &str| job.replacen("uid = \"tokenizer\"\n", &format!("uid = \"tokenizer\"\n{extra}"), 1);
    // A cap out of range, or below the operator's own parallelism, is a
    // bad job file.
    for (extra, says) in [
        ("max_parallelism = 0\n", "operator 'tokenizer': max_parallelism = 0 must be between 1 and the job's"),
        ("max_parallelism = 129\n", "max_parallelism = 129 must be between 1 and the job's max_parallelism (128)"),
        (
            "max_parallelism = 2\nparallelism = 3\n",
            "operator 'tokenizer': parallelism 3 is above its max_parallelism (2)",
        ),
    ] {
        dir.write("job.toml", capped(extra));
        let err = dir.fails();
        assert!(err.contains(says), "{extra}: {err}");
    }
    // --parallelism gives way to the cap.
    dir.write("job.toml", capped("max_parallelism = 2\n"));
    let child = dir.start(&["-p", "4"]);
    dir.wait_for_output("eo");
    let now = parallelism_of(&dir, "eo");
    assert_eq!((now["tokenizer"], now["counter"]), (2, 4), "{now:?}");
    let out = dir.host(&["rescale", "eo", "--operator", "tokenizer", "-p", "3"]);
    assert!(!out.status.success(), "above the operator's cap must be refused");
    let err = text(&out.stderr);
    assert!(err.contains("'tokenizer' cannot run on 3 subtasks: its max_parallelism is 2"), "{err}");
    // A whole-job rescale takes each operator as far as it may go.
    for (p, tokenizer, counter) in [(1, 1, 1), (8, 2, 8)] {
        let out = dir.host(&["rescale", "eo", "-p", &p.to_string()]);
        assert!(out.status.success(), "-p {p}: {}", text(&out.stderr));
        let now = parallelism_of(&dir, "eo");
        assert_eq!((now["tokenizer"], now["counter"]), (tokenizer, counter), "-p {p}: {now:?}");
    }
    let (ok, err) = finish_within(&dir, child, Duration::from_secs(120));
    assert!(ok, "{err}");
    assert_eq!(final_counts(&committed(dir.path())), want);
}

/// Waits up to `limit` for the job to end on its own: its success and
/// stderr. A job still running then is killed and fails the test.
fn finish_within(dir: &JobDir, mut child: Child, limit: Duration) -> (bool, String) {
    let until = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            child.kill().unwrap();
            let (_, err) = dir.finish(child);
            panic!("the job did not end within {limit:?}:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    dir.finish(child)
}
