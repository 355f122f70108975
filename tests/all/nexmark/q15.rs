//! q15, bidding statistics per day, over a slow stream (one event per
//! second of event time, so 250 000 events cross three midnights) at
//! parallelism 1 and 3, in order and shuffled across midnights; and over
//! hand-made bids at the day's and the price ranks' edges. The helpers
//! here serve q16 and q17 too.

use super::ExampleCopy;
use nexmark::config::NexmarkConfig;
use nexmark::event::Event;
use weir_tests::nexmark::{config, q15, sorted};

/// 2024-12-31T11:59:59.999Z: at one event per second, event 43 200 is at
/// 23:59:59.999 (the crate's times are exact there) and the next a second
/// later, on the next day.
const BASE: u64 = 1_735_646_399_999;

/// 2.9 days of events at one per second from noon: four days, three midnights.
const EVENTS: usize = 250_000;

/// Events are shuffled in groups of this many (500 s of event time; the
/// source's watermark lags by as much), so groups around each midnight mix
/// the two days.
const SHUFFLE: usize = 500;

/// The first `EVENTS` events of a `nexmark` source with
/// `first_event_rate = 1`, `base_time = BASE` and
/// `out_of_order_group_size = group`.
fn slow_events(group: usize) -> Vec<Event> {
    let c = NexmarkConfig { base_time: BASE, first_rate: 1, next_rate: 1, out_of_order_group_size: group, ..config() };
    nexmark::EventGenerator::new(c).take(EVENTS).collect()
}

/// `guest-examples/nexmark/<query>.toml` over those events at
/// `parallelism`: its lines, sorted.
fn run_slow(query: &str, parallelism: u32, group: usize) -> Vec<String> {
    let copy = ExampleCopy::new("nexmark");
    let job = format!("{query}.toml");
    copy.edit(
        &job,
        "events = 1000000",
        &format!("events = {EVENTS}\nfirst_event_rate = 1\nbase_time = {BASE}\nout_of_order_group_size = {group}"),
    );
    copy.run(&job, &["--parallelism", &parallelism.to_string()]);
    sorted(copy.take_output(&format!("{query}.txt")).lines().map(str::to_string))
}

/// `query`'s job against `reference` over the slow stream: in order at
/// parallelism 1 and 3, and shuffled at 3. The reference must have at least
/// `at_least` lines, over four days.
pub(super) fn check_slow(query: &str, reference: fn(&[Event]) -> Vec<String>, at_least: usize) {
    let expected = sorted(reference(&slow_events(1)));
    assert!(expected.len() >= at_least, "{query}: only {} reference lines", expected.len());
    for day in ["2024-12-31", "2025-01-01", "2025-01-02", "2025-01-03"] {
        assert!(expected.iter().any(|l| l.contains(day)), "{query}: no line for {day}");
    }
    for p in [1, 3] {
        let got = run_slow(query, p, 1);
        assert_eq!(got.len(), expected.len(), "{query} at parallelism {p}: line count");
        assert!(got == expected, "{query} at parallelism {p}: output differs from the reference");
    }
    let shuffled = sorted(reference(&slow_events(SHUFFLE)));
    let got = run_slow(query, 3, SHUFFLE);
    assert_eq!(got.len(), shuffled.len(), "{query} shuffled in groups of {SHUFFLE}: line count");
    assert!(got == shuffled, "{query} shuffled in groups of {SHUFFLE}: output differs from the reference");
}

/// Midnight of 2025-03-01 (UTC).
const MARCH: u64 = 1_740_787_200_000;
/// Midnight of 2025-01-01.
const NEW_YEAR: u64 = 1_735_689_600_000;
/// Midnight of 2024-02-29, a leap day.
const LEAP_DAY: u64 = 1_709_164_800_000;
const HOUR: u64 = 3_600_000;

/// A hand-made bid: auction, bidder, price, channel, time.
type Bid = (usize, usize, usize, &'static str, u64);

/// Bids at the edges: 23:59:59.999 and 00:00:00.000 of the same night
/// (also of a new year, and a leap day), each price bound on both sides
/// (9999 / 10000, 999999 / 1000000), one bidder and one auction in several
/// ranks, and a day's latest minute that is not its last bid. In file
/// order, which is not time order.
const EDGE_BIDS: [Bid; 13] = [
    (1, 10, 9_999, "A", MARCH - 1),
    (1, 10, 10_000, "A", MARCH - 1),
    (1, 10, 1_000_000, "A", MARCH),
    (2, 11, 999_999, "B", MARCH - 1),
    (3, 12, 9_999, "B", MARCH),
    (2, 10, 1_000_000, "A", MARCH - 24 * HOUR),
    (3, 12, 999_999, "B", MARCH + 1),
    (1, 11, 10_000, "A", MARCH + 12 * HOUR + 34 * 60_000),
    (1, 13, 2, "A", MARCH + 8 * HOUR),
    (5, 20, 500, "C", NEW_YEAR),
    (5, 20, 500, "C", NEW_YEAR - 1),
    (6, 21, 100, "C", LEAP_DAY + 12 * HOUR),
    (2, 11, 999_999, "B", MARCH - 1),
];

/// `bids` as the reference's events.
fn edge_events(bids: &[Bid]) -> Vec<Event> {
    bids.iter()
        .map(|&(auction, bidder, price, channel, date_time)| {
            Event::Bid(nexmark::event::Bid {
                auction,
                bidder,
                price,
                channel: channel.to_string(),
                url: "https://example.com/".to_string(),
                date_time,
                extra: String::new(),
            })
        })
        .collect()
}

/// `query`'s two stages over `bids`, read as Nexmark JSON lines from a file
/// (the file source's payload is the line; the records carry no event
/// time, so the days close on the final watermark), at `parallelism`.
fn run_edges(query: &str, bids: &[Bid], parallelism: u32) -> Vec<String> {
    let copy = ExampleCopy::new("nexmark");
    let lines: String = bids
        .iter()
        .map(|(a, b, p, c, t)| {
            format!(
                "{{\"bid\":{{\"auction\":{a},\"bidder\":{b},\"price\":{p},\"channel\":\"{c}\",\"url\":\"u\",\"date_time\":{t},\"extra\":\"\"}}}}\n"
            )
        })
        .collect();
    copy.write("edges.jsonl", &lines);
    copy.write(
        "edges.toml",
        &format!(
            r#"name = "{query}-edges"
[[sources]]
id = "bids"
kind = "file"
path = "edges.jsonl"
format = "jsonl"
[[operators]]
uid = "key"
module = "../../target/wasm/nexmark_{query}.wasm"
input = "bids"
params = {{ stage = "key" }}
[[operators]]
uid = "stats"
module = "../../target/wasm/nexmark_{query}.wasm"
input = "key"
partition = "key"
params = {{ stage = "stats" }}
[[sinks]]
id = "out"
kind = "file"
input = "stats"
path = "output/{query}.txt"
"#
        ),
    );
    copy.run("edges.toml", &["--parallelism", &parallelism.to_string()]);
    sorted(copy.take_output(&format!("{query}.txt")).lines().map(str::to_string))
}

/// `query` over the edge bids at parallelism 1 and 3 must write
/// `expected` (written out by hand from the SQL), which the reference must
/// also give.
pub(super) fn check_edges(query: &str, reference: fn(&[Event]) -> Vec<String>, expected: &[&str]) {
    let expected = sorted(expected.iter().map(|l| l.to_string()));
    assert_eq!(sorted(reference(&edge_events(&EDGE_BIDS))), expected, "{query}: the reference over the edge bids");
    for p in [1, 3] {
        assert_eq!(run_edges(query, &EDGE_BIDS, p), expected, "{query} over the edge bids at parallelism {p}");
    }
}

#[test]
fn q15_counts_bids_bidders_and_auctions_per_day() {
    // One line per day: four days, each of thousands of bids.
    check_slow("q15", q15::q15, 4);
}

#[test]
fn q15_days_and_price_ranks_at_their_edges() {
    check_edges(
        "q15",
        q15::q15,
        &[
            // 9999 (rank 1), 10000 and 999999 twice (rank 2), 1000000
            // (rank 3); bidders 10 (ranks 1-3) and 11 (rank 2); auctions 1
            // (ranks 1, 2) and 2 (ranks 2, 3).
            "2025-02-28,5,1,3,1,2,1,2,1,2,1,2,1",
            // 1000000 (3), 9999 (1), 999999 (2), 10000 (2), 2 (1); bidders
            // 10 (3), 12 (1, 2), 11 (2), 13 (1); auctions 1 (1-3), 3 (1, 2).
            "2025-03-01,5,2,2,1,4,2,2,1,2,2,2,1",
            "2024-12-31,1,1,0,0,1,1,0,0,1,1,0,0",
            "2025-01-01,1,1,0,0,1,1,0,0,1,1,0,0",
            "2024-02-29,1,1,0,0,1,1,0,0,1,1,0,0",
        ],
    );
}
