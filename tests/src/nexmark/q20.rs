//! q20, expand bid with auction: the inner join of all bids with the
//! category-10 auctions on `bid.auction = auction.id`, over the whole
//! stream, whatever the times.

use super::bids;
use nexmark::event::{Auction, Event};
use std::collections::HashMap;

/// q20: one line per bid on a category-10 auction (anywhere in `events`):
/// `auction,bidder,price,channel,url,bid_date_time,bid_extra,item_name,description,initial_bid,reserve,auction_date_time,expires,seller,category,auction_extra`.
pub fn q20(events: &[Event]) -> Vec<String> {
    let auctions: HashMap<usize, &Auction> = events
        .iter()
        .filter_map(|e| match e {
            Event::Auction(a) if a.category == 10 => Some((a.id, a)),
            _ => None,
        })
        .collect();
    bids(events)
        .filter_map(|b| {
            let a = auctions.get(&b.auction)?;
            Some(format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                b.auction,
                b.bidder,
                b.price,
                b.channel,
                b.url,
                b.date_time,
                b.extra,
                a.item_name,
                a.description,
                a.initial_bid,
                a.reserve,
                a.date_time,
                a.expires,
                a.seller,
                a.category,
                a.extra
            ))
        })
        .collect()
}
