//! The `nexmark` source's event times with a changing rate: for each rate
//! shape, the events of every second of event time number what the
//! documented rate says (`docs/nexmark.md`, "A changing rate"), and time
//! never goes back in order. The expected rates are computed here from the
//! documented formula, the counts from the stream the real host wrote.

use super::ExampleCopy;
use std::collections::BTreeMap;

const BASE: i64 = 1_700_000_000_000;

/// Every event of a `nexmark` source with `options`, as JSON lines in
/// index order (one subtask, one split): their `date_time`s.
fn event_times(events: u64, options: &str) -> Vec<i64> {
    let copy = ExampleCopy::new("nexmark");
    copy.write(
        "times.toml",
        &format!(
            r#"name = "nexmark-times"
[[sources]]
id = "events"
kind = "nexmark"
events = {events}
format = "json"
splits = 1
base_time = {BASE}
{options}
[[sinks]]
id = "out"
kind = "file"
input = "events"
path = "output/events.txt"
"#
        ),
    );
    copy.run("times.toml", &[]);
    copy.take_output("events.txt")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            // One variant's object: {"bid": {..., "date_time": t}}.
            let (_, e) = v.as_object().unwrap().iter().next().unwrap();
            e["date_time"].as_i64().unwrap()
        })
        .collect()
}

/// Events per whole second of event time, from `times` (in order), the
/// last (partial) second left out.
fn per_second(times: &[i64]) -> BTreeMap<i64, u64> {
    let mut counts = BTreeMap::new();
    for t in times {
        *counts.entry((t - BASE) / 1000).or_default() += 1;
    }
    counts.pop_last();
    counts
}

fn assert_never_back(times: &[i64], what: &str) {
    if let Some(i) = times.windows(2).position(|w| w[1] < w[0]) {
        panic!("{what}: event time goes back at event {}: {} after {}", i + 1, times[i + 1], times[i]);
    }
}

#[test]
fn a_square_rate_alternates_every_half_period_and_time_never_goes_back() {
    // 2000/s for 15 s, 4000/s for 15 s: 90,000 events a cycle; 2.2 cycles.
    let times = event_times(
        200_000,
        "first_event_rate = 2000\nnext_event_rate = 4000\nrate_shape = \"square\"\nrate_period = \"30s\"",
    );
    assert_eq!(times.len(), 200_000);
    assert_eq!(times[0], BASE);
    assert_never_back(&times, "square");
    let counts = per_second(&times);
    assert!(counts.len() >= 60, "{} seconds", counts.len());
    for (s, n) in counts {
        let expected = if (s % 30) < 15 { 2000 } else { 4000 };
        assert_eq!(n, expected, "events in second {s} of a square rate 2000/4000 over 30 s");
    }
}

#[test]
fn a_sine_rate_follows_its_steps_and_time_never_goes_back() {
    // 10 steps of 2 s between 4000/s and 2000/s.
    let times = event_times(
        250_000,
        "first_event_rate = 4000\nnext_event_rate = 2000\nrate_shape = \"sine\"\nrate_period = \"20s\"",
    );
    assert_never_back(&times, "sine");
    let counts = per_second(&times);
    assert!(counts.len() >= 70, "{} seconds", counts.len());
    for (s, n) in counts {
        let k = (s / 2) % 10;
        let expected = (3000.0 + 1000.0 * (2.0 * std::f64::consts::PI * k as f64 / 10.0).cos()).round() as u64;
        assert_eq!(n, expected, "events in second {s} (step {k}) of a sine between 4000 and 2000 over 20 s");
    }
}

#[test]
fn one_rate_spaces_events_evenly() {
    let times = event_times(30_000, "first_event_rate = 3000");
    assert_never_back(&times, "one rate");
    // One rate is the crate's own arithmetic: each time is rounded to the
    // nearest millisecond, which moves one event across a second's edge.
    for (s, n) in per_second(&times) {
        assert!(n.abs_diff(3000) <= 1, "events in second {s} at 3000/s: {n}");
    }
}
