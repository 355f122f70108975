//! q9, winning bids: per auction, the bid that ranks first among its bids
//! with `auction.date_time <= bid.date_time <= auction.expires` (the SQL's
//! `BETWEEN`, both ends included): the highest price, then the earliest
//! `date_time` (the SQL's `ROW_NUMBER() ... ORDER BY price DESC, dateTime
//! ASC`), then, where the SQL leaves a tie, the lowest bidder and then the
//! `extra` first in byte order (the rule `guest-examples/nexmark/q9`
//! documents). Auctions without such a bid have no row.

use nexmark::event::{Bid, Event};
use std::cmp::Reverse;
use std::collections::HashMap;

/// q9's rows: `id,item_name,description,initial_bid,reserve,date_time,
/// expires,seller,category,extra,auction,bidder,price,bid_date_time,
/// bid_extra`, one per auction with a valid bid, in auction order.
pub fn q9(events: &[Event]) -> Vec<String> {
    let mut bids: HashMap<usize, Vec<&Bid>> = HashMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            bids.entry(b.auction).or_default().push(b);
        }
    }
    let mut out = Vec::new();
    for e in events {
        let Event::Auction(a) = e else { continue };
        let winner = bids
            .get(&a.id)
            .into_iter()
            .flatten()
            .filter(|b| a.date_time <= b.date_time && b.date_time <= a.expires)
            .min_by_key(|b| (Reverse(b.price), b.date_time, b.bidder, b.extra.as_bytes()));
        if let Some(b) = winner {
            out.push(format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                a.id,
                a.item_name,
                a.description,
                a.initial_bid,
                a.reserve,
                a.date_time,
                a.expires,
                a.seller,
                a.category,
                a.extra,
                b.auction,
                b.bidder,
                b.price,
                b.date_time,
                b.extra
            ));
        }
    }
    out
}
