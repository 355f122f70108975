//! Nexmark q5, hot items: for every hopping window of 10 s sliding by 2 s,
//! the auctions with the most bids in it. The reference SQL:
//!
//! ```sql
//! SELECT AuctionBids.auction, AuctionBids.num FROM (
//!   SELECT B1.auction, count(*) AS num,
//!          HOP_START(B1.dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS starttime,
//!          HOP_END(B1.dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS endtime
//!   FROM bid B1 GROUP BY B1.auction, HOP(B1.dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)) AuctionBids
//! JOIN (
//!   SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime FROM (
//!     SELECT count(*) AS num, HOP_START(...) AS starttime, HOP_END(...) AS endtime
//!     FROM bid B2 GROUP BY B2.auction, HOP(B2.dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)) CountBids
//!   GROUP BY CountBids.starttime, CountBids.endtime) MaxBids
//! ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
//!    AND AuctionBids.num >= MaxBids.maxn;
//! ```
//!
//! Windows are `[s, s + size)` with `s` a multiple of `slide` (aligned to
//! the epoch, as Flink's HOP without offset); a bid at `t` is in every
//! window with `t - size < s <= t`. Defaults: `size_ms = 10000`,
//! `slide_ms = 2000` (`size_ms` must be a multiple of `slide_ms`).
//!
//! Output: one line per (window, auction) whose count equals the window's
//! largest, `starttime,auction,num` (ties give one line per auction).
//!
//! Two stages, one crate; `params.stage` picks one:
//!
//! - `"count"`, keyed by auction (the source's bid key). It needs no
//!   payload decoding: the key is the auction, the record timestamp the
//!   bid's time. Value state per auction: its bid counts per pane (the
//!   `slide`-long slices windows are made of). A bid in a new pane registers
//!   an event-time timer at the end of every window holding that pane
//!   (`size / slide` of them; the host keeps one timer per key and time, and
//!   ends an already counted pane covers are skipped), so an auction has
//!   timers only for windows it has bids in. A timer at `end` fires once the
//!   watermark passes it, when every bid of the window `[end + 1 - size,
//!   end]` has arrived: the operator emits the auction's count for it, keyed
//!   by the window start (decimal), with the window end as timestamp. It
//!   reads the state but writes it only to clear it (after the newest pane's
//!   last window: no timer is left) or to prune panes whose windows are all
//!   emitted (once more than `STALE_PANES` are), so state is bounded by the
//!   auctions with bids in an open window. Counts that cannot be their
//!   window's maximum stay here: per window end, the subtask remembers in
//!   memory the largest count it emitted and emits a count only if it is at
//!   least that (ties go on). That memory is a filter, not a result: a
//!   restore starts without it and only emits more.
//! - `"max"`, keyed by window start. Value state per window: the largest
//!   count so far and the auctions at it; a timer at the window end (the
//!   count records' timestamp) emits the lines and clears the state. The
//!   counts of a window are emitted by `count` timers at the window end,
//!   before the watermark that fires them reaches `max`, so they have all
//!   arrived when `max`'s timer fires.
//!
//! The `count` -> `max` payload is binary: the auction (u64) and its count
//! (u32), little-endian.

use serde::{Deserialize, Serialize};
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// Window geometry, shared by both stages.
#[derive(Clone, Copy)]
struct Hop {
    size: i64,
    slide: i64,
}

impl Hop {
    fn read(ctx: &OpenContext) -> Result<Hop> {
        let size: i64 = ctx.param_or("size_ms", 10_000)?;
        let slide: i64 = ctx.param_or("slide_ms", 2_000)?;
        if slide <= 0 || size <= 0 || size % slide != 0 {
            return Err(Error::msg("params.size_ms must be a positive multiple of params.slide_ms"));
        }
        Ok(Hop { size, slide })
    }
}

/// One auction's bids per pane, `(pane start, bids)` sorted by start, for
/// the panes a window not yet emitted holds (and, until the next prune, a
/// few whose windows are all emitted).
type Panes = Vec<(i64, u32)>;

/// Panes whose windows have all been emitted that a timer leaves in the
/// state (pruning them costs a state write).
const STALE_PANES: usize = 2;

struct Count {
    hop: Hop,
    state: ValueState<Panes>,
    /// (window end, largest count emitted for it by this subtask): a count
    /// below it cannot be its window's maximum, so it need not travel. A
    /// filter only: lost on restore, it lets more counts through.
    emitted: (i64, u32),
}

impl Count {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let t = input.timestamp.ok_or_else(|| Error::msg("a bid without a timestamp"))?;
        let Hop { size, slide } = self.hop;
        let pane = t - t.rem_euclid(slide);
        let mut panes = self.state.get()?.unwrap_or_default();
        match panes.binary_search_by_key(&pane, |p| p.0) {
            Ok(i) => panes[i].1 += 1,
            Err(i) => {
                // A new pane: a timer at the end of every window holding it
                // (pane + slide - 1 up to pane + size - 1), unless a pane
                // already counted is in that window too (its timer is
                // pending: the watermark is below this bid's time). Bids of
                // one auction from several source subtasks interleave, so
                // the new pane may be older than others.
                let mut end = pane + slide - 1;
                while end < pane + size {
                    if !panes.iter().any(|p| p.0 > end - size && p.0 <= end) {
                        ctx.register_event_time_timer(end)?;
                    }
                    end += slide;
                }
                panes.insert(i, (pane, 1));
            }
        }
        self.state.set(&panes)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(mut panes) = self.state.get()? else { return Ok(()) };
        let Hop { size, .. } = self.hop;
        let end = timer.time;
        let start = end + 1 - size;
        let num: u64 = panes.iter().filter(|p| p.0 >= start && p.0 <= end).map(|p| u64::from(p.1)).sum();
        if self.emitted.0 != end {
            self.emitted = (end, 0);
        }
        // Each (auction, window end) timer fires once (the host keeps one
        // per key and time), so each count is emitted at most once.
        if num > 0 && num >= u64::from(self.emitted.1) {
            let num = u32::try_from(num).unwrap_or(u32::MAX);
            self.emitted.1 = num;
            let auction = parse(&timer.key)?;
            let mut n = itoa::Buffer::new();
            ctx.emit_with(Some(n.format(start).as_bytes()), Some(end), |out| {
                out.extend_from_slice(&auction.to_le_bytes());
                out.extend_from_slice(&num.to_le_bytes());
            });
        }
        // Panes whose last window ends by now are done. The last window of
        // the newest pane: nothing is left (and no timer is pending).
        let done = panes.iter().take_while(|p| p.0 + size - 1 <= end).count();
        if done == panes.len() {
            self.state.clear()
        } else if done > STALE_PANES {
            panes.drain(..done);
            self.state.set(&panes)
        } else {
            Ok(())
        }
    }
}

/// The auctions at the largest count of one window.
#[derive(Serialize, Deserialize)]
struct Hot {
    max: u32,
    auctions: Vec<u64>,
}

struct Max {
    state: ValueState<Hot>,
}

impl Max {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let (Some(end), Ok(p)) = (input.timestamp, <[u8; 12]>::try_from(input.payload)) else {
            return Err(Error::msg("max: expected a count record from the count stage"));
        };
        let auction = u64::from_le_bytes(p[..8].try_into().unwrap());
        let num = u32::from_le_bytes(p[8..].try_into().unwrap());
        let hot = match self.state.get()? {
            None => {
                // The first count of this window: close it at its end.
                ctx.register_event_time_timer(end)?;
                Hot { max: num, auctions: vec![auction] }
            }
            Some(mut h) => {
                if num > h.max {
                    h.max = num;
                    h.auctions.clear();
                }
                if num == h.max {
                    h.auctions.push(auction);
                }
                h
            }
        };
        self.state.set(&hot)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(hot) = self.state.get()? else { return Ok(()) };
        let mut n = itoa::Buffer::new();
        for a in hot.auctions {
            ctx.emit_with(None, Some(timer.time), |out| {
                out.extend_from_slice(&timer.key);
                out.push(b',');
                out.extend_from_slice(n.format(a).as_bytes());
                out.push(b',');
                out.extend_from_slice(n.format(hot.max).as_bytes());
            });
        }
        self.state.clear()
    }
}

fn parse(key: &[u8]) -> Result<u64> {
    std::str::from_utf8(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::msg("count: the key is not an auction id (bids keyed by auction)"))
}

enum Q5 {
    Count(Count),
    Max(Max),
}

impl Operator for Q5 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            Some("count") => {
                Ok(Q5::Count(Count { hop: Hop::read(ctx)?, state: ctx.value_state("panes")?, emitted: (i64::MIN, 0) }))
            }
            Some("max") => Ok(Q5::Max(Max { state: ctx.value_state("hot")? })),
            _ => Err(Error::msg("params.stage must be \"count\" or \"max\"")),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q5::Count(c) => c.process(ctx, input),
            Q5::Max(m) => m.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q5::Count(c) => c.on_timer(ctx, timer),
            Q5::Max(m) => m.on_timer(ctx, timer),
        }
    }
}

export_operator!(Q5);
