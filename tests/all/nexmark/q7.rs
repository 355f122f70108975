//! q7, highest bid: the bids at each tumbling window's highest price, at
//! parallelism 1 and 3, with the query's 10 s windows and with short ones.

use super::run_query;
use crate::example_copy::ExampleCopy;
use weir_tests::nexmark::{events, q7, sorted};

/// 1 000 000 events are 100 s of event time: 10 windows of 10 s.
const EVENTS: u64 = 1_000_000;

#[test]
fn q7_writes_the_highest_bids_of_every_tumbling_window() {
    let expected = sorted(q7::q7(&events(EVENTS as usize)));
    assert!(expected.len() >= 10, "only {} lines", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q7", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q7 at parallelism {p}: line count");
        assert!(got == expected, "q7 at parallelism {p}: output differs from the reference");
    }
}

#[test]
fn q7_with_short_windows_matches_the_reference() {
    // Windows of 20 ms over 20 s: about 1 000 windows, so many window
    // boundaries (and the bids at a window's last millisecond) are crossed.
    let n = 200_000;
    let expected = sorted(q7::q7_with(&events(n), 20));
    assert!(expected.len() >= 900, "only {} lines", expected.len());
    for p in [1, 3] {
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q7.toml", "events = 1000000", &format!("events = {n}"));
        copy.edit("q7.toml", "stage = \"local\"", "stage = \"local\", window_ms = 20");
        copy.edit("q7.toml", "stage = \"max\"", "stage = \"max\", window_ms = 20");
        copy.run("q7.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q7.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q7 (20 ms) at parallelism {p}: line count");
        assert!(got == expected, "q7 (20 ms) at parallelism {p}: output differs from the reference");
    }
}
