//! Nexmark in the tests and benchmarks: the events the `kind = "nexmark"`
//! source produces with its defaults, made here by the `nexmark` crate
//! directly, and each query computed from them by a plain implementation
//! of its reference SQL (not the operators' code), to compare with what a
//! job wrote.

use nexmark::config::NexmarkConfig;
use nexmark::event::Event;

pub mod q0_q2;
pub mod q10;
pub mod q11;
pub mod q12;
pub mod q13;
pub mod q14;
pub mod q15;
pub mod q16;
pub mod q17;
pub mod q18;
pub mod q19;
pub mod q20;
pub mod q21;
pub mod q22;
pub mod q3;
pub mod q4;
pub mod q5;
pub mod q6;
pub mod q7;
pub mod q8;
pub mod q9;

/// The source's default `base_time`: event time starts here (ms).
pub const BASE_TIME: u64 = 1_735_689_600_000;

/// The generator configuration of a `nexmark` source with default options.
pub fn config() -> NexmarkConfig {
    NexmarkConfig { base_time: BASE_TIME, ..NexmarkConfig::default() }
}

/// The first `n` events of a `nexmark` source with default options, in
/// the order of their index.
pub fn events(n: usize) -> Vec<Event> {
    nexmark::EventGenerator::new(config()).take(n).collect()
}

/// The first `n` events of a `nexmark` source with `seed = <seed>`: ids,
/// which seed each event's data, start `seed` rounds of 50 events later.
pub fn seeded_events(n: usize, seed: usize) -> Vec<Event> {
    nexmark::EventGenerator::new(NexmarkConfig { first_event_id: seed * 50, ..config() }).take(n).collect()
}

/// The first `n` events of a `nexmark` source with `base_time = BASE_TIME`
/// and a rate that steps through `rates` (events per second), each for
/// `step_seconds`, round and round: the crate's events, timed by walking
/// the steps as `docs/nexmark.md` defines them (a step at rate `r` holds
/// `step_seconds * r` events `1000 / r` ms apart). `config` must carry the
/// same rates, so that the crate draws the same events.
pub fn stepped_events(n: usize, config: NexmarkConfig, rates: &[u64], step_seconds: u64) -> Vec<Event> {
    let mut generator = nexmark::EventGenerator::new(config);
    let mut out = Vec::with_capacity(n);
    let mut step_start = BASE_TIME;
    while out.len() < n {
        for &rate in rates {
            for j in 0..step_seconds * rate {
                if out.len() == n {
                    return out;
                }
                let at = step_start + j * 1000 / rate;
                let mut event = generator.next().expect("the generator never ends");
                match &mut event {
                    Event::Person(p) => p.date_time = at,
                    Event::Auction(a) => {
                        let length = a.expires - a.date_time;
                        a.date_time = at;
                        a.expires = at + length;
                    }
                    Event::Bid(b) => b.date_time = at,
                }
                out.push(event);
            }
            step_start += step_seconds * 1000;
        }
    }
    out
}

/// The bids among `events`.
pub fn bids(events: &[Event]) -> impl Iterator<Item = &nexmark::event::Bid> {
    events.iter().filter_map(|e| match e {
        Event::Bid(b) => Some(b),
        _ => None,
    })
}

/// `lines` sorted, for comparing outputs whose order is not defined.
pub fn sorted(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = lines.into_iter().collect();
    v.sort();
    v
}
