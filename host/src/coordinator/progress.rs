//! The progress display: records in and out per second and the checkpoint
//! status, as one line (an indicatif spinner) redrawn on stderr while the
//! job runs. Only the binary knows whether the line is wanted (a terminal,
//! text logs), so it turns it on ([`draw_on_terminal`]); otherwise progress
//! is quiet: debug-level log lines, visible with `RUST_LOG=weir_host=debug`.
//!
//! Log lines share stderr with the line. Written through [`log_writer`],
//! each is printed whole above it: the line is taken down, the log line
//! written, the line drawn again, under one lock.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The terminal's stderr once the line is on: what [`Progress`] draws on
/// and [`log_writer`] writes under. Process-wide, as stderr and the log
/// subscriber are; each attempt of a job adds its line and removes it.
static TERMINAL: OnceLock<MultiProgress> = OnceLock::new();

/// Draws progress on stderr from now on, if it is a terminal; returns
/// whether it will. Log lines must then go through [`log_writer`], or they
/// are written onto the line.
pub fn draw_on_terminal() -> bool {
    if !std::io::stderr().is_terminal() {
        return false;
    }
    TERMINAL.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
    true
}

/// Stderr for log lines (tracing's `with_writer(log_writer)`).
pub fn log_writer() -> LogWriter {
    LogWriter
}

/// Stderr, each write printed whole above the progress line.
#[derive(Debug)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    // tracing's fmt layer writes each event with one `write_all`: one
    // suspension of the line per log line, never half a line between.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match TERMINAL.get() {
            Some(terminal) => terminal.suspend(|| std::io::stderr().write_all(buf)),
            None => std::io::stderr().write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Renders job-wide progress.
pub struct Progress {
    started: Instant,
    last: Option<(Instant, u64, u64)>,
    /// The line on the terminal; none when progress is logged instead.
    line: Option<ProgressBar>,
    /// Checkpoint status shown after the rates.
    checkpoints: Option<String>,
}

impl Progress {
    /// Starts the clock; draws only if [`draw_on_terminal`] turned the line
    /// on.
    pub fn new() -> Self {
        let line = TERMINAL.get().map(|terminal| {
            let style = ProgressStyle::with_template("{spinner} {msg}").expect("a valid template");
            terminal.add(ProgressBar::new_spinner().with_style(style))
        });
        Progress { started: Instant::now(), last: None, line, checkpoints: None }
    }

    /// Sets the checkpoint status shown with the next update.
    pub fn set_checkpoints(&mut self, status: Option<String>) {
        self.checkpoints = status;
    }

    /// Time since start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Shows the totals: records read by sources, records written by sinks.
    pub fn update(&mut self, read: u64, written: u64) {
        let now = Instant::now();
        let (rate_in, rate_out) = match self.last {
            Some((t, r, w)) => {
                let dt = now.duration_since(t).as_secs_f64().max(1e-9);
                ((read - r) as f64 / dt, (written - w) as f64 / dt)
            }
            None => {
                let dt = self.elapsed().as_secs_f64().max(1e-9);
                (read as f64 / dt, written as f64 / dt)
            }
        };
        self.last = Some((now, read, written));
        let mut line = format!(
            "[{:>6.1}s] in {} ({}/s)  out {} ({}/s)",
            self.elapsed().as_secs_f64(),
            human(read as f64),
            human(rate_in),
            human(written as f64),
            human(rate_out)
        );
        if let Some(c) = &self.checkpoints {
            line.push_str("  ");
            line.push_str(c);
        }
        match &self.line {
            Some(bar) => {
                bar.set_message(line);
                // The spinner turns once per update: it shows the job is
                // alive when the numbers stand still.
                bar.tick();
            }
            None => tracing::debug!(records_in = read, records_out = written, "progress: {line}"),
        }
    }

    /// Clears the progress line before the summary.
    pub fn finish(&mut self) {
        if let Some(bar) = self.line.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    // indicatif leaves a bar dropped unfinished on the terminal: an attempt
    // that ended without `finish` would leave its line above the next
    // attempt's, or above the summary.
    fn drop(&mut self) {
        self.finish();
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

/// `1234567.0` as `1.23M`.
pub fn human(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.2}G", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}
