//! q11: bid counts per bidder session, at parallelism 1 and 3 (where one
//! bidder's bids come from several source subtasks, out of order, and
//! sessions merge), with the standard 10 s gap and with a 1 s gap that
//! makes many short sessions.

use super::{ExampleCopy, run_query};
use weir_tests::nexmark::{events, q11, sorted};

/// 100 s of event time: bidders have several sessions.
const EVENTS: u64 = 1_000_000;

#[test]
fn q11_counts_each_bidders_bids_per_session() {
    let events = events(EVENTS as usize);
    let expected = sorted(q11::q11(&events, q11::GAP));
    assert!(expected.len() >= 1000, "too few q11 sessions to mean something: {}", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q11", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q11 at parallelism {p}: session count");
        assert!(got == expected, "q11 at parallelism {p}: output differs from the reference");
    }
    // A short gap: most bidders have many sessions.
    let sessions = expected.len();
    let expected = sorted(q11::q11(&events, 1_000));
    assert!(expected.len() > sessions * 3 / 2, "a 1 s gap splits sessions: {} against {sessions}", expected.len());
    let copy = ExampleCopy::new("nexmark");
    copy.edit("q11.toml", "events = 1000000", &format!("events = {EVENTS}"));
    copy.edit("q11.toml", "partition = \"key\"", "partition = \"key\"\nparams = { gap_ms = 1000 }");
    copy.run("q11.toml", &["--parallelism", "3"]);
    let got = sorted(copy.take_output("q11.txt").lines().map(str::to_string));
    assert!(got == expected, "q11 with a 1 s gap at parallelism 3: output differs from the reference");
}
