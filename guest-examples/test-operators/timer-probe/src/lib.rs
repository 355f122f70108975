//! A test operator that registers timers and says when they fire, so the
//! host's timer service can be tested end to end. Params (from `job.toml`):
//! - `domain = "processing"` (the default): each record's key is a delay in
//!   milliseconds; the operator registers a processing-time timer that much
//!   after the call's processing time and emits `registered <key>`. When
//!   the timer fires it emits `fired <key>`, or `early <key>` if the
//!   processing time it sees is before the time the timer was registered
//!   for.
//! - `domain = "event"`: each record is emitted as `record <payload>`, and a
//!   record with an event time registers an event-time timer at that time;
//!   when it fires the operator emits `timer <time>`.

use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, Timer, export_operator};

struct TimerProbe {
    event_time: bool,
}

impl Operator for TimerProbe {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let event_time = match ctx.param("domain").unwrap_or("processing") {
            "processing" => false,
            "event" => true,
            other => return Err(Error::msg(format!("timer-probe: unknown domain '{other}'"))),
        };
        Ok(TimerProbe { event_time })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        if self.event_time {
            ctx.emit(format!("record {}", input.payload_str()));
            if let Some(t) = input.timestamp {
                ctx.register_event_time_timer(t)?;
            }
            return Ok(());
        }
        let key = input.key_str();
        let delay: i64 =
            key.parse().map_err(|_| Error::msg(format!("timer-probe: key {key:?} is not a delay in ms")))?;
        ctx.register_processing_time_timer(ctx.processing_time() + delay)?;
        ctx.emit(format!("registered {key}"));
        Ok(())
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let key = String::from_utf8_lossy(&timer.key).into_owned();
        if self.event_time {
            ctx.emit(format!("timer {}", timer.time));
        } else if ctx.processing_time() < timer.time {
            ctx.emit(format!("early {key}"));
        } else {
            ctx.emit(format!("fired {key}"));
        }
        Ok(())
    }
}

export_operator!(TimerProbe);
