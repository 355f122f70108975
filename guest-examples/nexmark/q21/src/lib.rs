//! Nexmark q21, add channel id: every bid with a channel id, taken from
//! its channel's name for the four known channels and from its URL's
//! `channel_id` parameter otherwise. The reference SQL:
//!
//! ```sql
//! SELECT auction, bidder, price, channel,
//!     CASE
//!         WHEN lower(channel) = 'apple' THEN '0'
//!         WHEN lower(channel) = 'google' THEN '1'
//!         WHEN lower(channel) = 'facebook' THEN '2'
//!         WHEN lower(channel) = 'baidu' THEN '3'
//!         ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
//!         END
//!     AS channel_id FROM bid
//!     where REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) is not null or
//!           lower(channel) in ('apple', 'google', 'facebook', 'baidu');
//! ```
//!
//! Output per bid kept: `auction,bidder,price,channel,channel_id`.
//!
//! - `lower` is Unicode lower case (as Java's `toLowerCase`): `APPLE` is
//!   `apple`, and so is `FACEBOO\u{212A}` with a Kelvin sign, whose lower
//!   case is `k`. A channel with anything more (`apple `) is not one of the
//!   four.
//! - `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)` is written out by
//!   hand (a regex engine would grow the component several times over for
//!   one fixed pattern): the regex's first match is the leftmost
//!   `channel_id=` that starts the URL or follows a `&`, so `?channel_id=`
//!   does not match and `&channel_id=` does, and group 2 is what follows it
//!   up to the next `&` or the end. No match is SQL `NULL`, and the bid is
//!   dropped unless its channel is one of the four; a match with nothing
//!   after `=` is the empty string, not `NULL`, and the bid is kept with an
//!   empty `channel_id`. The match is case-sensitive (`Channel_ID=` is not
//!   one).
//!
//! Stateless: one line per bid kept, emitted as the bid is processed.

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

const PARAM: &str = "channel_id=";

/// `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`: `None` is `NULL`.
fn channel_id_of_url(url: &str) -> Option<&str> {
    let value_from = if url.starts_with(PARAM) { PARAM.len() } else { url.find("&channel_id=")? + 1 + PARAM.len() };
    let rest = &url[value_from..];
    Some(rest.find('&').map_or(rest, |end| &rest[..end]))
}

/// The id of one of the four known channels, by `lower(channel)`.
fn known_channel_id(channel: &str) -> Option<&'static str> {
    const KNOWN: [(&str, &str); 4] = [("apple", "0"), ("google", "1"), ("facebook", "2"), ("baidu", "3")];
    if channel.is_ascii() {
        KNOWN.iter().find(|(name, _)| channel.eq_ignore_ascii_case(name)).map(|(_, id)| *id)
    } else {
        // A few non-ASCII letters have an ASCII lower case (the Kelvin
        // sign's is `k`).
        let lower = channel.to_lowercase();
        KNOWN.iter().find(|(name, _)| lower == *name).map(|(_, id)| *id)
    }
}

struct AddChannelId;

impl Operator for AddChannelId {
    fn open(_: &mut OpenContext) -> Result<Self> {
        Ok(AddChannelId)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        let Some(channel_id) = known_channel_id(&b.channel).or_else(|| channel_id_of_url(&b.url)) else {
            return Ok(());
        };
        ctx.emit_with(None, input.timestamp, |out| {
            let mut n = itoa::Buffer::new();
            for v in [b.auction, b.bidder, b.price] {
                out.extend_from_slice(n.format(v).as_bytes());
                out.push(b',');
            }
            out.extend_from_slice(b.channel.as_bytes());
            out.push(b',');
            out.extend_from_slice(channel_id.as_bytes());
        });
        Ok(())
    }
}

export_operator!(AddChannelId);
