//! q7, highest bid: the bids at each tumbling window's highest price, at
//! parallelism 1 and 3, with the query's 10 s windows, with short ones, and
//! on hand-made bids at the edge of the SQL's `BETWEEN`.

use super::run_query;
use crate::example_copy::ExampleCopy;
use nexmark::event::{Bid, Event};
use weir_tests::nexmark::{events, q7, sorted};
use weir_tests::{repo_root, run_example};

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

#[test]
fn q7_compares_a_bid_at_the_previous_windows_last_millisecond_with_the_window_maximum() {
    // Hand-made bids (as the source's JSON) where the edge of the SQL's
    // BETWEEN matters, which generated prices almost never reach: a bid at
    // s - 1 whose price equals window s's maximum is written for window s
    // (and compared with its own window's maximum too).
    let s0 = 1_735_689_600_000u64;
    let (s1, s2) = (s0 + 10_000, s0 + 20_000);
    let bid = |auction: usize, price: usize, date_time: u64, extra: &str| {
        Event::Bid(Bid {
            auction,
            bidder: auction + 100,
            price,
            channel: "Google".into(),
            url: "https://www.nexmark.com/a".into(),
            date_time,
            extra: extra.into(),
        })
    };
    let bids = [
        bid(1, 700, s0 + 5, "max of s0"),
        bid(2, 500, s1 - 1, "last ms of s0, equals the max of s1"),
        bid(3, 500, s1 + 3, "max of s1"),
        // After a higher bid of s1: the local stage need not send it on.
        bid(9, 450, s1 - 1, "last ms of s0, below the max of s1"),
        bid(4, 500, s1 + 7_000, "ties the max of s1"),
        bid(5, 400, s2 - 1, "last ms of s1, equals the max of s2"),
        bid(6, 400, s2 + 1, "max of s2"),
        bid(7, 300, s2 + 9_999, "last ms of s2; s3 has no bids"),
    ];
    let expected = sorted(q7::q7(&bids));
    let line = |b: &Event| match b {
        Event::Bid(b) => format!("{},{},{},{},{}", b.auction, b.price, b.bidder, b.date_time, b.extra),
        _ => unreachable!(),
    };
    let want = sorted([0, 1, 2, 4, 5, 6].map(|i| line(&bids[i])));
    assert_eq!(expected, want, "the reference");

    let dir = tempfile::tempdir().unwrap();
    let json: Vec<String> = bids
        .iter()
        .map(|b| match b {
            Event::Bid(b) => format!(
                r#"{{"bid":{{"auction":{},"bidder":{},"price":{},"channel":"{}","url":"{}","date_time":{},"extra":"{}"}}}}"#,
                b.auction, b.bidder, b.price, b.channel, b.url, b.date_time, b.extra
            ),
            _ => unreachable!(),
        })
        .collect();
    std::fs::write(dir.path().join("bids.jsonl"), json.join("\n") + "\n").unwrap();
    let module = repo_root().join("target/wasm/nexmark_q7.wasm");
    let job = format!(
        r#"name = "q7-edges"

[[sources]]
id = "events"
kind = "file"
path = "bids.jsonl"
format = "lines"

[[operators]]
uid = "local"
module = "{module}"
input = "events"
params = {{ stage = "local" }}

[[operators]]
uid = "max"
module = "{module}"
input = "local"
partition = "key"
params = {{ stage = "max" }}

[[sinks]]
id = "out"
kind = "file"
input = "max"
path = "output/q7.txt"
"#,
        module = module.display()
    );
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    for p in [1, 3] {
        let out = run_example(&dir.path().join("job.toml"), &["--parallelism", &p.to_string()]);
        assert!(out.status.success(), "{}", weir_tests::stderr(&out));
        let text = std::fs::read_to_string(dir.path().join("output/q7.txt")).unwrap();
        let got = sorted(text.lines().map(str::to_string));
        assert_eq!(got, expected, "q7 on hand-made bids at parallelism {p}");
    }
}
