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
use super::message::{BarrierKind, Control};
use crate::checkpoint::metadata::SinkState;
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::storage::{CheckpointStorage, LogPosition};
use crate::record::Batch;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A sink connector, configured from its `[[sinks]]` entry. One value
/// serves every run (attempt) of the job; each run opens a writer.
pub trait Sink: Send + Sync + 'static {
    /// Opens the output for a run: fresh, or as `at.restore` says.
    fn open(&self, at: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError>;

    /// The position to restore from `state`, recorded by a checkpoint or
    /// (`from_savepoint`) a savepoint, which may have been taken by a job
    /// writing elsewhere.
    fn restore_state(&self, state: &SinkState, from_savepoint: bool) -> SinkState {
        let _ = from_savepoint;
        state.clone()
    }

    /// The job had finished before: makes visible what its final
    /// checkpoint recorded, as `at.restore` says.
    fn publish_finished(&self, at: OpenAt<'_>) -> Result<(), ConnectorError> {
        let _ = at;
        Ok(())
    }

    /// Whether the sink can work with checkpoints every
    /// `checkpoint_interval` (`None`: no checkpointing); asked before the
    /// job starts.
    fn check(&self, checkpoint_interval: Option<Duration>) -> Result<(), ConnectorError> {
        let _ = checkpoint_interval;
        Ok(())
    }
}

/// Where a sink subtask opens its output.
#[derive(Clone, Copy)]
pub struct OpenAt<'a> {
    /// The job's name.
    pub job: &'a str,
    /// The sink subtask.
    pub subtask: u32,
    /// The checkpoint or savepoint the run starts from, if any.
    pub restore: Option<SinkRestore<'a>>,
    /// The job's storage when its commits go through a commit log (cluster
    /// mode): a sink publishes held output only while
    /// [`CheckpointStorage::check_fence`] says no other run took over.
    pub fence: Option<&'a Arc<CheckpointStorage>>,
    /// Where the run stands in that log as the sink opens; each
    /// [`SinkWriter::commit`] brings a newer position.
    pub log: Option<LogPosition>,
    /// How often the job checkpoints (`None`: it does not).
    pub checkpoint_interval: Option<Duration>,
    /// Whether the run was cancelled meanwhile: a sink whose opening takes
    /// long (reading its output back after a restore) asks now and then,
    /// and stops with [`ConnectorError::Cancelled`].
    pub cancelled: &'a dyn Fn() -> bool,
}

/// What a checkpoint recorded for a sink.
#[derive(Clone, Copy)]
pub struct SinkRestore<'a> {
    /// The checkpoint's id.
    pub id: CheckpointId,
    /// The sink's position in it.
    pub state: &'a SinkState,
    /// The storage it is in (where the sink's stored parts are).
    pub storage: &'a CheckpointStorage,
}

/// What a sink's part of a checkpoint is taken for.
pub struct SnapshotAt<'a> {
    /// The checkpoint, or `None` at the end of input (the job's final
    /// checkpoint, whose id is chosen after every sink ended).
    pub id: Option<CheckpointId>,
    /// `{id:010}`, or "end": a name for what the sink closes here.
    pub tag: &'a str,
    /// Where the checkpoint's state goes (a savepoint's own directory for
    /// a savepoint), for a part too big for the metadata.
    pub storage: &'a CheckpointStorage,
    /// "sink-<id>-<subtask>": the owner of what is stored.
    pub owner: &'a str,
}

/// A sink's output during one run.
pub trait SinkWriter: Send {
    /// Writes a batch of records.
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError>;

    /// At a barrier (or the end): makes what was written durable and says
    /// where the sink is, if it can resume.
    fn checkpoint(&mut self, at: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError>;

    /// Checkpoint `upto` completed (`None`: the job's final one): publishes
    /// what it covers. `log` is where the run stood in the commit log when
    /// it committed `upto` (cluster mode; see [`OpenAt::fence`]).
    fn commit(&mut self, upto: Option<CheckpointId>, log: Option<LogPosition>) -> Result<(), ConnectorError> {
        let _ = (upto, log);
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
    /// How often the job checkpoints, if it does (then the end waits for
    /// the final checkpoint).
    pub checkpoint_interval: Option<Duration>,
    /// The checkpoint to resume from, the position it recorded, and the
    /// storage it is in.
    pub restore: Option<(CheckpointId, SinkState, Arc<CheckpointStorage>)>,
    /// The job's name.
    pub job: Arc<str>,
    /// Its subtask index.
    pub subtask: u32,
    /// The job's checkpoint storage.
    pub storage: Arc<CheckpointStorage>,
    /// Where the run stood in the storage's commit log when the task
    /// started (cluster mode); the coordinator sends newer positions with
    /// each `Complete`.
    pub log: Option<LogPosition>,
}

impl SinkTask {
    /// Runs the sink until every upstream subtask ended (and, with
    /// checkpointing, the final checkpoint completed).
    pub fn run(self) -> Result<Counters, TaskError> {
        let SinkTask {
            id,
            sink,
            mut inputs,
            mut reporter,
            checkpoint_interval,
            restore,
            job,
            subtask,
            storage,
            mut log,
        } = self;
        let error = |source| TaskError::Sink { id: id.clone(), cause: source };
        let owner = format!("sink-{id}-{subtask}");
        // Opening may take long (a restore reading output back); the
        // coordinator's cancel is watched meanwhile.
        let opened = {
            let watch = std::cell::RefCell::new(&mut inputs);
            let cancelled = || watch.borrow_mut().cancel_requested();
            sink.open(OpenAt {
                job: &job,
                subtask,
                restore: restore.as_ref().map(|(c, s, st)| SinkRestore { id: *c, state: s, storage: st }),
                fence: storage.is_fenced().then_some(&storage),
                log,
                checkpoint_interval,
                cancelled: &cancelled,
            })
        };
        let mut out = match opened {
            Err(ConnectorError::Cancelled) => return Err(TaskError::Cancelled),
            other => other.map_err(error)?,
        };
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
                    let target = match &barrier.kind {
                        BarrierKind::Savepoint { target, .. } => target,
                        BarrierKind::Checkpoint => &storage,
                    };
                    let tag = format!("{:010}", barrier.id);
                    let at = SnapshotAt { id: Some(barrier.id), tag: &tag, storage: target, owner: &owner };
                    let state = out.checkpoint(&at).map_err(error)?;
                    let timing = AckTiming::since(started, inputs.last_alignment());
                    reporter.acknowledge(barrier.id, TaskSnapshot::Sink(state), timing);
                }
                Next::Control(Control::Complete { id: c, log: at }) => {
                    log = at.or(log);
                    out.commit(Some(c), log).map_err(error)?;
                }
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
        let state =
            out.checkpoint(&SnapshotAt { id: None, tag: "end", storage: &storage, owner: &owner }).map_err(error)?;
        if checkpoint_interval.is_some() {
            // The last output becomes visible only once the final
            // checkpoint records it, so a crash now cannot repeat it.
            reporter.send(TaskEvent::SinkEnded { task: reporter.id().clone(), state, counters });
            loop {
                match inputs.next_control() {
                    // Only the final checkpoint, triggered after every
                    // barrier this sink saw, covers the end.
                    Control::Complete { id: c, log: at } if c > last_barrier => {
                        log = at.or(log);
                        break;
                    }
                    Control::Complete { id: c, log: at } => {
                        log = at.or(log);
                        out.commit(Some(c), log).map_err(error)?;
                    }
                    Control::EndStopped => {
                        out.discard().map_err(error)?;
                        return Ok(counters);
                    }
                    Control::Cancel => return Err(TaskError::Cancelled),
                    Control::Trigger(_)
                    | Control::Resume
                    | Control::SwapCommit(_)
                    | Control::SwapAbort(_)
                    | Control::RescaleAbandoned
                    | Control::ShadowStop(_) => {}
                }
            }
        }
        out.commit(None, log).map_err(error)?;
        Ok(counters)
    }
}
