//! What tasks tell the coordinator ([`TaskEvent`]), what they count
//! ([`Counters`]), and the [`Reporter`] they send it through.

use super::error::{SwapError, TaskError};
use super::task_id::TaskId;
use crate::api::{GuestMetrics, ShadowReport};
use crate::checkpoint::metadata::{SinkState, SourcePosition, StateHandle};
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::upload::CheckpointError;
use crossbeam_channel::Sender;
use std::time::{Duration, Instant};

/// Counters a task reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Records received (sources: records read).
    pub records_in: u64,
    /// Records sent downstream (sinks: records written).
    pub records_out: u64,
    /// Nanoseconds spent with nothing to do: waiting for input, or for a
    /// paced source's next record.
    pub idle_ns: u64,
    /// Nanoseconds spent blocked on a full output channel (back-pressure,
    /// measured as Flink does).
    pub backpressured_ns: u64,
    /// The minimum watermark over the task's inputs; `i64::MIN` until
    /// every input sent one (and always for a source).
    pub input_watermark: i64,
    /// The latest watermark the task sent on; `i64::MIN` before the first.
    pub output_watermark: i64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            records_in: 0,
            records_out: 0,
            idle_ns: 0,
            backpressured_ns: 0,
            input_watermark: i64::MIN,
            output_watermark: i64::MIN,
        }
    }
}

/// Summing subtasks: counts and times add up, a node's watermark is its
/// slowest subtask's.
impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, other: Counters) {
        self.records_in += other.records_in;
        self.records_out += other.records_out;
        self.idle_ns += other.idle_ns;
        self.backpressured_ns += other.backpressured_ns;
        self.input_watermark = self.input_watermark.min(other.input_watermark);
        self.output_watermark = self.output_watermark.min(other.output_watermark);
    }
}

/// How a task took its part of a checkpoint, for the checkpoint history.
#[derive(Debug, Clone, Copy)]
pub struct AckTiming {
    /// When its barrier was aligned (a source: when the trigger came).
    pub aligned_at: Instant,
    /// From the first to the last of its inputs' barriers.
    pub alignment: Duration,
    /// The synchronous part: how long it stopped processing for it.
    pub sync: Duration,
}

impl AckTiming {
    /// A part taken at `aligned_at`, after `alignment`, that ends now.
    pub fn since(aligned_at: Instant, alignment: Duration) -> Self {
        AckTiming { aligned_at, alignment, sync: aligned_at.elapsed() }
    }
}

/// What one task contributed to a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskSnapshot {
    /// An operator subtask's state.
    Operator(StateHandle),
    /// A source subtask's position: the next record to read.
    Source(SourcePosition),
    /// A sink's position (none for sinks that cannot resume: stdout).
    Sink(Option<SinkState>),
}

/// Task to coordinator.
#[derive(Debug)]
pub enum TaskEvent {
    /// Periodic counters.
    Progress(TaskId, Counters),
    /// An operator subtask's guest and state, with its progress.
    Guest(TaskId, Box<GuestMetrics>),
    /// Finished after end of input (or a stop with savepoint).
    Finished(TaskId, Counters),
    /// Failed (or stopped on cancel).
    Failed(TaskId, TaskError),
    /// The task took (and stored) its part of checkpoint `id`.
    Acknowledged {
        /// Which task.
        task: TaskId,
        /// The checkpoint.
        id: CheckpointId,
        /// Its handle, offset or sink position.
        snapshot: TaskSnapshot,
        /// When and how long it took its part.
        timing: AckTiming,
    },
    /// The task could not take its part of checkpoint `id`.
    Declined {
        /// Which task.
        task: TaskId,
        /// The checkpoint.
        id: CheckpointId,
        /// Why.
        reason: CheckpointError,
    },
    /// A source subtask read its input to the end and ended its stream at
    /// `position`: it acknowledges every checkpoint from now on as
    /// finished (sent before its `Finished`; never after a stop with
    /// savepoint, which is no end of the input).
    SourceEnded {
        /// Which source subtask.
        task: TaskId,
        /// Its position at the end.
        position: crate::checkpoint::metadata::SourcePosition,
    },
    /// A sink reached the end of its input: it waits for the final
    /// checkpoint (with this position) before publishing its last output.
    SinkEnded {
        /// Which sink.
        task: TaskId,
        /// Its position at the end.
        state: Option<SinkState>,
        /// Its counters.
        counters: Counters,
    },
    /// An old subtask of a rescaled operator is handing its state over at
    /// the rescale's barrier, with its final counters; it ends next.
    HandedOver(TaskId, Counters),
    /// A new subtask of a rescaled operator opened its (empty) state
    /// backend and waits for the old subtasks' state: the rescale's
    /// barrier may go out once every new subtask is this far.
    ReadyToTakeOver(TaskId),
    /// A new subtask of a rescaled operator restored its state and opened
    /// its module: it processes records from here. `barrier_at` is when
    /// the first old subtask's barrier came.
    TookOver {
        /// Which subtask.
        task: TaskId,
        /// When the rescale's first barrier was aligned.
        barrier_at: Instant,
    },
    /// An operator subtask stopped at the barrier of module swap `id` with
    /// the new module opened over its state (`Ok`: when the barrier came),
    /// or could not (`Err`: why); it waits for `SwapCommit` or `SwapAbort`.
    SwapPrepared {
        /// Which subtask.
        task: TaskId,
        /// The swap's savepoint.
        id: CheckpointId,
        /// When its barrier arrived, or why the new module failed.
        result: Result<Instant, SwapError>,
    },
    /// A shadow of an operator subtask reports what it compared so far,
    /// and whether it ended.
    Shadow(TaskId, Box<ShadowReport>),
}

/// Sends a task's events, and its progress at most once per interval.
pub struct Reporter {
    id: TaskId,
    events: Sender<TaskEvent>,
    interval: Duration,
    last: Instant,
}

impl Reporter {
    /// A reporter for task `id`.
    pub fn new(id: TaskId, events: Sender<TaskEvent>, interval: Duration) -> Self {
        Reporter { id, events, interval, last: Instant::now() }
    }

    /// Reports `counters` if the interval has passed; says whether it did.
    #[inline]
    pub fn tick(&mut self, counters: Counters) -> bool {
        if self.last.elapsed() < self.interval {
            return false;
        }
        self.last = Instant::now();
        let _ = self.events.send(TaskEvent::Progress(self.id.clone(), counters));
        true
    }

    /// When the next report is due: a task waiting for input wakes up by
    /// then, so that an idle task's meters say it is idle.
    pub fn next_report(&self) -> Instant {
        self.last + self.interval
    }

    /// Sends `event` to the coordinator now.
    pub fn send(&self, event: TaskEvent) {
        let _ = self.events.send(event);
    }

    /// Acknowledges checkpoint `id` with `snapshot`.
    pub fn acknowledge(&self, id: CheckpointId, snapshot: TaskSnapshot, timing: AckTiming) {
        self.send(TaskEvent::Acknowledged { task: self.id.clone(), id, snapshot, timing });
    }

    /// A channel to the coordinator, for a background thread of this task.
    pub fn sender(&self) -> Sender<TaskEvent> {
        self.events.clone()
    }

    /// How often it reports progress.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The task's id.
    pub fn id(&self) -> &TaskId {
        &self.id
    }
}
