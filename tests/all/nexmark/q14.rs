//! q14, calculation: the bids between one and fifty million euros with
//! their time of day, at parallelism 1 and 3 over a day of event time (in
//! order, and shuffled), and on hand-made bids at each hour boundary of
//! `bidTimeType` and at the prices next to the bounds.

use super::ExampleCopy;
use nexmark::config::NexmarkConfig;
use nexmark::event::{Bid, Event};
use weir_tests::nexmark::{bids, q14, sorted};

/// 200 000 events at 2 events per second of event time: 27.8 hours, so
/// every hour of the day has bids.
const EVENTS: u64 = 200_000;
const RATE: usize = 2;

/// The job's output over hand-made `bids`, read by a file source (one
/// line of the source's JSON per bid, which `Event::decode` reads), at
/// `parallelism`: the query's operator, the payloads it decodes.
pub(super) fn run_bids(query: &str, bids: &[Bid], parallelism: u32) -> Vec<String> {
    let copy = ExampleCopy::new("nexmark");
    let lines: String = bids
        .iter()
        .map(|b| {
            let json = serde_json::json!({ "bid": {
                "auction": b.auction, "bidder": b.bidder, "price": b.price, "channel": b.channel,
                "url": b.url, "date_time": b.date_time, "extra": b.extra,
            }});
            format!("{json}\n")
        })
        .collect();
    copy.write("edges.jsonl", &lines);
    copy.write(
        "edges.toml",
        &format!(
            r#"name = "{query}-edges"
[pipeline]
batch_size = 1
[[sources]]
id = "bids"
kind = "file"
path = "edges.jsonl"
[[operators]]
uid = "{query}"
module = "../../target/wasm/nexmark_{query}.wasm"
input = "bids"
[[sinks]]
id = "out"
kind = "file"
input = "{query}"
path = "output/{query}.txt"
"#
        ),
    );
    copy.run("edges.toml", &["--parallelism", &parallelism.to_string()]);
    sorted(copy.take_output(&format!("{query}.txt")).lines().map(str::to_string))
}

/// A bid with the fields an edge case sets; the others fixed.
pub(super) fn bid(price: usize, date_time: u64, channel: &str, url: &str, extra: &str) -> Bid {
    Bid {
        auction: 1000 + price % 7,
        bidder: 2000 + date_time as usize % 11,
        price,
        channel: channel.into(),
        url: url.into(),
        date_time,
        extra: extra.into(),
    }
}

#[test]
fn q14_keeps_the_bids_in_the_price_range_with_their_time_of_day() {
    let config = |group| NexmarkConfig {
        first_rate: RATE,
        next_rate: RATE,
        out_of_order_group_size: group,
        ..weir_tests::nexmark::config()
    };
    for (p, group) in [(1, 1), (3, 1), (3, 10)] {
        let events: Vec<Event> = nexmark::EventGenerator::new(config(group)).take(EVENTS as usize).collect();
        let expected = sorted(q14::q14(&events));
        // Meaningful: about 28% of bids are in the range, some are above
        // it, and each time of day has bids.
        let thousandths = |b: &&Bid| b.price as u128 * 908;
        let above = bids(&events).filter(|b| thousandths(b) >= 50_000_000_000).count();
        assert!(expected.len() >= 20_000, "too few q14 lines to mean something: {}", expected.len());
        assert!(above >= 1000, "too few bids above the range: {above}");
        for kind in [",dayTime,", ",nightTime,", ",otherTime,"] {
            let n = expected.iter().filter(|l| l.contains(kind)).count();
            assert!(n >= 1000, "too few {kind} bids: {n}");
        }
        let copy = ExampleCopy::new("nexmark");
        copy.edit(
            "q14.toml",
            "events = 1000000",
            &format!("events = {EVENTS}\nfirst_event_rate = {RATE}\nout_of_order_group_size = {group}"),
        );
        copy.run("q14.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q14.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q14 at parallelism {p}, groups of {group}: line count");
        assert!(got == expected, "q14 at parallelism {p}, groups of {group}: output differs from the reference");
    }
}

/// The hour boundaries of `bidTimeType` (UTC: 6 night, 7 other, 8-18 day,
/// 19 other, 20 night), and the prices on either side of the bounds (no
/// integer price is exactly on one: 1000000 / 0.908 = 1101321.59 and
/// 50000000 / 0.908 = 55066079.30).
#[test]
fn q14_at_the_hour_and_price_boundaries() {
    const DAY: u64 = 1_735_689_600_000; // 2025-01-01T00:00:00Z
    const H: u64 = 3_600_000;
    const IN: usize = 1_101_322; // 1000000.376
    let at = |ms: u64, extra: &str| bid(IN, ms, "Google", "https://x/a/b/c", extra);
    let bids = [
        (at(DAY + 7 * H - 1, "06:59:59.999"), Some("nightTime")),
        (at(DAY + 7 * H, "07:00"), Some("otherTime")),
        (at(DAY + 8 * H - 1, "07:59:59.999"), Some("otherTime")),
        (at(DAY + 8 * H, "08:00"), Some("dayTime")),
        (at(DAY + 19 * H - 1, "18:59:59.999 c"), Some("dayTime")),
        (at(DAY + 19 * H, "19:00 cc"), Some("otherTime")),
        (at(DAY + 20 * H - 1, "19:59:59.999 ccc"), Some("otherTime")),
        (at(DAY + 20 * H, "20:00 Cc\u{e7}c"), Some("nightTime")),
        (at(DAY + 24 * H - 1, "23:59:59.999"), Some("nightTime")),
        (at(DAY + 24 * H, "the next day's 00:00"), Some("nightTime")),
        (at(0, "the epoch"), Some("nightTime")),
        (bid(1_101_321, DAY + 12 * H, "Google", "u", "999999.468: out"), None),
        (bid(55_066_079, DAY + 12 * H, "Google", "u", "49999999.732: in"), Some("dayTime")),
        (bid(55_066_080, DAY + 12 * H, "Google", "u", "50000000.640: out"), None),
        (bid(0, DAY, "Google", "u", "zero: out"), None),
        (bid(1 << 60, DAY, "Google", "u", "huge: out"), None),
    ];
    let events: Vec<Event> = bids.iter().map(|(b, _)| Event::Bid(b.clone())).collect();
    let expected = sorted(q14::q14(&events));
    // The reference itself, against the rule as written above.
    for (b, kind) in &bids {
        let line = expected.iter().find(|l| l.contains(&format!(",{},", b.extra)));
        assert_eq!(line.map(|l| l.split(',').nth(3).unwrap()), *kind, "the reference on {:?}", b.extra);
    }
    let day_end = format!(",1000000.376,dayTime,{},18:59:59.999 c,1", DAY + 19 * H - 1);
    assert!(expected.iter().any(|l| l.ends_with(&day_end)), "the reference's line format");
    assert!(expected.iter().any(|l| l.ends_with(",20:00 Cc\u{e7}c,2")), "count_char counts bytes equal to 'c'");
    let bids: Vec<Bid> = bids.into_iter().map(|(b, _)| b).collect();
    for p in [1, 3] {
        assert_eq!(run_bids("q14", &bids, p), expected, "hand-made bids, parallelism {p}");
    }
}
