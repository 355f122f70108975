//! q10, log to a file system: every bid, in the partition of its event
//! time's UTC date and minute (`PARTITIONED BY (dt, hm)`); the partition
//! columns name the directory, the other columns make the line.

use super::bids;
use nexmark::event::Event;

/// q10: per bid, its event time (ms) and the line
/// `auction,bidder,price,date_time,extra`; the caller names the partition
/// from the time.
pub fn q10(events: &[Event]) -> Vec<(u64, String)> {
    bids(events)
        .map(|b| (b.date_time, format!("{},{},{},{},{}", b.auction, b.bidder, b.price, b.date_time, b.extra)))
        .collect()
}
