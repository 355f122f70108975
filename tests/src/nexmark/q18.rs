//! q18, find last bid: per (bidder, auction), the bid with the latest
//! `dateTime` (`ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY
//! dateTime DESC) = 1`). Bids of a pair with the same `dateTime` are ordered
//! by the rule the operator documents: the higher price first, then the
//! greater line (byte order).

use super::bids;
use nexmark::event::{Bid, Event};
use std::cmp::Reverse;
use std::collections::HashMap;

/// `auction,bidder,price,channel,url,date_time,extra`.
pub fn bid_line(b: &Bid) -> String {
    format!("{},{},{},{},{},{},{}", b.auction, b.bidder, b.price, b.channel, b.url, b.date_time, b.extra)
}

/// q18's result: one line per (bidder, auction) pair, its last bid.
pub fn q18(events: &[Event]) -> Vec<String> {
    let mut pairs: HashMap<(usize, usize), Vec<&Bid>> = HashMap::new();
    for b in bids(events) {
        pairs.entry((b.bidder, b.auction)).or_default().push(b);
    }
    pairs
        .into_values()
        .map(|bids| {
            // ORDER BY dateTime DESC, then the tie rule: row 1 is the least.
            let first = bids.into_iter().map(|b| (Reverse(b.date_time), Reverse(b.price), Reverse(bid_line(b)))).min();
            first.expect("a pair has a bid").2.0
        })
        .collect()
}
