//! q5, hot items: the auctions with the most bids per hopping window, at
//! parallelism 1 and 3, with the query's windows and with short ones (many
//! windows).

use super::run_query;
use crate::example_copy::ExampleCopy;
use weir_tests::nexmark::{events, q5, sorted};

/// 1 000 000 events are 100 s of event time: about 50 windows of 10 s.
const EVENTS: u64 = 1_000_000;

#[test]
fn q5_writes_the_hottest_auctions_of_every_hopping_window() {
    let expected = sorted(q5::q5(&events(EVENTS as usize)));
    assert!(expected.len() >= 45, "only {} lines", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q5", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q5 at parallelism {p}: line count");
        assert!(got == expected, "q5 at parallelism {p}: output differs from the reference");
    }
}

#[test]
fn q5_with_short_windows_matches_the_reference() {
    // Windows of 1 s sliding by 200 ms over 20 s: about 100 windows, so
    // many window ends and pane boundaries are crossed.
    let n = 200_000;
    let expected = sorted(q5::q5_with(&events(n), 1_000, 200));
    assert!(expected.len() >= 100, "only {} lines", expected.len());
    for p in [1, 3] {
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q5.toml", "events = 1000000", &format!("events = {n}"));
        copy.edit("q5.toml", "stage = \"count\"", "stage = \"count\", size_ms = 1000, slide_ms = 200");
        copy.run("q5.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q5.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q5 (1 s by 200 ms) at parallelism {p}: line count");
        assert!(got == expected, "q5 (1 s by 200 ms) at parallelism {p}: output differs from the reference");
    }
}
