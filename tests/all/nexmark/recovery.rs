//! The `nexmark` source across failures: positions per split in
//! checkpoints, so a SIGKILL crash loop with `--resume` writes every bid
//! exactly once, and a savepoint taken at one parallelism restores at
//! another (the splits dealt out again).

use super::super::checkpoints::{checkpointing, committed, crash_loop, seed, spawn};
use super::super::support::JobDir;
use std::io::Read;
use std::time::{Duration, Instant};
use weir_tests::nexmark::{events, q0_q2, sorted};
use weir_tests::{artifacts, host_command};

/// q0 over `count` events at `rate` events/s, at `parallelism`, into a
/// transactional file sink (`out/`), with checkpoints every 100 ms and
/// savepoints in the job's directory.
fn q0_job(dir: &JobDir, count: u64, rate: u64, parallelism: u32) {
    let ck = format!("file://{}", dir.path().join("ck").display());
    let settings = checkpointing(&ck, "") + &format!("\n[state.savepoints]\ndir = \"{ck}\"\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "nexmark-q0"
parallelism = {parallelism}

{settings}

[[sources]]
id = "events"
kind = "nexmark"
events = {count}
events_per_second = {rate}
kinds = ["bid"]

[[operators]]
uid = "q0"
module = "{module}"
input = "events"

[[sinks]]
id = "out"
kind = "transactional-file"
input = "q0"
dir = "out"
"#,
            module = artifacts::NEXMARK_Q0
        ),
    );
}

fn expected(count: u64) -> Vec<String> {
    sorted(q0_q2::q0(&events(count as usize)))
}

fn assert_exact(dir: &JobDir, count: u64, context: &str) {
    let got = sorted(committed(dir.path()).lines().map(str::to_string));
    let want = expected(count);
    assert_eq!(got.len(), want.len(), "{context}: line count");
    assert!(got == want, "{context}: the output is not every bid exactly once");
}

#[test]
fn a_sigkill_crash_loop_writes_every_bid_exactly_once() {
    let dir = JobDir::new();
    q0_job(&dir, 120_000, 40_000, 2);
    let run = crash_loop(&dir, &[], seed());
    run.assert_recovered(2);
    assert_exact(&dir, 120_000, &format!("WEIR_TEST_SEED={}", run.seed));
}

#[test]
fn a_savepoint_at_parallelism_1_restores_at_3() {
    const COUNT: u64 = 60_000;
    let dir = JobDir::new();
    q0_job(&dir, COUNT, 15_000, 1);
    let mut child = spawn(&dir, &[], &[]);
    // Stop once the job has written something, well before its end.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < until, "the job never showed output");
        let out = host_command(dir.path(), &["status", "nexmark-q0", "--json"]).output().unwrap();
        if out.status.success()
            && serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["records_written"]
                .as_u64()
                .unwrap_or(0)
                > 0
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = host_command(dir.path(), &["savepoint", "nexmark-q0", "--stop"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let location = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(child.wait().unwrap().success());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let before = committed(dir.path()).lines().count();
    assert!(before > 0 && before < expected(COUNT).len(), "stopped part-way: {before} bids");

    q0_job(&dir, COUNT, 1_000_000, 3);
    let err = dir.succeeds(&["--from-savepoint", &location]);
    assert!(err.contains("events                      3"), "three source subtasks:\n{err}");
    assert_exact(&dir, COUNT, "after the restore at parallelism 3");
}
