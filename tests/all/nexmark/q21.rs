//! q21, add channel id: the id from the four known channels or the URL's
//! `channel_id`, at parallelism 1 and 3 (and over a shuffled stream), and
//! on hand-made channels and URLs where `lower` and `REGEXP_EXTRACT`'s
//! edges are.

use super::q14::{bid, run_bids};
use super::{EVENTS, ExampleCopy};
use nexmark::config::NexmarkConfig;
use nexmark::event::Event;
use weir_tests::nexmark::{bids, q21, sorted};

#[test]
fn q21_adds_the_channel_id_from_the_channel_or_the_url() {
    for (p, group) in [(1, 1), (3, 1), (3, 10)] {
        let config = NexmarkConfig { out_of_order_group_size: group, ..weir_tests::nexmark::config() };
        let events: Vec<Event> = nexmark::EventGenerator::new(config).take(EVENTS as usize).collect();
        let expected = sorted(q21::q21(&events));
        // Meaningful: half the bids are on the known channels, most others
        // have a channel_id in their URL, and some have none and drop out.
        let all = bids(&events).count();
        let from_url = expected.iter().filter(|l| l.contains(",channel-")).count();
        assert!(from_url >= 30_000, "too few ids from URLs: {from_url}");
        assert!(expected.len() >= 100_000 && all - expected.len() >= 1000, "kept {} of {all} bids", expected.len());
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q21.toml", "events = 1000000", &format!("events = {EVENTS}\nout_of_order_group_size = {group}"));
        copy.run("q21.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q21.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q21 at parallelism {p}, groups of {group}: line count");
        assert!(got == expected, "q21 at parallelism {p}, groups of {group}: output differs from the reference");
    }
}

/// `lower(channel)` in Unicode (a Kelvin sign is a `k`), and
/// `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`: a match at the
/// start or after `&` only (not after `?`), the first one, up to the next
/// `&`, an empty value kept as an empty id, no match dropped. The expected
/// id of each is written by hand from those rules, checked against the
/// reference, and the job must equal the reference.
#[test]
fn q21_at_the_edges_of_lower_and_regexp_extract() {
    let cases: [(&str, &str, Option<&str>); 22] = [
        ("Apple", "https://x/a?channel_id=9", Some("0")),
        ("GOOGLE", "", Some("1")),
        ("FACEBOO\u{212a}", "https://x/a", Some("2")),
        ("bAiDu", "https://x/a&channel_id=9", Some("3")),
        ("apple ", "https://x/a", None),
        ("apple ", "https://x/a&channel_id=7", Some("7")),
        ("c", "channel_id=5", Some("5")),
        ("c", "channel_id=5&channel_id=6", Some("5")),
        ("c", "xchannel_id=5&channel_id=6", Some("6")),
        ("c", "https://x/a?channel_id=5", None),
        ("c", "https://x/a?query=1&channel_id=", Some("")),
        ("c", "https://x/a?query=1&channel_id=&x=2", Some("")),
        ("c", "https://x/a?query=1&channel_id=7&channel_id=8", Some("7")),
        ("c", "https://x/a?query=1&channel_id=a=b?c", Some("a=b?c")),
        ("c", "https://x/a?query=1&&channel_id=3", Some("3")),
        ("c", "&channel_id=4", Some("4")),
        ("c", "https://x/a?query=1&xchannel_id=5", None),
        ("c", "https://x/a?query=1&channel_id5", None),
        ("c", "https://x/a?query=1&Channel_ID=5", None),
        ("c", "https://x/a?query=1&channel_id", None),
        ("c", "", None),
        ("", "https://x/a?channel_id=1&channel_id=\u{e9}t\u{e9}", Some("\u{e9}t\u{e9}")),
    ];
    let bids: Vec<_> =
        cases.iter().enumerate().map(|(i, (c, u, _))| bid(100 + i, 1_000 + i as u64, c, u, "")).collect();
    let events: Vec<Event> = bids.iter().cloned().map(Event::Bid).collect();
    let expected = sorted(q21::q21(&events));
    for (b, (_, url, id)) in bids.iter().zip(&cases) {
        let line = expected.iter().find(|l| l.starts_with(&format!("{},{},{},", b.auction, b.bidder, b.price)));
        assert_eq!(line.map(|l| l.rsplit(',').next().unwrap()), *id, "the reference on {:?} {url:?}", b.channel);
    }
    for p in [1, 3] {
        assert_eq!(run_bids("q21", &bids, p), expected, "hand-made bids, parallelism {p}");
    }
}
