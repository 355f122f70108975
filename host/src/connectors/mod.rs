//! Connectors: sources that read records into the job and sinks that write
//! them out. Each runs as one task thread; sources end the job when bounded.

pub mod file_source;
pub mod generator;
pub mod sink;

use crate::runtime::batch::Record;
use crate::runtime::events::{Control, Counters, TaskError};
use crate::runtime::router::Router;
use crate::runtime::task::{Reporter, route_error};
use crossbeam_channel::Receiver;
use std::sync::Arc;

/// What every source task shares: where to send, how to report, when to stop.
pub struct SourceContext {
    /// Source id.
    pub id: Arc<str>,
    /// Output side.
    pub router: Router,
    /// Progress.
    pub reporter: Reporter,
    /// Cancellation.
    pub control: Receiver<Control>,
    /// Records per batch (how often cancellation is checked).
    pub batch_size: usize,
    counters: Counters,
    /// For sources with event time: how far watermarks trail the largest
    /// timestamp seen.
    watermark_lag: Option<i64>,
    max_timestamp: i64,
    watermark: i64,
    /// With a rate limit: when the stream started, and the gap per record.
    pace: Option<(std::time::Instant, std::time::Duration)>,
}

impl SourceContext {
    /// A context for source `id`.
    pub fn new(
        id: Arc<str>,
        router: Router,
        reporter: Reporter,
        control: Receiver<Control>,
        batch_size: usize,
        watermark_lag: Option<i64>,
    ) -> Self {
        SourceContext {
            id,
            router,
            reporter,
            control,
            batch_size,
            counters: Counters::default(),
            watermark_lag,
            max_timestamp: i64::MIN,
            watermark: i64::MIN,
            pace: None,
        }
    }

    /// Limits the source to `rate` records per second. A paced source sends
    /// every record as soon as it is due instead of waiting for a full batch.
    pub fn with_rate(mut self, rate: Option<f64>) -> Self {
        self.pace = rate.map(|r| (std::time::Instant::now(), std::time::Duration::from_secs_f64(1.0 / r)));
        self
    }

    /// Sends one record; every `batch_size` records checks for cancellation
    /// and reports progress.
    #[inline]
    pub fn emit(&mut self, record: Record<'_>) -> Result<(), TaskError> {
        if let Some(t) = record.timestamp {
            self.max_timestamp = self.max_timestamp.max(t);
        }
        if let Some((start, gap)) = self.pace {
            let due = start + gap.mul_f64(self.counters.records_in as f64);
            let wait = due.saturating_duration_since(std::time::Instant::now());
            if !wait.is_zero() {
                // Waiting on the control channel keeps a paced source cancellable.
                match self.control.recv_timeout(wait) {
                    Ok(_) => return Err(TaskError::Cancelled),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
                }
            }
        }
        self.router.push(record).map_err(|e| route_error(&self.id, e))?;
        self.counters.records_in += 1;
        if self.pace.is_some() {
            self.router.flush().map_err(|e| route_error(&self.id, e))?;
        }
        if self.counters.records_in.is_multiple_of(self.batch_size as u64) {
            if self.control.try_recv().is_ok() {
                return Err(TaskError::Cancelled);
            }
            // Bounded out-of-orderness, as Flink's: the watermark trails the
            // largest timestamp by the lag, minus one.
            if let Some(lag) = self.watermark_lag {
                let w = self.max_timestamp.saturating_sub(lag).saturating_sub(1);
                if w > self.watermark {
                    self.watermark = w;
                    self.router.watermark(w).map_err(|e| route_error(&self.id, e))?;
                }
            }
            self.counters.records_out = self.router.records_out();
            self.reporter.tick(self.counters);
        }
        Ok(())
    }

    /// Ends the stream: event time jumps to the end (so pending event-time
    /// timers downstream fire), then end of input.
    pub fn finish(mut self) -> Result<Counters, TaskError> {
        self.router.watermark(i64::MAX).map_err(|e| route_error(&self.id, e))?;
        self.router.end().map_err(|e| route_error(&self.id, e))?;
        self.counters.records_out = self.router.records_out();
        Ok(self.counters)
    }

    /// A source error naming this source.
    pub fn error(&self, message: String) -> TaskError {
        TaskError::Source { id: self.id.clone(), message }
    }
}
