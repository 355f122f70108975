//! q7, highest bid: every bid at the highest price of a 10 s tumbling
//! window, matched over the window's rowtime range.

use super::bids;
use nexmark::event::Event;
use std::collections::BTreeMap;

/// The tumbling window size of q7 (ms).
pub const SIZE: u64 = 10_000;

/// q7 over `events`, as its SQL says: per window `[s, s + SIZE)`,
/// `maxprice = MAX(price)` of its bids and `rowtime = s + SIZE - 1`
/// (`TUMBLE_ROWTIME`); the output is every bid `B` with `B.price =
/// maxprice` and `rowtime - SIZE <= B.dateTime <= rowtime` (`BETWEEN`,
/// both ends included), as `auction,price,bidder,date_time,extra`.
pub fn q7(events: &[Event]) -> Vec<String> {
    q7_with(events, SIZE)
}

/// q7 with windows of `size` ms.
pub fn q7_with(events: &[Event], size: u64) -> Vec<String> {
    let mut maxprice: BTreeMap<u64, usize> = BTreeMap::new();
    for b in bids(events) {
        let m = maxprice.entry(b.date_time - b.date_time % size).or_default();
        *m = (*m).max(b.price);
    }
    let mut out = Vec::new();
    for (&s, &max) in &maxprice {
        let rowtime = s + size - 1;
        for b in bids(events) {
            if b.price == max && rowtime - size <= b.date_time && b.date_time <= rowtime {
                out.push(format!("{},{},{},{},{}", b.auction, b.price, b.bidder, b.date_time, b.extra));
            }
        }
    }
    out
}
