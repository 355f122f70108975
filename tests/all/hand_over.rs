//! The checkpoint cluster mode hands a partition over at
//! (`Request::HandOver`): the next owner resumes from it, so a swap that
//! answered before it must be in it, and a swap or savepoint asked for
//! after it must be refused, not taken and then lost with the copy.
//!
//! A hand-over is no command of the `host` binary: a member sends it to its
//! partition's copy in-process, just before it cancels the copy, and a
//! rebalance cannot be timed against a swap from outside. So this test runs
//! the copy in-process and sends the requests as the member does, on the
//! real word-count components.
//! The swaps are sent at delays across the swap's life (compiling, its
//! barrier in flight, done) before the hand-over.

use super::support::JobDir;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use std::time::{Duration, Instant};
use weir_host::api::{Request, RequestError, SavepointRequest, SwapRequest};
use weir_host::checkpoint::metadata::CheckpointMetadata;
use weir_host::config::load_job;
use weir_host::coordinator::{StartFrom, run_job_with};
use weir_tests::artifacts::{WORD_COUNT_COUNTER, WORD_COUNT_COUNTER_V2, WORD_COUNT_TOKENIZER};

const WAIT: Duration = Duration::from_secs(60);

/// Starts job `name` (generated words into the counter, checkpoints only
/// when asked for) in a thread, as a member starts a partition's copy;
/// returns once it runs.
fn start(dir: &JobDir, name: &str) -> (Sender<Request>, std::thread::JoinHandle<()>) {
    let ck = dir.path().join("checkpoints");
    let job = dir.write(
        "job.toml",
        format!(
            r#"
name = "{name}"

[checkpointing]
interval = "1h"

[state.checkpoints]
dir = "file://{ck}"

[[sources]]
id = "lines"
kind = "generator"
count = 100000000
keys = 500
seed = 1
records_per_second = 2000

[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "out"
input = "counter"
kind = "transactional-file"
dir = "{out}"
"#,
            ck = ck.display(),
            out = dir.path().join("out").display(),
        ),
    );
    let job = load_job(&job, None, None).unwrap();
    let (tx, rx) = unbounded();
    let own = tx.clone();
    let runner = std::thread::spawn(move || {
        // Cancelled at the end of the test: an error is the expected end.
        let _ = run_job_with(&job, &StartFrom::Beginning, (own, rx));
    });
    let until = Instant::now() + WAIT;
    loop {
        let (reply, status) = bounded(1);
        tx.send(Request::Status(reply)).unwrap();
        if status.recv_timeout(WAIT).is_ok_and(|s| s.state == "running" && s.records_read > 0) {
            return (tx, runner);
        }
        assert!(Instant::now() < until, "the job did not start within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn swap(tx: &Sender<Request>, dir: &JobDir) -> Receiver<Result<weir_host::api::SwapDone, RequestError>> {
    let (reply, answer) = bounded(1);
    let request = SwapRequest {
        operator: "counter".into(),
        module: WORD_COUNT_COUNTER_V2.into(),
        dir: Some(format!("file://{}", dir.path().join("savepoints").display())),
    };
    tx.send(Request::Swap(request, reply)).unwrap();
    answer
}

fn swapped_in(dir: &JobDir, name: &str, id: u64) -> Option<String> {
    let path = dir.path().join("checkpoints").join(name).join(format!("chk-{id}")).join("_metadata");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let metadata = CheckpointMetadata::decode(&bytes).unwrap();
    metadata.swapped.get("counter").map(|m| m.path.clone())
}

#[test]
fn a_hand_over_checkpoint_holds_every_swap_that_answered_before_it_and_refuses_later_changes() {
    let mut outcomes = Vec::new();
    for (n, delay_ms) in [0u64, 1, 3, 6, 10, 20, 40, 1000].into_iter().enumerate() {
        let dir = JobDir::new();
        // Unique per process and round: the run file's directory is the
        // user's, shared with anything else running.
        let name = format!("hand-over-{}-{n}", std::process::id());
        let (tx, runner) = start(&dir, &name);
        let swapped = swap(&tx, &dir);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let (reply, handed) = bounded(1);
        tx.send(Request::HandOver(reply)).unwrap();
        let handed = handed.recv_timeout(WAIT).expect("the hand-over was answered").expect("a checkpoint completed");
        let swapped = swapped.recv_timeout(WAIT).expect("the swap was answered");

        // The hand-over's checkpoint runs the new module exactly when the
        // swap said it took effect.
        let recorded = swapped_in(&dir, &name, handed);
        match &swapped {
            Ok(_) => assert_eq!(recorded.as_deref(), Some(WORD_COUNT_COUNTER_V2), "delay {delay_ms} ms"),
            Err(RequestError::HandingOver) => assert_eq!(recorded, None, "delay {delay_ms} ms"),
            Err(e) => panic!("delay {delay_ms} ms: the swap failed otherwise: {e}"),
        }
        outcomes.push((delay_ms, swapped.is_ok()));

        // From the hand-over on, changes are refused with the reason.
        let later = swap(&tx, &dir).recv_timeout(WAIT).unwrap();
        assert!(matches!(later, Err(RequestError::HandingOver)), "a swap after the hand-over: {later:?}");
        let (reply, savepoint) = bounded(1);
        let request = SavepointRequest { dir: Some(format!("file://{}", dir.path().display())), ..Default::default() };
        tx.send(Request::Savepoint(request, reply)).unwrap();
        let savepoint = savepoint.recv_timeout(WAIT).unwrap();
        let Err(e) = savepoint else { panic!("a savepoint after the hand-over was taken") };
        assert!(e.to_string().contains("being handed over to another member"), "{e}");

        let (reply, cancelled) = bounded(1);
        tx.send(Request::Cancel(reply)).unwrap();
        cancelled.recv_timeout(WAIT).unwrap();
        runner.join().unwrap();
    }
    // A second is long enough for any swap to complete first.
    assert_eq!(outcomes.last(), Some(&(1000, true)), "{outcomes:?}");
    eprintln!("(delay ms, swap taken): {outcomes:?}");
}
