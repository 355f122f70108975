//! A guest hoarding host memory through its imports rather than its own
//! linear memory (docs/security.md, "Host memory a guest can hold"): list,
//! map and operator-list state past `wasm.max_state_bytes` over many calls,
//! state writes past `wasm.max_state_write_bytes` in one call, timers past
//! `wasm.max_timers`, and log past `wasm.max_log_lines` with control and
//! bidirectional characters in it. Each state and timer attack fails the
//! job at once (no restart, though the strategy allows five), with an error
//! naming the operator and the budget, while the host's peak resident set
//! stays under the budget plus [`MARGIN`]; the log attack runs to its end
//! with the rest of each call's log dropped, counted and said once, and no
//! raw control character reaches the host's log.
//!
//! The host is watched as it runs and killed if it passes its ceiling, so
//! a host without the budgets fails these tests instead of the machine.

use super::support::JobDir;
use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{artifacts, host_command};

/// What the host holds besides the hoard: the runtime, wasmtime and the
/// component it compiles, the guest's linear memory, one call's writes in
/// flight, and the allocator's slack (measured: about 90 MiB for a job
/// that hoards nothing; the state attacks peaked at 130 MiB past their
/// budget).
const MARGIN: u64 = 192 << 20;

/// Records, one per call (`pipeline.batch_size = 1`).
const RECORDS: usize = 200;

/// A job running the hoard operator over [`RECORDS`] keyed records.
fn hoard_job(what: &str, per_record: &str, wasm: &str) -> JobDir {
    let dir = JobDir::new();
    let input: String = (0..RECORDS).map(|i| format!("{{\"k\": \"key-{}\"}}\n", i % 4)).collect();
    dir.write("input.jsonl", input);
    dir.write(
        "job.toml",
        format!(
            r#"name = "hoarder"

[wasm]
call_timeout = "300s"
{wasm}

[pipeline]
batch_size = 1

[restart-strategy]
type = "fixed-delay"
attempts = 5
delay = "100ms"

[[sources]]
id = "in"
kind = "file"
path = "input.jsonl"
format = "jsonl"
key_field = "k"

[[operators]]
uid = "hoard"
module = "{module}"
inputs = [{{ from = "in", partition = "key" }}]
params = {{ what = "{what}", per_record = "{per_record}" }}

[[sinks]]
id = "out"
kind = "file"
input = "hoard"
path = "out.txt"
"#,
            module = artifacts::HOARD
        ),
    );
    dir
}

/// How a watched run ended.
struct Run {
    code: Option<i32>,
    stderr: String,
    /// The most the host's resident set reached (VmHWM).
    peak: u64,
    elapsed: Duration,
}

/// A `/proc/<pid>/status` field, in bytes.
fn status_field(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = text.lines().find_map(|l| l.strip_prefix(field))?;
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|kb| kb * 1024)
}

/// Runs the job, sampling the host's peak resident set until it exits; a
/// host past `ceiling` is killed there, and the test fails saying so.
fn run_watched(dir: &JobDir, ceiling: u64) -> Run {
    let started = Instant::now();
    let mut child: Child =
        host_command(dir.path(), &["run", "job.toml"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).unwrap();
        bytes
    });
    let pid = child.id();
    let mut peak = 0;
    let deadline = started + Duration::from_secs(600);
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(status_field(pid, "VmHWM:").unwrap_or(0));
        if peak > ceiling || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
            let tail: String = stderr.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            panic!(
                "killed the host after {:?} at {} MiB (ceiling {} MiB): the budget did not hold; last lines, newest first:\n{tail}",
                started.elapsed(),
                peak >> 20,
                ceiling >> 20
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let code = child.wait().unwrap().code();
    let stderr = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    Run { code, stderr, peak, elapsed: started.elapsed() }
}

/// The job failed once, for good, naming the operator and `budget`, within
/// `ceiling`.
fn fails_on_budget(run: &Run, budget: &str, ceiling: u64) {
    let err = &run.stderr;
    assert_eq!(run.code, Some(1), "the job must fail (exit 1):\n{err}");
    assert!(err.contains("operator 'hoard'") && err.contains(budget), "expected the operator and {budget}:\n{err}");
    assert!(err.contains(&format!("raise {budget}")), "the error says which setting to raise:\n{err}");
    assert!(err.contains("not restarting: a restart cannot help"), "no restart:\n{err}");
    assert!(!err.contains("restart 1 of 5"), "restarted into the same budget:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(run.peak < ceiling, "peaked at {} MiB, ceiling {} MiB", run.peak >> 20, ceiling >> 20);
    eprintln!("{budget}: failed after {:?}, host peak {} MiB", run.elapsed, run.peak >> 20);
}

/// 64 KiB items, 64 per record: 4 MiB a call, 800 MiB over the input if
/// nothing stopped it; the state budget is 128 MiB.
fn state_hoard(what: &str) {
    const BUDGET: u64 = 128 << 20;
    let dir = hoard_job(what, "64", "max_state_bytes = \"128MiB\"");
    let run = run_watched(&dir, BUDGET + MARGIN);
    fails_on_budget(&run, "wasm.max_state_bytes", BUDGET + MARGIN);
    assert!(run.stderr.contains("past wasm.max_state_bytes (128.0 MiB)"), "{}", run.stderr);
}

#[test]
fn list_state_past_max_state_bytes_fails_the_job_within_the_budget() {
    state_hoard("list");
}

#[test]
fn map_state_past_max_state_bytes_fails_the_job_within_the_budget() {
    state_hoard("map");
}

#[test]
fn operator_list_state_past_max_state_bytes_fails_the_job_within_the_budget() {
    state_hoard("operator-list");
}

#[test]
fn one_call_writing_past_max_state_write_bytes_fails_the_job_at_the_default() {
    // Without end in one call: the default 64 MiB per call stops it long
    // before the default 1 GiB of state.
    const BUDGET: u64 = 64 << 20;
    let dir = hoard_job("list", &u64::MAX.to_string(), "");
    let run = run_watched(&dir, BUDGET + MARGIN);
    fails_on_budget(&run, "wasm.max_state_write_bytes", BUDGET + MARGIN);
}

#[test]
fn timers_past_max_timers_fail_the_job_at_the_default() {
    // A million timers (the default budget) with short keys: about 80 MiB
    // as the hashmap backend counts them.
    const TIMERS: u64 = 80 << 20;
    let dir = hoard_job("timers", &u64::MAX.to_string(), "");
    let run = run_watched(&dir, TIMERS + MARGIN);
    fails_on_budget(&run, "wasm.max_timers", TIMERS + MARGIN);
    assert!(run.stderr.contains("1000001 timers pending, past wasm.max_timers (1000000)"), "{}", run.stderr);
}

#[test]
fn guest_log_past_its_budget_is_dropped_counted_and_escaped() {
    // 4 records, each logging 5000 lines on stdout and 5000 on stderr:
    // 1000 lines a call pass (the default budget), 9000 are dropped.
    let dir = hoard_job("log", "5000", "");
    let input: String = (0..4).map(|i| format!("{{\"k\": \"key-{i}\"}}\n")).collect();
    dir.write("input.jsonl", input);
    let run = run_watched(&dir, 512 << 20);
    let err = &run.stderr;
    assert_eq!(run.code, Some(0), "dropping log does not fail the job:\n{err}");
    assert_eq!(
        err.matches("guest log dropped: 9000 lines").count(),
        4,
        "one summary per call, with the count:\n{}",
        err.lines().filter(|l| l.contains("dropped")).collect::<Vec<_>>().join("\n")
    );
    assert!(err.contains("wasm.max_log_lines (1000)"), "the summary names the setting");
    // Stdout and stderr lines alternate: half of each call's 1000 are
    // stdout's.
    let logged = err.lines().filter(|l| l.contains("forged")).count();
    assert_eq!(logged, 4 * 500, "stdout lines logged");
    for forbidden in ['\r', '\x1b', '\x08', '\u{202e}', '\u{202c}', '\u{2067}', '\u{2069}'] {
        assert!(!err.contains(forbidden), "{forbidden:?} reached the host's log raw");
    }
    assert!(
        err.contains(r"\u{1b}[31mforged\u{8} \u{202e}desrever"),
        "escaped, not removed:\n{}",
        &err[..err.len().min(4000)]
    );
    assert_eq!(dir.read("out.txt").lines().count(), 4, "every record went through");
}
