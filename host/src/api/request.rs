//! What the control API asks of a running job: a [`Request`] the server
//! (or a cluster member, in process) hands to the coordinator over a
//! channel, with the channel to answer on, and the [`RequestError`] a
//! refusal or a failure comes back as.

use super::actions::{RescaleDone, RescaleRequest, SavepointDone, SavepointRequest, SwapDone, SwapRequest};
use super::checkpoints::{CheckpointConfig, CheckpointDetails, CheckpointOverview};
use super::graph::JobGraph;
use super::metrics::Metrics;
use super::shadow::{ShadowReport, ShadowRequest, ShadowStarted};
use super::status::Status;

/// Why the job refused or could not carry out a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
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
    /// One rescale at a time.
    #[error("a rescale is already in progress")]
    RescaleInProgress,
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
    /// A rescale or shadow run that cannot be done; the reason says why
    /// and what to change.
    #[error("{0}")]
    Refused(String),
    /// One shadow run at a time.
    #[error("a shadow run is already in progress (stop or promote it first)")]
    ShadowInProgress,
    /// Nothing to stop or promote.
    #[error("no shadow run is in progress")]
    NoShadow,
    /// Cluster mode is handing this copy's partition over to another
    /// member: a change now would not reach the next owner, which resumes
    /// from the hand-over's checkpoint.
    #[error(
        "the partition is being handed over to another member, which resumes from the checkpoint taken for it; ask again once the partition runs there"
    )]
    HandingOver,
}

/// A request the coordinator answers.
#[derive(Debug)]
pub enum Request {
    /// `GET /v1/job`.
    Status(crossbeam_channel::Sender<Status>),
    /// `GET /v1/job/plan`.
    Plan(crossbeam_channel::Sender<JobGraph>),
    /// `GET /metrics`, `GET /v1/job/metrics` (and the back-pressure and
    /// watermark views of it).
    Metrics(crossbeam_channel::Sender<Metrics>),
    /// `GET /v1/checkpoints`.
    Checkpoints(crossbeam_channel::Sender<CheckpointOverview>),
    /// `GET /v1/checkpoints/{id}`.
    CheckpointDetails(u64, crossbeam_channel::Sender<Option<CheckpointDetails>>),
    /// `GET /v1/checkpoints/config`.
    CheckpointConfig(crossbeam_channel::Sender<CheckpointConfig>),
    /// `POST /v1/savepoints`.
    Savepoint(SavepointRequest, crossbeam_channel::Sender<Result<SavepointDone, RequestError>>),
    /// `POST /v1/cancel`.
    Cancel(crossbeam_channel::Sender<()>),
    /// The checkpoint cluster mode hands the partition over at, answered
    /// with its id once it completed: the one in flight, or else one
    /// triggered at once; after a swap, savepoint or rescale under way, the
    /// first one after it. From then on the job takes no more changes
    /// ([`RequestError::HandingOver`]).
    HandOver(crossbeam_channel::Sender<Result<u64, RequestError>>),
    /// `POST /v1/swaps`.
    Swap(SwapRequest, crossbeam_channel::Sender<Result<SwapDone, RequestError>>),
    /// `POST /v1/rescales`.
    Rescale(RescaleRequest, crossbeam_channel::Sender<Result<RescaleDone, RequestError>>),
    /// `POST /v1/shadows`.
    Shadow(ShadowRequest, crossbeam_channel::Sender<Result<ShadowStarted, RequestError>>),
    /// `GET /v1/shadow`: the shadow run's report (the last one's, once it
    /// ended).
    ShadowReport(crossbeam_channel::Sender<Option<ShadowReport>>),
    /// `POST /v1/shadow/stop`: ends the shadow run; answers its final
    /// report.
    StopShadow(crossbeam_channel::Sender<Result<ShadowReport, RequestError>>),
    /// `POST /v1/shadow/promote`: ends the shadow run and swaps its module
    /// in, with the live state, at the next barrier.
    PromoteShadow(crossbeam_channel::Sender<Result<SwapDone, RequestError>>),
}
