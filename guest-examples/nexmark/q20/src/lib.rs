//! Nexmark q20, expand bid with auction: every bid on a category-10
//! auction, with the auction's fields. The reference SQL:
//!
//! ```sql
//! SELECT
//!     auction, bidder, price, channel, url, B.`dateTime`, B.extra,
//!     itemName, description, initialBid, reserve, A.`dateTime`, expires, seller, category, A.extra
//! FROM
//!     bid AS B INNER JOIN auction AS A on B.auction = A.id
//! WHERE A.category = 10;
//! ```
//!
//! A regular (unwindowed) inner join, append-only: one line per (bid,
//! auction) pair, written as soon as both have arrived,
//! `auction,bidder,price,channel,url,bid_date_time,bid_extra,item_name,description,initial_bid,reserve,auction_date_time,expires,seller,category,auction_extra`.
//! The SQL has no time condition, so a bid joins its auction whatever their
//! times: before the auction starts or after it expired.
//!
//! Keyed by auction id: the source's default keys (auctions by `id`, bids
//! by `auction`; a record keyed otherwise fails the job). Either side may
//! arrive first: the generator bids on auctions up to 10 ids ahead of the
//! last one made, and at parallelism above 1 a bid can overtake its auction
//! from another source subtask. Per auction id the operator keeps one
//! value, [`Slot`]:
//! - absent: nothing seen yet;
//! - `Waiting`: bids arrived before the auction; their lines' bid part
//!   waits in list state `waiting` (appended to unread, read once when the
//!   auction comes);
//! - `Joins(suffix)`: a category-10 auction; `suffix` is its part of the
//!   line, ready to write, so a later bid costs one value read and a line;
//! - `Other`: an auction of another category; its bids are dropped.
//!
//! Auction ids are unique in the stream: a second auction with an id seen
//! fails the job rather than join twice.
//!
//! State: like the SQL's join, it forgets nothing, and an auction's bids
//! after it expired still join. It holds one value per auction id (the
//! line's auction part for category 10, about 600 bytes with the default
//! sizes, a marker for the others), and the bids on an auction that never
//! comes (the generator's last few ids when the stream stops) keep
//! waiting. It grows with the number of auctions. Dropping an expired
//! auction would lose its late bids, which the SQL joins.
//!
//! `params.stage = "key"` runs a helper stage instead: it keys bids by
//! auction and auctions by id, as the `nexmark` source does, for an input
//! without keys (the tests feed hand-made events from a jsonl file through
//! it).

use nexmark_sql::columns::bid_line;
use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::{Auction, Bid, Event};
use weir_sdk::{Context, Element, Error, ListState, OpenContext, Operator, Result, ValueState, export_operator};

/// The category whose auctions are joined.
const CATEGORY: u64 = 10;

/// What is known of the current auction id.
#[derive(Serialize, Deserialize)]
enum Slot {
    /// Bids wait in list state; the auction has not come.
    Waiting,
    /// A category-10 auction: the line's part after the bid's, without the
    /// leading comma.
    Joins(String),
    /// An auction of another category.
    Other,
}

/// The auction's part:
/// `item_name,description,initial_bid,reserve,date_time,expires,seller,category,extra`.
fn auction_part(a: &Auction<'_>) -> String {
    let mut n = itoa::Buffer::new();
    let mut s = String::with_capacity(96 + a.item_name.len() + a.description.len() + a.extra.len());
    for t in [&a.item_name, &a.description] {
        s.push_str(t);
        s.push(',');
    }
    for v in [a.initial_bid, a.reserve] {
        s.push_str(n.format(v));
        s.push(',');
    }
    for v in [a.date_time, a.expires] {
        s.push_str(n.format(v));
        s.push(',');
    }
    for v in [a.seller, a.category] {
        s.push_str(n.format(v));
        s.push(',');
    }
    s.push_str(&a.extra);
    s
}

fn emit(ctx: &mut Context, bid: &str, auction: &str, timestamp: Option<i64>) {
    ctx.emit_with(None, timestamp, |out| {
        out.extend_from_slice(bid.as_bytes());
        out.push(b',');
        out.extend_from_slice(auction.as_bytes());
    });
}

/// Fails unless the record's key is `id` in decimal.
fn check_key(input: &Element<'_>, what: &str, id: u64) -> Result<()> {
    if input.key == Some(itoa::Buffer::new().format(id).as_bytes()) {
        return Ok(());
    }
    Err(Error::msg(format!(
        "{what} {id} came keyed {:?}: q20 needs auctions keyed by id and bids by auction (the nexmark source's defaults) over partition = \"key\"",
        input.key_str()
    )))
}

struct Join {
    slot: ValueState<Slot>,
    /// The bid parts of the bids that came before their auction.
    waiting: ListState<String>,
}

impl Join {
    fn bid(&mut self, ctx: &mut Context, b: &Bid<'_>, timestamp: Option<i64>) -> Result<()> {
        match self.slot.get()? {
            Some(Slot::Joins(auction)) => emit(ctx, &bid_line(b), &auction, timestamp),
            Some(Slot::Other) => {}
            Some(Slot::Waiting) => self.waiting.add(&bid_line(b))?,
            None => {
                self.waiting.add(&bid_line(b))?;
                self.slot.set(&Slot::Waiting)?;
            }
        }
        Ok(())
    }

    fn auction(&mut self, ctx: &mut Context, a: &Auction<'_>, timestamp: Option<i64>) -> Result<()> {
        let known = if a.category == CATEGORY { Slot::Joins(auction_part(a)) } else { Slot::Other };
        match self.slot.get()? {
            None => {}
            Some(Slot::Waiting) => {
                // The waiting bids' lines carry the auction's timestamp:
                // the record being processed, so never behind the
                // watermark that record passed.
                if let Slot::Joins(auction) = &known {
                    for bid in self.waiting.iter() {
                        emit(ctx, &bid?, auction, timestamp);
                    }
                }
                self.waiting.clear()?;
            }
            Some(Slot::Joins(_) | Slot::Other) => return Err(Error::msg(format!("auction {} seen twice", a.id))),
        }
        self.slot.set(&known)
    }
}

enum Q20 {
    /// Keys bids by auction and auctions by id (for inputs without keys).
    Key,
    /// The query.
    Join(Join),
}

impl Operator for Q20 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            None | Some("join") => {
                Ok(Q20::Join(Join { slot: ctx.value_state("auction")?, waiting: ctx.list_state("waiting")? }))
            }
            Some("key") => Ok(Q20::Key),
            Some(other) => Err(Error::msg(format!("params.stage must be \"join\" or \"key\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let event = Event::decode(input.payload)?;
        match self {
            Q20::Key => {
                let id = match &event {
                    Event::Bid(b) => b.auction,
                    Event::Auction(a) => a.id,
                    Event::Person(_) => return Ok(()),
                };
                let mut key = itoa::Buffer::new();
                ctx.emit_with(Some(key.format(id).as_bytes()), input.timestamp, |out| {
                    out.extend_from_slice(input.payload)
                });
                Ok(())
            }
            Q20::Join(j) => match &event {
                Event::Bid(b) => {
                    check_key(&input, "a bid on auction", b.auction)?;
                    j.bid(ctx, b, input.timestamp)
                }
                Event::Auction(a) => {
                    check_key(&input, "auction", a.id)?;
                    j.auction(ctx, a, input.timestamp)
                }
                Event::Person(_) => Ok(()),
            },
        }
    }
}

export_operator!(Q20);
