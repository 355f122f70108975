//! Messages between the coordinator and the tasks, and how a task fails.

use crate::checkpoint::metadata::{SinkState, TaskSnapshot};
use crate::checkpoint::protocol::CheckpointId;
use crate::wasm::{GuestFailure, WasmError};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Identifies one task: a node and a subtask index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskId {
    /// Source id, operator uid or sink id.
    pub node: Arc<str>,
    /// Subtask index.
    pub subtask: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.node, self.subtask)
    }
}

/// Counters a task reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Records received (sources: records read).
    pub records_in: u64,
    /// Records sent downstream (sinks: records written).
    pub records_out: u64,
}

/// Task to coordinator.
#[derive(Debug)]
pub enum TaskEvent {
    /// Periodic counters.
    Progress(TaskId, Counters),
    /// Finished after end of input.
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
        /// How long the task stopped processing for it (the synchronous part).
        sync: Duration,
    },
    /// The task could not take its part of checkpoint `id`.
    Declined {
        /// Which task.
        task: TaskId,
        /// The checkpoint.
        id: CheckpointId,
        /// Why.
        reason: String,
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
    /// An operator subtask stopped at the barrier of module swap `id` with
    /// the new module opened over its state (`Ok`: when the barrier came),
    /// or could not (`Err`: why); it waits for `SwapCommit` or `SwapAbort`.
    SwapPrepared {
        /// Which subtask.
        task: TaskId,
        /// The swap's savepoint.
        id: CheckpointId,
        /// When its barrier arrived, or why the new module failed.
        result: Result<std::time::Instant, String>,
    },
}

/// Coordinator to task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Stop now; the job is failing.
    Cancel,
    /// Sources: record your position and send barrier `id` downstream.
    Trigger(CheckpointId),
    /// Checkpoint `id` is complete, and with it every lower id: sinks
    /// publish what they prepared up to it.
    Complete(CheckpointId),
    /// Sources: stop with savepoint `id`. Advance event time to the end
    /// first if `drain` (so every event-time timer fires before the
    /// savepoint), send barrier `id`, then wait: on `Complete(id)` end the
    /// stream, on `Resume` (the savepoint failed) go on.
    Stop {
        /// The savepoint.
        id: CheckpointId,
        /// Advance event time to the end first.
        drain: bool,
    },
    /// Sources: the savepoint of a `Stop` failed; carry on.
    Resume,
    /// Sinks: the job stopped with a savepoint; end without publishing what
    /// came after it (a restore from the savepoint produces it again).
    EndStopped,
    /// Operator subtasks that prepared module swap `id`: go on with the new
    /// module.
    SwapCommit(CheckpointId),
    /// Operator subtasks that prepared module swap `id`: go back to the old
    /// module, with the state of the swap's savepoint.
    SwapAbort(CheckpointId),
}

/// Why a task stopped without finishing.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The guest failed in a call.
    #[error("operator '{uid}' (subtask {subtask} of {parallelism}) {what}: {}", failure.message)]
    Guest {
        /// Operator uid.
        uid: Arc<str>,
        /// Subtask index.
        subtask: u32,
        /// Parallelism.
        parallelism: u32,
        /// Where: "failed in open", "failed on input record 12 (key \"x\")".
        what: String,
        /// The failure.
        failure: GuestFailure,
    },
    /// A subtask's state backend could not start.
    #[error("operator '{uid}' (subtask {subtask}): {message}")]
    Backend {
        /// Operator uid.
        uid: Arc<str>,
        /// Subtask index.
        subtask: u32,
        /// What failed.
        message: String,
    },
    /// A subtask's state could not be restored.
    #[error("operator '{uid}' (subtask {subtask}) cannot restore its state: {message}")]
    Restore {
        /// Operator uid.
        uid: Arc<str>,
        /// Subtask index.
        subtask: u32,
        /// What failed.
        message: String,
    },
    /// The module could not be instantiated.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// A source could not read its input.
    #[error("source '{id}': {message}")]
    Source {
        /// Source id.
        id: Arc<str>,
        /// What failed, with file and line.
        message: String,
    },
    /// A sink could not write.
    #[error("sink '{id}': {message}")]
    Sink {
        /// Sink id.
        id: Arc<str>,
        /// What failed.
        message: String,
    },
    /// A record without key was sent over a keyed edge.
    #[error(
        "'{from}' emitted a record without a key, but '{to}' reads it with partition = \"key\" (emit keyed records, or change the partition)"
    )]
    MissingKey {
        /// Sender.
        from: Arc<str>,
        /// Keyed receiver.
        to: Arc<str>,
    },
    /// A peer task went away; a consequence of another failure.
    #[error("'{0}' lost a neighbouring task")]
    Disconnected(Arc<str>),
    /// Stopped by the coordinator.
    #[error("cancelled")]
    Cancelled,
    /// A source stopped with a savepoint (not a failure: the source ends
    /// with these counters).
    #[error("stopped with a savepoint")]
    Stopped(Counters),
}

impl TaskError {
    /// Whether this error only follows from another task's failure.
    pub fn is_secondary(&self) -> bool {
        matches!(self, TaskError::Disconnected(_) | TaskError::Cancelled)
    }
}
