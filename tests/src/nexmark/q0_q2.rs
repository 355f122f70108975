//! q0, q1 and q2: the stateless queries, one output line per bid kept.

use super::bids;
use nexmark::event::Event;

/// q0: `auction,bidder,price,date_time,extra` per bid.
pub fn q0(events: &[Event]) -> Vec<String> {
    bids(events).map(|b| format!("{},{},{},{},{}", b.auction, b.bidder, b.price, b.date_time, b.extra)).collect()
}

/// q1: as q0 with the price times 0.908, to three decimals.
pub fn q1(events: &[Event]) -> Vec<String> {
    bids(events)
        .map(|b| {
            // Decimal arithmetic on the digits, as SQL's DECIMAL does.
            let milli = b.price as u128 * 908;
            format!("{},{},{}.{:03},{},{}", b.auction, b.bidder, milli / 1000, milli % 1000, b.date_time, b.extra)
        })
        .collect()
}

/// q2: `auction,price` of the bids whose auction id is a multiple of 123.
pub fn q2(events: &[Event]) -> Vec<String> {
    bids(events).filter(|b| b.auction % 123 == 0).map(|b| format!("{},{}", b.auction, b.price)).collect()
}
