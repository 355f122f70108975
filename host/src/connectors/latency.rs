//! `kind = "latency"` sink: measures how long each record took to reach
//! the sink, as processing time at arrival minus the record's timestamp,
//! into a histogram (`hdrhistogram`, three significant digits), and
//! reports its percentiles when the run ends: in the log, and as JSON in
//! `output` if set. The records are dropped, as `discard` does.
//!
//! The timestamp is event time in milliseconds since the epoch (`unit =
//! "ms"`, the default: how Kafka and most sources stamp records, so this
//! is the event-time lag of a job's output), or microseconds (`unit =
//! "us"`, with a generator's `timestamps = "wall-clock-us"`, for
//! measuring the pipeline itself). An operator passes a timestamp on when
//! it emits with its input's timestamp (the word-count counter does).
//! Records without a timestamp are counted apart; a timestamp ahead of the
//! clock counts as zero latency, and one over an hour old as an hour.

use super::{OptionsError, options};
use crate::checkpoint::metadata::SinkState;
use crate::clock::now_us;
use crate::config::ConnectorSpec;
use crate::record::Batch;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::{OpenAt, Sink, SinkWriter, SnapshotAt};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The unit of record timestamps.
    #[serde(default)]
    unit: Unit,
    /// Where to write the percentiles as JSON when a run ends.
    output: Option<PathBuf>,
}

/// The unit of record timestamps.
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Milliseconds since the Unix epoch.
    #[default]
    Ms,
    /// Microseconds since the Unix epoch.
    Us,
}

/// A configured latency sink.
struct LatencySink {
    id: String,
    unit: Unit,
    output: Option<PathBuf>,
}

/// Builds the sink from its entry; a relative `output` resolves against
/// `base`.
pub fn build(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    let o: Options = options(spec, "sink")?;
    Ok(Arc::new(LatencySink { id: spec.id.clone(), unit: o.unit, output: o.output.map(|p| base.join(p)) }))
}

impl Sink for LatencySink {
    fn open(&self, _: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        Ok(Box::new(LatencyWriter {
            id: self.id.clone(),
            unit: self.unit,
            output: self.output.clone(),
            histogram: new_histogram().map_err(|e| ConnectorError::Refused(format!("sink '{}': {e}", self.id)))?,
            untimed: 0,
        }))
    }
}

/// The longest latency told apart, in microseconds: an hour. Longer ones
/// count as an hour, so a timestamp from long ago cannot make the histogram
/// grow.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Microseconds from 1 to an hour, three significant digits (about 200
/// KiB).
fn new_histogram() -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
}

/// One run's histogram.
struct LatencyWriter {
    id: String,
    unit: Unit,
    output: Option<PathBuf>,
    /// Latencies in microseconds.
    histogram: Histogram<u64>,
    untimed: u64,
}

/// What the sink reports: latencies in microseconds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LatencyReport {
    /// Records measured.
    pub count: u64,
    /// Records without a timestamp, not measured.
    pub untimed: u64,
    /// The timestamps' unit: "ms" or "us".
    pub unit: String,
    /// Percentiles and extremes, in microseconds.
    pub min_us: u64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

impl LatencyWriter {
    fn report(&self) -> LatencyReport {
        let h = &self.histogram;
        let q = |q: f64| if h.is_empty() { 0 } else { h.value_at_quantile(q) };
        LatencyReport {
            count: h.len(),
            untimed: self.untimed,
            unit: format!("{:?}", self.unit).to_lowercase(),
            min_us: if h.is_empty() { 0 } else { h.min() },
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: if h.is_empty() { 0 } else { h.max() },
            mean_us: h.mean(),
        }
    }
}

impl SinkWriter for LatencyWriter {
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError> {
        // One clock read per batch: the records of a batch arrive together.
        let now = now_us();
        for r in batch.iter() {
            let Some(t) = r.timestamp else {
                self.untimed += 1;
                continue;
            };
            let t_us = match self.unit {
                Unit::Ms => t.saturating_mul(1000),
                Unit::Us => t,
            };
            self.histogram.saturating_record(now.saturating_sub(t_us).max(0) as u64);
        }
        Ok(())
    }

    fn checkpoint(&mut self, at: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        if at.id.is_some() {
            return Ok(None);
        }
        let r = self.report();
        tracing::info!(
            sink = %self.id,
            count = r.count,
            untimed = r.untimed,
            p50_us = r.p50_us,
            p99_us = r.p99_us,
            p999_us = r.p999_us,
            max_us = r.max_us,
            "latency from record timestamp to sink"
        );
        if let Some(path) = &self.output {
            let json = serde_json::to_vec_pretty(&r).expect("a report serializes");
            // Whole or not at all: written beside, then renamed.
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, json).map_err(|cause| ConnectorError::Io { op: "write", path: tmp.clone(), cause })?;
            std::fs::rename(&tmp, path).map_err(|cause| ConnectorError::Io { op: "rename", path: tmp, cause })?;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    fn writer(unit: Unit) -> LatencyWriter {
        LatencyWriter { id: "l".into(), unit, output: None, histogram: new_histogram().unwrap(), untimed: 0 }
    }

    fn batch(timestamps: &[Option<i64>]) -> Batch {
        let mut b = Batch::with_capacity(timestamps.len(), false);
        for t in timestamps {
            b.push(Record { payload: b"x", key: None, timestamp: *t });
        }
        b
    }

    #[test]
    fn percentiles_match_latencies_computed_by_hand() {
        let mut w = writer(Unit::Us);
        let now = now_us();
        // 1000 records, 1..=1000 ms old (plus the microseconds this takes).
        let stamps: Vec<Option<i64>> = (1..=1000).map(|ms| Some(now - ms * 1000)).chain([None, None]).collect();
        w.write(&batch(&stamps)).unwrap();
        let r = w.report();
        assert_eq!((r.count, r.untimed), (1000, 2));
        // Sorted latencies are 1..=1000 ms; hdrhistogram keeps 3 digits.
        let close = |got: u64, ms: u64| {
            let want = ms * 1000;
            assert!(got >= want && got <= want + want / 500 + 5_000, "{got} us, want about {want}");
        };
        close(r.min_us, 1);
        close(r.p50_us, 500);
        close(r.p90_us, 900);
        close(r.p99_us, 990);
        close(r.p999_us, 999);
        close(r.max_us, 1000);
    }

    #[test]
    fn millisecond_timestamps_and_timestamps_ahead_of_the_clock() {
        let mut w = writer(Unit::Ms);
        let now_ms = now_us() / 1000;
        w.write(&batch(&[Some(now_ms - 250), Some(now_ms + 60_000), Some(0)])).unwrap();
        let r = w.report();
        assert_eq!(r.count, 3);
        assert_eq!(r.min_us, 0, "a timestamp ahead of the clock is no latency, not a huge one");
        // 250 ms read as milliseconds: 250,000 µs plus the time between
        // reading the clock above and the write (a few ms on a busy
        // machine; 4.7 ms was seen). A unit mix-up would be off by 1000x.
        assert!((250_000..=300_000).contains(&r.p50_us), "{}", r.p50_us);
        let hour = MAX_LATENCY_US;
        assert!((hour..=hour + hour / 1000).contains(&r.max_us), "a record from 1970 counts as an hour: {}", r.max_us);
    }
}
