//! Nexmark events as the `kind = "nexmark"` source hands them to operators
//! (cargo feature `nexmark`): [`Event::decode`] reads a payload in either
//! of the source's formats, borrowing its strings from the payload.
//!
//! The encoding (`docs/nexmark.md` has it field by field) is postcard of
//! [`Event`] for `format = "postcard"` (the default), and JSON with the
//! same field names, `{"bid": {...}}`, for `format = "json"`. A payload
//! that starts with `{` is read as JSON: a postcard event starts with its
//! variant index, 0, 1 or 2.

use serde::Deserialize;
use std::borrow::Cow;

/// One Nexmark event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Event<'a> {
    /// A new person.
    Person(#[serde(borrow)] Person<'a>),
    /// A new auction.
    Auction(#[serde(borrow)] Auction<'a>),
    /// A bid on an auction.
    Bid(#[serde(borrow)] Bid<'a>),
}

/// A person who registers to sell or bid.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Person<'a> {
    /// Unique id.
    pub id: u64,
    /// First and last name.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// Email address.
    #[serde(borrow)]
    pub email_address: Cow<'a, str>,
    /// A 19-character card number.
    #[serde(borrow)]
    pub credit_card: Cow<'a, str>,
    /// A US city, lower case.
    #[serde(borrow)]
    pub city: Cow<'a, str>,
    /// A US state, two lower-case letters.
    #[serde(borrow)]
    pub state: Cow<'a, str>,
    /// Event time, milliseconds since the epoch.
    pub date_time: i64,
    /// Padding to the configured average size.
    #[serde(borrow)]
    pub extra: Cow<'a, str>,
}

/// An item put up for auction.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Auction<'a> {
    /// Unique id.
    pub id: u64,
    /// Item name.
    #[serde(borrow)]
    pub item_name: Cow<'a, str>,
    /// Item description.
    #[serde(borrow)]
    pub description: Cow<'a, str>,
    /// Opening bid, in cents.
    pub initial_bid: u64,
    /// Lowest price that sells, in cents.
    pub reserve: u64,
    /// Event time, milliseconds since the epoch.
    pub date_time: i64,
    /// When the auction closes, milliseconds since the epoch.
    pub expires: i64,
    /// The selling person's id.
    pub seller: u64,
    /// Category id.
    pub category: u64,
    /// Padding to the configured average size.
    #[serde(borrow)]
    pub extra: Cow<'a, str>,
}

/// A bid.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Bid<'a> {
    /// The auction's id.
    pub auction: u64,
    /// The bidding person's id.
    pub bidder: u64,
    /// Price, in cents.
    pub price: u64,
    /// Where the bid came from.
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
    /// The bid's URL.
    #[serde(borrow)]
    pub url: Cow<'a, str>,
    /// Event time, milliseconds since the epoch.
    pub date_time: i64,
    /// Padding to the configured average size.
    #[serde(borrow)]
    pub extra: Cow<'a, str>,
}

impl<'a> Event<'a> {
    /// Reads an event from a `nexmark` source's payload, in either format.
    pub fn decode(payload: &'a [u8]) -> crate::Result<Self> {
        if payload.first() == Some(&b'{') {
            serde_json::from_slice(payload).map_err(|e| crate::Error::msg(format!("not a Nexmark event in JSON: {e}")))
        } else {
            postcard::from_bytes(payload)
                .map_err(|e| crate::Error::msg(format!("not a Nexmark event in postcard: {e}")))
        }
    }

    /// The event's time, milliseconds since the epoch.
    pub fn date_time(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }
}
