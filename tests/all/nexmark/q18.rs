//! q18, an updating query: the job writes a pair's bid each time the
//! latest bid of a (bidder, auction) pair changes, so its LAST line per
//! (auction, bidder) must equal the reference's result, at parallelism 1
//! and 3, over an out-of-order stream, and over hand-made bids at the tie
//! rule's edges (fed in both orders).
//!
//! Also home of [`run_hand_made`], which the q19 and q20 tests share.

use super::{EVENTS, ExampleCopy, run_query};
use nexmark::config::NexmarkConfig;
use nexmark::event::{Auction, Bid, Event};
use std::collections::{BTreeMap, HashMap};
use weir_tests::nexmark::{config, events, q18, sorted};

/// Runs query `query` (`q18`, `q19` or `q20`) over hand-made `events`, in
/// that order, from a jsonl file (one event a line, the `nexmark` source's
/// JSON), at `parallelism`: a first operator of the query's own crate
/// (`stage = "key"`) keys them as the `nexmark` source would, over a
/// round-robin edge, so at parallelism 3 one auction's events reach the
/// query through different subtasks, in any order. Returns the lines
/// written.
pub(super) fn run_hand_made(query: &str, events: &[Event], parallelism: u32) -> Vec<String> {
    let copy = ExampleCopy::new("nexmark");
    let lines: String = events.iter().map(|e| json_line(e) + "\n").collect();
    copy.write("edges.jsonl", &lines);
    copy.write(
        "edges.toml",
        &format!(
            r#"name = "{query}-edges"
[pipeline]
batch_size = 1
[[sources]]
id = "events"
kind = "file"
path = "edges.jsonl"
format = "jsonl"
[[operators]]
uid = "key"
module = "../../target/wasm/nexmark_{query}.wasm"
input = "events"
partition = "rebalance"
params = {{ stage = "key" }}
[[operators]]
uid = "{query}"
module = "../../target/wasm/nexmark_{query}.wasm"
input = "key"
partition = "key"
[[sinks]]
id = "out"
kind = "file"
input = "{query}"
path = "output/{query}.txt"
"#
        ),
    );
    copy.run("edges.toml", &["--parallelism", &parallelism.to_string()]);
    copy.take_output(&format!("{query}.txt")).lines().map(str::to_string).collect()
}

/// `event` as a `format = "json"` payload of the `nexmark` source.
fn json_line(event: &Event) -> String {
    let value = match event {
        Event::Bid(b) => serde_json::json!({"bid": {
            "auction": b.auction, "bidder": b.bidder, "price": b.price, "channel": b.channel,
            "url": b.url, "date_time": b.date_time, "extra": b.extra,
        }}),
        Event::Auction(a) => serde_json::json!({"auction": {
            "id": a.id, "item_name": a.item_name, "description": a.description,
            "initial_bid": a.initial_bid, "reserve": a.reserve, "date_time": a.date_time,
            "expires": a.expires, "seller": a.seller, "category": a.category, "extra": a.extra,
        }}),
        Event::Person(_) => panic!("the hand-made streams hold bids and auctions"),
    };
    value.to_string()
}

/// A hand-made bid.
pub(super) fn bid(auction: usize, bidder: usize, price: usize, date_time: u64, extra: &str) -> Event {
    Event::Bid(Bid {
        auction,
        bidder,
        price,
        channel: "Google".into(),
        url: "https://www.nexmark.com/a/b/c/item.htm?query=1".into(),
        date_time,
        extra: extra.into(),
    })
}

/// A hand-made auction.
pub(super) fn auction(id: usize, category: usize, date_time: u64, expires: u64) -> Event {
    Event::Auction(Auction {
        id,
        item_name: format!("item{id}"),
        description: "a thing".into(),
        initial_bid: 100,
        reserve: 200,
        date_time,
        expires,
        seller: 1000 + id,
        category,
        extra: "pad".into(),
    })
}

/// The first `n` events of a `nexmark` source with
/// `out_of_order_group_size = group`, in stream order.
pub(super) fn shuffled_events(n: usize, group: usize) -> Vec<Event> {
    nexmark::EventGenerator::new(NexmarkConfig { out_of_order_group_size: group, ..config() }).take(n).collect()
}

/// The last line per (auction, bidder) of q18's output, sorted. On the way
/// it checks that each pair's lines reach the sink in the order written:
/// every line of a pair supersedes the one before (a later time, or the
/// same time and a higher price, or the same both and a greater line).
fn last_per_pair(lines: &[String], what: &str) -> Vec<String> {
    let mut last: BTreeMap<(u64, u64), (u64, u64, &String)> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.splitn(7, ',').collect();
        let num = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("{what}: field {i} of {line:?}")) };
        assert_eq!(f.len(), 7, "{what}: line {line:?}");
        let key = (num(0), num(1));
        let order = (num(5), num(2), line);
        if let Some(prev) = last.get(&key) {
            assert!(order > *prev, "{what}: {line:?} came after {:?}, which it does not supersede", prev.2);
        }
        last.insert(key, order);
    }
    sorted(last.into_values().map(|(_, _, l)| l.clone()))
}

/// Pairs with two or more bids at their latest time: where the tie rule
/// decides the answer.
fn tied_pairs(events: &[Event]) -> usize {
    let mut latest: HashMap<(usize, usize), (u64, usize)> = HashMap::new();
    for b in weir_tests::nexmark::bids(events) {
        let e = latest.entry((b.bidder, b.auction)).or_insert((b.date_time, 0));
        if b.date_time > e.0 {
            *e = (b.date_time, 0);
        }
        if b.date_time == e.0 {
            e.1 += 1;
        }
    }
    latest.values().filter(|(_, n)| *n > 1).count()
}

#[test]
fn q18_last_line_per_pair_matches_the_reference() {
    let events = events(EVENTS as usize);
    let expected = sorted(q18::q18(&events));
    assert!(expected.len() >= 20_000, "too few q18 pairs to mean something: {}", expected.len());
    // The hot bidder on the hot auction bids several times a millisecond.
    let ties = tied_pairs(&events);
    assert!(ties >= 100, "only {ties} pairs with tied latest bids");
    for p in [1, 3] {
        let lines = run_query("q18", EVENTS, p, &[]);
        assert!(lines.len() > expected.len() * 11 / 10, "q18 at parallelism {p}: only {} lines", lines.len());
        let got = last_per_pair(&lines, &format!("q18 at parallelism {p}"));
        assert_eq!(got.len(), expected.len(), "q18 at parallelism {p}: pair count");
        assert!(got == expected, "q18 at parallelism {p}: last line per pair differs from the reference");
    }
}

/// Events shuffled within groups of 2000 (0.2 s): a pair's later bid often
/// arrives before an earlier one, which must then write nothing.
#[test]
fn q18_over_an_out_of_order_stream_keeps_each_pairs_latest_bid() {
    const GROUP: usize = 2000;
    let events = shuffled_events(EVENTS as usize, GROUP);
    let expected = sorted(q18::q18(&events));
    assert!(expected.len() >= 20_000, "too few q18 pairs to mean something: {}", expected.len());
    // Bids that arrive after a later bid of their pair.
    let mut latest: HashMap<(usize, usize), u64> = HashMap::new();
    let mut overtaken = 0;
    for b in weir_tests::nexmark::bids(&events) {
        let t = latest.entry((b.bidder, b.auction)).or_insert(b.date_time);
        overtaken += usize::from(b.date_time < *t);
        *t = (*t).max(b.date_time);
    }
    assert!(overtaken >= 1000, "the shuffle put only {overtaken} bids after a later one of their pair");
    let copy = ExampleCopy::new("nexmark");
    copy.edit("q18.toml", "events = 1000000", &format!("events = {EVENTS}\nout_of_order_group_size = {GROUP}"));
    copy.run("q18.toml", &["--parallelism", "3"]);
    let lines: Vec<String> = copy.take_output("q18.txt").lines().map(str::to_string).collect();
    let got = last_per_pair(&lines, "q18 out of order");
    assert!(got == expected, "q18 over an out-of-order stream: last line per pair differs from the reference");
}

/// Ties at a pair's latest time, a bid older than the pair's latest coming
/// last, identical bids, and one bidder on two auctions and two bidders on
/// one: the expected lines are written out by hand from the documented rule
/// (the latest time; at equal times the higher price; at equal prices the
/// greater line), and the reference must agree.
#[test]
fn q18_ties_at_the_latest_time_go_to_the_higher_price_then_the_greater_line() {
    let line = |a: usize, b: usize, p: usize, t: u64, x: &str| {
        format!("{a},{b},{p},Google,https://www.nexmark.com/a/b/c/item.htm?query=1,{t},{x}")
    };
    let in_order = vec![
        // Pair (10, 100): three bids at the latest time 2000.
        bid(100, 10, 5, 1000, "a"),
        bid(100, 10, 3, 2000, "a"),
        bid(100, 10, 7, 2000, "a"),
        bid(100, 10, 7, 2000, "b"),
        bid(100, 10, 6, 2000, "z"),
        // Older, and the highest price: not the last bid.
        bid(100, 10, 900, 1500, "a"),
        // Pair (11, 100): identical bids.
        bid(100, 11, 40, 3000, "a"),
        bid(100, 11, 40, 3000, "a"),
        // Pair (10, 101): the same bidder on another auction, an older bid last.
        bid(101, 10, 8, 2500, "a"),
        bid(101, 10, 9, 2400, "a"),
        // Pair (12, 102): one bid.
        bid(102, 12, 1, 1000, ""),
    ];
    let expected = sorted([
        line(100, 10, 7, 2000, "b"),
        line(100, 11, 40, 3000, "a"),
        line(101, 10, 8, 2500, "a"),
        line(102, 12, 1, 1000, ""),
    ]);
    assert_eq!(sorted(q18::q18(&in_order)), expected, "the reference follows the tie rule");
    let mut reversed = in_order.clone();
    reversed.reverse();
    for (order, events) in [("in order", &in_order), ("reversed", &reversed)] {
        for p in [1, 3] {
            let lines = run_hand_made("q18", events, p);
            assert_eq!(
                last_per_pair(&lines, &format!("{order}, parallelism {p}")),
                expected,
                "{order}, parallelism {p}"
            );
        }
    }
}
