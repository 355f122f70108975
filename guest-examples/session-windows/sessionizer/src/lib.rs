//! Session windows: clicks keyed by user, grouped into sessions of activity
//! separated by at least `gap_ms` of event time without a click. A session
//! closes when the watermark passes its last click plus the gap: an
//! event-time timer fires and the operator emits `user start end count`.
//!
//! Clicks may arrive out of order (within the source's
//! `max_out_of_orderness`): a click that falls between two open sessions
//! merges them. A click whose session would already have closed (later than
//! the watermark allows) is dropped, as Flink drops late data by default.

use weir_sdk::{Context, Element, Error, MapState, OpenContext, Operator, Result, Timer, export_operator};

struct Sessions {
    /// Open sessions of the current user: start -> (end, clicks).
    open: MapState<i64, (i64, u64)>,
    gap: i64,
}

impl Operator for Sessions {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Sessions { open: ctx.map_state("sessions")?, gap: ctx.param_or("gap_ms", 30_000)? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let t = input.timestamp.ok_or_else(|| Error::msg("clicks need an event time (timestamp_field)"))?;
        if t + self.gap <= ctx.watermark() {
            return Ok(()); // late: its session has closed
        }
        let (mut start, mut end, mut clicks) = (t, t, 1u64);
        let touching: Vec<(i64, (i64, u64))> = self
            .open
            .entries()
            .filter(|e| e.as_ref().map_or(true, |(s, (e, _))| *s - self.gap <= t && t <= *e + self.gap))
            .collect::<Result<_>>()?;
        for (s, (e, n)) in touching {
            start = start.min(s);
            end = end.max(e);
            clicks += n;
            self.open.remove(&s)?;
            ctx.delete_event_time_timer(e + self.gap)?;
        }
        self.open.put(&start, &(end, clicks))?;
        ctx.register_event_time_timer(end + self.gap)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let closing: Vec<(i64, (i64, u64))> = self
            .open
            .entries()
            .filter(|e| e.as_ref().map_or(true, |(_, (e, _))| *e + self.gap == timer.time))
            .collect::<Result<_>>()?;
        let user = String::from_utf8_lossy(&timer.key).into_owned();
        for (start, (end, clicks)) in closing {
            self.open.remove(&start)?;
            ctx.emit(format!("{user} {start} {end} {clicks}"));
        }
        Ok(())
    }
}

export_operator!(Sessions);
