//! q13, bounded side input join: each bid with the side table's values for
//! its auction id modulo 10000, at parallelism 1 and 3, against a reference
//! that reads the same file; and with a hand-made table, read slowly and
//! in an order that gives the first bids' keys last, so a bid joined before
//! the table is complete would miss its row.

use super::{EVENTS, ExampleCopy};
use nexmark::config::NexmarkConfig;
use nexmark::event::Event;
use weir_tests::nexmark::{bids, events, q13, sorted};
use weir_tests::repo_root;

#[test]
fn q13_joins_every_bid_with_the_committed_side_input() {
    let text = std::fs::read_to_string(repo_root().join("guest-examples/nexmark/side_input.csv")).unwrap();
    let side = q13::side_table(&text);
    assert!((0..10_000).all(|k| side.get(&k).is_some_and(|v| v.len() == 1)), "one row per key 0-9999");
    assert_eq!(side.len(), 10_000);
    let events = events(EVENTS as usize);
    let expected = sorted(q13::q13(&events, &side));
    assert_eq!(expected.len(), bids(&events).count(), "every bid has its row");
    for p in [1, 3] {
        let copy = ExampleCopy::new("nexmark");
        copy.edit("q13.toml", "events = 1000000", &format!("events = {EVENTS}"));
        copy.run("q13.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q13.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q13 at parallelism {p}: line count");
        assert!(got == expected, "q13 at parallelism {p}: output differs from the reference");
    }
}

/// A hand-made table: only keys that are multiples of 3 (bids on the other
/// keys are dropped), two rows for key 0 (a bid joins both), an empty value,
/// keys no `mod 10000` reaches (-1, 10000, 10002), empty lines and a CRLF
/// line end. Its rows come in descending key order at 2000 rows per second
/// (about 1.7 s), so the keys of the first bids (auctions from 1000 up)
/// come near the end: a bid joined against the table before it is complete
/// would lose its row. At parallelism 1, and at 3 over a shuffled stream.
#[test]
fn q13_holds_bids_until_the_side_input_is_complete() {
    let mut text = String::from("-1,negative\n10000,too big\n\n10002,too big\n");
    for k in (1..10_000).rev().filter(|k| k % 3 == 0) {
        let value = match k {
            3 => String::new(),
            9999 => "the last key".into(),
            _ => format!("v{k}"),
        };
        text.push_str(&format!("{k},{value}{}", if k == 999 { "\r\n" } else { "\n" }));
    }
    text.push_str("0,zero\n\n0,zero again\n");
    let side = q13::side_table(&text);
    assert_eq!(side[&0], ["zero", "zero again"]);
    assert_eq!(side[&3], [""]);
    assert_eq!(side[&999], ["v999"]);
    for (p, group) in [(1, 1), (3, 10)] {
        let config = NexmarkConfig { out_of_order_group_size: group, ..weir_tests::nexmark::config() };
        let events: Vec<Event> = nexmark::EventGenerator::new(config).take(EVENTS as usize).collect();
        let expected = sorted(q13::q13(&events, &side));
        // Meaningful: some bids dropped, some joined twice (auction 10000),
        // some with the empty value, and auction ids past 10000 wrap.
        let all = bids(&events).count();
        assert!(expected.len() >= 20_000 && expected.len() < all, "{} lines for {all} bids", expected.len());
        assert!(expected.iter().filter(|l| l.ends_with(",zero again")).count() >= 100, "auction 10000's bids");
        assert!(expected.iter().any(|l| l.ends_with(',')), "an empty value");
        let wrapped = expected.iter().filter(|l| l.split(',').next().unwrap().parse::<u64>().unwrap() > 10_000).count();
        assert!(wrapped >= 1000, "only {wrapped} lines of auctions past 10000");
        let copy = ExampleCopy::new("nexmark");
        copy.write("side_input.csv", &text);
        copy.edit("q13.toml", "events = 1000000", &format!("events = {EVENTS}\nout_of_order_group_size = {group}"));
        copy.edit("q13.toml", "path = \"side_input.csv\"", "path = \"side_input.csv\"\nrecords_per_second = 2000");
        copy.run("q13.toml", &["--parallelism", &p.to_string()]);
        let got = sorted(copy.take_output("q13.txt").lines().map(str::to_string));
        assert_eq!(got.len(), expected.len(), "q13 (slow side input) at parallelism {p}: line count");
        assert!(got == expected, "q13 (slow side input) at parallelism {p}: output differs from the reference");
    }
}
