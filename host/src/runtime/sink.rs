//! Sinks: the [`Sink`] trait a sink connector implements, and the sink task
//! that drives it through the checkpoint protocol.
//!
//! With checkpointing, the task acknowledges every barrier with the sink's
//! position, tells the sink when a checkpoint completed (so a
//! transactional sink publishes what it covers), and at the end of input
//! waits for the job's final checkpoint before the sink makes its last
//! output visible, so a crash after the end cannot repeat it.

use super::error::{ConnectorError, TaskError};
use super::events::{AckTiming, Counters, Reporter, TaskEvent, TaskSnapshot};
use super::inputs::{Inputs, Next};
use super::message::Control;
use crate::checkpoint::metadata::SinkState;
use crate::checkpoint::protocol::CheckpointId;
use crate::record::Batch;
use std::sync::Arc;
use std::time::Instant;

/// A sink connector, configured from its `[[sinks]]` entry. One value
/// serves every run (attempt) of the job; each run opens a writer.
pub trait Sink: Send + Sync + 'static {
    /// Opens the output for a run: fresh, or as of checkpoint `restore.0`,
    /// at the position `restore.1` it recorded.
    fn open(&self, restore: Option<(CheckpointId, &SinkState)>) -> Result<Box<dyn SinkWriter>, ConnectorError>;

    /// The position to restore from `state`, recorded by a checkpoint or
    /// (`from_savepoint`) a savepoint, which may have been taken by a job
    /// writing elsewhere.
    fn restore_state(&self, state: &SinkState, from_savepoint: bool) -> SinkState {
        let _ = from_savepoint;
        state.clone()
    }

    /// The job had finished before: makes visible what its final
    /// checkpoint recorded in `state`.
    fn publish_finished(&self, state: &SinkState) -> Result<(), ConnectorError> {
        let _ = state;
        Ok(())
    }
}

/// A sink's output during one run.
pub trait SinkWriter: Send {
    /// Writes a batch of records.
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError>;

    /// At a barrier (or the end, `tag` "end"): makes what was written
    /// durable and says where the sink is, if it can resume.
    fn checkpoint(&mut self, tag: &str) -> Result<Option<SinkState>, ConnectorError>;

    /// Checkpoint `upto` completed (`None`: the job's final one): publishes
    /// what it covers.
    fn commit(&mut self, upto: Option<CheckpointId>) -> Result<(), ConnectorError> {
        let _ = upto;
        Ok(())
    }

    /// The job stopped with a savepoint: drops what came after it (a
    /// restore from the savepoint produces it again).
    fn discard(&mut self) -> Result<(), ConnectorError> {
        Ok(())
    }
}

/// Everything a sink task needs.
pub struct SinkTask {
    /// Sink id.
    pub id: Arc<str>,
    /// The connector.
    pub sink: Arc<dyn Sink>,
    /// Its input.
    pub inputs: Inputs,
    /// Progress and events.
    pub reporter: Reporter,
    /// Whether the job checkpoints (then the end waits for the final one).
    pub checkpointing: bool,
    /// The checkpoint to resume from, and the position it recorded.
    pub restore: Option<(CheckpointId, SinkState)>,
}

impl SinkTask {
    /// Runs the sink until every upstream subtask ended (and, with
    /// checkpointing, the final checkpoint completed).
    pub fn run(self) -> Result<Counters, TaskError> {
        let SinkTask { id, sink, mut inputs, mut reporter, checkpointing, restore } = self;
        let error = |source| TaskError::Sink { id: id.clone(), cause: source };
        let mut out = sink.open(restore.as_ref().map(|(c, s)| (*c, s))).map_err(error)?;
        let mut counters = Counters::default();
        let mut last_barrier = 0;
        loop {
            let waiting_since = Instant::now();
            // Wakes up to report progress while no input comes.
            let next = inputs.next_until(Some(reporter.next_report()));
            counters.idle_ns += waiting_since.elapsed().as_nanos() as u64;
            match next {
                Next::Batch { batch, .. } => {
                    counters.records_in += batch.len() as u64;
                    out.write(&batch).map_err(error)?;
                    counters.records_out = counters.records_in;
                    counters.input_watermark = inputs.watermark();
                    reporter.tick(counters);
                }
                Next::Barrier(barrier) => {
                    last_barrier = barrier.id;
                    let started = Instant::now();
                    let state = out.checkpoint(&format!("{:010}", barrier.id)).map_err(error)?;
                    let timing = AckTiming::since(started, inputs.last_alignment());
                    reporter.acknowledge(barrier.id, TaskSnapshot::Sink(state), timing);
                }
                Next::Control(Control::Complete(c)) => out.commit(Some(c)).map_err(error)?,
                Next::Timeout => {
                    counters.input_watermark = inputs.watermark();
                    reporter.tick(counters);
                }
                Next::Watermark(_) | Next::BarrierAborted(_) | Next::Control(_) => {}
                Next::Ended => break,
                Next::Disconnected => return Err(TaskError::Disconnected(id.clone())),
                Next::Cancelled => return Err(TaskError::Cancelled),
            }
        }
        let state = out.checkpoint("end").map_err(error)?;
        if checkpointing {
            // The last output becomes visible only once the final
            // checkpoint records it, so a crash now cannot repeat it.
            reporter.send(TaskEvent::SinkEnded { task: reporter.id().clone(), state, counters });
            loop {
                match inputs.next_control() {
                    // Only the final checkpoint, triggered after every
                    // barrier this sink saw, covers the end.
                    Control::Complete(c) if c > last_barrier => break,
                    Control::Complete(c) => out.commit(Some(c)).map_err(error)?,
                    Control::EndStopped => {
                        out.discard().map_err(error)?;
                        return Ok(counters);
                    }
                    Control::Cancel => return Err(TaskError::Cancelled),
                    Control::Trigger(_) | Control::Resume | Control::SwapCommit(_) | Control::SwapAbort(_) => {}
                }
            }
        }
        out.commit(None).map_err(error)?;
        Ok(counters)
    }
}
