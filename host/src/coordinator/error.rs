//! Why a job did not complete ([`JobError`], one variant per layer that
//! can fail it) or could not start as asked ([`StartError`]), each saying
//! whether a restart can help.

use super::checkpointing::CheckpointingError;
use super::job_state::IllegalTransition;
use crate::checkpoint::modules::ModuleStoreError;
use crate::checkpoint::restore::RestoreError;
use crate::checkpoint::storage::StorageError;
use crate::config::ConfigError;
use crate::control::server::ControlError;
use crate::fault::{Classify, Domain, RetryHint};
use crate::runtime::TaskError;
use crate::wasm::WasmError;
use thiserror::Error;

/// Why a job did not complete.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum JobError {
    /// A source or sink entry of the job file cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A module could not be loaded.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// A task failed; this is the first, root failure.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// The engine could not start.
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
    /// Checkpoint storage failed outside a checkpoint (opening, listing).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The checkpoint to restore from cannot be used.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// The job cannot start as asked.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The control endpoint could not start (or the job runs already).
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Checkpointing failed the job.
    #[error(transparent)]
    Checkpoints(#[from] CheckpointingError),
    /// The job's state was asked to move where its life does not allow (a
    /// fault of the host).
    #[error(transparent)]
    State(#[from] IllegalTransition),
    /// Cancelled through the control API (`host cancel`).
    #[error("cancelled on request (host cancel)")]
    Cancelled,
    /// The restart strategy gave up.
    #[error("{cause}\n(gave up after {restarts} restart(s), restart-strategy.attempts = {attempts})")]
    RestartsExhausted {
        /// The last failure.
        cause: Box<JobError>,
        /// Restarts made.
        restarts: u32,
        /// Allowed.
        attempts: u32,
    },
}

impl Classify for JobError {
    fn domain(&self) -> Domain {
        match self {
            JobError::Config(e) => e.domain(),
            JobError::Wasm(_) | JobError::Start(_) | JobError::Cancelled => Domain::User,
            JobError::Task(e) => e.domain(),
            JobError::Engine(_) | JobError::State(_) => Domain::Internal,
            JobError::Storage(e) => e.domain(),
            JobError::Restore(e) => e.domain(),
            JobError::Control(_) => Domain::External,
            JobError::Checkpoints(e) => e.domain(),
            JobError::RestartsExhausted { cause, .. } => cause.domain(),
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            JobError::Task(e) => e.retry(),
            JobError::Storage(e) => e.retry(),
            JobError::Restore(e) => e.retry(),
            JobError::Checkpoints(e) => e.retry(),
            JobError::Config(_)
            | JobError::Wasm(_)
            | JobError::Engine(_)
            | JobError::State(_)
            | JobError::Start(_)
            | JobError::Control(_)
            | JobError::Cancelled
            | JobError::RestartsExhausted { .. } => RetryHint::NoRetry,
        }
    }
}

/// Why a run cannot start as asked.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StartError {
    /// `--resume` with checkpoints in host memory.
    #[error(
        "--resume needs state.checkpoints.dir: job '{job}' keeps checkpoints in host memory, which end with the process"
    )]
    ResumeNeedsDir {
        /// The job.
        job: String,
    },
    /// A fresh run would collide with the job's checkpoints.
    #[error(
        "job '{job}' already has checkpoints in {dir} (latest chk-{latest}): run with --resume to continue from them, or delete that directory to start over"
    )]
    HasCheckpoints {
        /// The job.
        job: String,
        /// Its checkpoint directory.
        dir: String,
        /// The latest id there.
        latest: u64,
    },
    /// The checkpoint holds state of operators the job no longer has.
    #[error(
        "{location} holds state of operator(s) {operators}, which the job no longer has (operators are matched by uid): restore with --allow-non-restored-state to drop it"
    )]
    NonRestoredState {
        /// The checkpoint.
        location: String,
        /// The operators, quoted.
        operators: String,
    },
    /// The module a restored checkpoint's state belongs to cannot be
    /// loaded from the checkpoint's module store.
    #[error(
        "operator '{uid}': {checkpoint} holds the state of a module swapped in while the job ran ({path}, SHA-256 {sha256}), which is loaded only from the job's module store, and cannot be: {why}; restore an earlier checkpoint or the savepoint the swap took, or name the module to run in the job file"
    )]
    SwappedModuleGone {
        /// The operator.
        uid: String,
        /// The checkpoint.
        checkpoint: String,
        /// Where the module was swapped in from (never read).
        path: String,
        /// Its recorded SHA-256.
        sha256: String,
        /// What is wrong.
        why: String,
    },
    /// A module the run's checkpoints will name cannot be kept in the job's
    /// module store.
    #[error("operator '{uid}': cannot keep module {path} in {store}/modules: {cause}")]
    KeepModule {
        /// The operator.
        uid: String,
        /// The module.
        path: String,
        /// The job's directory.
        store: String,
        /// Why.
        cause: Box<ModuleStoreError>,
    },
}

impl Classify for StartError {
    fn domain(&self) -> Domain {
        match self {
            StartError::KeepModule { cause, .. } => cause.domain(),
            _ => Domain::User,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            StartError::KeepModule { cause, .. } => cause.retry(),
            _ => RetryHint::NoRetry,
        }
    }
}
