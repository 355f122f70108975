//! Connectors: sources that read records into the job and sinks that write
//! them out. Each runs as one task thread; sources end the job when bounded.

pub mod file_source;
pub mod generator;
pub mod part_files;
pub mod sink;

use crate::checkpoint::metadata::TaskSnapshot;
use crate::runtime::batch::Record;
use crate::runtime::events::{Control, Counters, TaskError, TaskEvent};
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
    /// Where the source is: what a checkpoint records, so a restore
    /// resumes at the next record. Sources set it before each `emit`.
    pub position: u64,
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
            position: 0,
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
        let mut deferred = Vec::new();
        if let Some((start, gap)) = self.pace {
            let due = start + gap.mul_f64(self.counters.records_in as f64);
            let wait = due.saturating_duration_since(std::time::Instant::now());
            if !wait.is_zero() {
                // Waiting on the control channel keeps a paced source
                // responsive to cancellation and checkpoints.
                let until = std::time::Instant::now() + wait;
                loop {
                    match self.control.recv_deadline(until) {
                        Ok(Control::Cancel) => return Err(TaskError::Cancelled),
                        // The position already counts this record: its
                        // barrier must follow it.
                        Ok(c) => deferred.push(c),
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => break,
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                            std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
                            break;
                        }
                    }
                }
            }
        }
        self.router.push(record).map_err(|e| route_error(&self.id, e))?;
        self.counters.records_in += 1;
        if self.pace.is_some() {
            self.router.flush().map_err(|e| route_error(&self.id, e))?;
            for c in deferred {
                self.on_control(c)?;
            }
        }
        if self.counters.records_in.is_multiple_of(self.batch_size as u64) {
            self.poll_control()?;
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

    /// Handles what the coordinator sent since the last look.
    fn poll_control(&mut self) -> Result<(), TaskError> {
        while let Ok(c) = self.control.try_recv() {
            self.on_control(c)?;
        }
        Ok(())
    }

    fn on_control(&mut self, c: Control) -> Result<(), TaskError> {
        match c {
            Control::Cancel => Err(TaskError::Cancelled),
            Control::Trigger(id) => {
                // The position and the barrier mark the same point: every
                // record before it is covered by checkpoint `id`.
                let started = std::time::Instant::now();
                self.router.barrier(id).map_err(|e| route_error(&self.id, e))?;
                self.reporter.send(TaskEvent::Acknowledged {
                    task: self.reporter.id().clone(),
                    id,
                    snapshot: TaskSnapshot::Source(self.position),
                    sync: started.elapsed(),
                });
                Ok(())
            }
            Control::Stop { id, drain } => self.stop(id, drain),
            Control::Complete(_)
            | Control::Resume
            | Control::EndStopped
            | Control::SwapCommit(_)
            | Control::SwapAbort(_) => Ok(()),
        }
    }

    /// Stop with savepoint `id`: nothing follows the barrier until the
    /// coordinator says how the savepoint went. If it completed, the stream
    /// ends here (without the end-of-input watermark unless `drain` sent it
    /// before the barrier); if it failed, the source carries on as if
    /// nothing happened, unless it drained, which cannot be undone.
    fn stop(&mut self, id: u64, drain: bool) -> Result<(), TaskError> {
        if drain {
            self.router.watermark(i64::MAX).map_err(|e| route_error(&self.id, e))?;
        }
        self.router.barrier(id).map_err(|e| route_error(&self.id, e))?;
        self.reporter.send(TaskEvent::Acknowledged {
            task: self.reporter.id().clone(),
            id,
            snapshot: TaskSnapshot::Source(self.position),
            sync: std::time::Duration::ZERO,
        });
        loop {
            match self.control.recv() {
                Ok(Control::Complete(c)) if c >= id => {
                    self.router.end().map_err(|e| route_error(&self.id, e))?;
                    self.counters.records_out = self.router.records_out();
                    return Err(TaskError::Stopped(self.counters));
                }
                Ok(Control::Resume) if !drain => return Ok(()),
                Ok(Control::Resume) => {
                    return Err(self.error(format!(
                        "stop --drain with savepoint {id} failed after event time was advanced to the end"
                    )));
                }
                Ok(Control::Cancel) | Err(_) => return Err(TaskError::Cancelled),
                Ok(_) => {}
            }
        }
    }

    /// Ends the stream: event time jumps to the end (so pending event-time
    /// timers downstream fire), then end of input.
    pub fn finish(mut self) -> Result<Counters, TaskError> {
        // A trigger that arrived with the last records still gets its barrier.
        self.poll_control()?;
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
