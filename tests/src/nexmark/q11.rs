//! q11, user sessions: per bidder, its bids split where two consecutive
//! bids (in event time) are more than 10 s apart. Flink's session windows
//! merge windows that touch (`TimeWindow.intersects`: `start <= other.end
//! && end >= other.start`), so bids exactly the gap apart share a session.

use super::bids;
use nexmark::event::Event;
use std::collections::HashMap;

/// The session gap, ms.
pub const GAP: u64 = 10_000;

/// q11: `bidder,bid_count,starttime,endtime` per session, with `endtime`
/// the last bid's time plus `gap`.
pub fn q11(events: &[Event], gap: u64) -> Vec<String> {
    let mut times: HashMap<usize, Vec<u64>> = HashMap::new();
    for b in bids(events) {
        times.entry(b.bidder).or_default().push(b.date_time);
    }
    let mut out = Vec::new();
    for (bidder, mut ts) in times {
        ts.sort_unstable();
        let mut start = 0;
        for i in 1..=ts.len() {
            if i == ts.len() || ts[i] - ts[i - 1] > gap {
                out.push(format!("{bidder},{},{},{}", i - start, ts[start], ts[i - 1] + gap));
                start = i;
            }
        }
    }
    out
}
