//! q20: the unwindowed join of bids with category-10 auctions, at
//! parallelism 1 and 3 (bids arrive before their auctions: the generator
//! bids up to 10 ids ahead, and across source subtasks bids overtake
//! auctions), over an out-of-order stream, and over hand-made events (bids
//! before their auction, after its expiry, on other categories and on an
//! auction that never comes), fed in both orders.

use super::q18::{auction, bid, run_hand_made, shuffled_events};
use super::{ExampleCopy, run_query};
use nexmark::event::Event;
use std::collections::HashMap;
use weir_tests::nexmark::{bids, events, q20, sorted};

/// q20's lines carry the auction's ~500-byte `extra`: fewer events keep the
/// output small.
const EVENTS: u64 = 100_000;

#[test]
fn q20_joins_bids_with_category_10_auctions() {
    let events = events(EVENTS as usize);
    let expected = sorted(q20::q20(&events));
    assert!(expected.len() >= 5_000, "too few q20 lines to mean something: {}", expected.len());
    // Bids the stream puts before their auction (which then come).
    let created: HashMap<usize, usize> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Event::Auction(a) => Some((a.id, i)),
            _ => None,
        })
        .collect();
    let early = events
        .iter()
        .enumerate()
        .filter(|(i, e)| matches!(e, Event::Bid(b) if created.get(&b.auction).is_some_and(|at| at > i)))
        .count();
    assert!(early >= 500, "only {early} bids come before their auction");
    // Joined bids made after their auction expired: the join keeps them.
    let expires: HashMap<usize, u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Auction(a) if a.category == 10 => Some((a.id, a.expires)),
            _ => None,
        })
        .collect();
    let late = bids(&events).filter(|b| expires.get(&b.auction).is_some_and(|x| b.date_time > *x)).count();
    assert!(late >= 100, "only {late} joined bids after their auction's expiry");
    for p in [1, 3] {
        let got = sorted(run_query("q20", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q20 at parallelism {p}: line count");
        assert!(got == expected, "q20 at parallelism {p}: output differs from the reference");
    }
}

/// Events shuffled within groups of 2000 (0.2 s): more bids come before
/// their auctions.
#[test]
fn q20_over_an_out_of_order_stream_matches_the_reference() {
    const GROUP: usize = 2000;
    let events = shuffled_events(EVENTS as usize, GROUP);
    let expected = sorted(q20::q20(&events));
    assert!(expected.len() >= 5_000, "too few q20 lines to mean something: {}", expected.len());
    let copy = ExampleCopy::new("nexmark");
    copy.edit("q20.toml", "events = 1000000", &format!("events = {EVENTS}\nout_of_order_group_size = {GROUP}"));
    copy.run("q20.toml", &["--parallelism", "3"]);
    let got = sorted(copy.take_output("q20.txt").lines().map(str::to_string));
    assert_eq!(got.len(), expected.len(), "q20 out of order: line count");
    assert!(got == expected, "q20 over an out-of-order stream: output differs from the reference");
}

/// Written out by hand from the SQL (every bid on a category-10 auction,
/// whatever the times), and the reference must agree.
#[test]
fn q20_joins_bids_before_their_auction_and_after_its_expiry() {
    let bid_part = |a: usize, b: usize, p: usize, t: u64| {
        format!("{a},{b},{p},Google,https://www.nexmark.com/a/b/c/item.htm?query=1,{t},x")
    };
    // auction(id, 10, 1000, 2000) as the line's auction part.
    let auction_part = |id: usize| format!("item{id},a thing,100,200,1000,2000,{},10,pad", 1000 + id);
    let in_order = vec![
        // Before auction 300 in the stream: one before it starts, one inside.
        bid(300, 1, 10, 500, "x"),
        bid(300, 2, 11, 1500, "x"),
        // Auction 301, category 11: a bid before it and one after.
        bid(301, 1, 10, 1500, "x"),
        auction(300, 10, 1000, 2000),
        auction(301, 11, 1000, 2000),
        bid(301, 2, 10, 1600, "x"),
        // After auction 300: inside, and after its expiry.
        bid(300, 3, 12, 1800, "x"),
        bid(300, 4, 13, 5000, "x"),
        // An auction that never comes.
        bid(302, 1, 10, 1500, "x"),
        // A category-10 auction without bids, and one with a bid at its expiry.
        auction(303, 10, 1000, 2000),
        auction(304, 10, 1000, 2000),
        bid(304, 5, 14, 2000, "x"),
    ];
    let expected = sorted(
        [(300, 1, 10, 500), (300, 2, 11, 1500), (300, 3, 12, 1800), (300, 4, 13, 5000), (304, 5, 14, 2000)]
            .map(|(a, b, p, t)| format!("{},{}", bid_part(a, b, p, t), auction_part(a))),
    );
    assert_eq!(sorted(q20::q20(&in_order)), expected, "the reference joins as the SQL");
    let mut reversed = in_order.clone();
    reversed.reverse();
    for (order, events) in [("in order", &in_order), ("reversed", &reversed)] {
        for p in [1, 3] {
            assert_eq!(sorted(run_hand_made("q20", events, p)), expected, "{order}, parallelism {p}");
        }
    }
}
