//! Nexmark q6, average selling price by seller: per seller, the average
//! final price of their last closed auctions.
//!
//! ```sql
//! SELECT Q.seller, AVG(Q.price) OVER
//!   (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
//! FROM (
//!   SELECT *, ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC) AS rownum
//!   FROM (SELECT A.id, A.seller, B.price, B.`dateTime`
//!         FROM auction AS A, bid AS B
//!         WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires)
//!   WHERE rownum <= 1
//! ) AS Q;
//! ```
//!
//! (Flink cannot run it: its `OVER` window does not take the retractions the
//! inner `ROW_NUMBER` makes.) An auction's final price is its winning price,
//! q9's: the highest price among its bids with `auction.date_time <=
//! bid.date_time <= auction.expires` (both ends inclusive); an auction
//! without such a bid has none and does not count.
//!
//! The order of a seller's auctions: the SQL orders them by the winning
//! bid's `dateTime`, which is not known for good until the auction closes,
//! and an auction that closes later can have an earlier winning bid, so
//! rows in that order could never be final. Here a seller's auctions are in
//! the order they close: by `expires`, then by auction id (auctions closing
//! in the same millisecond). An auction closes when the watermark passes its
//! `expires` (no valid bid can come after). For every closed auction with a
//! final price, in that order, the query writes `seller,avg`: the average of
//! that price and the seller's up to 10 preceding ones (`ROWS BETWEEN 10
//! PRECEDING AND CURRENT ROW`: 11 rows, fewer for a seller's first
//! auctions), rounded down (Flink's `AVG` over `BIGINT` divides integers).
//! Every line is final.
//!
//! One crate, two stages, picked by `params.stage`:
//!
//! - `"winners"`, keyed by auction id (the source's default keys: auctions
//!   by `id`, bids by `auction`): q4's first stage, except that it writes
//!   an auction's final price once, at an event-time timer at `expires`,
//!   keyed by the seller in decimal, as 24 bytes: `expires`, auction id and
//!   price, each 8 bytes little-endian, with `expires` as its timestamp.
//!   Per auction: `(id, seller, date_time, expires, max)`; bids that come
//!   before their auction (at parallelism above 1 a bid can overtake it)
//!   wait in a list state, dropped by a timer at their time plus `wait_ms`
//!   (param, default 50) when the auction does not come: an auction that
//!   has not arrived when the watermark reaches `t` has `date_time > t`. An
//!   expired auction leaves a marker until `date_time + keep_ms` (param,
//!   default 250) that drops the bids still coming for it at once. Neither
//!   param changes the result.
//! - `"average"`, keyed by seller. Winners reach it from several subtasks
//!   of the first stage in any order, so each waits in the seller's state
//!   with a timer at its `expires`: when the watermark passes it, every
//!   first-stage subtask has written all auctions closing until then (a
//!   timer's output goes out before the watermark that fired it), and the
//!   waiting ones up to the timer are taken in `(expires, id)` order. The
//!   seller's state keeps its last 10 prices (all the window needs) and the
//!   winners still waiting.

use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::{Auction, Bid, Event, Person};
use weir_sdk::{Context, Element, Error, ListState, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// How many preceding auctions the average takes with the current one.
const PRECEDING: usize = 10;

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

/// What stage 1 knows about one auction id.
#[derive(Serialize, Deserialize)]
enum Slot {
    /// Bids came before the auction (in `WinnersStage::pending`); the time
    /// of the clean-up timer registered for them.
    Pending { timer: i64 },
    /// The auction and the highest price so far among its bids in
    /// `[start, expires]`, if any; its timer is at `expires`.
    Open { id: u64, seller: u64, start: i64, expires: i64, max: Option<u64> },
    /// The auction closed; bids that still come are dropped. A timer at
    /// `until` removes the marker.
    Closed { until: i64 },
}

/// Stage `"winners"`: the final price of every auction, once it closes.
struct WinnersStage {
    slot: ValueState<Slot>,
    /// Bids seen before their auction, as `(date_time, price)`.
    pending: ListState<(i64, u64)>,
    keep_ms: i64,
    wait_ms: i64,
}

impl WinnersStage {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match decode(input.payload)? {
            Event::Bid(b) => self.bid(ctx, b.date_time, b.price),
            Event::Auction(a) => self.auction(ctx, &a),
            Event::Person(_) => Ok(()),
        }
    }

    fn bid(&mut self, ctx: &mut Context, t: i64, price: u64) -> Result<()> {
        match self.slot.get()? {
            Some(Slot::Open { id, seller, start, expires, max }) => {
                if t < start || t > expires || max.is_some_and(|m| price <= m) {
                    return Ok(());
                }
                self.slot.set(&Slot::Open { id, seller, start, expires, max: Some(price) })
            }
            Some(Slot::Closed { .. }) => Ok(()),
            // The timer already registered drops what it covers and
            // re-arms for the rest (see `on_timer`).
            Some(Slot::Pending { .. }) => self.pending.add(&(t, price)),
            None => {
                let timer = t.saturating_add(self.wait_ms);
                ctx.register_event_time_timer(timer)?;
                self.slot.set(&Slot::Pending { timer })?;
                self.pending.add(&(t, price))
            }
        }
    }

    fn auction(&mut self, ctx: &mut Context, a: &Auction<'_>) -> Result<()> {
        let (start, expires) = (a.date_time, a.expires);
        let max = match self.slot.get()? {
            None => None,
            Some(Slot::Pending { timer }) => {
                // The auction's own timer replaces the pending bids' one.
                ctx.delete_event_time_timer(timer)?;
                let bids = self.pending.get()?;
                self.pending.clear()?;
                bids.iter().filter(|(t, _)| start <= *t && *t <= expires).map(|&(_, p)| p).max()
            }
            Some(Slot::Open { .. } | Slot::Closed { .. }) => {
                return Err(Error::msg(format!("auction {} seen twice", a.id)));
            }
        };
        self.slot.set(&Slot::Open { id: a.id, seller: a.seller, start, expires, max })?;
        ctx.register_event_time_timer(expires)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self.slot.get()? {
            // The watermark passed `expires`: no bid in the interval is to come.
            Some(Slot::Open { id, seller, start, expires, max }) if timer.time >= expires => {
                if let Some(price) = max {
                    let mut key = itoa::Buffer::new();
                    ctx.emit_with(Some(key.format(seller).as_bytes()), Some(expires), |out| {
                        out.extend_from_slice(&expires.to_le_bytes());
                        out.extend_from_slice(&id.to_le_bytes());
                        out.extend_from_slice(&price.to_le_bytes());
                    });
                }
                let until = start.saturating_add(self.keep_ms);
                if until > timer.time {
                    ctx.register_event_time_timer(until)?;
                    self.slot.set(&Slot::Closed { until })
                } else {
                    self.slot.clear()
                }
            }
            Some(Slot::Closed { until }) if timer.time >= until => self.slot.clear(),
            Some(Slot::Open { .. } | Slot::Closed { .. }) | None => Ok(()),
            Some(Slot::Pending { timer: armed }) => {
                // An auction still to come has date_time > watermark >= timer.time.
                let mut bids = self.pending.get()?;
                bids.retain(|(t, _)| *t > timer.time);
                if bids.is_empty() {
                    self.pending.clear()?;
                    return self.slot.clear();
                }
                let mut armed = armed;
                if armed <= timer.time {
                    // The timer these bids relied on fired: one more covers the rest.
                    armed = bids.iter().map(|(t, _)| *t).max().unwrap_or(timer.time).saturating_add(self.wait_ms);
                    ctx.register_event_time_timer(armed)?;
                }
                self.pending.update(&bids)?;
                self.slot.set(&Slot::Pending { timer: armed })
            }
        }
    }
}

/// Stage 2's state per seller.
#[derive(Serialize, Deserialize, Default)]
struct Seller {
    /// The final prices of the seller's last closed auctions, oldest first,
    /// at most [`PRECEDING`].
    last: Vec<u64>,
    /// Winners that came and whose `expires` the watermark has not passed,
    /// as `(expires, auction id, price)`.
    waiting: Vec<(i64, u64, u64)>,
}

/// Stage `"average"`: the moving average of each seller's final prices.
struct AverageStage {
    state: ValueState<Seller>,
}

impl AverageStage {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let word = |i: usize| input.payload.get(i..i + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let (Some(expires), Some(id), Some(price), 24) = (word(0), word(8), word(16), input.payload.len()) else {
            let n = input.payload.len();
            return Err(Error::msg(format!("stage average: a {n}-byte record is not a winner")));
        };
        let expires = expires as i64;
        let mut s = self.state.get()?.unwrap_or_default();
        s.waiting.push((expires, id, price));
        self.state.set(&s)?;
        ctx.register_event_time_timer(expires)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(mut s) = self.state.get()? else { return Ok(()) };
        let mut due: Vec<(i64, u64, u64)> = Vec::new();
        s.waiting.retain(|w| {
            let closed = w.0 <= timer.time;
            if closed {
                due.push(*w);
            }
            !closed
        });
        if due.is_empty() {
            return Ok(());
        }
        due.sort_unstable();
        for (_, _, price) in due {
            let sum = s.last.iter().try_fold(price, |sum, p| sum.checked_add(*p));
            let sum = sum.ok_or_else(|| Error::msg("sum of prices overflows"))?;
            let avg = sum / (s.last.len() as u64 + 1);
            ctx.emit_with(None, None, |out| {
                out.extend_from_slice(&timer.key);
                out.push(b',');
                out.extend_from_slice(itoa::Buffer::new().format(avg).as_bytes());
            });
            if s.last.len() == PRECEDING {
                s.last.remove(0);
            }
            s.last.push(price);
        }
        self.state.set(&s)
    }
}

enum Q6 {
    Winners(WinnersStage),
    Average(AverageStage),
}

impl Operator for Q6 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            Some("winners") => Ok(Q6::Winners(WinnersStage {
                slot: ctx.value_state("auction")?,
                pending: ctx.list_state("pending-bids")?,
                keep_ms: ctx.param_or("keep_ms", 250)?,
                wait_ms: ctx.param_or("wait_ms", 50)?,
            })),
            Some("average") => Ok(Q6::Average(AverageStage { state: ctx.value_state("seller")? })),
            other => Err(Error::msg(format!("params.stage must be \"winners\" or \"average\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q6::Winners(w) => w.process(ctx, input),
            Q6::Average(a) => a.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q6::Winners(w) => w.on_timer(ctx, timer),
            Q6::Average(a) => a.on_timer(ctx, timer),
        }
    }
}

export_operator!(Q6);
