//! The control API of a running job: an HTTP server ([`server`], axum) that
//! the `host status`, `savepoint`, `swap`, `rescale`, `shadow` and `cancel` commands
//! talk to ([`client`], reqwest), the dashboard reads, and Prometheus
//! scrapes; and the run file through which they find it. The coordinator
//! answers the requests; this module only carries them.
//!
//! The endpoints (JSON, `docs/rest-api.md`; the resources are in [`api`]):
//! - reads: `GET /v1/job`, `/v1/job/plan`, `/v1/job/metrics`,
//!   `/v1/job/backpressure`, `/v1/job/watermarks`, `/v1/checkpoints`,
//!   `/v1/checkpoints/config`, `/v1/checkpoints/{id}`, `/v1/operations`,
//!   `/v1/savepoints/{request_id}`, `/v1/swaps/{request_id}`,
//!   `/v1/rescales/{request_id}`, `/v1/shadows/{request_id}`, `/v1/shadow`
//!   (the shadow run's report, [`shadow`]), and `/metrics` (Prometheus
//!   text with Flink's names, [`metrics`]);
//! - actions: `POST /v1/savepoints` (a savepoint, or a stop with one),
//!   `POST /v1/swaps`, `POST /v1/rescales`, `POST /v1/shadows` and
//!   `POST /v1/shadow/promote` answer `202 Accepted` with the operation to
//!   follow ([`operations`]); `POST /v1/shadow/stop` ends a shadow run and
//!   answers its report; `POST /v1/cancel` cancels the job.
//!
//! `GET /` serves the web dashboard ([`dashboard`]): the job as HTML
//! tables, redrawn live by its script from the endpoints above.
//!
//! Every request carries `Authorization: Bearer <token>` from the run
//! file, which only the user who started the job can read; reads need it
//! too unless `rest.auth = "none"`. Errors come back as
//! `{"error": "..."}` with a 4xx or 5xx status.

mod access;
pub mod api;
pub mod client;
mod connections;
pub mod dashboard;
pub mod group;
pub mod metrics;
pub mod operations;
pub mod run_file;
pub mod server;
pub mod shadow;

pub use api::*;
use serde::{Deserialize, Serialize};
pub use shadow::*;
use std::path::PathBuf;

/// Where a running job's control endpoint is: written at start to
/// `<run dir>/<job>.json` (mode 0600), removed at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFile {
    /// The job's name.
    pub job: String,
    /// The host process.
    pub pid: u32,
    /// The address to reach the server at from this machine.
    #[serde(default = "loopback")]
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The bearer token requests must carry.
    pub token: String,
}

fn loopback() -> String {
    "127.0.0.1".into()
}

impl RunFile {
    /// The server's base URL, `http://host:port`.
    pub fn url(&self) -> String {
        match self.host.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(ip)) => format!("http://[{ip}]:{}", self.port),
            _ => format!("http://{}:{}", self.host, self.port),
        }
    }

    /// The dashboard's URL, the token in its fragment (which a browser
    /// never sends to the server, nor to anyone else).
    pub fn dashboard_url(&self) -> String {
        format!("{}/#token={}", self.url(), self.token)
    }
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
