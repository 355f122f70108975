//! q19, auction top-10 price: per auction, its bids ranked by price, highest
//! first (`ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC)`),
//! ranks 1 to 10. Bids at the same price are ordered by the rule the
//! operator documents: the earlier `dateTime` first, then the smaller bid
//! line (byte order).

use super::bids;
use super::q18::bid_line;
use nexmark::event::Event;
use std::cmp::Reverse;
use std::collections::HashMap;

/// q19's result: `auction,bidder,price,channel,url,date_time,extra,rank_number`
/// for ranks 1 to 10 (or fewer, for an auction with fewer bids).
pub fn q19(events: &[Event]) -> Vec<String> {
    let mut auctions: HashMap<usize, Vec<(Reverse<usize>, u64, String)>> = HashMap::new();
    for b in bids(events) {
        auctions.entry(b.auction).or_default().push((Reverse(b.price), b.date_time, bid_line(b)));
    }
    let mut out = Vec::new();
    for (_, mut rows) in auctions {
        rows.sort();
        for (rank, (_, _, line)) in rows.into_iter().take(10).enumerate() {
            out.push(format!("{line},{}", rank + 1));
        }
    }
    out
}
