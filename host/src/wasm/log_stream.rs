//! Guest stdout and stderr: written line by line to the host log, tagged
//! with the operator uid, subtask and stream. The last stderr lines are kept
//! so a trap report can quote what the guest said before it died (a Rust
//! panic message, for instance).
//!
//! A guest's text never reaches the log raw: control characters (carriage
//! returns and escape sequences included) and Unicode's bidirectional
//! formatting characters are written escaped (`\u{1b}`, by
//! [`crate::paths::terminal`]), so a line cannot forge another line or
//! reorder what a reader sees. Both streams share one
//! budget per call ([`LogBudget`]: `wasm.max_log_lines` and
//! `wasm.max_log_bytes`); lines past it are dropped and counted, and the
//! instance reports the count once the call ends.

use crate::paths::terminal::escape;
use bytes::Bytes;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Lines of stderr kept for error reports.
const KEEP_LINES: usize = 8;
/// A line longer than this is logged in pieces.
const MAX_LINE: usize = 4096;

/// Which standard stream.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
}

/// What one call may log, both streams together, and what it logged and
/// dropped so far. Counters only: taking a line is two atomic adds.
#[derive(Debug)]
pub struct LogBudget {
    max_lines: u64,
    max_bytes: u64,
    lines: AtomicU64,
    bytes: AtomicU64,
    dropped_lines: AtomicU64,
    dropped_bytes: AtomicU64,
}

impl LogBudget {
    /// A budget of `max_lines` lines and `max_bytes` bytes (newlines
    /// included) per call.
    pub fn new(max_lines: u64, max_bytes: u64) -> Self {
        LogBudget {
            max_lines,
            max_bytes,
            lines: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dropped_lines: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
        }
    }

    /// A new call starts with the whole budget. Returns the lines and bytes
    /// the last call dropped.
    pub fn reset(&self) -> (u64, u64) {
        self.lines.store(0, Relaxed);
        self.bytes.store(0, Relaxed);
        (self.dropped_lines.swap(0, Relaxed), self.dropped_bytes.swap(0, Relaxed))
    }

    /// The limits, for messages: (`max_log_lines`, `max_log_bytes`).
    pub fn limits(&self) -> (u64, u64) {
        (self.max_lines, self.max_bytes)
    }

    /// Takes a line of `len` bytes (with its newline), or counts it
    /// dropped; once a line is dropped, every later one of the call is.
    fn take(&self, len: usize) -> bool {
        let len = len as u64;
        let lines = self.lines.load(Relaxed);
        let bytes = self.bytes.load(Relaxed);
        if self.dropped_lines.load(Relaxed) == 0 && lines < self.max_lines && bytes + len <= self.max_bytes {
            self.lines.store(lines + 1, Relaxed);
            self.bytes.store(bytes + len, Relaxed);
            true
        } else {
            self.dropped_lines.fetch_add(1, Relaxed);
            self.dropped_bytes.fetch_add(len, Relaxed);
            false
        }
    }
}

/// Shared by every handle the guest opens on one stream.
#[derive(Clone)]
pub struct GuestLog {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    uid: Arc<str>,
    subtask: u32,
    stream: Stream,
    partial: Vec<u8>,
    recent: VecDeque<String>,
    budget: Arc<LogBudget>,
}

impl GuestLog {
    /// A log for one stream of one subtask, within `budget` (shared with
    /// the subtask's other stream).
    pub fn new(uid: Arc<str>, subtask: u32, stream: Stream, budget: Arc<LogBudget>) -> Self {
        let inner = Inner { uid, subtask, stream, partial: Vec::new(), recent: VecDeque::new(), budget };
        GuestLog { inner: Arc::new(Mutex::new(inner)) }
    }

    fn write(&self, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.partial.extend_from_slice(bytes);
        while let Some(pos) = inner.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = inner.partial.drain(..=pos).collect();
            inner.emit(&line[..line.len() - 1]);
        }
        if inner.partial.len() > MAX_LINE {
            let line = std::mem::take(&mut inner.partial);
            inner.emit(&line);
        }
    }

    /// Logs any unterminated last line.
    pub fn flush(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if !inner.partial.is_empty() {
            let line = std::mem::take(&mut inner.partial);
            inner.emit(&line);
        }
    }

    /// The last lines written, oldest first.
    pub fn recent(&self) -> Vec<String> {
        self.flush();
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).recent.iter().cloned().collect()
    }
}

impl Inner {
    fn emit(&mut self, line: &[u8]) {
        let logged = self.budget.take(line.len() + 1);
        // A dropped stdout line costs nothing more; stderr's is still
        // kept among the last lines, for a trap report (a panic message
        // after a flood of output).
        if !logged && matches!(self.stream, Stream::Stdout) {
            return;
        }
        let text = escape(&String::from_utf8_lossy(line)).into_owned();
        match self.stream {
            Stream::Stdout => tracing::info!(operator = %self.uid, subtask = self.subtask, stream = "stdout", "{text}"),
            Stream::Stderr if logged => {
                tracing::warn!(operator = %self.uid, subtask = self.subtask, stream = "stderr", "{text}")
            }
            Stream::Stderr => {}
        }
        if self.recent.len() == KEEP_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back(text);
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        GuestLog::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        GuestLog::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_budget_are_dropped_and_counted() {
        let b = LogBudget::new(2, 100);
        assert!(b.take(10) && b.take(10));
        assert!(!b.take(1), "a third line");
        assert_eq!(b.reset(), (1, 1));
        assert!(b.take(60));
        assert!(!b.take(50), "past the bytes");
        assert!(!b.take(1), "and everything after, though it would fit");
        assert_eq!(b.reset(), (2, 51));
        assert_eq!(b.reset(), (0, 0));
        let silent = LogBudget::new(0, 0);
        assert!(!silent.take(0));
    }
}
