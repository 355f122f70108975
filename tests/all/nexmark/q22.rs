//! q22, URL directories: parts 3, 4 and 5 of every bid's URL, at
//! parallelism 1 and 3 (and over a shuffled stream), and on hand-made URLs
//! with fewer parts, empty parts and no parts, where `SPLIT_INDEX` gives
//! `NULL` (written as an empty field).

use super::q14::{bid, run_bids};
use super::{EVENTS, ExampleCopy};
use nexmark::config::NexmarkConfig;
use nexmark::event::Event;
use weir_tests::nexmark::{q22, sorted};

#[test]
fn q22_splits_every_bids_url_into_directories() {
    for (p, group) in [(1, 1), (3, 1), (3, 10)] {
        let config = NexmarkConfig { out_of_order_group_size: group, ..weir_tests::nexmark::config() };
        let events: Vec<Event> = nexmark::EventGenerator::new(config).take(EVENTS as usize).collect();
        let expected = sorted(q22::q22(&events));
        assert!(expected.len() >= 100_000, "too few q22 lines to mean something: {}", expected.len());
        // Every generated URL has three directories, none empty.
        assert!(expected.iter().all(|l| !l.contains(",,") && !l.ends_with(',')), "generated URLs have all parts");
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q22.toml", "events = 1000000", &format!("events = {EVENTS}\nout_of_order_group_size = {group}"));
        copy.run("q22.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q22.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q22 at parallelism {p}, groups of {group}: line count");
        assert!(got == expected, "q22 at parallelism {p}, groups of {group}: output differs from the reference");
    }
}

/// URLs with fewer than six parts, empty parts (`//`, a trailing `/`) and
/// none at all (an empty URL): the directories written by hand from
/// Flink's `SPLIT_INDEX` (commons-lang's split keeping every token, `NULL`
/// past the last part, written empty), checked against the reference, and
/// the job must equal the reference.
#[test]
fn q22_writes_missing_parts_empty() {
    let none = None::<&str>;
    let cases = [
        ("", [none, none, none]),
        ("https:", [none, none, none]),
        ("https://x", [none, none, none]),
        ("https://x/", [Some(""), none, none]),
        ("https://x/a", [Some("a"), none, none]),
        ("https://x/a/", [Some("a"), Some(""), none]),
        ("https://x/a/b", [Some("a"), Some("b"), none]),
        ("https://x/a/b/c", [Some("a"), Some("b"), Some("c")]),
        ("https://x/a/b/c/", [Some("a"), Some("b"), Some("c")]),
        ("https://x/a/b/c/d/e", [Some("a"), Some("b"), Some("c")]),
        ("https://x//", [Some(""), Some(""), none]),
        ("https://x///c", [Some(""), Some(""), Some("c")]),
        ("//////", [Some(""), Some(""), Some("")]),
        ("////", [Some(""), Some(""), none]),
        ("a/b/c/d/e/f", [Some("d"), Some("e"), Some("f")]),
        ("https://x/a?q=/b&channel_id=1", [Some("a?q="), Some("b&channel_id=1"), none]),
    ];
    for (url, dirs) in &cases {
        let got: Vec<Option<String>> = (3..6).map(|n| q22::split_index(url, "/", n)).collect();
        let want: Vec<Option<String>> = dirs.iter().map(|d| d.map(str::to_string)).collect();
        assert_eq!(got, want, "the reference's SPLIT_INDEX on {url:?}");
    }
    let bids: Vec<_> = cases.iter().enumerate().map(|(i, (u, _))| bid(100 + i, 1_000, "Apple", u, "")).collect();
    let events: Vec<Event> = bids.iter().cloned().map(Event::Bid).collect();
    let expected = sorted(q22::q22(&events));
    assert_eq!(expected.len(), cases.len());
    for p in [1, 3] {
        assert_eq!(run_bids("q22", &bids, p), expected, "hand-made bids, parallelism {p}");
    }
}
