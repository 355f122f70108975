//! Nexmark q12, processing-time windows: how many bids each bidder makes
//! in each 10 s of wall-clock time. The reference SQL:
//!
//! ```sql
//! CREATE VIEW B AS SELECT *, PROCTIME() as p_time FROM bid;
//! SELECT bidder, count(*) as bid_count,
//!        window_start AS starttime, window_end AS endtime
//! FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
//! GROUP BY bidder, window_start, window_end;
//! ```
//!
//! Output per bidder and window with bids: `bidder,bid_count,starttime,endtime`
//! (milliseconds since the epoch, `endtime = starttime + 10000`), without a
//! timestamp (processing time is not event time). `params.size_ms` (default
//! 10000) sets the window size.
//!
//! - A bid's `p_time` is the processing time of the call that processes it
//!   (`current-processing-time`: one reading per call, so the bids of one
//!   batch share it). Its window is `[p - p mod size, ... + size)`, aligned
//!   to the epoch as Flink's `TUMBLE` without an offset.
//! - A window is written when processing time reaches its end, by a
//!   processing-time timer at `endtime` (not `endtime - 1`: a bid processed
//!   in the window's last millisecond after the timer would otherwise open
//!   the same window again). A bid whose call sees a later window than the
//!   bidder's open one writes the open one first (its end has passed; its
//!   timer has not fired yet), so a bidder has one line per window. If the
//!   wall clock steps back, bids count in the bidder's open window.
//! - At the end of input the windows still open are written too, so every
//!   bid is counted once. (Flink in streaming mode drops processing-time
//!   timers still pending when a bounded input ends, and with them those
//!   windows; in batch mode it fires them at the end.) The host does not
//!   fire pending processing-time timers at the end, and `end-of-input` has
//!   no key to read state for, so each open window also has an event-time
//!   timer at `i64::MAX`: only the watermark every source sends when it
//!   ends reaches it, and the host fires it before `end-of-input`.
//!
//! Keyed by bidder (the source's `bid_key = "bidder"`), so the payload is
//! never decoded. Value state per bidder: its open window and count.

use serde::{Deserialize, Serialize};
use weir_sdk::{
    Context, Element, Error, OpenContext, Operator, Result, TimeDomain, Timer, ValueState, export_operator,
};

/// The event-time timer only the end of input reaches.
const AT_END: i64 = i64::MAX;

/// A bidder's open window.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct Window {
    start: i64,
    bids: u64,
}

struct Q12 {
    open: ValueState<Window>,
    size: i64,
}

impl Q12 {
    fn emit(&self, ctx: &mut Context, bidder: &[u8], w: Window) {
        ctx.emit_with(None, None, |out| {
            let mut n = itoa::Buffer::new();
            out.extend_from_slice(bidder);
            for v in [w.bids as i64, w.start, w.start + self.size] {
                out.push(b',');
                out.extend_from_slice(n.format(v).as_bytes());
            }
        });
    }
}

impl Operator for Q12 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let size: i64 = ctx.param_or("size_ms", 10_000)?;
        if size <= 0 {
            return Err(Error::msg("params.size_ms must be positive"));
        }
        Ok(Q12 { open: ctx.value_state("window")?, size })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let now = ctx.processing_time();
        let start = now - now.rem_euclid(self.size);
        match self.open.get()? {
            Some(mut w) if w.start >= start => {
                w.bids += 1;
                self.open.set(&w)
            }
            open => {
                if let Some(w) = open {
                    // Ended, its timer not fired yet (it will find this
                    // newer window and leave it).
                    let bidder = input.key.ok_or_else(|| Error::msg("q12 needs bids keyed by bidder"))?;
                    self.emit(ctx, bidder, w);
                }
                ctx.register_processing_time_timer(start + self.size)?;
                ctx.register_event_time_timer(AT_END)?;
                self.open.set(&Window { start, bids: 1 })
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(w) = self.open.get()? else { return Ok(()) };
        let due = match timer.domain {
            TimeDomain::ProcessingTime => w.start + self.size <= timer.time,
            TimeDomain::EventTime => timer.time == AT_END,
        };
        if due {
            self.emit(ctx, &timer.key, w);
            self.open.clear()?;
        }
        Ok(())
    }
}

export_operator!(Q12);
