//! The Kafka sink's `mode = "transactions"` on Apache Kafka: a
//! `read_committed` reader sees every word's updates 1..n exactly once
//! through SIGKILL loops; a restore commits the transaction a checkpoint
//! pre-committed when the process died between the checkpoint's completion
//! and the commit; a frozen run whose successor took over is fenced, and
//! nothing it writes once it wakes becomes visible.

use super::checkpoints::{crash_loop, seed};
use super::kafka::{
    as_lines, assert_exact, broker_with_lines, checkpoints_in, expected, kafka_job, kafka_job_with, lines,
    produce_lines,
};

use super::support::{JobDir, counts_by_key};
use std::time::{Duration, Instant};
use weir_tests::host_command;
use weir_tests::kafka::KafkaBroker;

const TRANSACTIONS: &str = "mode = \"transactions\"";

#[test]
fn sigkill_crash_loop_in_transactions_mode_is_exactly_once_for_a_read_committed_reader() {
    let (broker, want) = broker_with_lines(40_000, 17);
    let dir = JobDir::new();
    // About 4 s a whole run, so kills land in it (see the crash loop in
    // kafka.rs).
    let pace = "records_per_second = 5000";
    kafka_job_with(&dir, &broker, 2, pace, TRANSACTIONS, &checkpoints_in(&dir, "[pipeline]\nbatch_size = 64"));
    let run = crash_loop(&dir, &[], seed());
    run.assert_recovered(2);
    // consume_all reads at read_committed: aborted transactions (the
    // killed runs' open ones) are not seen, committed ones once.
    assert_exact(&broker, &want, &format!("WEIR_TEST_SEED={}", run.seed));
    // The records of open and aborted transactions are in the log all the
    // same: a read_uncommitted reader sees more than the exact output
    // whenever a kill cut a transaction short.
    let committed: usize = broker.consume_all("counts").len();
    assert_eq!(committed as u64, want.values().sum::<u64>());
}

#[test]
fn a_restore_commits_the_transaction_a_checkpoint_pre_committed_before_the_process_died() {
    let (broker, want) = broker_with_lines(6000, 23);
    let dir = JobDir::new();
    kafka_job_with(&dir, &broker, 1, "records_per_second = 3000", TRANSACTIONS, &checkpoints_in(&dir, ""));
    // The first checkpoint with output completes, and the process dies
    // before the sink commits its transaction.
    let out = host_command(dir.path(), &["run", "job.toml"])
        .env("WEIR_CRASH_AT", "kafka.txn-before-commit")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("crashing at kafka.txn-before-commit"), "{err}");
    assert!(broker.consume_all("counts").is_empty(), "nothing was committed before the crash");
    let err = dir.succeeds(&["--resume"]);
    assert!(
        err.contains("committed the transaction the checkpoint pre-committed (recover and commit)"),
        "the restore commits the pre-committed transaction:\n{err}"
    );
    assert_exact(&broker, &want, &err);
}

/// The newest checkpoint of `job` under `dir`'s `checkpoints/` that has
/// its `_metadata`.
fn latest_checkpoint(dir: &JobDir, job: &str) -> std::path::PathBuf {
    let root = dir.path().join("checkpoints").join(job);
    let mut done: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().strip_prefix("chk-")?.parse().ok()?;
            e.path().join("_metadata").is_file().then(|| (n, e.path()))
        })
        .collect();
    done.sort();
    done.pop().unwrap_or_else(|| panic!("no complete checkpoint under {}", root.display())).1
}

/// Waits for `child` to end within `limit` (else kills it and fails);
/// its success and stderr.
fn finish_within(mut child: std::process::Child, dir: &JobDir, limit: Duration) -> (bool, String) {
    let until = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            child.kill().unwrap();
            let (_, log) = dir.finish(child);
            panic!("the run did not end within {limit:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    dir.finish(child)
}

#[test]
fn a_frozen_run_is_fenced_by_its_successor_and_nothing_it_writes_after_waking_becomes_visible() {
    let input = lines(10_000, 29);
    let want = expected(&input);
    let broker = KafkaBroker::start();
    produce_lines(&broker, &input);
    // Both runs share the transactional ids: the same prefix, subtask 0.
    let sink = format!("{TRANSACTIONS}\ntransactional_id_prefix = \"wc-fence\"");
    let first = JobDir::new();
    let no_restarts = checkpoints_in(&first, "[restart-strategy]\ntype = \"none\"");
    // About 250 s of input, paced: it is frozen long before its end, however
    // slowly a loaded machine lets this test look at the output.
    kafka_job_with(&first, &broker, 1, "records_per_second = 40", &sink, &no_restarts);
    let started = Instant::now();
    // Both runs log to files: a checkpoint every 100 ms fills a pipe's
    // 64 KiB in about a minute, and a full pipe would stall the host.
    let mut zombie = first.start(&[]);
    let until = started + Duration::from_secs(90);
    while !broker.has_at_least("counts", 200, Duration::from_secs(5)) {
        if Instant::now() > until || zombie.try_wait().unwrap().is_some() {
            let _ = zombie.kill();
            let (_, log) = first.finish(zombie);
            panic!("the first run committed no output in {:?}:\n{log}", started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let frozen_after = started.elapsed();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill").args([sig, &zombie.id().to_string()]).status().unwrap();
        assert!(ok.success());
    };
    signal("-STOP");
    // Frozen, it completes nothing more: its newest checkpoint is where
    // the successor, another job directory, starts.
    let from = latest_checkpoint(&first, "wc-kafka");
    let second = JobDir::new();
    kafka_job(&second, &broker, 1, &sink, &checkpoints_in(&second, ""));
    let from = format!("file://{}", from.display());
    let mut successor = second.start(&["--from-checkpoint", &from]);
    // Once the successor has committed output of its own, it initialised
    // every transactional id: the frozen run's producers are fenced.
    let committed = broker.consume_all("counts").len();
    let until = Instant::now() + Duration::from_secs(60);
    while !broker.has_at_least("counts", committed + 1, Duration::from_secs(5)) {
        if Instant::now() > until {
            successor.kill().unwrap();
            let (_, log) = second.finish(successor);
            signal("-KILL");
            let (_, first_log) = first.finish(zombie);
            panic!(
                "the successor never committed output:\n{log}\nthe first run (frozen after {frozen_after:?}):\n{first_log}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    signal("-CONT");
    let (ok, log) = finish_within(zombie, &first, Duration::from_secs(90));
    assert!(!ok, "the woken run ends in an error:\n{log}");
    assert!(log.contains("its producer is fenced"), "the woken run learnt it was fenced:\n{log}");
    let (ok, err) = second.finish(successor);
    assert!(ok, "{err}");
    // Every word's updates 1..n once: nothing the frozen run sent after
    // the successor took over was committed.
    assert_exact(&broker, &want, &format!("successor:\n{err}\nfrozen run:\n{log}"));
    let seen = counts_by_key(&as_lines(&broker.consume_all("counts")));
    assert_eq!(seen.len(), want.len());
}
