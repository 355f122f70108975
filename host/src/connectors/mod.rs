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
}

impl SourceContext {
    /// A context for source `id`.
    pub fn new(
        id: Arc<str>,
        router: Router,
        reporter: Reporter,
        control: Receiver<Control>,
        batch_size: usize,
    ) -> Self {
        SourceContext { id, router, reporter, control, batch_size, counters: Counters::default() }
    }

    /// Sends one record; every `batch_size` records checks for cancellation
    /// and reports progress.
    #[inline]
    pub fn emit(&mut self, record: Record<'_>) -> Result<(), TaskError> {
        self.router.push(record).map_err(|e| route_error(&self.id, e))?;
        self.counters.records_in += 1;
        if self.counters.records_in.is_multiple_of(self.batch_size as u64) {
            if self.control.try_recv().is_ok() {
                return Err(TaskError::Cancelled);
            }
            self.counters.records_out = self.router.records_out();
            self.reporter.tick(self.counters);
        }
        Ok(())
    }

    /// Ends the stream.
    pub fn finish(mut self) -> Result<Counters, TaskError> {
        self.router.end().map_err(|e| route_error(&self.id, e))?;
        self.counters.records_out = self.router.records_out();
        Ok(self.counters)
    }

    /// A source error naming this source.
    pub fn error(&self, message: String) -> TaskError {
        TaskError::Source { id: self.id.clone(), message }
    }
}
