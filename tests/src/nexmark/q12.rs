//! q12, processing-time windows: which window a bid falls in depends on
//! the wall clock, so the reference gives what does not: the number of
//! bids of each bidder, which its windows' counts must add up to.

use super::bids;
use nexmark::event::Event;
use std::collections::HashMap;

/// Bidder -> its number of bids.
pub fn bids_per_bidder(events: &[Event]) -> HashMap<u64, u64> {
    let mut counts = HashMap::new();
    for b in bids(events) {
        *counts.entry(b.bidder as u64).or_insert(0) += 1;
    }
    counts
}
