//! Guest stdout and stderr: written line by line to the host log, tagged
//! with the operator uid, subtask and stream. The last stderr lines are kept
//! so a trap report can quote what the guest said before it died (a Rust
//! panic message, for instance).

use bytes::Bytes;
use std::collections::VecDeque;
use std::pin::Pin;
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
}

impl GuestLog {
    /// A log for one stream of one subtask.
    pub fn new(uid: Arc<str>, subtask: u32, stream: Stream) -> Self {
        GuestLog {
            inner: Arc::new(Mutex::new(Inner { uid, subtask, stream, partial: Vec::new(), recent: VecDeque::new() })),
        }
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
        let text = String::from_utf8_lossy(line).into_owned();
        match self.stream {
            Stream::Stdout => tracing::info!(operator = %self.uid, subtask = self.subtask, stream = "stdout", "{text}"),
            Stream::Stderr => tracing::warn!(operator = %self.uid, subtask = self.subtask, stream = "stderr", "{text}"),
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
