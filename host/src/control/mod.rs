//! The control API of a running job: an HTTP server on loopback
//! ([`server`], axum) that the `host status`, `savepoint`, `swap` and
//! `cancel` commands talk to ([`client`], reqwest), and the run file through
//! which they find it. The coordinator answers the requests; this module
//! only carries them.
//!
//! Endpoints (JSON bodies, `Authorization: Bearer <token>` from the run
//! file, which only the user who started the job can read):
//! - `GET /v1/status`: a [`Status`];
//! - `POST /v1/savepoint` with a [`SavepointRequest`]: waits for the
//!   savepoint and answers a [`SavepointDone`];
//! - `POST /v1/swap` with a [`SwapRequest`]: replaces one operator's
//!   module while the job runs, and answers a [`SwapDone`];
//! - `POST /v1/cancel`: cancels the job;
//! - `GET /metrics`: the job's [`Metrics`] in the Prometheus text format,
//!   with Flink's metric names ([`metrics`], `docs/metrics.md`).
//!
//! Errors come back as `{"error": "..."}` with a 4xx or 5xx status.

pub mod client;
pub mod metrics;
pub mod server;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where a running job's control endpoint is: written at start to
/// `<run dir>/<job>.json` (mode 0600), removed at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFile {
    /// The job's name.
    pub job: String,
    /// The host process.
    pub pid: u32,
    /// The loopback port.
    pub port: u16,
    /// The bearer token requests must carry.
    pub token: String,
}

/// The directory of run files: `$WEIR_RUN_DIR`, else
/// `$XDG_RUNTIME_DIR/weir`, else `$XDG_CACHE_HOME/weir/run` (or
/// `~/.cache/weir/run`), else `<tmp>/weir-run`.
pub fn run_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = env("WEIR_RUN_DIR") {
        return d;
    }
    if let Some(d) = env("XDG_RUNTIME_DIR") {
        return d.join("weir");
    }
    if let Some(d) = env("XDG_CACHE_HOME").or_else(|| env("HOME").map(|h| h.join(".cache"))) {
        return d.join("weir").join("run");
    }
    std::env::temp_dir().join("weir-run")
}

/// The run file of job `job`.
pub fn run_file_path(job: &str) -> PathBuf {
    run_dir().join(format!("{job}.json"))
}

/// A request for a savepoint.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SavepointRequest {
    /// Parent directory (`file://` or `s3://`); the job's
    /// `state.savepoints.dir` if none.
    pub dir: Option<String>,
    /// Stop the job once the savepoint completed.
    pub stop: bool,
    /// With `stop`: advance event time to the end first, firing every
    /// event-time timer, as Flink's `stop --drain`.
    pub drain: bool,
}

/// A completed savepoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavepointDone {
    /// Its checkpoint id.
    pub id: u64,
    /// Its directory, to give to `host run --from-savepoint`.
    pub location: String,
    /// Bytes of state.
    pub size: u64,
    /// Trigger to completion, in milliseconds.
    pub duration_ms: u64,
    /// The job stopped with it.
    pub stopped: bool,
}

/// A request to replace one operator's module while the job runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwapRequest {
    /// The operator's uid.
    pub operator: String,
    /// The new component, as an absolute path on the host's machine.
    pub module: String,
    /// Parent directory of the swap's savepoint; the job's
    /// `state.savepoints.dir` if none.
    pub dir: Option<String>,
}

/// A module swap that took effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwapDone {
    /// The savepoint taken at the swap (the state before it, for rollback).
    pub savepoint: SavepointDone,
    /// How long the operator stopped processing, in milliseconds: from the
    /// first subtask's barrier to the new module taking over everywhere.
    pub pause_ms: f64,
}

/// A running job's state, as `host status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// Job name.
    pub job: String,
    /// Host process id.
    pub pid: u32,
    /// Restarts so far (0 on the first attempt).
    pub attempt: u32,
    /// Where the job is in its life: running, savepointing, stopping, ...
    #[serde(default)]
    pub state: String,
    /// Time since the run started, in milliseconds.
    pub uptime_ms: u64,
    /// Records read by the sources.
    pub records_read: u64,
    /// Records written by the sinks.
    pub records_written: u64,
    /// The checkpoint line of the progress display (none without
    /// checkpointing).
    pub checkpoints: Option<String>,
    /// The id of the latest checkpoint this run completed.
    #[serde(default)]
    pub latest_checkpoint: Option<u64>,
    /// Per node: role, id, parallelism, records in and out.
    pub nodes: Vec<NodeStatus>,
}

/// One node of a running job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    /// "source", "operator" or "sink".
    pub role: String,
    /// Source id, operator uid or sink id.
    pub id: String,
    /// Subtasks.
    pub parallelism: u32,
    /// Records in, summed over subtasks.
    pub records_in: u64,
    /// Records out, summed over subtasks.
    pub records_out: u64,
}

/// A running job's metrics at one instant, for `GET /metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Metrics {
    /// Job name.
    pub job: String,
    /// Restarts so far.
    pub restarts: u32,
    /// Time since the run started, in milliseconds.
    pub uptime_ms: u64,
    /// Every subtask of the current attempt (none while restarting).
    pub tasks: Vec<TaskMetrics>,
    /// With checkpointing.
    pub checkpoints: Option<CheckpointMetrics>,
}

/// One subtask's counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskMetrics {
    /// Source id, operator uid or sink id.
    pub node: String,
    /// "source", "operator" or "sink".
    pub role: String,
    /// Subtask index.
    pub subtask: u32,
    /// Records received (a source: records read).
    pub records_in: u64,
    /// Records sent on (a sink: records written).
    pub records_out: u64,
    /// Over the subtask's last reporting interval (`pipeline.progress_interval`);
    /// none before its second report.
    pub rates: Option<TaskRates>,
}

/// A subtask's meters, as Flink's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TaskRates {
    /// Records received per second.
    pub records_in_per_second: f64,
    /// Records sent on per second.
    pub records_out_per_second: f64,
    /// Milliseconds per second working.
    pub busy_ms_per_second: f64,
    /// Milliseconds per second blocked on a full output channel.
    pub backpressured_ms_per_second: f64,
    /// Milliseconds per second with nothing to do.
    pub idle_ms_per_second: f64,
}

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
    /// The latest completed one's state bytes.
    pub last_size: Option<u64>,
}

/// Why the job refused or could not carry out a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Savepoints and swaps ride on checkpoints.
    #[error("{what} checkpointing: set [checkpointing] interval in the job file")]
    NeedsCheckpointing {
        /// "savepoints need", "a module swap needs".
        what: &'static str,
    },
    /// The job is failing or being cancelled.
    #[error("the job is failing")]
    Failing,
    /// Every source finished: nothing more can be taken.
    #[error("the job's input is exhausted and it is finishing")]
    Finishing,
    /// One savepoint at a time.
    #[error("a savepoint is already in progress")]
    SavepointInProgress,
    /// One swap at a time.
    #[error("a module swap is already in progress")]
    SwapInProgress,
    /// No directory given and none configured.
    #[error(
        "no savepoint directory: pass --dir, or set state.savepoints.dir (the default needs $XDG_DATA_HOME or $HOME)"
    )]
    NoSavepointDir,
    /// The swap names no operator of the job.
    #[error("the job has no operator '{uid}' (it has: {known})")]
    UnknownOperator {
        /// The uid asked for.
        uid: String,
        /// The job's operators.
        known: String,
    },
    /// The new module of a swap cannot be loaded.
    #[error("cannot load the new module: {0}")]
    Module(String),
    /// The savepoint directory cannot be used.
    #[error("{0}")]
    Storage(String),
    /// The savepoint or swap was tried and failed; the reason says what
    /// state the job is in now.
    #[error("{0}")]
    Failed(String),
}

/// A request the coordinator answers.
#[derive(Debug)]
pub enum Request {
    /// `GET /v1/status`.
    Status(crossbeam_channel::Sender<Status>),
    /// `POST /v1/savepoint`.
    Savepoint(SavepointRequest, crossbeam_channel::Sender<Result<SavepointDone, RequestError>>),
    /// `POST /v1/cancel`.
    Cancel(crossbeam_channel::Sender<()>),
    /// `POST /v1/swap`.
    Swap(SwapRequest, crossbeam_channel::Sender<Result<SwapDone, RequestError>>),
    /// `GET /metrics`.
    Metrics(crossbeam_channel::Sender<Metrics>),
}
