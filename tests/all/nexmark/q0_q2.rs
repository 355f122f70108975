//! q0, q1 and q2: every bid (or every selected one) once, as the query
//! writes it, at parallelism 1 and 3.

use super::{EVENTS, run_query};
use weir_tests::nexmark::{events, q0_q2, sorted};

fn check(query: &str, reference: fn(&[nexmark::event::Event]) -> Vec<String>) {
    let expected = sorted(reference(&events(EVENTS as usize)));
    assert!(!expected.is_empty());
    for p in [1, 3] {
        let got = sorted(run_query(query, EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "{query} at parallelism {p}: line count");
        assert!(got == expected, "{query} at parallelism {p}: output differs from the reference");
    }
}

#[test]
fn q0_passes_every_bid_through() {
    check("q0", q0_q2::q0);
}

#[test]
fn q1_converts_every_price_exactly() {
    check("q1", q0_q2::q1);
}

#[test]
fn q2_selects_the_bids_on_every_123rd_auction() {
    check("q2", q0_q2::q2);
}

#[test]
fn json_events_give_the_same_answer() {
    let copy = super::ExampleCopy::new("nexmark");
    copy.edit("q2.toml", "events = 1000000", &format!("events = {EVENTS}\nformat = \"json\""));
    copy.run("q2.toml", &["--parallelism", "2"]);
    let got = sorted(copy.take_output("q2.txt").lines().map(str::to_string));
    assert_eq!(got, sorted(q0_q2::q2(&events(EVENTS as usize))));
}
