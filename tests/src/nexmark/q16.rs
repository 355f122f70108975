//! q16, channel statistics per channel and day: as q15 per `(channel,
//! day)`, with `max(DATE_FORMAT(dateTime, 'HH:mm'))`, the greatest of the
//! group's `HH:mm` strings. The final value of the SQL's updating table,
//! one row per group.

use super::bids;
use super::q15::{Distinct, day, minute};
use nexmark::event::Event;
use std::collections::HashMap;

/// q16: one `channel,day,minute,total_bids,...,rank3_auctions` line per
/// channel and day.
pub fn q16(events: &[Event]) -> Vec<String> {
    let mut groups: HashMap<(String, String), (String, Distinct)> = HashMap::new();
    for b in bids(events) {
        let (latest, stats) = groups.entry((b.channel.clone(), day(b.date_time))).or_default();
        let m = minute(b.date_time);
        if m > *latest {
            *latest = m;
        }
        stats.add(b);
    }
    groups.into_iter().map(|((c, d), (m, s))| format!("{c},{d},{m},{}", s.columns())).collect()
}
