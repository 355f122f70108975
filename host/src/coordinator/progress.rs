//! Progress display: records in and out per second on a terminal; when
//! stderr is not a terminal, quiet (debug-level log lines only, visible with
//! `RUST_LOG=weir_host=debug`).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Renders job-wide progress.
pub struct Progress {
    started: Instant,
    tty: bool,
    last: Option<(Instant, u64, u64)>,
    drawn: bool,
    /// Checkpoint status shown after the rates.
    checkpoints: Option<String>,
}

impl Progress {
    /// Starts the clock; draws only when stderr is a terminal.
    pub fn new() -> Self {
        Progress {
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last: None,
            drawn: false,
            checkpoints: None,
        }
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
        if self.tty {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
            self.drawn = true;
        } else {
            tracing::debug!(records_in = read, records_out = written, "progress: {line}");
        }
    }

    /// Clears the progress line before the summary.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
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
