//! `pipeline.idle_timeout` end to end: an input that sends nothing for that
//! long stops holding back its operator's watermark, so event-time timers
//! fire on the other inputs' progress; without it, a silent input holds
//! every timer until it sends again or ends.
//!
//! The probe operator reads two sources: `events`, which carries event time
//! and advances it steadily for 2 s, and `rare`, which carries no event time
//! (its watermark stays at the start) and sends one record at once and
//! the next only after 5 s. The probe registers an event-time timer per
//! timestamped record and writes `timer <t>` when it fires.

use super::support::JobDir;
use weir_tests::artifacts;

const EVENTS: u64 = 40;
const LATE: &str = r#"record {"k":"r","n":"late"}"#;

/// Runs the job with `pipeline` settings; returns the probe's output lines.
fn run(pipeline: &str) -> Vec<String> {
    run_with(pipeline, "{\"k\":\"r\",\"n\":\"first\"}\n{\"k\":\"r\",\"n\":\"late\"}\n", "")
}

/// As [`run`], with `rare` as the rare source's lines and `rare_options`
/// added to its entry.
fn run_with(pipeline: &str, rare: &str, rare_options: &str) -> Vec<String> {
    let dir = JobDir::new();
    let events: String = (1..=EVENTS).map(|i| format!("{{\"k\":\"e{}\",\"t\":{}}}\n", i % 4, i * 1000)).collect();
    dir.write("events.jsonl", events);
    dir.write("rare.jsonl", rare);
    dir.write(
        "job.toml",
        format!(
            r#"name = "idle"

[pipeline]
# A watermark after every record.
batch_size = 1
{pipeline}

[[sources]]
id = "events"
kind = "file"
path = "events.jsonl"
format = "jsonl"
key_field = "k"
timestamp_field = "t"
records_per_second = 20

[[sources]]
id = "rare"
kind = "file"
path = "rare.jsonl"
format = "jsonl"
key_field = "k"
records_per_second = 0.2
{rare_options}

[[operators]]
uid = "probe"
module = "{probe}"
inputs = [{{ from = "events", partition = "key" }}, {{ from = "rare", partition = "key" }}]
params = {{ domain = "event" }}

[[sinks]]
id = "out"
kind = "file"
input = "probe"
path = "out.txt"
"#,
            probe = artifacts::TIMER_PROBE
        ),
    );
    dir.succeeds(&[]);
    dir.read("out.txt").lines().map(str::to_string).collect()
}

/// Every record once and one timer per event, in any order.
fn assert_complete(lines: &[String]) {
    let mut got = lines.to_vec();
    got.sort();
    let mut expected: Vec<String> = (1..=EVENTS)
        .flat_map(|i| [format!("record {{\"k\":\"e{}\",\"t\":{}}}", i % 4, i * 1000), format!("timer {}", i * 1000)])
        .chain([r#"record {"k":"r","n":"first"}"#.to_string(), LATE.to_string()])
        .collect();
    expected.sort();
    assert_eq!(got, expected);
}

/// Where `line` is in `lines`.
fn at(lines: &[String], line: &str) -> usize {
    lines.iter().position(|l| l == line).unwrap_or_else(|| panic!("no {line:?} in {lines:#?}"))
}

#[test]
fn with_an_idle_timeout_a_silent_input_stops_holding_back_event_time_timers() {
    let lines = run("idle_timeout = \"300ms\"");
    assert_complete(&lines);
    let late = at(&lines, LATE);
    let timers: Vec<usize> = (1..=EVENTS).map(|i| at(&lines, &format!("timer {}", i * 1000))).collect();
    assert!(
        timers.iter().all(|&t| t < late),
        "every timer fired while `rare` was silent, before its late record:\n{lines:#?}"
    );
    // A timer fires only once the watermark passed it, after its record.
    for i in 1..=EVENTS {
        let record = at(&lines, &format!("record {{\"k\":\"e{}\",\"t\":{}}}", i % 4, i * 1000));
        assert!(record < timers[i as usize - 1], "timer {} before its record", i * 1000);
    }
}

#[test]
fn without_an_idle_timeout_a_silent_input_holds_every_timer_until_it_ends() {
    let lines = run("");
    assert_complete(&lines);
    let late = at(&lines, LATE);
    for i in 1..=EVENTS {
        assert!(at(&lines, &format!("timer {}", i * 1000)) > late, "timer {} fired before `rare` ended", i * 1000);
    }
}

/// wit/timers.wit and docs/job-file.md promise that all pending event-time
/// timers fire before the end of input. Here `events` ends while `rare` is
/// idle, so the watermark reaches its maximum; `rare`'s late record then
/// registers a timer at 500, due at once, for which no later watermark
/// will come: it must still fire before the end.
#[test]
fn a_timer_registered_after_event_time_ended_fires_before_the_end() {
    let rare = "{\"k\":\"r\",\"t\":100}\n{\"k\":\"r\",\"t\":500}\n";
    let lines = run_with("idle_timeout = \"300ms\"", rare, "timestamp_field = \"t\"");
    let late = at(&lines, r#"record {"k":"r","t":500}"#);
    assert!(at(&lines, "timer 100") < late, "{lines:#?}");
    assert!(at(&lines, "timer 500") > late, "the late record's timer fires:\n{lines:#?}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("timer ")).count() as u64, EVENTS + 2, "{lines:#?}");
}
