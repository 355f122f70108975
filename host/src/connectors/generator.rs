//! `kind = "generator"` source: a deterministic stream of `count` records
//! over `keys` distinct keys, for tests and benchmarks. Its position is the
//! index of the next record.
//!
//! Record `i` has key `k = splitmix64(seed + i) % keys`, written as decimal
//! ASCII, and the same bytes as payload; with `event_time_step`, its event
//! time is `i * step` milliseconds. The same (count, keys, seed) always
//! gives the same stream.
//!
//! With `timestamps = "wall-clock"` (or `"wall-clock-us"`), each record is
//! stamped instead with the time it was made, in milliseconds (or
//! microseconds) since the epoch: when it was due, for a paced generator,
//! so a record held back by a slow pipeline still counts its wait. That is
//! what the `latency` sink measures against.

use super::file_source::rate_problem;
use super::{OptionsError, options};
use crate::config::ConnectorSpec;
use crate::config::units::HumanDuration;
use crate::record::Record;
use crate::runtime::source::{Halt, Source, SourceContext};
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Records to produce.
    count: u64,
    /// Distinct keys.
    keys: u64,
    /// Seed of the key sequence.
    #[serde(default)]
    seed: u64,
    /// Event time of record `i` is `i * event_time_step`; unset, records
    /// carry no timestamp.
    event_time_step: Option<HumanDuration>,
    /// At most this many records per second.
    records_per_second: Option<f64>,
    /// Stamp each record with the wall clock when it was made.
    timestamps: Option<WallClock>,
}

/// The unit of wall-clock timestamps.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum WallClock {
    /// Milliseconds since the epoch: event time as usual.
    WallClock,
    /// Microseconds since the epoch: for latency measurements.
    WallClockUs,
}

/// A configured generator.
#[derive(Debug)]
pub struct Generator {
    count: u64,
    keys: u64,
    seed: u64,
    step_ms: Option<i64>,
    wall_clock: Option<WallClock>,
    rate: Option<f64>,
}

/// Builds the generator from its entry.
pub fn build(spec: &ConnectorSpec, _base: &Path) -> Result<Arc<dyn Source>, OptionsError> {
    let o: Options = options(spec, "source")?;
    let bad = |message: String| OptionsError { node: format!("source '{}'", spec.id), message };
    if o.keys == 0 {
        return Err(bad("keys must be at least 1".into()));
    }
    if let Some(problem) = rate_problem(o.records_per_second) {
        return Err(bad(problem));
    }
    if o.event_time_step.is_some() && o.timestamps.is_some() {
        return Err(bad("set event_time_step or timestamps, not both: each decides the records' timestamps".into()));
    }
    Ok(Arc::new(Generator {
        count: o.count,
        keys: o.keys,
        seed: o.seed,
        step_ms: o.event_time_step.map(|d| d.0.as_millis() as i64),
        wall_clock: o.timestamps,
        rate: o.records_per_second,
    }))
}

/// SplitMix64: a fixed, well-known mixer, so streams are reproducible.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key id of record `i`.
#[inline]
pub fn key_of(seed: u64, i: u64, keys: u64) -> u64 {
    splitmix64(seed.wrapping_add(i)) % keys
}

impl Source for Generator {
    fn watermark_lag_ms(&self) -> Option<i64> {
        // Generated timestamps never go backwards.
        (self.step_ms.is_some() || self.wall_clock.is_some()).then_some(0)
    }

    fn records_per_second(&self) -> Option<f64> {
        self.rate
    }

    fn run(&self, ctx: &mut SourceContext) -> Result<(), Halt> {
        let mut buf = itoa::Buffer::new();
        for i in ctx.position..self.count {
            ctx.position = i + 1;
            let key = buf.format(key_of(self.seed, i, self.keys)).as_bytes();
            let timestamp = match (self.step_ms, self.wall_clock) {
                (Some(s), _) => Some((i as i64).saturating_mul(s)),
                (None, Some(WallClock::WallClock)) => Some(ctx.due_time_us() / 1000),
                (None, Some(WallClock::WallClockUs)) => Some(ctx.due_time_us()),
                (None, None) => None,
            };
            ctx.emit(Record { payload: key, key: Some(key), timestamp })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_deterministic_and_covers_keys() {
        let a: Vec<u64> = (0..1000).map(|i| key_of(7, i, 10)).collect();
        let b: Vec<u64> = (0..1000).map(|i| key_of(7, i, 10)).collect();
        assert_eq!(a, b);
        assert!((0..10).all(|k| a.contains(&k)));
        assert_ne!(a, (0..1000).map(|i| key_of(8, i, 10)).collect::<Vec<_>>());
    }
}
