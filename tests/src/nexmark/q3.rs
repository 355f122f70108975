//! q3, local item suggestion: the inner join of category-10 auctions with
//! their sellers in Oregon, Idaho or California, over the whole stream.

use nexmark::event::Event;
use std::collections::HashMap;

/// q3: `name,city,state,auction_id` per category-10 auction whose seller
/// is a person (anywhere in `events`) in state `or`, `id` or `ca`.
pub fn q3(events: &[Event]) -> Vec<String> {
    let persons: HashMap<usize, &nexmark::event::Person> = events
        .iter()
        .filter_map(|e| match e {
            Event::Person(p) => Some((p.id, p)),
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter_map(|e| match e {
            Event::Auction(a) if a.category == 10 => Some(a),
            _ => None,
        })
        .filter_map(|a| {
            let p = persons.get(&a.seller)?;
            ["or", "id", "ca"]
                .contains(&p.state.as_str())
                .then(|| format!("{},{},{},{}", p.name, p.city, p.state, a.id))
        })
        .collect()
}
