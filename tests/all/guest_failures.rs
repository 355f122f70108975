//! Guests that trap, loop forever, allocate without bound or return an error
//! fail their task with a message naming the operator and the record; the
//! host exits non-zero and stays in control.

use super::support::JobDir;
use std::time::{Duration, Instant};
use weir_tests::artifacts::MISBEHAVE;

fn misbehaving_job(mode: &str, extra_settings: &str) -> JobDir {
    let dir = JobDir::new();
    dir.write("input.txt", "fine\nalso fine\nboom\nnever reached\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "misbehaving"
{extra_settings}

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"

[[operators]]
uid = "bad-apple"
module = "{MISBEHAVE}"
input = "lines"
params = {{ mode = "{mode}", on = "boom" }}

[[sinks]]
id = "out"
kind = "file"
input = "bad-apple"
path = "out.txt"
"#
        ),
    );
    dir
}

#[test]
fn a_trap_names_the_operator_the_record_and_what_the_guest_said() {
    let err = misbehaving_job("trap", "").fails();
    for needle in [
        "operator 'bad-apple' (subtask 0 of 1) failed on input record 3 (payload \"boom\")",
        "trapped",
        "misbehave: trap on \"boom\"",
    ] {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
}

#[test]
fn a_returned_error_names_the_operator_and_record() {
    let err = misbehaving_job("error", "").fails();
    assert!(
        err.contains("operator 'bad-apple' (subtask 0 of 1) failed on input record 3 (payload \"boom\"): misbehave: rejecting \"boom\""),
        "{err}"
    );
}

#[test]
fn an_endless_loop_is_interrupted_at_the_deadline() {
    let started = Instant::now();
    let err = misbehaving_job("loop", "[wasm]\ncall_timeout = \"300ms\"").fails();
    assert!(err.contains("operator 'bad-apple'") && err.contains("ran past wasm.call_timeout (300ms)"), "{err}");
    // A loop never tells the host which element it is on: the report names
    // the batch instead.
    assert!(err.contains("failed in the batch of input records 1 to 4"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "the deadline did not stop the loop promptly");
}

#[test]
fn growing_past_the_memory_limit_fails_the_task() {
    let err = misbehaving_job("alloc", "[wasm]\nmemory_limit = \"32MiB\"").fails();
    assert!(
        err.contains("operator 'bad-apple'") && err.contains("exceeded wasm.memory_limit of 33554432 bytes"),
        "{err}"
    );
}

#[test]
fn records_before_the_failure_were_processed() {
    // The same operator passes other records through unchanged.
    let dir = misbehaving_job("trap", "");
    dir.write("input.txt", "fine\nalso fine\n");
    dir.succeeds(&[]);
    assert_eq!(dir.read("out.txt"), "fine\nalso fine\n");
}
