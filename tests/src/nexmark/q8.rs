//! q8, new users: persons who registered and put up an auction in the same
//! 10-second tumbling window.

use nexmark::event::Event;
use std::collections::HashSet;

/// The tumbling window size, ms.
const WINDOW: u64 = 10_000;

/// q8: `id,name,starttime` per (person, window) where the person's
/// registration and at least one of its auctions fall in the window
/// starting at `starttime`.
pub fn q8(events: &[Event]) -> Vec<String> {
    let start = |t: u64| t - t % WINDOW;
    // GROUP BY seller, TUMBLE(dateTime): the (seller, window) pairs.
    let sold: HashSet<(usize, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Auction(a) => Some((a.seller, start(a.date_time))),
            _ => None,
        })
        .collect();
    // GROUP BY id, name, TUMBLE(dateTime), joined on id and window.
    let registered: HashSet<(usize, &str, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Person(p) => Some((p.id, p.name.as_str(), start(p.date_time))),
            _ => None,
        })
        .collect();
    registered
        .into_iter()
        .filter(|(id, _, s)| sold.contains(&(*id, *s)))
        .map(|(id, name, s)| format!("{id},{name},{s}"))
        .collect()
}
