//! The control API's server: HTTP/1.1 on 127.0.0.1 with a port the kernel
//! picks, one short-lived thread per connection, each request handed to the
//! coordinator as a [`Request`] and its answer written back as JSON. It
//! listens on loopback only and checks the bearer token of the run file,
//! so other users of the machine cannot steer the job.
//!
//! Deliberately small (no HTTP library): a request line, headers, an
//! optional `Content-Length` body, one response, connection closed.

use super::{Request, RunFile, SavepointRequest, SwapRequest, run_file_path};
use crossbeam_channel::Sender;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

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
    /// The socket or the run file.
    #[error("control endpoint: {0}")]
    Io(String),
}

/// A running control endpoint; dropping it stops it and removes the run
/// file.
pub struct ControlServer {
    file: PathBuf,
    port: u16,
    shutdown: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Whether process `pid` is alive.
pub(super) fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn token() -> Result<String, ControlError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| ControlError::Io(format!("cannot read /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl ControlServer {
    /// Starts the endpoint of job `job`, sending requests to `requests`,
    /// and writes its run file. Refuses if a live process runs `job`.
    pub fn start(job: &str, requests: Sender<Request>) -> Result<Self, ControlError> {
        let file = run_file_path(job);
        if let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(other) = serde_json::from_str::<RunFile>(&text)
            && other.pid != std::process::id()
            && alive(other.pid)
        {
            return Err(ControlError::AlreadyRunning {
                job: job.to_string(),
                pid: other.pid,
                file: file.display().to_string(),
            });
        }
        let io = |what: &str, e: std::io::Error| ControlError::Io(format!("{what}: {e}"));
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| io("cannot listen on 127.0.0.1", e))?;
        let port = listener.local_addr().map_err(|e| io("cannot read the port", e))?.port();
        let run = RunFile { job: job.to_string(), pid: std::process::id(), port, token: token()? };
        write_run_file(&file, &run).map_err(|e| io(&format!("cannot write {}", file.display()), e))?;
        let shutdown = Arc::new(AtomicBool::new(false));
        let stop = shutdown.clone();
        let token = Arc::new(run.token);
        let thread = std::thread::Builder::new()
            .name("weir-control".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (requests, token) = (requests.clone(), token.clone());
                    let _ = std::thread::Builder::new()
                        .name("weir-control-conn".into())
                        .spawn(move || serve(stream, &requests, &token));
                }
            })
            .map_err(|e| io("cannot start its thread", e))?;
        tracing::debug!(port, file = %file.display(), "control endpoint listening on 127.0.0.1");
        Ok(ControlServer { file, port, shutdown, thread: Some(thread) })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

fn write_run_file(file: &std::path::Path, run: &RunFile) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    // Written aside and renamed: a reader never sees half a file.
    let tmp = file.with_extension(format!("json.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(&serde_json::to_vec(run).expect("serializes"))?;
    f.sync_all()?;
    std::fs::rename(&tmp, file)
}

/// How long a savepoint request may wait for its answer.
const SAVEPOINT_WAIT: Duration = Duration::from_secs(3600);

fn serve(stream: TcpStream, requests: &Sender<Request>, token: &str) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    let (status, body) = match read_request(&mut reader) {
        Ok((method, path, auth, body)) => {
            if auth.as_deref() != Some(token) {
                (401, error_json("missing or wrong bearer token (see the job's run file)"))
            } else {
                route(&method, &path, &body, requests)
            }
        }
        Err(e) => (400, error_json(&e.to_string())),
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        409 => "Conflict",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = &stream;
    let _ = out.write_all(head.as_bytes()).and_then(|_| out.write_all(&body));
}

fn error_json(message: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "error": message })).expect("serializes")
}

type Parsed = (String, String, Option<String>, Vec<u8>);

/// A request that is not the HTTP this server speaks.
#[derive(Debug, Error)]
enum BadRequest {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("not an HTTP request")]
    NotHttp,
    #[error("bad Content-Length")]
    Length,
    #[error("too many headers")]
    Headers,
}

fn read_request(r: &mut impl BufRead) -> Result<Parsed, BadRequest> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(BadRequest::NotHttp);
    };
    let (method, path) = (method.to_string(), path.to_string());
    let (mut length, mut auth) = (0usize, None);
    for _ in 0..100 {
        line.clear();
        r.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            let mut body = vec![0; length.min(1 << 20)];
            r.read_exact(&mut body)?;
            return Ok((method, path, auth, body));
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse().map_err(|_| BadRequest::Length)?,
                "authorization" => auth = value.strip_prefix("Bearer ").map(str::to_string),
                _ => {}
            }
        }
    }
    Err(BadRequest::Headers)
}

fn route(method: &str, path: &str, body: &[u8], requests: &Sender<Request>) -> (u16, Vec<u8>) {
    let gone = || (503, error_json("the job is not taking requests (it is ending or restarting)"));
    match (method, path) {
        ("GET", "/v1/status") => {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if requests.send(Request::Status(tx)).is_err() {
                return gone();
            }
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(status) => (200, serde_json::to_vec(&status).expect("serializes")),
                Err(_) => gone(),
            }
        }
        ("POST", "/v1/savepoint") => match serde_json::from_slice::<SavepointRequest>(body) {
            Ok(request) => ask_long(requests, |tx| Request::Savepoint(request, tx), "savepoint"),
            Err(e) => (400, error_json(&format!("bad savepoint request: {e}"))),
        },
        ("POST", "/v1/swap") => match serde_json::from_slice::<SwapRequest>(body) {
            Ok(request) => ask_long(requests, |tx| Request::Swap(request, tx), "swap"),
            Err(e) => (400, error_json(&format!("bad swap request: {e}"))),
        },
        ("POST", "/v1/cancel") => {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if requests.send(Request::Cancel(tx)).is_err() {
                return gone();
            }
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(()) => (200, serde_json::to_vec(&serde_json::json!({ "cancelled": true })).expect("serializes")),
                Err(_) => gone(),
            }
        }
        _ => (404, error_json(&format!("no endpoint {method} {path} (try GET /v1/status)"))),
    }
}

/// Sends a request whose answer takes a checkpoint's time (a savepoint, a
/// swap), waits for it, and turns it into a response.
fn ask_long<T: serde::Serialize>(
    requests: &Sender<Request>,
    make: impl FnOnce(crossbeam_channel::Sender<Result<T, super::RequestError>>) -> Request,
    what: &str,
) -> (u16, Vec<u8>) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    if requests.send(make(tx)).is_err() {
        return (503, error_json("the job is not taking requests (it is ending or restarting)"));
    }
    match rx.recv_timeout(SAVEPOINT_WAIT) {
        Ok(Ok(done)) => (200, serde_json::to_vec(&done).expect("serializes")),
        Ok(Err(reason)) => (409, error_json(&reason.to_string())),
        Err(_) => (503, error_json(&format!("the job ended or restarted before the {what} completed"))),
    }
}
