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
//! [`MAX_CONNECTIONS`](super::limits::MAX_CONNECTIONS) connections at once
//! (a new one closes the oldest that has not sent its request,
//! [`super::connections`]), and a request's head and body must arrive in
//! time and fit the sizes of [`super::limits`]. The routes are
//! [`super::routes`].

use super::connections::{Connections, serve_connection};
use super::operations::Operations;
use super::routes::router;
use super::shared::Shared;
use super::{RunFile, run_file_path};
use crate::api::Request;
use crate::config::{RestAuth, RestSettings};
use crossbeam_channel::Sender;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

/// How long the server answers on after the job ended, for clients that
/// have not read their action's outcome yet.
const LINGER: Duration = Duration::from_secs(3);

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

        let body = vec![b'{'; crate::control::limits::MAX_BODY_BYTES + 1];
        let mut request =
            format!("POST /v1/swaps HTTP/1.1\r\nauthorization: Bearer fuzz\r\ncontent-length: {}\r\n\r\n", body.len())
                .into_bytes();
        request.extend_from_slice(&body);
        let status = status_of(&request);
        assert!(status.contains("413"), "{status}");
    }
}
