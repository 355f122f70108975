//! The control server's connections: each served on a task of its own,
//! one request per connection, and at most [`MAX_CONNECTIONS`] of them.
//!
//! Anyone on the machine can connect, so a full table must not lock the
//! job's owner out, nor drop the owner's request half-answered: a new
//! connection evicts the oldest connection that has not yet sent a whole
//! request head (silent, slow or flooding ones), never one whose request
//! the server is serving. A request without the token is answered at once
//! (401), so only the owner's requests hold a slot for longer; if every
//! slot serves one, the new connection is closed instead.

use super::limits::{BODY_TIMEOUT, HEAD_TIMEOUT, LONG_WAIT, MAX_CONNECTIONS, MAX_HEAD_BYTES};
use axum::Router;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long a connection may live: the longest wait for an answer, and
/// its body's time.
const LIFETIME: Duration = Duration::from_secs(LONG_WAIT.as_secs() + BODY_TIMEOUT.as_secs());

/// The connections being served, oldest first.
#[derive(Default)]
pub(super) struct Connections {
    live: VecDeque<Connection>,
}

struct Connection {
    task: JoinHandle<()>,
    /// Set once the connection's request head has arrived whole.
    requested: Arc<AtomicBool>,
}

impl Connections {
    /// Serves `stream` on a task of its own if there is a slot for it, or
    /// one can be freed by evicting the oldest connection that has not
    /// sent its request yet; otherwise closes it. Whether it is served.
    pub(super) fn admit<S>(&mut self, stream: S, app: Router) -> bool
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        self.live.retain(|c| !c.task.is_finished());
        if self.live.len() >= MAX_CONNECTIONS {
            let Some(idle) = self.live.iter().position(|c| !c.requested.load(Ordering::Acquire)) else {
                tracing::debug!("control API: every connection is serving a request; a new one is closed");
                return false;
            };
            if let Some(evicted) = self.live.remove(idle) {
                evicted.task.abort();
            }
        }
        let requested = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(serve_connection(stream, app, requested.clone()));
        self.live.push_back(Connection { task, requested });
        true
    }
}

/// Serves one connection: one request, its head within limits, then
/// closed. `requested` is set when the head has arrived and the request
/// goes to `app`.
pub(super) async fn serve_connection<S>(stream: S, app: Router, requested: Arc<AtomicBool>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let app = hyper_util::service::TowerToHyperService::new(app);
    let service = hyper::service::service_fn(move |request: axum::http::Request<hyper::body::Incoming>| {
        requested.store(true, Ordering::Release);
        hyper::service::Service::call(&app, request)
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES.max(8192))
        .keep_alive(false)
        // A client may close its side once it has sent its request.
        .half_close(true)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    // A connection lives as long as its answer takes, no longer.
    let _ = tokio::time::timeout(LIFETIME, connection).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::sync::Semaphore;

    const SLOW: &[u8] = b"GET /slow HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

    /// A router whose `GET /slow` is answered once `gate` lets it through,
    /// and anything else at once.
    fn app(gate: &Arc<Semaphore>) -> Router {
        let gate = gate.clone();
        Router::new().route(
            "/slow",
            axum::routing::get(move || {
                let gate = gate.clone();
                async move { gate.acquire().await.map(|_| "answered").unwrap_or("closed") }
            }),
        )
    }

    /// A connection offered to `table`: the client's end, and whether it
    /// was admitted.
    fn connect(table: &mut Connections, app: &Router) -> (DuplexStream, bool) {
        let (client, server) = tokio::io::duplex(4096);
        let admitted = table.admit(server, app.clone());
        (client, admitted)
    }

    /// Lets every task run until none can progress.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    async fn answer(mut client: DuplexStream) -> String {
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        answer
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn a_full_table_evicts_the_oldest_silent_connection_never_one_being_served() {
        runtime().block_on(async {
            let gate = Arc::new(Semaphore::new(0));
            let app = app(&gate);
            let mut table = Connections::default();
            // The owner's request comes first, and is being served...
            let (mut owner, admitted) = connect(&mut table, &app);
            assert!(admitted);
            owner.write_all(SLOW).await.unwrap();
            settle().await;
            // ...while the table fills with silent connections, and a
            // flood of new ones follows, each admitted.
            let mut silent = Vec::new();
            for _ in 0..4 * MAX_CONNECTIONS {
                let (flood, admitted) = connect(&mut table, &app);
                assert!(admitted, "a silent connection makes room");
                silent.push(flood);
                settle().await;
            }
            assert_eq!(table.live.len(), MAX_CONNECTIONS);
            // The oldest silent ones were closed (they read the end), the
            // newest kept.
            let mut buf = [0u8; 16];
            assert_eq!(silent[0].read(&mut buf).await.unwrap(), 0, "the oldest silent connection is closed");
            let newest = silent.len() - 1;
            assert!(!table.live.back().unwrap().task.is_finished(), "the newest ({newest}) is served");
            // The owner's request was never evicted: its answer comes whole.
            gate.add_permits(1);
            let answer = answer(owner).await;
            assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("answered"), "{answer:?}");
        });
    }

    #[test]
    fn a_table_of_requests_being_served_closes_the_new_connection() {
        runtime().block_on(async {
            let gate = Arc::new(Semaphore::new(0));
            let app = app(&gate);
            let mut table = Connections::default();
            let mut served = Vec::new();
            for _ in 0..MAX_CONNECTIONS {
                let (mut c, _) = connect(&mut table, &app);
                c.write_all(SLOW).await.unwrap();
                served.push(c);
            }
            settle().await;
            let (mut late, admitted) = connect(&mut table, &app);
            assert!(!admitted, "no slot: the new connection is closed");
            let mut buf = [0u8; 16];
            assert_eq!(late.read(&mut buf).await.unwrap(), 0);
            gate.add_permits(MAX_CONNECTIONS);
            for c in served {
                let answer = answer(c).await;
                assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("answered"), "{answer:?}");
            }
        });
    }
}
