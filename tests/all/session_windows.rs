//! The session-windows example: event time, bounded out-of-orderness,
//! watermarks and event-time timers, end to end and exact.

use super::example_copy::ExampleCopy;

use super::support::JobDir;
use std::collections::BTreeMap;
use std::time::Duration;
use weir_tests::artifacts::SESSION_WINDOWS;

/// Sessions computed directly: per user, sorted clicks split where the next
/// click is more than `gap` after the previous one.
pub fn expected_sessions(clicks: &[(String, i64)], gap: i64) -> Vec<String> {
    let mut by_user: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (u, t) in clicks {
        by_user.entry(u).or_default().push(*t);
    }
    let mut out = Vec::new();
    for (user, mut ts) in by_user {
        ts.sort();
        let (mut start, mut end, mut n) = (ts[0], ts[0], 1);
        for &t in &ts[1..] {
            if t - end > gap {
                out.push(format!("{user} {start} {end} {n}"));
                (start, n) = (t, 0);
            }
            end = t;
            n += 1;
        }
        out.push(format!("{user} {start} {end} {n}"));
    }
    out.sort();
    out
}

fn parse_clicks(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let user = l.split("\"user\": \"").nth(1).unwrap().split('"').next().unwrap().to_string();
            let ts = l.split("\"ts\": ").nth(1).unwrap().split(|c: char| !c.is_ascii_digit()).next().unwrap();
            (user, ts.parse().unwrap())
        })
        .collect()
}

pub fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn the_example_job_closes_every_session_exactly() {
    let example = ExampleCopy::new("session-windows");
    example.run("job.toml", &[]);
    let clicks = parse_clicks(&example.read("clicks.jsonl"));
    let out = example.take_output("sessions.txt");
    let expected = expected_sessions(&clicks, 10_000);
    assert_eq!(sorted_lines(&out), expected);
    // The example's point: a click that arrives out of order still joins
    // (and merges) its session. Some click must come before a larger one.
    assert!(clicks.windows(2).any(|w| w[1].1 < w[0].1), "the example has out-of-order clicks");
}

/// Clicks of 60 users over a long stretch of event time, shuffled locally so
/// that no click is more than `disorder` ms behind the largest seen before.
pub fn generated_clicks(n: usize, disorder: i64) -> Vec<(String, i64)> {
    let mut x: u64 = 99;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 0i64;
    let mut clicks: Vec<(String, i64)> = (0..n)
        .map(|_| {
            t += (next() % 400) as i64;
            (format!("u{}", next() % 60), t)
        })
        .collect();
    let mut i = 0;
    while i + 1 < clicks.len() {
        if clicks[i + 1].1 - clicks[i].1 <= disorder && next() % 2 == 0 {
            clicks.swap(i, i + 1);
        }
        i += 2;
    }
    clicks
}

#[test]
fn sessions_are_exact_at_parallelism_1_and_3_with_out_of_order_clicks() {
    sessions_exact_with(SESSION_WINDOWS);
}

/// The same sessions from the Python sessionizer (map state, event-time
/// timers through the Python SDK).
#[test]
fn sessions_in_python_are_exact_at_parallelism_1_and_3() {
    sessions_exact_with(&weir_tests::script_guest("session_windows_py_sessionizer"));
}

/// The same sessions from the JavaScript sessionizer.
#[test]
fn sessions_in_javascript_are_exact_at_parallelism_1_and_3() {
    sessions_exact_with(&weir_tests::script_guest("session_windows_js_sessionizer"));
}

/// 20 000 generated clicks, 2 s out of order, through the sessionizer
/// `module` at parallelism 1 and 3: exactly the sessions computed directly.
fn sessions_exact_with(module: &str) {
    let clicks = generated_clicks(20_000, 2_000);
    // The disorder stays within the bound, so no click is late.
    let mut max = i64::MIN;
    for (_, t) in &clicks {
        assert!(*t >= max.saturating_sub(2_000));
        max = max.max(*t);
    }
    let expected = expected_sessions(&clicks, 10_000);
    assert!(expected.len() > 500, "many sessions: {}", expected.len());
    let input: String = clicks.iter().map(|(u, t)| format!("{{\"user\": \"{u}\", \"ts\": {t}}}\n")).collect();
    for p in [1u32, 3] {
        let dir = JobDir::new();
        dir.write("clicks.jsonl", &input);
        dir.write(
            "job.toml",
            format!(
                r#"name = "sessions"
parallelism = {p}

[pipeline]
batch_size = 256

[[sources]]
id = "clicks"
kind = "file"
path = "clicks.jsonl"
format = "jsonl"
key_field = "user"
timestamp_field = "ts"
max_out_of_orderness = "2s"

[[operators]]
uid = "sessions"
module = "{module}"
input = "clicks"
partition = "key"
params = {{ gap_ms = 10000 }}

[[sinks]]
id = "out"
kind = "file"
input = "sessions"
path = "sessions.txt"
"#
            ),
        );
        dir.succeeds(&[]);
        let out = dir.read("sessions.txt");
        assert_eq!(sorted_lines(&out), expected, "parallelism {p}");
        // Timers fire in event-time order: each user's sessions come out in order.
        let mut last: BTreeMap<String, i64> = BTreeMap::new();
        for line in out.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let start: i64 = f[1].parse().unwrap();
            let prev = last.insert(f[0].to_string(), start);
            assert!(prev.is_none_or(|p| p < start), "{line} after a later session");
        }
    }
}

#[test]
fn clicks_without_event_time_fail_clearly() {
    let dir = JobDir::new();
    dir.write("clicks.jsonl", "{\"user\": \"ann\"}\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "sessions"
[[sources]]
id = "clicks"
kind = "file"
path = "clicks.jsonl"
format = "jsonl"
key_field = "user"

[[operators]]
uid = "sessions"
module = "{SESSION_WINDOWS}"
input = "clicks"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "sessions"
"#
        ),
    );
    let err = dir.fails();
    assert!(err.contains("operator 'sessions'") && err.contains("clicks need an event time"), "{err}");
}

/// Clicks for a paced run of about three seconds.
const PACED_CLICKS: usize = 3_000;

/// The sessionizer `module` at parallelism `p` over [`generated_clicks`],
/// paced, checkpoints every 200 ms, into a transactional file sink
/// (`out/`); savepoints under `sp/`.
fn write_paced_sessions_job(dir: &JobDir, module: &str, p: u32) {
    let root = dir.path().display();
    let input: String = generated_clicks(PACED_CLICKS, 2_000)
        .iter()
        .map(|(u, t)| format!("{{\"user\": \"{u}\", \"ts\": {t}}}\n"))
        .collect();
    dir.write("clicks.jsonl", input);
    dir.write(
        "job.toml",
        format!(
            r#"name = "sp"
parallelism = {p}

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[pipeline]
batch_size = 64

[[sources]]
id = "clicks"
kind = "file"
path = "clicks.jsonl"
format = "jsonl"
key_field = "user"
timestamp_field = "ts"
max_out_of_orderness = "2s"
records_per_second = 1000

[[operators]]
uid = "sessions"
module = "{module}"
input = "clicks"
partition = "key"
params = {{ gap_ms = 10000 }}

[[sinks]]
id = "out"
kind = "transactional-file"
input = "sessions"
dir = "out"
"#
        ),
    );
}

fn expected_paced_sessions() -> Vec<String> {
    expected_sessions(&generated_clicks(PACED_CLICKS, 2_000), 10_000)
}

/// The sessionizer `module` killed with SIGKILL mid-run and resumed from its
/// latest checkpoint: every session exactly once.
fn killed_sessions_resume_exactly(module: &str) {
    let dir = JobDir::new();
    write_paced_sessions_job(&dir, module, 2);
    let mut child = dir.start(&[]);
    dir.wait_for_output("sp");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let expected = expected_paced_sessions();
    let before = dir.published().lines().count();
    assert!(before < expected.len(), "killed mid-run: {before} sessions published");
    dir.succeeds(&["--resume"]);
    assert_eq!(sorted_lines(&dir.published()), expected);
}

#[test]
fn a_killed_rust_sessionizer_resumes_exactly() {
    killed_sessions_resume_exactly(SESSION_WINDOWS);
}

#[test]
fn a_killed_javascript_sessionizer_resumes_exactly() {
    killed_sessions_resume_exactly(&weir_tests::script_guest("session_windows_js_sessionizer"));
}

/// A stop savepoint of the sessionizer `from` at parallelism 2, restored
/// into `into` at 3: the open sessions (map state) and their timers, written
/// by one language, are closed by the other, and every session comes out
/// exactly once.
fn sessions_savepoint_restores_across(from: &str, into: &str) {
    let dir = JobDir::new();
    write_paced_sessions_job(&dir, from, 2);
    let child = dir.start(&[]);
    // Sessions are open from the first records on: the savepoint follows
    // the first output at once, since the whole input lasts 3 s and on a
    // loaded machine each `host` command takes a good part of a second.
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let location = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    let expected = expected_paced_sessions();
    let before = dir.published().lines().count();
    assert!(before > 0 && before < expected.len(), "stopped mid-run: {before} sessions published");
    write_paced_sessions_job(&dir, into, 3);
    dir.succeeds(&["--from-savepoint", &location]);
    assert_eq!(sorted_lines(&dir.published()), expected);
}

#[test]
fn a_savepoint_of_the_rust_sessionizer_restores_into_the_javascript_one() {
    sessions_savepoint_restores_across(SESSION_WINDOWS, &weir_tests::script_guest("session_windows_js_sessionizer"));
}

#[test]
fn a_savepoint_of_the_javascript_sessionizer_restores_into_the_rust_one() {
    sessions_savepoint_restores_across(&weir_tests::script_guest("session_windows_js_sessionizer"), SESSION_WINDOWS);
}
