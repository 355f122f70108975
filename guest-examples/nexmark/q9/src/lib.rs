//! Nexmark q9, winning bids: the winning bid of every auction.
//!
//! ```sql
//! SELECT id, itemName, description, initialBid, reserve, `dateTime`, expires, seller, category,
//!        extra, auction, bidder, price, bid_dateTime, bid_extra
//! FROM (
//!   SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime, B.extra AS bid_extra,
//!     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC) AS rownum
//!   FROM auction A, bid B
//!   WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
//! )
//! WHERE rownum <= 1;
//! ```
//!
//! For every auction, its bids with `auction.date_time <= bid.date_time <=
//! auction.expires` (`BETWEEN`: both ends inclusive) compete; the winner has
//! the highest price, then the earliest `date_time` (the SQL's `ORDER BY`).
//! The SQL leaves bids equal in both unordered; here the lower `bidder`
//! wins, then the `extra` first in byte order. Bids equal in all four give
//! the same row, so the output is determined. An auction without a valid
//! bid has no row (an inner join).
//!
//! Output, one line per auction with a winner:
//! `id,item_name,description,initial_bid,reserve,date_time,expires,seller,category,extra,auction,bidder,price,bid_date_time,bid_extra`
//! (times in ms since the epoch, strings as they are, as q0 writes them).
//!
//! Emission: Flink runs this as an updating query (a new top row retracts
//! the previous one as better bids arrive). Weir writes only the final row:
//! once the watermark passes `expires` no bid inside the interval can still
//! come (no event is late), so an event-time timer at `expires` writes the
//! winner, once, with `expires` as its timestamp. The lines are Flink's
//! final result.
//!
//! Keyed by auction id (the source's default keys: auctions by `id`, bids
//! by `auction`); per auction a value state [`Slot`], the auction's own
//! columns (written at the timer only) and, for bids that come before their
//! auction (at parallelism above 1 a bid can overtake it), a list state.
//! State stays bounded, as in q4:
//!
//! - an open auction keeps only its current winner; its timer at `expires`
//!   writes the row and drops the entry, leaving a marker until
//!   `date_time + keep_ms` (param, default 250) so that bids still coming
//!   for an expired auction are dropped at once instead of waiting as
//!   pending bids;
//! - bids waiting for their auction are dropped by a timer at their own time
//!   plus `wait_ms` (param, default 50, so the bids on an auction not yet
//!   created share one timer): an auction that has not arrived by the time
//!   the watermark reaches `t` has `date_time > t`, so such a bid can never
//!   count. When the auction arrives, that timer is deleted.
//!
//! Neither param changes the result.

use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use weir_sdk::nexmark::{Auction, Bid, Event, Person};
use weir_sdk::{Context, Element, Error, ListState, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// The best bid of an auction so far (its `auction` is the key).
#[derive(Serialize, Deserialize)]
struct Best {
    price: u64,
    date_time: i64,
    bidder: u64,
    extra: String,
}

/// How bids rank: the smallest wins (highest price, then earliest time,
/// then lowest bidder, then first `extra` in byte order).
fn rank(price: u64, date_time: i64, bidder: u64, extra: &str) -> (Reverse<u64>, i64, u64, &str) {
    (Reverse(price), date_time, bidder, extra)
}

impl Best {
    fn rank(&self) -> (Reverse<u64>, i64, u64, &str) {
        rank(self.price, self.date_time, self.bidder, &self.extra)
    }
}

/// What one auction id has.
#[derive(Serialize, Deserialize)]
enum Slot {
    /// Bids came before the auction (in `Q9::pending`); the time of the
    /// clean-up timer registered for them.
    Pending { timer: i64 },
    /// The auction is here (its columns in `Q9::row`), with the best valid
    /// bid so far, if any; its timer is at `expires`.
    Open { id: u64, start: i64, expires: i64, best: Option<Best> },
    /// The row went out; bids that still come are dropped. A timer at
    /// `until` removes the marker.
    Closed { until: i64 },
}

struct Q9 {
    slot: ValueState<Slot>,
    /// The auction's columns, each followed by a comma.
    row: ValueState<String>,
    /// Bids seen before their auction.
    pending: ListState<Best>,
    keep_ms: i64,
    wait_ms: i64,
}

/// The event in `payload`: what [`Event::decode`] reads, or a JSON object
/// with the event under its kind beside other fields
/// (`{"k":7,"t":1000,"bid":{...}}`), as a `jsonl` file source needs to find
/// a record's key and time in top-level fields (`key_field`,
/// `timestamp_field`).
fn decode(payload: &[u8]) -> Result<Event<'_>> {
    #[derive(Deserialize)]
    struct Tagged<'a> {
        #[serde(borrow)]
        person: Option<Person<'a>>,
        #[serde(borrow)]
        auction: Option<Auction<'a>>,
        #[serde(borrow)]
        bid: Option<Bid<'a>>,
    }
    match Event::decode(payload) {
        Ok(e) => Ok(e),
        Err(e) if payload.first() == Some(&b'{') => match serde_json::from_slice::<Tagged<'_>>(payload) {
            Ok(Tagged { bid: Some(b), .. }) => Ok(Event::Bid(b)),
            Ok(Tagged { auction: Some(a), .. }) => Ok(Event::Auction(a)),
            Ok(Tagged { person: Some(p), .. }) => Ok(Event::Person(p)),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

impl Q9 {
    fn bid(&mut self, ctx: &mut Context, b: Bid<'_>) -> Result<()> {
        match self.slot.get()? {
            Some(Slot::Open { id, start, expires, best }) => {
                let t = b.date_time;
                if t < start || t > expires {
                    return Ok(());
                }
                if best.as_ref().is_some_and(|old| old.rank() <= rank(b.price, t, b.bidder, &b.extra)) {
                    return Ok(());
                }
                let best = Best { price: b.price, date_time: t, bidder: b.bidder, extra: b.extra.into_owned() };
                self.slot.set(&Slot::Open { id, start, expires, best: Some(best) })
            }
            Some(Slot::Closed { .. }) => Ok(()),
            // The timer already registered drops what it covers and
            // re-arms for the rest (see `on_timer`).
            Some(Slot::Pending { .. }) => self.pending.add(&pending(b)),
            None => {
                let timer = b.date_time.saturating_add(self.wait_ms);
                ctx.register_event_time_timer(timer)?;
                self.slot.set(&Slot::Pending { timer })?;
                self.pending.add(&pending(b))
            }
        }
    }

    fn auction(&mut self, ctx: &mut Context, a: Auction<'_>) -> Result<()> {
        let (start, expires) = (a.date_time, a.expires);
        let best = match self.slot.get()? {
            None => None,
            Some(Slot::Pending { timer }) => {
                // The auction's own timer replaces the pending bids' one.
                ctx.delete_event_time_timer(timer)?;
                let bids = self.pending.get()?;
                self.pending.clear()?;
                bids.into_iter()
                    .filter(|b| start <= b.date_time && b.date_time <= expires)
                    .min_by(|x, y| x.rank().cmp(&y.rank()))
            }
            Some(Slot::Open { .. } | Slot::Closed { .. }) => {
                return Err(Error::msg(format!("auction {} seen twice", a.id)));
            }
        };
        let row = columns(&a);
        self.row.set(&row)?;
        self.slot.set(&Slot::Open { id: a.id, start, expires, best })?;
        ctx.register_event_time_timer(expires)
    }

    fn close(
        &mut self,
        ctx: &mut Context,
        now: i64,
        (id, start, expires): (u64, i64, i64),
        best: Option<Best>,
    ) -> Result<()> {
        if let Some(b) = best {
            let row = self.row.get()?.unwrap_or_default();
            ctx.emit_with(None, Some(expires), |out| {
                out.extend_from_slice(row.as_bytes());
                out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
                for x in [b.bidder, b.price] {
                    out.push(b',');
                    out.extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
                }
                out.push(b',');
                out.extend_from_slice(itoa::Buffer::new().format(b.date_time).as_bytes());
                out.push(b',');
                out.extend_from_slice(b.extra.as_bytes());
            });
        }
        self.row.clear()?;
        let until = start.saturating_add(self.keep_ms);
        if until > now {
            ctx.register_event_time_timer(until)?;
            self.slot.set(&Slot::Closed { until })
        } else {
            self.slot.clear()
        }
    }
}

/// The auction's columns of the output row, each followed by a comma.
fn columns(a: &Auction<'_>) -> String {
    format!(
        "{},{},{},{},{},{},{},{},{},{},",
        a.id,
        a.item_name,
        a.description,
        a.initial_bid,
        a.reserve,
        a.date_time,
        a.expires,
        a.seller,
        a.category,
        a.extra
    )
}

/// A bid as it waits for its auction.
fn pending(b: Bid<'_>) -> Best {
    Best { price: b.price, date_time: b.date_time, bidder: b.bidder, extra: b.extra.into_owned() }
}

impl Operator for Q9 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Q9 {
            slot: ctx.value_state("auction")?,
            row: ctx.value_state("row")?,
            pending: ctx.list_state("pending-bids")?,
            keep_ms: ctx.param_or("keep_ms", 250)?,
            wait_ms: ctx.param_or("wait_ms", 50)?,
        })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match decode(input.payload)? {
            Event::Bid(b) => self.bid(ctx, b),
            Event::Auction(a) => self.auction(ctx, a),
            Event::Person(_) => Ok(()),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self.slot.get()? {
            // The watermark passed `expires`: no bid in the interval is to come.
            Some(Slot::Open { id, start, expires, best }) if timer.time >= expires => {
                self.close(ctx, timer.time, (id, start, expires), best)
            }
            Some(Slot::Closed { until }) if timer.time >= until => self.slot.clear(),
            Some(Slot::Open { .. } | Slot::Closed { .. }) | None => Ok(()),
            Some(Slot::Pending { timer: armed }) => {
                // An auction still to come has date_time > watermark >= timer.time.
                let mut bids = self.pending.get()?;
                bids.retain(|b| b.date_time > timer.time);
                if bids.is_empty() {
                    self.pending.clear()?;
                    return self.slot.clear();
                }
                let mut armed = armed;
                if armed <= timer.time {
                    // The timer these bids relied on fired: one more covers the rest.
                    armed = bids.iter().map(|b| b.date_time).max().unwrap_or(timer.time).saturating_add(self.wait_ms);
                    ctx.register_event_time_timer(armed)?;
                }
                self.pending.update(&bids)?;
                self.slot.set(&Slot::Pending { timer: armed })
            }
        }
    }
}

export_operator!(Q9);
