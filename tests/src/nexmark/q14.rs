//! q14, calculation: the bids whose `0.908 * price` is strictly between
//! 1 000 000 and 50 000 000, with their time of day (the UTC hour of
//! `dateTime`: 8-18 `dayTime`, 0-6 and 20-23 `nightTime`, 7 and 19
//! `otherTime`) and the number of `c`s in `extra`.

use super::bids;
use nexmark::event::Event;

/// The hour of the day (UTC) of a time in milliseconds since the epoch.
fn utc_hour(date_time: u64) -> u64 {
    date_time / 1000 / 60 / 60 % 24
}

/// q14: `auction,bidder,price,bidTimeType,dateTime,extra,c_counts` per
/// bid kept, the price with three decimals.
pub fn q14(events: &[Event]) -> Vec<String> {
    bids(events)
        .filter_map(|b| {
            // The SQL's DECIMAL(23, 3), in thousandths: exact.
            let thousandths = b.price as u128 * 908;
            if !(1_000_000 * 1000 < thousandths && thousandths < 50_000_000 * 1000) {
                return None;
            }
            let hour = utc_hour(b.date_time);
            let kind = if (8..=18).contains(&hour) {
                "dayTime"
            } else if hour <= 6 || hour >= 20 {
                "nightTime"
            } else {
                "otherTime"
            };
            let c_counts = b.extra.matches('c').count();
            Some(format!(
                "{},{},{}.{:03},{kind},{},{},{c_counts}",
                b.auction,
                b.bidder,
                thousandths / 1000,
                thousandths % 1000,
                b.date_time,
                b.extra
            ))
        })
        .collect()
}
