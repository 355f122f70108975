//! q4, average closing price per category: for every auction, the highest
//! price among its bids with `auction.date_time <= bid.date_time <=
//! auction.expires` (auctions without one do not count); per category,
//! `category,avg` with avg the integer average of those maxima (Flink's
//! `AVG` over `BIGINT` rounds down).

use nexmark::event::Event;
use std::collections::{BTreeMap, HashMap};

/// q4's result: one `category,avg` line per category, sorted by category.
pub fn q4(events: &[Event]) -> Vec<String> {
    let mut prices: HashMap<usize, Vec<(u64, usize)>> = HashMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            prices.entry(b.auction).or_default().push((b.date_time, b.price));
        }
    }
    // category -> (sum of finals, auctions counted)
    let mut per_category: BTreeMap<usize, (u128, u128)> = BTreeMap::new();
    for e in events {
        let Event::Auction(a) = e else { continue };
        let bids = prices.get(&a.id).map(Vec::as_slice).unwrap_or_default();
        let last = bids.iter().filter(|(t, _)| a.date_time <= *t && *t <= a.expires).map(|&(_, p)| p).max();
        if let Some(last) = last {
            let c = per_category.entry(a.category).or_default();
            c.0 += last as u128;
            c.1 += 1;
        }
    }
    per_category.into_iter().map(|(category, (sum, count))| format!("{category},{}", sum / count)).collect()
}
