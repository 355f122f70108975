//! Nexmark q7, highest bid: the bids at the highest price of every 10 s
//! tumbling window. The reference SQL:
//!
//! ```sql
//! SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra FROM bid B
//! JOIN (SELECT MAX(B1.price) AS maxprice, TUMBLE_ROWTIME(B1.dateTime, INTERVAL '10' SECOND) AS dateTime
//!       FROM bid B1 GROUP BY TUMBLE(B1.dateTime, INTERVAL '10' SECOND)) B1
//! ON B.price = B1.maxprice
//! WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime;
//! ```
//!
//! `TUMBLE_ROWTIME` is the window end minus 1 ms, so for the window
//! `[s, s + size)` (`s` a multiple of `size`, aligned to the epoch; param
//! `window_ms`, default 10000): `maxprice` is the largest price of the bids
//! with `s <= date_time < s + size`, and the output is every bid with
//! `price == maxprice` and `s - 1 <= date_time <= s + size - 1`, both ends
//! included, exactly as the SQL says. A bid at `s - 1` (the previous
//! window's last millisecond) is compared with window `s`'s maximum too, so
//! it can be written for two windows. A window without bids of its own
//! writes nothing.
//!
//! Output: `auction,price,bidder,date_time,extra`, one line per (window,
//! matching bid).
//!
//! Two stages, one crate; `params.stage` picks one:
//!
//! - `"local"`, on each source subtask's bids as they come (no shuffle, no
//!   keyed state). Only a bid that could equal its window's maximum needs to
//!   travel: the operator keeps, per open window, the highest price it has
//!   seen in it, and forwards a bid (keyed by window start, decimal) only
//!   when its price is at least that high; ties are forwarded. A bid at a
//!   window's last millisecond is also forwarded, marked as an edge
//!   candidate, to the next window unless a higher price of that window was
//!   already seen. This running maximum is a filter, never the result: it
//!   lives in the instance's memory (one entry per open window, dropped once
//!   the watermark passes the window end), and losing it (a restore starts
//!   with none) only lets more candidates through, so it needs no
//!   checkpointed state. A window of ~92 000 bids sends a few dozen.
//! - `"max"`, keyed by window start. Value state per window: the highest
//!   price of the window's own bids, the lines of the bids at it, and the
//!   edge candidates (lines with prices); one timer at the window end
//!   (registered with the window's first candidate) writes the lines at the
//!   maximum and the edge candidates equal to it, then clears the state.
//!   Candidates come from `local` before the watermark that passes their
//!   time, so they have all arrived when the timer fires.
//!
//! The `local` -> `max` payload: a tag byte (`w` for a bid of the window,
//! `e` for an edge candidate), the price (u64, little-endian), then the
//! output line.

use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::{Bid, Event};
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, Timer, ValueState, export_operator};

fn window_size(ctx: &OpenContext) -> Result<i64> {
    let size: i64 = ctx.param_or("window_ms", 10_000)?;
    if size <= 0 {
        return Err(Error::msg("params.window_ms must be positive"));
    }
    Ok(size)
}

struct Local {
    size: i64,
    /// (window start, highest price seen in it) of the open windows.
    seen: Vec<(i64, u64)>,
}

impl Local {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        let t = b.date_time;
        let s = t - t.rem_euclid(self.size);
        let i = match self.seen.iter().position(|w| w.0 == s) {
            Some(i) => i,
            None => self.open_window(ctx, s),
        };
        if b.price >= self.seen[i].1 {
            self.seen[i].1 = b.price;
            emit(ctx, s, b'w', &b);
        }
        if t == s + self.size - 1 {
            // A candidate for the next window too, compared only with that
            // window's own bids: it does not raise that window's maximum.
            let next = s + self.size;
            if self.seen.iter().find(|w| w.0 == next).is_none_or(|w| b.price >= w.1) {
                emit(ctx, next, b'e', &b);
            }
        }
        Ok(())
    }

    /// Adds window `s` (nothing seen yet) and drops the windows no bid can
    /// come for any more: those that ended at or before the watermark.
    fn open_window(&mut self, ctx: &Context, s: i64) -> usize {
        let watermark = ctx.watermark();
        let size = self.size;
        self.seen.retain(|w| w.0 + size - 1 > watermark);
        self.seen.push((s, 0));
        self.seen.len() - 1
    }
}

/// Sends bid `b` to window `s`'s `max` as a candidate of kind `tag`.
fn emit(ctx: &mut Context, s: i64, tag: u8, b: &Bid<'_>) {
    let mut k = itoa::Buffer::new();
    ctx.emit_with(Some(k.format(s).as_bytes()), Some(b.date_time), |out| {
        let mut n = itoa::Buffer::new();
        out.push(tag);
        out.extend_from_slice(&b.price.to_le_bytes());
        for v in [b.auction, b.price, b.bidder] {
            out.extend_from_slice(n.format(v).as_bytes());
            out.push(b',');
        }
        out.extend_from_slice(n.format(b.date_time).as_bytes());
        out.push(b',');
        out.extend_from_slice(b.extra.as_bytes());
    });
}

/// One window's candidates.
#[derive(Serialize, Deserialize, Default)]
struct Best {
    /// The highest price of the window's own bids, if any came.
    max: Option<u64>,
    /// Lines of the window's bids at `max`.
    lines: Vec<String>,
    /// (price, line) of the bids at the previous window's last millisecond.
    edge: Vec<(u64, String)>,
}

struct Max {
    size: i64,
    state: ValueState<Best>,
}

impl Max {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let p = input.payload;
        let (Some(&tag), Some(price), Ok(line)) = (
            p.first(),
            p.get(1..9).map(|b| u64::from_le_bytes(b.try_into().unwrap())),
            std::str::from_utf8(p.get(9..).unwrap_or_default()),
        ) else {
            return Err(Error::msg("max: expected a candidate from the local stage"));
        };
        let mut best = match self.state.get()? {
            Some(b) => b,
            None => {
                let s = parse(input.key.unwrap_or_default())?;
                ctx.register_event_time_timer(s + self.size - 1)?;
                Best::default()
            }
        };
        match tag {
            b'w' => {
                if best.max.is_none_or(|m| price > m) {
                    best.max = Some(price);
                    best.lines.clear();
                }
                if best.max == Some(price) {
                    best.lines.push(line.to_string());
                }
            }
            b'e' => best.edge.push((price, line.to_string())),
            _ => return Err(Error::msg("max: unknown candidate tag")),
        }
        self.state.set(&best)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(best) = self.state.get()? else { return Ok(()) };
        if let Some(max) = best.max {
            let edge = best.edge.iter().filter(|(p, _)| *p == max).map(|(_, l)| l);
            for line in best.lines.iter().chain(edge) {
                ctx.emit_with(None, Some(timer.time), |out| out.extend_from_slice(line.as_bytes()));
            }
        }
        self.state.clear()
    }
}

fn parse(key: &[u8]) -> Result<i64> {
    std::str::from_utf8(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::msg("max: the key is not a window start (read local with partition = \"key\")"))
}

enum Q7 {
    Local(Local),
    Max(Max),
}

impl Operator for Q7 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let size = window_size(ctx)?;
        match ctx.param("stage") {
            Some("local") => Ok(Q7::Local(Local { size, seen: Vec::new() })),
            Some("max") => Ok(Q7::Max(Max { size, state: ctx.value_state("best")? })),
            _ => Err(Error::msg("params.stage must be \"local\" or \"max\"")),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q7::Local(l) => l.process(ctx, input),
            Q7::Max(m) => m.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q7::Local(_) => Ok(()),
            Q7::Max(m) => m.on_timer(ctx, timer),
        }
    }
}

export_operator!(Q7);
