//! q9, winning bids: one row per auction with a valid bid, written when it
//! expires, at parallelism 1 and 3 (where bids overtake their auctions),
//! on an out-of-order stream, and on hand-made events at the edges of the
//! SQL's `BETWEEN` and its ties. The hand-made events are also q6's.

use super::{EVENTS, ExampleCopy, run_query};
use nexmark::config::NexmarkConfig;
use nexmark::event::{Auction, Bid, Event};
use std::collections::BTreeMap;
use weir_tests::nexmark::{config, events, q9, sorted};

#[test]
fn q9_writes_the_winning_bid_of_every_auction() {
    let expected = sorted(q9::q9(&events(EVENTS as usize)));
    // 200 000 events hold 12 000 auctions; many get no bid in time.
    assert!(expected.len() >= 2000, "only {} reference rows", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q9", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q9 at parallelism {p}: row count");
        assert!(got == expected, "q9 at parallelism {p}: output differs from the reference");
    }
}

/// Events shuffled in groups of this many (100 ms of event time at the
/// default rate: auctions last 1 to 333 ms).
pub(super) const GROUP: usize = 1000;

/// The source's events with `out_of_order_group_size = GROUP`, as the
/// generator makes them; `n` is a multiple of `GROUP`, so they are the
/// in-order stream's events in another order.
pub(super) fn shuffled_events(n: usize) -> Vec<Event> {
    assert_eq!(n % GROUP, 0);
    let events: Vec<Event> =
        nexmark::EventGenerator::new(NexmarkConfig { out_of_order_group_size: GROUP, ..config() }).take(n).collect();
    // Meaningful: time goes back often, and bids that count for their
    // auction come before it.
    let auctions: std::collections::HashMap<usize, (usize, &Auction)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Event::Auction(a) => Some((a.id, (i, a))),
            _ => None,
        })
        .collect();
    let (mut max, mut back, mut early) = (0, 0, 0);
    for (i, e) in events.iter().enumerate() {
        back += usize::from(e.timestamp() < max);
        max = max.max(e.timestamp());
        if let Event::Bid(b) = e
            && let Some(&(at, a)) = auctions.get(&b.auction)
        {
            early += usize::from(i < at && a.date_time <= b.date_time && b.date_time <= a.expires);
        }
    }
    assert!(back > n / 4 && early > 100, "{back} steps back in time, {early} valid bids before their auction");
    events
}

/// A job file's nexmark source with events shuffled in groups of `GROUP`
/// (the watermark lag follows from it).
pub(super) fn shuffle(copy: &ExampleCopy, job: &str) {
    copy.edit(
        job,
        "kinds = [\"auction\", \"bid\"]",
        &format!("kinds = [\"auction\", \"bid\"]\nout_of_order_group_size = {GROUP}"),
    );
}

#[test]
fn q9_on_an_out_of_order_stream_matches_the_reference() {
    let expected = sorted(q9::q9(&shuffled_events(EVENTS as usize)));
    assert!(expected.len() >= 2000, "only {} reference rows", expected.len());
    // The default params, then params that keep nothing past expiry and
    // let pending bids go at the first chance: neither changes the result.
    for (p, params) in [(1, ""), (3, "\nparams = { keep_ms = 0, wait_ms = 0 }")] {
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q9.toml", "events = 1000000", &format!("events = {EVENTS}"));
        shuffle(&copy, "q9.toml");
        copy.edit("q9.toml", "partition = \"key\"", &format!("partition = \"key\"{params}"));
        copy.run("q9.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q9.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q9 out of order at parallelism {p} {params}: row count");
        assert!(got == expected, "q9 out of order at parallelism {p} {params}: output differs from the reference");
    }
}

/// Event time of the hand-made events: offsets are from here (ms).
pub(super) const T: u64 = 1_800_000_000_000;

/// How far the hand-made events go back in time, at most (the file
/// source's `max_out_of_orderness`).
const LAG_MS: u64 = 100;

fn at(offset: i64) -> u64 {
    T.checked_add_signed(offset).unwrap()
}

fn auction(id: usize, seller: usize, start: i64, expires: i64) -> Event {
    Event::Auction(Auction {
        id,
        item_name: format!("item{id}"),
        description: format!("item {id} of seller {seller}"),
        initial_bid: 10,
        reserve: 20 + id,
        date_time: at(start),
        expires: at(expires),
        seller,
        category: 10 + id % 5,
        extra: format!("auction {id}"),
    })
}

fn bid(auction: usize, bidder: usize, price: usize, t: i64, extra: &str) -> Event {
    Event::Bid(Bid {
        auction,
        bidder,
        price,
        channel: "Google".into(),
        url: "https://www.nexmark.com/b".into(),
        date_time: at(t),
        extra: extra.into(),
    })
}

/// Seller 300's auctions 20 to 32: when each expires (offset from `T`),
/// so that the closing order differs from the order of their ids and
/// bids, with ties in `expires`.
fn expires_300(id: usize) -> i64 {
    match id {
        20 | 21 => 9_000,
        22 | 23 => 8_000,
        24 => 7_000,
        25..=30 => 10_000 + (32 - id as i64),
        _ => 30_000,
    }
}

/// Hand-made auctions and bids, in the order of the file (a watermark
/// follows each, `LAG_MS` behind the largest time so far):
///
/// - auction 1: a bid 1 ms before its start (no), one at its start (wins),
///   a higher one 1 ms after `expires` (no);
/// - auction 2: a bid at exactly `expires` wins, a higher one 1 ms later
///   does not;
/// - auction 3: three bids at the highest price at different times: the
///   earliest wins, though it comes after a later one;
/// - auction 4: bids equal in price and time: the lowest bidder wins, and
///   of its two bids the one whose `extra` sorts first;
/// - auctions 5, 7 and 9: bids before their auction arrives (5: one valid,
///   one before its start; 7: one dropped by the pending bids' timer, the
///   other kept until the auction comes; 9: only one before its start and
///   one after `expires`, so no row);
/// - auction 6: a bid, and the auction never comes; auction 8: no bids;
/// - auction 10: shorter than the first stage's `keep_ms`, with a bid after
///   it expired;
/// - seller 300's auctions 20 to 32, closing in another order than they
///   came (and 31, 32 only at the end of input), for q6's window of 11;
/// - a last bid on no auction that moves the watermark past most expiries.
pub(super) fn edge_events() -> Vec<Event> {
    let mut e = vec![
        auction(1, 100, 0, 1000),
        auction(2, 100, 0, 1000),
        bid(1, 11, 900, -1, "before the start"),
        bid(1, 12, 500, 0, "at the start"),
        bid(2, 21, 600, 5, ""),
        auction(3, 100, 10, 1000),
        auction(4, 200, 10, 1000),
        auction(8, 100, 20, 1500),
        bid(9, 91, 999, 29, "before its auction and its start"),
        auction(9, 100, 30, 1200),
        bid(4, 45, 500, 100, "b"),
        bid(4, 44, 500, 100, "z"),
        bid(4, 44, 500, 100, "a"),
        bid(4, 46, 499, 100, "a"),
    ];
    for id in 20..=32 {
        let start = 100 + (id as i64 - 20) * 10;
        e.push(auction(id, 300, start, expires_300(id)));
        e.push(bid(id, 1000 + id, 100 * (id - 19), start + 1, ""));
    }
    e.extend([
        bid(3, 31, 500, 300, "later"),
        bid(3, 32, 500, 250, "earlier, after in the file"),
        bid(3, 34, 400, 260, "lower"),
        bid(3, 33, 500, 400, "latest"),
        bid(1, 13, 400, 500, "lower"),
        auction(10, 200, 600, 700),
        bid(10, 101, 50, 650, ""),
        // Its timer at 700 fires after this one; the next comes while the
        // expired auction's marker is there.
        bid(10, 103, 70, 820, "after expires"),
        bid(10, 102, 60, 760, "after expires, while closed"),
        bid(2, 22, 650, 999, ""),
        bid(2, 23, 700, 1000, "at expires"),
        bid(2, 24, 800, 1001, "after expires"),
        bid(1, 14, 950, 1001, "after expires"),
        bid(9, 92, 999, 1201, "after expires"),
        bid(6, 61, 100, 1500, "its auction never comes"),
        bid(5, 52, 350, 1990, "before its auction and its start"),
        bid(5, 51, 300, 2050, "before its auction"),
        auction(5, 100, 2000, 3000),
        bid(5, 53, 200, 2500, ""),
        bid(7, 71, 900, 3000, "before its auction and its start"),
        // The watermark passes 3050: the timer of auction 7's pending bids
        // drops bid 71 and keeps this one.
        bid(7, 72, 600, 3200, "before its auction"),
        auction(7, 100, 3150, 4000),
        bid(7, 73, 100, 3500, ""),
        bid(99, 991, 1, 20_000, "on no auction: moves the watermark"),
    ]);
    // No record is late: each is after the watermark before it.
    let mut max = 0;
    for ev in &e {
        assert!(ev.timestamp() + LAG_MS >= max, "{ev:?} would be late");
        max = max.max(ev.timestamp());
    }
    e
}

/// Runs `guest-examples/nexmark/<query>.toml` at `parallelism` with its
/// source replaced by a `jsonl` file of `events` (each line the source's
/// JSON of the event, with its key as `k` and its time as `t` beside it),
/// a watermark after every record, and `edits` to the job file; returns the
/// lines written.
pub(super) fn run_edges(query: &str, events: &[Event], parallelism: u32, edits: &[(&str, &str)]) -> Vec<String> {
    let lines: String = events
        .iter()
        .map(|e| {
            let line = match e {
                Event::Auction(a) => serde_json::json!({"k": a.id, "t": a.date_time, "auction": {
                    "id": a.id, "item_name": a.item_name, "description": a.description,
                    "initial_bid": a.initial_bid, "reserve": a.reserve, "date_time": a.date_time,
                    "expires": a.expires, "seller": a.seller, "category": a.category, "extra": a.extra}}),
                Event::Bid(b) => serde_json::json!({"k": b.auction, "t": b.date_time, "bid": {
                    "auction": b.auction, "bidder": b.bidder, "price": b.price, "channel": b.channel,
                    "url": b.url, "date_time": b.date_time, "extra": b.extra}}),
                Event::Person(_) => unreachable!("no people here"),
            };
            line.to_string() + "\n"
        })
        .collect();
    let copy = ExampleCopy::new("nexmark");
    copy.write("edges.jsonl", &lines);
    let job = format!("{query}.toml");
    copy.edit(
        &job,
        "kind = \"nexmark\"\nevents = 1000000\nkinds = [\"auction\", \"bid\"]",
        &format!(
            "kind = \"file\"\npath = \"edges.jsonl\"\nformat = \"jsonl\"\nkey_field = \"k\"\ntimestamp_field = \"t\"\nmax_out_of_orderness = \"{LAG_MS}ms\""
        ),
    );
    let name = format!("name = \"nexmark-{query}\"");
    copy.edit(&job, &name, &format!("{name}\n\n[pipeline]\nbatch_size = 1"));
    for (from, to) in edits {
        copy.edit(&job, from, to);
    }
    copy.run(&job, &["--parallelism", &parallelism.to_string()]);
    sorted(copy.take_output(&format!("{query}.txt")).lines().map(str::to_string))
}

/// The hand-made events' winners as written out by hand from the rules in
/// `edge_events`: auction id to `(bidder, price, bid time offset, extra)`.
fn edge_winners() -> BTreeMap<usize, (usize, usize, i64, String)> {
    let mut w: BTreeMap<usize, (usize, usize, i64, String)> = [
        (1, (12, 500, 0, "at the start")),
        (2, (23, 700, 1000, "at expires")),
        (3, (32, 500, 250, "earlier, after in the file")),
        (4, (44, 500, 100, "a")),
        (5, (51, 300, 2050, "before its auction")),
        (7, (72, 600, 3200, "before its auction")),
        (10, (101, 50, 650, "")),
    ]
    .into_iter()
    .map(|(id, (bidder, price, t, extra))| (id, (bidder, price, t, extra.to_string())))
    .collect();
    for id in 20..=32 {
        w.insert(id, (1000 + id, 100 * (id - 19), 100 + (id as i64 - 20) * 10 + 1, String::new()));
    }
    w
}

#[test]
fn q9_on_hand_made_events_keeps_the_betweens_ends_and_breaks_ties() {
    let events = edge_events();
    let expected = sorted(q9::q9(&events));
    // The reference agrees with the rules worked out by hand.
    let mut winners = BTreeMap::new();
    for line in &expected {
        // The bid's `extra` is last and may hold commas.
        let f: Vec<&str> = line.splitn(15, ',').collect();
        assert_eq!(f.len(), 15, "{line}");
        assert_eq!(f[0], f[10], "{line}");
        let t = f[13].parse::<u64>().unwrap() as i64 - T as i64;
        winners.insert(f[0].parse().unwrap(), (f[11].parse().unwrap(), f[12].parse().unwrap(), t, f[14].to_string()));
    }
    assert_eq!(winners, edge_winners(), "the reference's winners");
    for (p, edits) in [
        (1, vec![]),
        (3, vec![]),
        // Keeping expired auctions longer and dropping pending bids sooner
        // changes nothing.
        (3, vec![("partition = \"key\"", "partition = \"key\"\nparams = { keep_ms = 1000, wait_ms = 0 }")]),
    ] {
        let got = run_edges("q9", &events, p, &edits);
        assert_eq!(got, expected, "q9 on hand-made events at parallelism {p} with {edits:?}");
    }
}
