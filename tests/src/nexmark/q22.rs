//! q22, URL directories: every bid with `SPLIT_INDEX(url, '/', n)` for n =
//! 3, 4, 5, `NULL` written as an empty field.

use super::bids;
use nexmark::event::Event;

/// Flink's `SPLIT_INDEX(str, separator, index)`: part `index` of
/// `StringUtils.splitByWholeSeparatorPreserveAllTokens(str, separator)`,
/// `None` (`NULL`) past the last part. The split is commons-lang's loop,
/// step by step: an empty string has no parts; a separator at the
/// position where a part starts gives an empty part; the rest after the
/// last separator is the last part, even when empty.
pub fn split_index(s: &str, separator: &str, index: usize) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    let len = s.len();
    if len > 0 {
        let (mut beg, mut end) = (0, 0);
        while end < len {
            match s[beg..].find(separator).map(|i| i + beg) {
                Some(found) => {
                    end = found;
                    parts.push(if end > beg { &s[beg..end] } else { "" });
                    beg = end + separator.len();
                }
                None => {
                    parts.push(&s[beg..]);
                    end = len;
                }
            }
        }
    }
    parts.get(index).map(|p| p.to_string())
}

/// q22: `auction,bidder,price,channel,dir1,dir2,dir3` per bid.
pub fn q22(events: &[Event]) -> Vec<String> {
    bids(events)
        .map(|b| {
            let dir = |n| split_index(&b.url, "/", n).unwrap_or_default();
            format!("{},{},{},{},{},{},{}", b.auction, b.bidder, b.price, b.channel, dir(3), dir(4), dir(5))
        })
        .collect()
}
