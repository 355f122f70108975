//! The control API of a running job: an HTTP server ([`server`], axum) that
//! the `host status`, `savepoint`, `swap`, `rescale`, `shadow` and `cancel` commands
//! talk to ([`client`], reqwest), the dashboard reads, and Prometheus
//! scrapes; and the run file through which they find it. The coordinator
//! answers the requests; this module only carries them.
//!
//! The endpoints (JSON, `docs/rest-api.md`; the resources are
//! [`crate::api`]'s):
//! - reads: `GET /v1/job`, `/v1/job/plan`, `/v1/job/metrics`,
//!   `/v1/job/backpressure`, `/v1/job/watermarks`, `/v1/checkpoints`,
//!   `/v1/checkpoints/config`, `/v1/checkpoints/{id}`, `/v1/operations`,
//!   `/v1/savepoints/{request_id}`, `/v1/swaps/{request_id}`,
//!   `/v1/rescales/{request_id}`, `/v1/shadows/{request_id}`, `/v1/shadow`
//!   (the shadow run's report), and `/metrics` (Prometheus
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
pub mod client;
mod connections;
pub mod dashboard;
pub mod limits;
pub mod metrics;
pub mod operations;
mod routes;
pub mod run_file;
pub mod server;
mod shared;

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
