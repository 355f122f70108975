//! The job's checkpoints as the control API shows them, shaped after
//! Flink's checkpoint tab: counts, the latest of each kind and the history
//! (`GET /v1/checkpoints`), one checkpoint with each subtask's part
//! (`GET /v1/checkpoints/{id}`), the checkpoint the run restored, and the
//! settings (`GET /v1/checkpoints/config`).
//!
//! Times are milliseconds: `*_time_ms` since the Unix epoch, `*_ms`
//! durations.

use serde::{Deserialize, Serialize};

/// The job's checkpoints in this run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointMetrics {
    /// Completed.
    pub completed: u64,
    /// Failed or aborted.
    pub failed: u64,
    /// Triggered and not yet completed or failed.
    pub in_progress: u64,
    /// The latest completed one's id.
    pub last_completed_id: Option<u64>,
    /// The latest completed one's trigger-to-completion time, milliseconds.
    pub last_duration_ms: Option<u64>,
    /// The latest completed one's state bytes (Flink's
    /// `lastCheckpointFullSize`).
    pub last_size: Option<u64>,
    /// Bytes the latest completed one stored that no earlier one had
    /// (`lastCheckpointSize`: equal to the full size unless incremental).
    #[serde(default)]
    pub last_incremental_size: Option<u64>,
    /// When the run last restored a checkpoint (at start or on a restart).
    #[serde(default)]
    pub last_restore_time_ms: Option<u64>,
}

/// `GET /v1/checkpoints`: counts, the latest of each kind, and the history.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointOverview {
    /// Counts over the run.
    pub counts: CheckpointCounts,
    /// The latest completed checkpoint (not savepoint).
    pub latest_completed: Option<CheckpointSummary>,
    /// The latest savepoint.
    pub latest_savepoint: Option<CheckpointSummary>,
    /// The latest failed checkpoint or savepoint.
    pub latest_failed: Option<CheckpointSummary>,
    /// The latest restore.
    pub latest_restored: Option<RestoredCheckpoint>,
    /// The last checkpoints and savepoints, newest first.
    pub history: Vec<CheckpointSummary>,
}

/// Counts of checkpoints over the run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct CheckpointCounts {
    /// Completed checkpoints and savepoints.
    pub completed: u64,
    /// Failed or aborted ones.
    pub failed: u64,
    /// Triggered and not yet completed or failed.
    pub in_progress: u64,
    /// Restores (at start and on restarts).
    pub restored: u64,
}

/// One checkpoint or savepoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointSummary {
    /// Its id.
    pub id: u64,
    /// "in-progress", "completed" or "failed".
    pub status: String,
    /// A savepoint (or a swap's).
    pub savepoint: bool,
    /// When it was triggered.
    pub trigger_time_ms: u64,
    /// Trigger to completion (or failure); so far while in progress.
    pub duration_ms: u64,
    /// Bytes of state it holds.
    pub size: u64,
    /// Bytes it stored that no earlier checkpoint of the run had.
    pub incremental_size: u64,
    /// Subtasks that acknowledged it.
    pub acknowledged: u32,
    /// Subtasks that must.
    pub subtasks: u32,
    /// Where it is, once completed.
    pub location: Option<String>,
    /// Why it failed.
    pub failure: Option<String>,
}

/// `GET /v1/checkpoints/{id}`: one checkpoint and each subtask's part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointDetails {
    /// The checkpoint.
    #[serde(flatten)]
    pub summary: CheckpointSummary,
    /// The subtasks that acknowledged it, by node and index.
    pub tasks: Vec<SubtaskCheckpoint>,
}

/// One subtask's part of a checkpoint, as Flink's checkpoint details.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubtaskCheckpoint {
    /// Node id.
    pub node: String,
    /// Subtask index.
    pub subtask: u32,
    /// Trigger to its acknowledgement.
    pub ack_ms: u64,
    /// Trigger to its barrier being aligned: how long the barrier took to
    /// reach it.
    pub start_delay_ms: u64,
    /// First to last barrier of its inputs.
    pub alignment_ms: f64,
    /// The synchronous part: the subtask stopped processing for it.
    pub sync_ms: f64,
    /// The asynchronous part: writing its state while it went on.
    pub async_ms: f64,
    /// Bytes of state.
    pub size: u64,
    /// Bytes stored that no earlier checkpoint of the run had.
    pub incremental_size: u64,
}

/// A checkpoint the run restored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoredCheckpoint {
    /// Its id.
    pub id: u64,
    /// Where it is.
    pub location: String,
    /// When it was restored.
    pub restore_time_ms: u64,
    /// A savepoint.
    pub savepoint: bool,
}

/// `GET /v1/checkpoints/config`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// Periodic checkpoints are on.
    pub enabled: bool,
    /// "exactly-once".
    pub mode: String,
    /// Between triggers.
    pub interval_ms: Option<u64>,
    /// A checkpoint not complete by then fails.
    pub timeout_ms: Option<u64>,
    /// Least time from one checkpoint's end to the next trigger.
    pub min_pause_ms: Option<u64>,
    /// Failures in a row before the job restarts.
    pub tolerable_failures: Option<u32>,
    /// Completed checkpoints kept.
    pub retained: Option<u32>,
    /// "hashmap" or "rocksdb".
    pub backend: String,
    /// RocksDB checkpoints store only new files.
    pub incremental: bool,
    /// Where checkpoints go.
    pub checkpoints_dir: Option<String>,
    /// Where savepoints go unless a request names a directory.
    pub savepoints_dir: Option<String>,
}
