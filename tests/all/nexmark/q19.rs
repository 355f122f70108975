//! q19, an updating Top-N: when a bid enters an auction's top 10 the job
//! writes every row whose rank changed, with its new rank, so its LAST line
//! per (auction, rank_number) must equal the reference's top 10, at
//! parallelism 1 and 3, over an out-of-order stream, and over hand-made
//! bids at the edges (an 11th bid that enters and ones that do not, ties in
//! price, identical bids), fed in both orders.

use super::q18::{bid, run_hand_made, shuffled_events};
use super::{EVENTS, ExampleCopy, run_query};
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use weir_tests::nexmark::{bids, events, q19, sorted};

/// The last line per (auction, rank_number) of q19's output, sorted. On the
/// way it checks that each slot's lines reach the sink in the order
/// written: a rank's row can only be replaced by one that ranks at least
/// as high (a higher price, or the same price and an earlier time, or the
/// same both and a line not greater).
fn last_per_rank(lines: &[String], what: &str) -> Vec<String> {
    type Order<'a> = (Reverse<u64>, u64, &'a str);
    let mut last: BTreeMap<(u64, u64), (Order<'_>, &String)> = BTreeMap::new();
    for line in lines {
        let (row, rank) = line.rsplit_once(',').unwrap_or_else(|| panic!("{what}: line {line:?}"));
        let f: Vec<&str> = row.splitn(7, ',').collect();
        assert_eq!(f.len(), 7, "{what}: line {line:?}");
        let num = |s: &str| -> u64 { s.parse().unwrap_or_else(|_| panic!("{what}: {s:?} in {line:?}")) };
        let rank = num(rank);
        assert!((1..=10).contains(&rank), "{what}: rank {rank} in {line:?}");
        let key = (num(f[0]), rank);
        let order = (Reverse(num(f[2])), num(f[5]), row);
        if let Some((prev, prev_line)) = last.get(&key) {
            assert!(order <= *prev, "{what}: {line:?} came after {prev_line:?}, which ranks higher");
        }
        last.insert(key, (order, line));
    }
    sorted(last.into_values().map(|(_, l)| l.clone()))
}

#[test]
fn q19_last_line_per_rank_matches_the_reference() {
    let events = events(EVENTS as usize);
    let expected = sorted(q19::q19(&events));
    assert!(expected.len() >= 20_000, "too few q19 rows to mean something: {}", expected.len());
    // Auctions with more than 10 bids, where bids are pushed out.
    let mut per_auction: HashMap<usize, usize> = HashMap::new();
    for b in bids(&events) {
        *per_auction.entry(b.auction).or_default() += 1;
    }
    let full = per_auction.values().filter(|n| **n > 10).count();
    assert!(full >= 1000, "only {full} auctions with more than 10 bids");
    for p in [1, 3] {
        let lines = run_query("q19", EVENTS, p, &[]);
        assert!(lines.len() > expected.len() * 2, "q19 at parallelism {p}: only {} lines", lines.len());
        let got = last_per_rank(&lines, &format!("q19 at parallelism {p}"));
        assert_eq!(got.len(), expected.len(), "q19 at parallelism {p}: row count");
        assert!(got == expected, "q19 at parallelism {p}: last line per rank differs from the reference");
    }
}

/// Events shuffled within groups of 2000 (0.2 s): the rows enter in
/// another order, the top 10 stays.
#[test]
fn q19_over_an_out_of_order_stream_matches_the_reference() {
    const GROUP: usize = 2000;
    let events = shuffled_events(EVENTS as usize, GROUP);
    let expected = sorted(q19::q19(&events));
    assert!(expected.len() >= 20_000, "too few q19 rows to mean something: {}", expected.len());
    let copy = ExampleCopy::new("nexmark");
    copy.edit("q19.toml", "events = 1000000", &format!("events = {EVENTS}\nout_of_order_group_size = {GROUP}"));
    copy.run("q19.toml", &["--parallelism", "3"]);
    let lines: Vec<String> = copy.take_output("q19.txt").lines().map(str::to_string).collect();
    let got = last_per_rank(&lines, "q19 out of order");
    assert!(got == expected, "q19 over an out-of-order stream: last line per rank differs from the reference");
}

/// The edges of the top 10, written out by hand from the documented rule
/// (price, highest first; at equal prices the earlier time; at equal both
/// the smaller line), and the reference must agree. In order, auction 200
/// fills its 10 rows, then: a bid below the 10th (does not enter), an 11th
/// that enters at rank 6 and pushes the 10th out, one at the 10th's price
/// and a later time (does not enter), one at its price and time with a
/// smaller line (enters at rank 10), one with a greater line (does not).
/// Auction 201 has identical bids and ties; 202 fewer than 10 bids.
#[test]
fn q19_top_10_edges_entering_pushed_out_and_tied() {
    let row = |a: usize, b: usize, p: usize, t: u64, x: &str, rank: u64| {
        format!("{a},{b},{p},Google,https://www.nexmark.com/a/b/c/item.htm?query=1,{t},{x},{rank}")
    };
    let in_order = vec![
        bid(200, 11, 100, 1000, "a"),
        bid(200, 12, 90, 1000, "a"),
        bid(200, 13, 80, 1000, "a"),
        bid(200, 14, 70, 1005, "a"),
        bid(200, 15, 70, 1001, "a"),
        bid(200, 16, 60, 1000, "a"),
        bid(200, 17, 50, 1000, "a"),
        bid(200, 18, 40, 1000, "a"),
        bid(200, 22, 20, 1010, "a"),
        bid(200, 19, 10, 1000, "a"),
        // Full. Below the 10th: out.
        bid(200, 30, 5, 999, "a"),
        // An 11th that enters at rank 6; bidder 19's row drops out.
        bid(200, 31, 65, 1020, "a"),
        // The 10th's price (bidder 22's), a later time: out.
        bid(200, 32, 20, 1011, "a"),
        // Its price and time, a smaller line ("200,21," < "200,22,"): in.
        bid(200, 21, 20, 1010, "a"),
        // Its price and time, a greater line than the new 10th: out.
        bid(200, 26, 20, 1010, "a"),
        // Auction 201: ties and identical bids.
        bid(201, 21, 50, 1000, "x"),
        bid(201, 21, 50, 1000, "x"),
        bid(201, 20, 50, 1000, "x"),
        bid(201, 22, 50, 999, "x"),
        bid(201, 23, 49, 900, "x"),
        // Auction 202: three bids.
        bid(202, 40, 7, 1000, ""),
        bid(202, 41, 9, 1000, ""),
        bid(202, 42, 8, 1000, ""),
    ];
    let expected = sorted([
        row(200, 11, 100, 1000, "a", 1),
        row(200, 12, 90, 1000, "a", 2),
        row(200, 13, 80, 1000, "a", 3),
        row(200, 15, 70, 1001, "a", 4),
        row(200, 14, 70, 1005, "a", 5),
        row(200, 31, 65, 1020, "a", 6),
        row(200, 16, 60, 1000, "a", 7),
        row(200, 17, 50, 1000, "a", 8),
        row(200, 18, 40, 1000, "a", 9),
        row(200, 21, 20, 1010, "a", 10),
        row(201, 22, 50, 999, "x", 1),
        row(201, 20, 50, 1000, "x", 2),
        row(201, 21, 50, 1000, "x", 3),
        row(201, 21, 50, 1000, "x", 4),
        row(201, 23, 49, 900, "x", 5),
        row(202, 41, 9, 1000, "", 1),
        row(202, 42, 8, 1000, "", 2),
        row(202, 40, 7, 1000, "", 3),
    ]);
    assert_eq!(sorted(q19::q19(&in_order)), expected, "the reference follows the rank rule");
    let mut reversed = in_order.clone();
    reversed.reverse();
    for (order, events) in [("in order", &in_order), ("reversed", &reversed)] {
        for p in [1, 3] {
            let lines = run_hand_made("q19", events, p);
            assert_eq!(
                last_per_rank(&lines, &format!("{order}, parallelism {p}")),
                expected,
                "{order}, parallelism {p}"
            );
        }
    }
    // In order at parallelism 1, the bids that do not enter write nothing,
    // and the 11th writes ranks 6 to 10, the rows it moved, and then bidder
    // 21's bid its rank 10.
    let lines = run_hand_made("q19", &in_order, 1);
    assert!(!lines.iter().any(|l| l.starts_with("200,30,") || l.starts_with("200,32,") || l.starts_with("200,26,")));
    let at = lines.iter().position(|l| l.starts_with("200,31,")).expect("the 11th bid enters");
    let after_11th: Vec<&String> = lines[at..].iter().take(6).collect();
    assert_eq!(
        after_11th,
        [
            &row(200, 31, 65, 1020, "a", 6),
            &row(200, 16, 60, 1000, "a", 7),
            &row(200, 17, 50, 1000, "a", 8),
            &row(200, 18, 40, 1000, "a", 9),
            &row(200, 22, 20, 1010, "a", 10),
            &row(200, 21, 20, 1010, "a", 10),
        ],
        "the lines the 11th bid writes, then bidder 21's"
    );
}
