//! Processing-time timers end to end: a timer fires once when the wall
//! clock reaches it, in time order, with its key current, while no input
//! arrives; registering the same key and time twice leaves one timer; and
//! timers still pending when the input ends do not fire
//! (docs/job-file.md, "Event time and watermarks"; wit/timers.wit).

use super::support::JobDir;
use std::time::{Duration, Instant};
use weir_tests::artifacts;

/// Jsonl lines whose `delay` field becomes the record's key: the delay of
/// the timer the probe registers for it.
fn delays(ms: &[u64]) -> String {
    ms.iter().map(|d| format!("{{\"delay\": {d}}}\n")).collect()
}

#[test]
fn processing_time_timers_fire_once_on_the_clock_and_pending_ones_do_not_fire_at_the_end() {
    let dir = JobDir::new();
    // Read at once, in one batch, so one call: both `50`s register the
    // same key and time.
    dir.write("soon.jsonl", delays(&[1500, 50, 60, 50]));
    // One record now and one 4 s later: the input stays open, and silent,
    // while the timers above fall due; the hour-long ones are pending at
    // the end.
    dir.write("later.jsonl", delays(&[3_600_000, 3_600_001]));
    dir.write(
        "job.toml",
        format!(
            r#"name = "timers"

[[sources]]
id = "soon"
kind = "file"
path = "soon.jsonl"
format = "jsonl"
key_field = "delay"

[[sources]]
id = "later"
kind = "file"
path = "later.jsonl"
format = "jsonl"
key_field = "delay"
records_per_second = 0.25

[[operators]]
uid = "probe"
module = "{probe}"
inputs = [{{ from = "soon", partition = "key" }}, {{ from = "later", partition = "key" }}]
params = {{ domain = "processing" }}

[[sinks]]
id = "out"
kind = "file"
input = "probe"
path = "out.txt"
"#,
            probe = artifacts::TIMER_PROBE
        ),
    );
    let started = Instant::now();
    dir.succeeds(&[]);
    assert!(started.elapsed() < Duration::from_secs(300), "pending timers held the job: {:?}", started.elapsed());

    let out = dir.read("out.txt");
    let lines: Vec<&str> = out.lines().collect();
    // Every registration; one `fired <key>` per distinct due timer, never
    // `early`, never twice; nothing for the pending ones.
    let mut got = lines.clone();
    got.sort();
    let mut expected = vec![
        "fired 1500",
        "fired 50",
        "fired 60",
        "registered 1500",
        "registered 3600000",
        "registered 3600001",
        "registered 50",
        "registered 50",
        "registered 60",
    ];
    expected.sort();
    assert_eq!(got, expected, "output:\n{out}");
    // The 1.5 s timer fired on the clock alone, after the short ones and
    // before the next record came 4 s in.
    assert_eq!(lines[lines.len() - 2..], ["fired 1500", "registered 3600001"], "output:\n{out}");
    let position = |l: &str| lines.iter().position(|x| *x == l).unwrap();
    assert!(position("fired 50") > position("registered 60") && position("fired 60") > position("registered 60"));
}
