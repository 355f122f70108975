//! q6, average selling price by seller: every auction's final price is the
//! highest price among its bids with `auction.date_time <= bid.date_time <=
//! auction.expires` (auctions without one do not count); a seller's
//! auctions are taken in the order they close, by `expires` and then by id
//! (the order `guest-examples/nexmark/q6` documents: the SQL's order by the
//! winning bid's time could never give final rows), and for each, in that
//! order, `seller,avg` with avg the integer average (Flink's `AVG` over
//! `BIGINT` rounds down) of its price and the seller's up to 10 preceding
//! ones (`ROWS BETWEEN 10 PRECEDING AND CURRENT ROW`).

use nexmark::event::Event;
use std::collections::{BTreeMap, HashMap};

/// How many rows the `OVER` window holds: 10 preceding and the current one.
pub const ROWS: usize = 11;

/// q6's lines, seller by seller, each seller's in closing order.
pub fn q6(events: &[Event]) -> Vec<String> {
    let mut bids: HashMap<usize, Vec<(u64, usize)>> = HashMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            bids.entry(b.auction).or_default().push((b.date_time, b.price));
        }
    }
    // seller -> (expires, auction id, final price)
    let mut closed: BTreeMap<usize, Vec<(u64, usize, usize)>> = BTreeMap::new();
    for e in events {
        let Event::Auction(a) = e else { continue };
        let valid = bids.get(&a.id).into_iter().flatten().filter(|(t, _)| a.date_time <= *t && *t <= a.expires);
        if let Some(price) = valid.map(|&(_, p)| p).max() {
            closed.entry(a.seller).or_default().push((a.expires, a.id, price));
        }
    }
    let mut out = Vec::new();
    for (seller, mut auctions) in closed {
        auctions.sort();
        for i in 0..auctions.len() {
            let window = &auctions[(i + 1).saturating_sub(ROWS)..=i];
            let sum: u128 = window.iter().map(|&(_, _, p)| p as u128).sum();
            out.push(format!("{seller},{}", sum / window.len() as u128));
        }
    }
    out
}
