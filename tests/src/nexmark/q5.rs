//! q5, hot items: per hopping window (10 s, sliding by 2 s, aligned to the
//! epoch), the auctions with the most bids, as `starttime,auction,num`.

use super::bids;
use nexmark::event::Event;
use std::collections::BTreeMap;

/// The window size of q5 (ms).
pub const SIZE: u64 = 10_000;
/// The window slide of q5 (ms).
pub const SLIDE: u64 = 2_000;

/// q5 over `events`: `HOP(dateTime, 2 s, 10 s)` groups counted per
/// auction, joined with each window's largest count (`num >= maxn`).
pub fn q5(events: &[Event]) -> Vec<String> {
    q5_with(events, SIZE, SLIDE)
}

/// q5 with windows of `size` ms sliding by `slide` ms.
pub fn q5_with(events: &[Event], size: u64, slide: u64) -> Vec<String> {
    // AuctionBids: count(*) per (window start, auction). A bid at t is in
    // the windows [s, s + size) with s a multiple of slide and t - size < s <= t.
    let mut counts: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    for b in bids(events) {
        let t = b.date_time;
        let mut s = t - t % slide;
        while s + size > t {
            *counts.entry((s, b.auction)).or_default() += 1;
            match s.checked_sub(slide) {
                Some(prev) => s = prev,
                None => break,
            }
        }
    }
    // MaxBids: max(num) per window.
    let mut maxn: BTreeMap<u64, u64> = BTreeMap::new();
    for (&(s, _), &num) in &counts {
        let m = maxn.entry(s).or_default();
        *m = (*m).max(num);
    }
    counts
        .iter()
        .filter(|&(&(s, _), &num)| num >= maxn[&s])
        .map(|(&(s, auction), num)| format!("{s},{auction},{num}"))
        .collect()
}
