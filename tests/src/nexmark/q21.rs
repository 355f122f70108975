//! q21, add channel id: the bids whose channel is one of four known ones
//! (by its lower case) or whose URL has a `channel_id`, with that id.

use super::bids;
use nexmark::event::Event;

/// `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)` as `java.util.regex`
/// finds it: the first start position where the pattern matches (the
/// alternatives `&` and `^` tried in order), group 2 greedy up to the
/// first `&`. `None` is SQL `NULL` (no match).
pub fn regexp_extract_channel_id(url: &str) -> Option<&str> {
    let bytes = url.as_bytes();
    for start in 0..=bytes.len() {
        // Group 1: `&` here, or `^` (only at the start).
        let after_group_1 = if bytes.get(start) == Some(&b'&') {
            start + 1
        } else if start == 0 {
            start
        } else {
            continue;
        };
        let Some(rest) = url.get(after_group_1..).and_then(|r| r.strip_prefix("channel_id=")) else {
            continue;
        };
        let len = rest.bytes().take_while(|&c| c != b'&').count();
        return Some(&rest[..len]);
    }
    None
}

/// q21: `auction,bidder,price,channel,channel_id` per bid kept.
pub fn q21(events: &[Event]) -> Vec<String> {
    bids(events)
        .filter_map(|b| {
            let known = match b.channel.to_lowercase().as_str() {
                "apple" => Some("0"),
                "google" => Some("1"),
                "facebook" => Some("2"),
                "baidu" => Some("3"),
                _ => None,
            };
            let id = known.or_else(|| regexp_extract_channel_id(&b.url))?;
            Some(format!("{},{},{},{},{id}", b.auction, b.bidder, b.price, b.channel))
        })
        .collect()
}
