//! Nexmark q8, new users: the persons who registered and put up an auction
//! in the same 10-second tumbling window.
//!
//! ```sql
//! SELECT P.id, P.name, P.starttime FROM (
//!   SELECT P.id, P.name, TUMBLE_START(P.dateTime, INTERVAL '10' SECOND) AS starttime,
//!          TUMBLE_END(P.dateTime, INTERVAL '10' SECOND) AS endtime
//!   FROM person P GROUP BY P.id, P.name, TUMBLE(P.dateTime, INTERVAL '10' SECOND)) P
//! JOIN (
//!   SELECT A.seller, TUMBLE_START(A.dateTime, INTERVAL '10' SECOND) AS starttime,
//!          TUMBLE_END(A.dateTime, INTERVAL '10' SECOND) AS endtime
//!   FROM auction A GROUP BY A.seller, TUMBLE(A.dateTime, INTERVAL '10' SECOND)) A
//! ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
//! ```
//!
//! Output: one line per (person, window) in which the person registered and
//! sold at least one auction, `id,name,starttime` (window start in ms since
//! the epoch), emitted once, as soon as both sides are there (the SQL's
//! result is the same set, only earlier). Windows are aligned to the epoch;
//! param `window_ms` (default 10 000) sets their size.
//!
//! Keyed by person id (auctions keyed by `seller`). Either side may arrive
//! first, so per key one value, [`Windows`], holds the person's window and
//! name once the person came (with whether the line went out), and the
//! windows in which auctions came while the person was unknown. Each person
//! id occurs once in the stream, so once the person is known, auctions of
//! other windows can never join and are dropped at once, and the waiting
//! windows are forgotten. Every window put in the value gets an event-time
//! timer at its end - 1; when it fires, that window leaves the value (and
//! the value goes when empty), so state only holds open windows. No event
//! is late, so nothing of a window can come after its timer.

use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// The person, once it came.
#[derive(Serialize, Deserialize)]
struct Person {
    /// Start of the window it registered in.
    start: i64,
    name: String,
    /// Whether its line went out (an auction of `start`'s window came).
    emitted: bool,
}

/// What the current person id has in open windows.
#[derive(Serialize, Deserialize, Default)]
struct Windows {
    person: Option<Person>,
    /// Starts of the windows with auctions of an unknown person (empty
    /// once the person is known).
    auctions: Vec<i64>,
}

struct NewUsers {
    windows: ValueState<Windows>,
    size: i64,
}

impl NewUsers {
    fn start(&self, t: i64) -> i64 {
        t - t.rem_euclid(self.size)
    }

    fn emit(&self, ctx: &mut Context, id: u64, name: &str, start: i64) {
        ctx.emit_with(None, Some(start + self.size - 1), |out| {
            let mut n = itoa::Buffer::new();
            out.extend_from_slice(n.format(id).as_bytes());
            out.push(b',');
            out.extend_from_slice(name.as_bytes());
            out.push(b',');
            out.extend_from_slice(n.format(start).as_bytes());
        });
    }
}

impl Operator for NewUsers {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let size = ctx.param_or("window_ms", 10_000i64)?;
        if size <= 0 {
            return Err(Error::msg("params.window_ms must be at least 1"));
        }
        Ok(NewUsers { windows: ctx.value_state("windows")?, size })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match Event::decode(input.payload)? {
            Event::Auction(a) => {
                let start = self.start(a.date_time);
                let mut w = self.windows.get()?.unwrap_or_default();
                match &mut w.person {
                    Some(p) if p.start == start => {
                        if !p.emitted {
                            p.emitted = true;
                            self.emit(ctx, a.seller, &p.name, start);
                            self.windows.set(&w)?;
                        }
                    }
                    // The person registered in another window: no join.
                    Some(_) => {}
                    None => {
                        if !w.auctions.contains(&start) {
                            w.auctions.push(start);
                            self.windows.set(&w)?;
                            ctx.register_event_time_timer(start + self.size - 1)?;
                        }
                    }
                }
            }
            Event::Person(p) => {
                let start = self.start(p.date_time);
                let mut w = self.windows.get()?.unwrap_or_default();
                let emitted = w.auctions.contains(&start);
                if emitted {
                    self.emit(ctx, p.id, &p.name, start);
                } else {
                    ctx.register_event_time_timer(start + self.size - 1)?;
                }
                // Auctions of other windows can no longer join; their
                // timers find nothing to clear.
                w.auctions.clear();
                w.person = Some(Person { start, name: p.name.into_owned(), emitted });
                self.windows.set(&w)?;
            }
            Event::Bid(_) => {}
        }
        Ok(())
    }

    fn on_timer(&mut self, _ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(mut w) = self.windows.get()? else { return Ok(()) };
        // Windows ending at or before the timer are closed.
        let open = |start: i64| start + self.size - 1 > timer.time;
        w.auctions.retain(|&s| open(s));
        if w.person.as_ref().is_some_and(|p| !open(p.start)) {
            w.person = None;
        }
        if w.person.is_none() && w.auctions.is_empty() { self.windows.clear() } else { self.windows.set(&w) }
    }
}

export_operator!(NewUsers);
