//! q17, auction statistics per auction and day: bids in all and per price
//! rank, and min, max, avg and sum of their prices, `avg` as Flink's `AVG`
//! over `BIGINT` (the sum divided by the count in integers). The final
//! value of the SQL's updating table, one row per group.

use super::bids;
use super::q15::{day, rank};
use nexmark::event::Event;
use std::collections::HashMap;

/// q17: one `auction,day,total_bids,rank1_bids,rank2_bids,rank3_bids,
/// min_price,max_price,avg_price,sum_price` line per auction and day.
pub fn q17(events: &[Event]) -> Vec<String> {
    let mut prices: HashMap<(usize, String), Vec<usize>> = HashMap::new();
    for b in bids(events) {
        prices.entry((b.auction, day(b.date_time))).or_default().push(b.price);
    }
    prices
        .into_iter()
        .map(|((auction, d), ps)| {
            let count = ps.len();
            let per_rank = |r| ps.iter().filter(|&&p| rank(p) == r).count();
            let sum: usize = ps.iter().sum();
            let (min, max) = (ps.iter().min().unwrap(), ps.iter().max().unwrap());
            format!(
                "{auction},{d},{count},{},{},{},{min},{max},{},{sum}",
                per_rank(1),
                per_rank(2),
                per_rank(3),
                sum / count
            )
        })
        .collect()
}
