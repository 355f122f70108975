//! q6, average selling price by seller: a line per closed auction with a
//! winning bid, the average of the seller's last 11 final prices in closing
//! order, at parallelism 1 and 3 (where winners reach the second stage from
//! three subtasks in any order), on an out-of-order stream, and on q9's
//! hand-made events.

use super::q9::{edge_events, run_edges, shuffle, shuffled_events};
use super::{EVENTS, ExampleCopy, run_query};
use std::collections::HashMap;
use weir_tests::nexmark::{events, q6, sorted};

/// The reference's lines over `events`, checked to mean something: many
/// lines, and sellers whose window of 11 fills and moves on.
fn reference(events: &[nexmark::event::Event]) -> Vec<String> {
    let lines = q6::q6(events);
    assert!(lines.len() >= 2000, "only {} reference lines", lines.len());
    let mut per_seller: HashMap<&str, usize> = HashMap::new();
    for line in &lines {
        *per_seller.entry(line.split_once(',').unwrap().0).or_default() += 1;
    }
    let full = per_seller.values().filter(|&&n| n > q6::ROWS).count();
    assert!(full >= 10, "only {full} sellers with more than {} closed auctions", q6::ROWS);
    sorted(lines)
}

#[test]
fn q6_averages_each_sellers_last_closed_auctions() {
    let expected = reference(&events(EVENTS as usize));
    for p in [1, 3] {
        let got = sorted(run_query("q6", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q6 at parallelism {p}: line count");
        assert!(got == expected, "q6 at parallelism {p}: output differs from the reference");
    }
}

#[test]
fn q6_on_an_out_of_order_stream_matches_the_reference() {
    let expected = reference(&shuffled_events(EVENTS as usize));
    let params = "stage = \"winners\", keep_ms = 0, wait_ms = 0";
    for (p, edit) in [(1, None), (3, Some(params))] {
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q6.toml", "events = 1000000", &format!("events = {EVENTS}"));
        shuffle(&copy, "q6.toml");
        if let Some(to) = edit {
            copy.edit("q6.toml", "stage = \"winners\"", to);
        }
        copy.run("q6.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q6.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q6 out of order at parallelism {p} {edit:?}: line count");
        assert!(got == expected, "q6 out of order at parallelism {p} {edit:?}: output differs from the reference");
    }
}

/// On q9's hand-made events (see `edge_events`), the lines worked out by
/// hand from the documented rules: per seller, the final prices in order of
/// `expires` and then id, averaged over up to 11, rounded down.
#[test]
fn q6_on_hand_made_events_takes_auctions_in_closing_order() {
    let events = edge_events();
    let by_hand = sorted(
        [
            // Seller 100: auctions 1, 2, 3 close at 1000 (500, 700, 500);
            // 8 and 9 have no valid bid; 5 closes at 3000 (300), 7 at 4000
            // (600). In order of the winning bids' time (1, 3, 2, ...) the
            // second line would be 500.
            "100,500", "100,600", "100,566", "100,500", "100,520",
            // Seller 200: auction 10 closes at 700 (50), 4 at 1000 (500).
            "200,50", "200,275",
            // Seller 300: auctions 24, 22, 23, 20, 21, 30, 29, ..., 25, 31,
            // 32 in closing order, at 100 times (id - 19): 500, 300, 400,
            // 100, 200, 1100, 1000, 900, 800, 700, 600, 1200, 1300; the
            // last two windows drop 500 and then 300.
            "300,500", "300,400", "300,400", "300,325", "300,300", "300,433", "300,514", "300,562", "300,588",
            "300,600", "300,600", "300,663", "300,754",
        ]
        .map(str::to_string),
    );
    let expected = sorted(q6::q6(&events));
    assert_eq!(expected, by_hand, "the reference");
    let params = "stage = \"winners\", keep_ms = 1000, wait_ms = 0";
    for (p, edits) in [(1, vec![]), (3, vec![]), (3, vec![("stage = \"winners\"", params)])] {
        let got = run_edges("q6", &events, p, &edits);
        assert_eq!(got, expected, "q6 on hand-made events at parallelism {p} with {edits:?}");
    }
}
