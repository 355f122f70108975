//! The control API's server: HTTP on `rest.bind` (127.0.0.1 with a port
//! the kernel picks unless set), on axum and hyper, each request handed to
//! the coordinator as a [`Request`] and its answer written back as JSON.
//!
//! Only the user who started the job can steer it: every action must carry
//! the bearer token of the run file (mode 0600, in a directory only that
//! user can write), compared in constant time before anything else of the
//! request is read; so must every read unless `rest.auth = "none"`. The
//! dashboard's page and assets are open, but the page shows the job only
//! to a request that may read it (the token posted by its form). Nobody
//! can exhaust the host through it: at most
//! [`MAX_CONNECTIONS`] connections at once (a new one closes the oldest that
//! has not sent its request, [`super::connections`]), a
//! request's head must arrive within [`HEAD_TIMEOUT`] and fit in
//! [`MAX_HEAD_BYTES`], and a body is at most [`MAX_BODY_BYTES`], read within
//! [`BODY_TIMEOUT`].

use super::connections::{Connections, serve_connection};
use super::operations::{Operations, Outcome};
use super::{RunFile, run_file_path};
use crate::api::{
    Accepted, BackPressure, Request, RequestError, RescaleRequest, SavepointRequest, ShadowRequest, SwapRequest,
    Watermarks,
};
use crate::clock::now_ms;
use crate::config::{RestAuth, RestSettings};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use crossbeam_channel::Sender;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

/// Connections served at once; past it, the oldest that has not sent its
/// request yet is closed ([`super::connections`]).
pub const MAX_CONNECTIONS: usize = 256;
/// Time for a request's line and headers to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a request's line and headers.
pub const MAX_HEAD_BYTES: usize = 16 << 10;
/// Bytes of a request's body.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// Time for a request's body to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a savepoint, swap or rescale request may wait for its answer.
pub(super) const LONG_WAIT: Duration = Duration::from_secs(3600);
/// How long the server answers on after the job ended, for clients that
/// have not read their action's outcome yet.
const LINGER: Duration = Duration::from_secs(3);
/// How long a read or a cancel may wait for the coordinator.
const SHORT_WAIT: Duration = Duration::from_secs(10);

/// Why the control endpoint could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ControlError {
    /// Another process runs a job of this name.
    #[error(
        "job '{job}' is already running (pid {pid}, {file}): two runs of one job would write the same checkpoints; stop it first (host cancel {job})"
    )]
    AlreadyRunning {
        /// Job name.
        job: String,
        /// Its process.
        pid: u32,
        /// Its run file.
        file: String,
    },
    /// The run directory could be used by another user.
    #[error("the run directory {dir} {why}: the control API's token would not be private")]
    UnsafeRunDir {
        /// The directory.
        dir: String,
        /// What is wrong.
        why: String,
    },
    /// The address cannot be listened on.
    #[error("cannot listen on rest.bind = {bind}: {cause}")]
    Bind {
        /// The address.
        bind: std::net::SocketAddr,
        /// Why.
        cause: std::io::Error,
    },
    /// The socket or the run file.
    #[error("control endpoint: {0}")]
    Io(String),
}

/// A running control endpoint; dropping it stops it and removes the run
/// file.
pub struct ControlServer {
    file: PathBuf,
    /// The port in the run file this server wrote.
    port: u16,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Whether process `pid` is alive.
pub(super) fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A fresh random bearer token.
fn token() -> String {
    use rand::RngExt;
    // The thread RNG: a CSPRNG seeded by the operating system.
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

/// What every handler shares.
pub(super) struct Shared {
    requests: Sender<Request>,
    pub(super) token: String,
    pub(super) auth: RestAuth,
}

impl ControlServer {
    /// Starts the endpoint of job `job` as `rest` says, sending requests
    /// to `requests`, and writes its run file. Refuses if a live process
    /// runs `job`.
    pub fn start(job: &str, requests: Sender<Request>, rest: &RestSettings) -> Result<Self, ControlError> {
        let file = run_file_path(job);
        // A run file that is not this user's own is no job of theirs; the
        // run directory's check below refuses it.
        if let Ok(Some(other)) = super::run_file::read(&file)
            && other.pid != std::process::id()
            && alive(other.pid)
            && !rest.take_over
        {
            return Err(ControlError::AlreadyRunning {
                job: job.to_string(),
                pid: other.pid,
                file: file.display().to_string(),
            });
        }
        let io = |what: &str, e: std::io::Error| ControlError::Io(format!("{what}: {e}"));
        let listener =
            std::net::TcpListener::bind(rest.bind).map_err(|cause| ControlError::Bind { bind: rest.bind, cause })?;
        listener.set_nonblocking(true).map_err(|e| io("cannot set up the socket", e))?;
        let local = listener.local_addr().map_err(|e| io("cannot read the port", e))?;
        // A client on this machine reaches an unspecified address through
        // loopback.
        let host = match local.ip() {
            std::net::IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
            std::net::IpAddr::V6(ip) if ip.is_unspecified() => "::1".to_string(),
            ip => ip.to_string(),
        };
        let run = RunFile { job: job.to_string(), pid: std::process::id(), host, port: local.port(), token: token() };
        write_run_file(&file, &run)?;
        if !local.ip().is_loopback() {
            tracing::warn!(address = %local, "the control API listens beyond loopback: put TLS in front of it (a proxy)");
        }
        // The token stays out of the logs (they may be shipped anywhere):
        // `host status` prints the address with it.
        tracing::info!(run_file = %file.display(), "dashboard: {}/ (host status {job} prints it with the token)", run.url());
        let shared = Arc::new(Shared { requests, token: run.token, auth: rest.auth });
        let (shutdown, stop) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("weir-control".into())
            .spawn(move || serve(listener, shared, stop))
            .map_err(|e| io("cannot start its thread", e))?;
        tracing::debug!(address = %local, file = %file.display(), "control endpoint listening");
        Ok(ControlServer { file, port: local.port(), shutdown: Some(shutdown), thread: Some(thread) })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Only while it is this server's (a run that took the job over wrote its own).
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        if serde_json::from_str::<RunFile>(&text).is_ok_and(|r| r.pid == std::process::id() && r.port == self.port) {
            let _ = std::fs::remove_file(&self.file);
        }
    }
}

/// Checks the run directory (creating it 0700) and writes the run file
/// aside under a fresh name, without following links, then renames it into
/// place: a reader never sees half a file, and nothing planted in the
/// directory is written through.
fn write_run_file(file: &Path, run: &RunFile) -> Result<(), ControlError> {
    let io = |what: String, e: std::io::Error| ControlError::Io(format!("{what}: {e}"));
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io(format!("cannot create {}", dir.display()), e))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| io(format!("cannot read {}", dir.display()), e))?;
    let unsafe_dir = |why: String| Err(ControlError::UnsafeRunDir { dir: dir.display().to_string(), why });
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        return unsafe_dir("is not a directory (a symbolic link is not followed)".into());
    }
    if meta.uid() != me {
        return unsafe_dir(format!("belongs to user {}, not to the user running the host ({me})", meta.uid()));
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return unsafe_dir(format!("is writable by others (mode {:o}): chmod go-w it", mode & 0o777));
    }
    let tmp = dir.join(format!(".{}.{}.{}", run.job, std::process::id(), token()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(&serde_json::to_vec(run).expect("a run file serializes"))?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(format!("cannot write {}", file.display()), e));
    }
    Ok(())
}

/// The accept loop, on a runtime of its own, until `stop`.
fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, mut stop: tokio::sync::oneshot::Receiver<()>) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "the control endpoint cannot start its runtime");
            return;
        }
    };
    runtime.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
        let operations = Operations::spawn();
        let app = router(shared, operations.clone());
        // Once the job has ended, the server answers on while an action's
        // outcome is unread (the client of a stop with savepoint polls for
        // it after the job stopped), for at most `LINGER`.
        let mut lingering_until: Option<tokio::time::Instant> = None;
        // A flood of silent connections cannot lock the owner out, nor
        // evict a request being served, and costs a task each, no thread.
        let mut connections = Connections::default();
        loop {
            let (stream, _) = tokio::select! {
                _ = &mut stop, if lingering_until.is_none() => {
                    lingering_until = Some(tokio::time::Instant::now() + LINGER);
                    continue;
                }
                _ = tokio::time::sleep(Duration::from_millis(20)), if lingering_until.is_some() => {
                    if lingering_until.is_some_and(|t| tokio::time::Instant::now() >= t) || !operations.unread().await {
                        return;
                    }
                    continue;
                }
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(_) => continue,
                },
            };
            connections.admit(stream, app.clone());
            // The new connection's task reads its request (if it is there)
            // before the next one is accepted: a burst of connections
            // cannot evict a request that had arrived.
            tokio::task::yield_now().await;
        }
    });
    // A read still waiting for the coordinator, which has stopped
    // answering, is not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
}

/// What the server answers a connection that sends `request` and closes,
/// with no job behind it: for fuzzing the request path, limits included.
pub fn answer_raw(request: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return Vec::new() };
    runtime.block_on(async {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (requests, _) = crossbeam_channel::bounded(0);
        let shared = Shared { requests, token: "fuzz".into(), auth: RestAuth::Token };
        let app = router(Arc::new(shared), Operations::spawn());
        let served = tokio::spawn(serve_connection(server, app, Default::default()));
        let (mut from_server, mut to_server) = tokio::io::split(client);
        // Written while the answer is read: the server may answer (and
        // close) before it has read everything.
        let write = async {
            let _ = to_server.write_all(request).await;
            let _ = to_server.shutdown().await;
        };
        let mut answer = Vec::new();
        let exchange = async { tokio::join!(write, from_server.read_to_end(&mut answer)) };
        let _ = tokio::time::timeout(Duration::from_secs(5), exchange).await;
        served.abort();
        answer
    })
}

/// What a handler gets: the shared settings and the operations table.
#[derive(Clone)]
struct App {
    shared: Arc<Shared>,
    operations: Operations,
}

fn router(shared: Arc<Shared>, table: Operations) -> Router {
    Router::new()
        .route("/v1/job", get(job))
        .route("/v1/job/plan", get(plan))
        .route("/v1/job/metrics", get(job_metrics))
        .route("/v1/job/backpressure", get(back_pressure))
        .route("/v1/job/watermarks", get(watermarks))
        .route("/v1/checkpoints", get(checkpoints))
        .route("/v1/checkpoints/config", get(checkpoint_config))
        .route("/v1/checkpoints/{id}", get(checkpoint_details))
        .route("/v1/savepoints", post(trigger_savepoint))
        .route("/v1/savepoints/{request_id}", get(operation))
        .route("/v1/swaps", post(trigger_swap))
        .route("/v1/swaps/{request_id}", get(operation))
        .route("/v1/rescales", post(trigger_rescale))
        .route("/v1/rescales/{request_id}", get(operation))
        .route("/v1/shadows", post(trigger_shadow))
        .route("/v1/shadows/{request_id}", get(operation))
        .route("/v1/shadow", get(shadow_report))
        .route("/v1/shadow/stop", post(stop_shadow))
        .route("/v1/shadow/promote", post(promote_shadow))
        .route("/v1/operations", get(list_operations))
        .route("/v1/cancel", post(cancel))
        .route("/metrics", get(metrics))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint (see docs/rest-api.md; try GET /v1/job)") })
        .layer(axum::middleware::from_fn_with_state(shared.clone(), super::access::authorize))
        // The dashboard, outside the token check: its page asks for the
        // token itself, and its assets hold nothing of the job.
        .route("/", get(dashboard_page).post(dashboard_form))
        .merge(super::dashboard::router())
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(BODY_TIMEOUT))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(super::access::check_host))
        .with_state(App { shared, operations: table })
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

fn gone() -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, "the job is not taking requests (it is ending or restarting)")
}

/// Sends a request to the coordinator and waits, off the async threads,
/// for its answer.
async fn ask<T: Send + 'static>(
    shared: &Shared,
    make: impl FnOnce(crossbeam_channel::Sender<T>) -> Request,
    wait: Duration,
) -> Option<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    shared.requests.send(make(tx)).ok()?;
    tokio::task::spawn_blocking(move || rx.recv_timeout(wait).ok()).await.ok().flatten()
}

/// A read: the coordinator's answer as JSON.
async fn read<T: serde::Serialize + Send + 'static>(
    app: &App,
    make: impl FnOnce(crossbeam_channel::Sender<T>) -> Request,
) -> Response {
    match ask(&app.shared, make, SHORT_WAIT).await {
        Some(answer) => axum::Json(answer).into_response(),
        None => gone(),
    }
}

/// `GET /`: the dashboard with the job's state when the request may read
/// it (`rest.auth = "none"`, or the bearer token), else the form that asks
/// for the token.
async fn dashboard_page(State(app): State<App>, headers: axum::http::HeaderMap) -> Response {
    dashboard_answer(app, super::dashboard::bearer_token(&headers)).await
}

/// `POST /`: the page's form where scripts do not run, the token in the
/// body.
async fn dashboard_form(State(app): State<App>, body: Bytes) -> Response {
    dashboard_answer(app, super::dashboard::form_token(&body)).await
}

async fn dashboard_answer(app: App, given: Option<String>) -> Response {
    use super::dashboard::{PageData, respond, unavailable};
    let valid = given.as_ref().is_some_and(|t| super::access::token_matches(t.as_bytes(), &app.shared.token));
    if !valid && app.shared.auth != RestAuth::ReadOpen {
        return respond(None, given.is_some());
    }
    let shared = &app.shared;
    let answers = tokio::join!(
        ask(shared, Request::Status, SHORT_WAIT),
        ask(shared, Request::Plan, SHORT_WAIT),
        ask(shared, Request::Metrics, SHORT_WAIT),
        ask(shared, Request::Checkpoints, SHORT_WAIT),
    );
    match answers {
        (Some(status), Some(graph), Some(metrics), Some(checkpoints)) => {
            respond(Some(&PageData { status, graph, metrics, checkpoints }), false)
        }
        _ => unavailable(),
    }
}

async fn job(State(app): State<App>) -> Response {
    read(&app, Request::Status).await
}

async fn plan(State(app): State<App>) -> Response {
    read(&app, Request::Plan).await
}

async fn job_metrics(State(app): State<App>) -> Response {
    read(&app, Request::Metrics).await
}

async fn back_pressure(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Metrics, SHORT_WAIT).await {
        Some(m) => axum::Json(BackPressure::of(&m)).into_response(),
        None => gone(),
    }
}

async fn watermarks(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Metrics, SHORT_WAIT).await {
        Some(m) => axum::Json(Watermarks::of(&m, now_ms())).into_response(),
        None => gone(),
    }
}

async fn checkpoints(State(app): State<App>) -> Response {
    read(&app, Request::Checkpoints).await
}

async fn checkpoint_config(State(app): State<App>) -> Response {
    read(&app, Request::CheckpointConfig).await
}

async fn checkpoint_details(State(app): State<App>, UrlPath(id): UrlPath<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return error(StatusCode::BAD_REQUEST, &format!("'{id}' is not a checkpoint id"));
    };
    match ask(&app.shared, |tx| Request::CheckpointDetails(id, tx), SHORT_WAIT).await {
        Some(Some(details)) => axum::Json(details).into_response(),
        Some(None) => error(StatusCode::NOT_FOUND, &format!("checkpoint {id} is not in the run's history")),
        None => gone(),
    }
}

async fn metrics(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Metrics, SHORT_WAIT).await {
        Some(m) => {
            let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
            ([(header::CONTENT_TYPE, kind)], super::metrics::encode(&m)).into_response()
        }
        None => gone(),
    }
}

async fn cancel(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Cancel, SHORT_WAIT).await {
        Some(()) => axum::Json(serde_json::json!({ "cancelled": true })).into_response(),
        None => gone(),
    }
}

async fn trigger_savepoint(State(app): State<App>, body: Bytes) -> Response {
    let request = match serde_json::from_slice::<SavepointRequest>(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("bad savepoint request: {e}")),
    };
    let kind = if request.stop { "stop" } else { "savepoint" };
    start(app, kind, "savepoints", |tx| Request::Savepoint(request, tx), Outcome::Savepoint).await
}

async fn trigger_swap(State(app): State<App>, body: Bytes) -> Response {
    match serde_json::from_slice::<SwapRequest>(&body) {
        Ok(request) => start(app, "swap", "swaps", |tx| Request::Swap(request, tx), Outcome::Swap).await,
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("bad swap request: {e}")),
    }
}

async fn trigger_rescale(State(app): State<App>, body: Bytes) -> Response {
    match serde_json::from_slice::<RescaleRequest>(&body) {
        Ok(request) => start(app, "rescale", "rescales", |tx| Request::Rescale(request, tx), Outcome::Rescale).await,
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("bad rescale request: {e}")),
    }
}

async fn trigger_shadow(State(app): State<App>, body: Bytes) -> Response {
    match serde_json::from_slice::<ShadowRequest>(&body) {
        Ok(request) => start(app, "shadow", "shadows", |tx| Request::Shadow(request, tx), Outcome::Shadow).await,
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("bad shadow request: {e}")),
    }
}

async fn shadow_report(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::ShadowReport, SHORT_WAIT).await {
        Some(Some(report)) => axum::Json(report).into_response(),
        Some(None) => error(StatusCode::NOT_FOUND, "no shadow run in this job yet (start one with POST /v1/shadows)"),
        None => gone(),
    }
}

/// Ends the shadow run; answers its final report once every subtask of it
/// ended.
async fn stop_shadow(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::StopShadow, SHORT_WAIT + SHORT_WAIT).await {
        Some(Ok(report)) => axum::Json(report).into_response(),
        Some(Err(e)) => error(StatusCode::CONFLICT, &e.to_string()),
        None => gone(),
    }
}

async fn promote_shadow(State(app): State<App>) -> Response {
    start(app, "swap", "swaps", Request::PromoteShadow, Outcome::Swap).await
}

/// Starts an action that takes a checkpoint's time (a savepoint, a swap, a
/// rescale): answers `202 Accepted` with where to follow it, and records
/// its outcome there when the coordinator answers.
async fn start<T: Send + 'static>(
    app: App,
    kind: &'static str,
    collection: &str,
    make: impl FnOnce(crossbeam_channel::Sender<Result<T, RequestError>>) -> Request,
    done: fn(T) -> Outcome,
) -> Response {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let Some(request_id) = app.operations.start(kind).await else { return gone() };
    if app.shared.requests.send(make(tx)).is_err() {
        app.operations.finish(request_id, Outcome::Lost);
        return gone();
    }
    let operations = app.operations.clone();
    let id = request_id.clone();
    tokio::spawn(async move {
        let answer = tokio::task::spawn_blocking(move || rx.recv_timeout(LONG_WAIT).ok()).await.ok().flatten();
        let outcome = match answer {
            Some(Ok(t)) => done(t),
            Some(Err(e)) => Outcome::Failed(e),
            None => Outcome::Lost,
        };
        operations.finish(id, outcome);
    });
    let location = format!("/v1/{collection}/{request_id}");
    (StatusCode::ACCEPTED, [(header::LOCATION, location.clone())], axum::Json(Accepted { request_id, location }))
        .into_response()
}

async fn operation(State(app): State<App>, UrlPath(request_id): UrlPath<String>) -> Response {
    match app.operations.get(request_id.clone()).await {
        Some(o) => axum::Json(o).into_response(),
        None => error(StatusCode::NOT_FOUND, &format!("no operation '{request_id}' (the last 100 are kept)")),
    }
}

async fn list_operations(State(app): State<App>) -> Response {
    axum::Json(app.operations.list().await).into_response()
}

#[cfg(test)]
mod tests {
    use super::answer_raw;

    /// The status line of the answer to `request` (the test server's token
    /// is `fuzz`).
    fn status_of(request: &[u8]) -> String {
        let answer = answer_raw(request);
        String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_string()
    }

    #[test]
    fn only_the_token_opens_the_api() {
        assert!(status_of(b"GET /v1/job HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").contains("401"));
        // Right length, wrong bytes; and a prefix of the token.
        assert!(status_of(b"GET /v1/job HTTP/1.1\r\nauthorization: Bearer fuzy\r\n\r\n").contains("401"));
        assert!(status_of(b"GET /v1/job HTTP/1.1\r\nauthorization: Bearer fuz\r\n\r\n").contains("401"));
        // With it, the request reaches the (absent) job.
        let status = status_of(b"GET /v1/job HTTP/1.1\r\nauthorization: Bearer fuzz\r\n\r\n");
        assert!(status.contains("503"), "{status}");
    }

    #[test]
    fn the_dashboard_is_open_and_its_data_behind_the_token() {
        // The page asks for the token; its assets need none.
        let answer = String::from_utf8_lossy(&answer_raw(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")).into_owned();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("id=\"token-form\""), "{answer}");
        assert!(answer.contains("content-security-policy: default-src 'self'"), "{answer}");
        assert!(status_of(b"GET /assets/app.js HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").contains("200"));
        // A wrong token: asked again; the right one reaches the (absent)
        // job, posted by the form or as a header, never from the address.
        let form = |token: &str| {
            let body = format!("token={token}");
            let request = format!(
                "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            status_of(request.as_bytes())
        };
        assert!(form("fuzy").contains("401"));
        assert!(form("fuzz").contains("503"));
        let by_address =
            String::from_utf8_lossy(&answer_raw(b"GET /?token=fuzz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")).into_owned();
        assert!(by_address.starts_with("HTTP/1.1 200") && by_address.contains("id=\"token-form\""), "{by_address}");
        assert!(status_of(b"GET / HTTP/1.1\r\nauthorization: Bearer fuzz\r\n\r\n").contains("503"));
        // The API stays behind the token.
        assert!(status_of(b"GET /v1/job?token=fuzz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").contains("401"));
        assert!(status_of(b"GET /nothing HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").contains("401"));
    }

    /// A `POST /v1/rescales` with the token and `body`.
    fn post_rescale(body: &str) -> String {
        let request = format!(
            "POST /v1/rescales HTTP/1.1\r\nauthorization: Bearer fuzz\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        String::from_utf8_lossy(&answer_raw(request.as_bytes())).into_owned()
    }

    #[test]
    fn a_rescale_needs_the_token_and_a_well_formed_body() {
        let body = r#"{"operator": "counter", "parallelism": 4}"#;
        let anonymous = format!("POST /v1/rescales HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        assert!(status_of(anonymous.as_bytes()).contains("401"));
        // Well formed: it reaches the (absent) job.
        let answer = post_rescale(body);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        for bad in [r#"{"operator": "counter", "parallelism": 4, "module": "x"}"#, r#"{"operator": "counter"}"#, "{"] {
            let answer = post_rescale(bad);
            assert!(answer.starts_with("HTTP/1.1 400"), "{bad}: {answer}");
            assert!(answer.contains("bad rescale request: "), "{bad}: {answer}");
        }
        let status = status_of(b"GET /v1/rescales/rescale-1 HTTP/1.1\r\nauthorization: Bearer fuzz\r\n\r\n");
        assert!(status.contains("404"), "{status}");
    }

    #[test]
    fn heads_and_bodies_past_their_limits_are_refused() {
        // Cut short: closed, at once.
        let started = std::time::Instant::now();
        let status = status_of(b"GET /v1/sta");
        assert!(status.is_empty() || status.contains("400"), "{status}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        let mut big_head = b"GET /v1/job HTTP/1.1\r\nx-pad: ".to_vec();
        big_head.resize(64 << 10, b'a');
        big_head.extend_from_slice(b"\r\n\r\n");
        let status = status_of(&big_head);
        assert!(status.is_empty() || status.contains("431"), "{status}");

        let body = vec![b'{'; super::MAX_BODY_BYTES + 1];
        let mut request =
            format!("POST /v1/swaps HTTP/1.1\r\nauthorization: Bearer fuzz\r\ncontent-length: {}\r\n\r\n", body.len())
                .into_bytes();
        request.extend_from_slice(&body);
        let status = status_of(&request);
        assert!(status.contains("413"), "{status}");
    }
}
