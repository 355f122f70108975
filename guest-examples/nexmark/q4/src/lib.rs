//! Nexmark q4, average closing price per category:
//!
//! ```sql
//! SELECT Q.category, AVG(Q.final) FROM (
//!   SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
//!   WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//!   GROUP BY A.id, A.category) Q
//! GROUP BY Q.category;
//! ```
//!
//! An updating query, as Flink runs it: the inner group emits a new maximum
//! per auction whenever it grows, and the outer `AVG` retracts the old one
//! and adds the new. For every auction, `final` is the highest price among
//! its bids with `auction.date_time <= bid.date_time <= auction.expires`
//! (both ends inclusive); an auction without such a bid does not count. Per
//! category, the average is `sum of finals / auctions counted`, rounded
//! down (Flink's `AVG` over `BIGINT` divides integers).
//!
//! One crate, two stages, picked by `params.stage`:
//!
//! - `"max"`, keyed by auction id (the source's default keys: auctions by
//!   `id`, bids by `auction`). One value state per auction: once the
//!   auction is known, `(category, date_time, expires, max)`. Bids can come
//!   before it (a bid overtakes its auction when they come from different
//!   source subtasks); they wait in a list state, appended to without
//!   reading it, to be checked against the auction's interval when it
//!   arrives. When `max` changes it
//!   emits, keyed by the category in decimal, the old maximum (if any) and
//!   the new one: 8 bytes little-endian new, then 8 more for the old when
//!   there was one.
//! - `"average"`, keyed by category: `(sum, count)` per category; it writes
//!   `category,avg` whenever the average differs from the last one it wrote,
//!   so the last line per category is the query's result.
//!
//! State stays bounded. An auction's state may go once the watermark passes
//! `expires`: no bid inside the interval can still arrive then (no event is
//! late). Its event-time clean-up timer is set at
//! `max(expires, date_time + keep_ms)` (param, default 250): kept a little
//! longer, the entry drops the bids still coming for an expired auction at
//! once, where a missing entry would hold them as pending bids with a timer.
//! Bids waiting for their auction are dropped by a timer at their own time
//! plus `wait_ms` (param, default 50, so the bids on an auction not yet
//! created share one timer): an auction that has not arrived by the time the
//! watermark reaches `t` will have `date_time > t`, so such a bid can never
//! count. When the auction arrives, that timer is deleted. Neither param
//! changes the result. Categories are few (5 by default), so the second
//! stage's state is tiny and kept.

use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, Error, ListState, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// What stage 1 knows about one auction id.
#[derive(Serialize, Deserialize)]
enum Slot {
    /// Bids came before the auction (they are in `MaxStage::pending`);
    /// the time of the clean-up timer registered for them.
    Pending { timer: i64 },
    /// The auction and the highest price so far among its bids in
    /// `[start, expires]`, if any.
    Open { category: u64, start: i64, expires: i64, max: Option<u64> },
}

/// Stage `"max"`: the highest valid bid per auction.
struct MaxStage {
    slot: ValueState<Slot>,
    /// Bids seen before their auction, as `(date_time, price)`.
    pending: ListState<(i64, u64)>,
    /// An auction's entry lives at least this long after its `date_time`,
    /// even past `expires`, so the bids still coming for it (the generator
    /// bids on the last 100 auctions) are dropped at once instead of
    /// waiting as pending bids with a timer each. Any value is correct.
    keep_ms: i64,
    /// Pending bids wait this long past their own time before their timer
    /// drops them, so the bids for an auction not yet created share one
    /// timer. Any value is correct.
    wait_ms: i64,
}

impl MaxStage {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match Event::decode(input.payload)? {
            Event::Bid(b) => self.bid(ctx, b.date_time, b.price),
            Event::Auction(a) => self.auction(ctx, a.id, a.category, a.date_time, a.expires),
            Event::Person(_) => Ok(()),
        }
    }

    fn bid(&mut self, ctx: &mut Context, t: i64, price: u64) -> Result<()> {
        match self.slot.get()? {
            Some(Slot::Open { category, start, expires, max }) => {
                if t < start || t > expires || max.is_some_and(|m| price <= m) {
                    return Ok(());
                }
                emit_max(ctx, category, max, price);
                self.slot.set(&Slot::Open { category, start, expires, max: Some(price) })
            }
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

    fn auction(&mut self, ctx: &mut Context, id: u64, category: u64, start: i64, expires: i64) -> Result<()> {
        let max = match self.slot.get()? {
            None => None,
            Some(Slot::Pending { timer }) => {
                // The auction's own timer replaces the pending bids' one.
                ctx.delete_event_time_timer(timer)?;
                let bids = self.pending.get()?;
                self.pending.clear()?;
                bids.iter().filter(|(t, _)| start <= *t && *t <= expires).map(|&(_, p)| p).max()
            }
            Some(Slot::Open { .. }) => return Err(Error::msg(format!("auction {id} seen twice"))),
        };
        if let Some(m) = max {
            emit_max(ctx, category, None, m);
        }
        self.slot.set(&Slot::Open { category, start, expires, max })?;
        ctx.register_event_time_timer(expires.max(start.saturating_add(self.keep_ms)))
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self.slot.get()? {
            // The watermark passed `expires`: no bid in the interval is to come.
            Some(Slot::Open { expires, .. }) if timer.time >= expires => self.slot.clear(),
            Some(Slot::Open { .. }) | None => Ok(()),
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

/// Tells stage 2, keyed by category, that an auction's maximum went from
/// `old` (none: the auction did not count yet) to `new`.
fn emit_max(ctx: &mut Context, category: u64, old: Option<u64>, new: u64) {
    let mut key = itoa::Buffer::new();
    ctx.emit_with(Some(key.format(category).as_bytes()), None, |out| {
        out.extend_from_slice(&new.to_le_bytes());
        if let Some(o) = old {
            out.extend_from_slice(&o.to_le_bytes());
        }
    });
}

/// Stage 2's state per category.
#[derive(Serialize, Deserialize, Default)]
struct Average {
    /// Sum of the counted auctions' current maxima.
    sum: u64,
    /// Auctions counted.
    count: u64,
    /// The average last written, if any.
    written: Option<u64>,
}

/// Stage `"average"`: the average of the maxima per category.
struct AverageStage {
    state: ValueState<Average>,
}

impl AverageStage {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let category = input.key.ok_or_else(|| Error::msg("stage average needs partition = \"key\""))?;
        let word = |i: usize| input.payload.get(i..i + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let (new, old) = match input.payload.len() {
            8 => (word(0), None),
            16 => (word(0), word(8)),
            n => return Err(Error::msg(format!("stage average: a {n}-byte record is not a max update"))),
        };
        let new = new.unwrap_or_default();
        let mut s = self.state.get()?.unwrap_or_default();
        match old {
            // A retraction: the auction is counted already, its max replaced.
            Some(o) => s.sum = s.sum.checked_sub(o).ok_or_else(|| Error::msg("retracted more than was added"))?,
            None => s.count += 1,
        }
        s.sum = s.sum.checked_add(new).ok_or_else(|| Error::msg("sum of prices overflows"))?;
        let avg = s.sum / s.count;
        if s.written != Some(avg) {
            s.written = Some(avg);
            ctx.emit_with(None, None, |out| {
                out.extend_from_slice(category);
                out.push(b',');
                out.extend_from_slice(itoa::Buffer::new().format(avg).as_bytes());
            });
        }
        self.state.set(&s)
    }
}

enum Q4 {
    Max(MaxStage),
    Average(AverageStage),
}

impl Operator for Q4 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            Some("max") => Ok(Q4::Max(MaxStage {
                slot: ctx.value_state("auction")?,
                pending: ctx.list_state("pending-bids")?,
                keep_ms: ctx.param_or("keep_ms", 250)?,
                wait_ms: ctx.param_or("wait_ms", 50)?,
            })),
            Some("average") => Ok(Q4::Average(AverageStage { state: ctx.value_state("category")? })),
            other => Err(Error::msg(format!("params.stage must be \"max\" or \"average\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q4::Max(m) => m.process(ctx, input),
            Q4::Average(a) => a.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q4::Max(m) => m.on_timer(ctx, timer),
            Q4::Average(_) => Ok(()),
        }
    }
}

export_operator!(Q4);
