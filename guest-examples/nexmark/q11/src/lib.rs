//! Nexmark q11, user sessions: how many bids each bidder makes per session
//! of activity. The reference SQL:
//!
//! ```sql
//! SELECT B.bidder, count(*) AS bid_count,
//!        SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
//!        SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
//! FROM bid B
//! GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND);
//! ```
//!
//! As Flink's session windows: a bid at `t` opens the window `[t, t +
//! gap)`, and windows of one bidder that intersect merge, touching ones
//! included (Flink's `TimeWindow.intersects`: `start <= other.end && end >=
//! other.start`), so two bids are in one session when at most `gap` apart
//! (through the bids between). A session `[start, last + gap)` is complete
//! once the watermark reaches `last + gap`: a bid at `last + gap` would
//! still touch it, and the watermark promises no bid at or before it
//! follows. Output per session: `bidder,bid_count,starttime,endtime`
//! (`endtime = last + gap`). `params.gap_ms` (default 10000) sets the gap.
//!
//! Keyed by bidder (the source's `bid_key = "bidder"`): the key is the
//! bidder and the record timestamp the bid's time, so the payload is never
//! decoded. Value state per bidder: its open sessions, usually one.
//!
//! Timers: a bid that extends a session does not move its timer (that
//! would be a delete and a register per bid). Each session keeps the time
//! of the timer registered for it, at or before its closing time; when
//! that timer fires before the session is complete, it is registered again
//! at the session's current end. A bidder bidding without pause costs one
//! timer per `gap` of event time, not one per bid.

use serde::{Deserialize, Serialize};
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// One open session of a bidder.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct Session {
    start: i64,
    /// The latest bid's time: the session ends at `last + gap`.
    last: i64,
    bids: u64,
    /// The time of the event-time timer pending for this session.
    armed: i64,
}

struct Q11 {
    /// A bidder's open sessions, by start.
    open: ValueState<Vec<Session>>,
    gap: i64,
}

impl Q11 {
    /// When `s` closes: the watermark at which no bid can join it (a bid
    /// at `last + gap` touches it), its timer's time once complete.
    fn closes_at(&self, s: &Session) -> i64 {
        s.last.saturating_add(self.gap)
    }
}

impl Operator for Q11 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let gap: i64 = ctx.param_or("gap_ms", 10_000)?;
        if gap <= 0 {
            return Err(Error::msg("params.gap_ms must be positive"));
        }
        Ok(Q11 { open: ctx.value_state("sessions")?, gap })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let t = input.timestamp.ok_or_else(|| Error::msg("a bid without a timestamp"))?;
        let mut sessions = self.open.get()?.unwrap_or_default();
        // The sessions whose windows [start, last + gap) intersect or touch
        // [t, t + gap) merge with it.
        let (touching, mut rest): (Vec<Session>, Vec<Session>) = sessions
            .drain(..)
            .partition(|s| s.start <= t.saturating_add(self.gap) && t <= s.last.saturating_add(self.gap));
        let merged = match touching.into_iter().reduce(|a, b| Session {
            start: a.start.min(b.start),
            last: a.last.max(b.last),
            bids: a.bids + b.bids,
            // The earliest of their timers is pending; the others will find
            // no session armed at their time and do nothing.
            armed: a.armed.min(b.armed),
        }) {
            Some(s) => Session { start: s.start.min(t), last: s.last.max(t), bids: s.bids + 1, ..s },
            None => {
                let s = Session { start: t, last: t, bids: 1, armed: 0 };
                let armed = self.closes_at(&s);
                ctx.register_event_time_timer(armed)?;
                Session { armed, ..s }
            }
        };
        let at = rest.partition_point(|s| s.start < merged.start);
        rest.insert(at, merged);
        self.open.set(&rest)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(sessions) = self.open.get()? else { return Ok(()) };
        let mut kept = Vec::with_capacity(sessions.len());
        let mut changed = false;
        for mut s in sessions {
            if s.armed != timer.time {
                kept.push(s);
                continue;
            }
            changed = true;
            if self.closes_at(&s) <= timer.time {
                let mut n = itoa::Buffer::new();
                ctx.emit_with(None, Some(s.last.saturating_add(self.gap)), |out| {
                    out.extend_from_slice(&timer.key);
                    for v in [s.bids as i64, s.start, s.last.saturating_add(self.gap)] {
                        out.push(b',');
                        out.extend_from_slice(n.format(v).as_bytes());
                    }
                });
            } else {
                // Extended since the timer was set: wait for its new end.
                s.armed = self.closes_at(&s);
                ctx.register_event_time_timer(s.armed)?;
                kept.push(s);
            }
        }
        match (changed, kept.is_empty()) {
            (false, _) => Ok(()),
            (true, true) => self.open.clear(),
            (true, false) => self.open.set(&kept),
        }
    }
}

export_operator!(Q11);
