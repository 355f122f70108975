//! q15, bidding statistics per day: per UTC day (`DATE_FORMAT(dateTime,
//! 'yyyy-MM-dd')`), bids, distinct bidders and distinct auctions, in all and
//! per price rank (1: `price < 10000`, 2: `10000 <= price < 1000000`, 3:
//! `price >= 1000000`). The SQL's result is an updating table; this is its
//! final value, one row per day. The date helpers here serve q16 and q17.

use super::bids;
use nexmark::event::Event;
use std::collections::{HashMap, HashSet};

const DAY_MS: u64 = 86_400_000;

fn leap(year: u64) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

/// `DATE_FORMAT(t, 'yyyy-MM-dd')` of a time in ms since the epoch, in UTC:
/// whole years and then whole months counted off from 1970-01-01.
pub fn day(t: u64) -> String {
    let mut days = t / DAY_MS;
    let mut year = 1970;
    loop {
        let length = if leap(year) { 366 } else { 365 };
        if days < length {
            break;
        }
        days -= length;
        year += 1;
    }
    let months = [31, if leap(year) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 0;
    while days >= months[month] {
        days -= months[month];
        month += 1;
    }
    format!("{year:04}-{:02}-{:02}", month + 1, days + 1)
}

/// `DATE_FORMAT(t, 'HH:mm')` in UTC.
pub fn minute(t: u64) -> String {
    let in_day = t % DAY_MS;
    format!("{:02}:{:02}", in_day / 3_600_000, in_day % 3_600_000 / 60_000)
}

/// The rank whose `FILTER` a price passes, the three filters as the SQL
/// writes them (checked to take each price exactly once).
pub fn rank(price: usize) -> usize {
    let filters = [price < 10000, (10000..1000000).contains(&price), price >= 1000000];
    assert_eq!(filters.iter().filter(|&&f| f).count(), 1, "price {price} passes one filter");
    filters.iter().position(|&f| f).unwrap() + 1
}

/// `count(*)`, `count(distinct bidder)` and `count(distinct auction)`, each
/// unfiltered (index 0) and per rank (1 to 3), of one group's bids.
#[derive(Default)]
pub struct Distinct {
    bids: [u64; 4],
    bidders: [HashSet<usize>; 4],
    auctions: [HashSet<usize>; 4],
}

impl Distinct {
    pub fn add(&mut self, b: &nexmark::event::Bid) {
        for i in [0, rank(b.price)] {
            self.bids[i] += 1;
            self.bidders[i].insert(b.bidder);
            self.auctions[i].insert(b.auction);
        }
    }

    /// The twelve columns, comma-separated.
    pub fn columns(&self) -> String {
        let counts = self.bids.iter().copied();
        let bidders = self.bidders.iter().map(|s| s.len() as u64);
        let auctions = self.auctions.iter().map(|s| s.len() as u64);
        counts.chain(bidders).chain(auctions).map(|n| n.to_string()).collect::<Vec<_>>().join(",")
    }
}

/// q15: one `day,total_bids,rank1_bids,...,rank3_auctions` line per day.
pub fn q15(events: &[Event]) -> Vec<String> {
    let mut days: HashMap<String, Distinct> = HashMap::new();
    for b in bids(events) {
        days.entry(day(b.date_time)).or_default().add(b);
    }
    days.into_iter().map(|(d, s)| format!("{d},{}", s.columns())).collect()
}
