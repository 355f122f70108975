//! q13, bounded side input join: each bid joined with every row of the
//! side table whose key is its auction id modulo 10000 (an inner join: no
//! row, no line).

use super::bids;
use nexmark::event::Event;
use std::collections::HashMap;

/// The side table of a `key,value` file: the key before the first comma,
/// the value the rest of the line; empty lines skipped.
pub fn side_table(text: &str) -> HashMap<i64, Vec<String>> {
    let mut table: HashMap<i64, Vec<String>> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line.split_once(',').expect("a key,value line");
        table.entry(key.parse().expect("an integer key")).or_default().push(value.to_string());
    }
    table
}

/// q13: `auction,bidder,price,dateTime,value` per bid and matching row.
pub fn q13(events: &[Event], side: &HashMap<i64, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for b in bids(events) {
        for value in side.get(&((b.auction % 10_000) as i64)).into_iter().flatten() {
            out.push(format!("{},{},{},{},{value}", b.auction, b.bidder, b.price, b.date_time));
        }
    }
    out
}
