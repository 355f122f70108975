//! The commands of the `host` binary, one module each; what they share
//! (logging, the host settings file, naming a job) is here. Each command
//! parses nothing and decides little: it calls the library and prints.
//! `anyhow` lives only here, at the edge, where errors get their context;
//! [`error_line`] is how one reaches the terminal.

pub mod checkpoints;
pub mod control;
pub mod inspect;
mod logging;
pub mod new;
pub mod replay;
pub mod run;
pub mod shadow;

use anyhow::Context;
use std::path::{Path, PathBuf};
use weir_host::config::{self, HostFile, Settings};

pub use logging::init_logging;

/// How log lines are written.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per event (`timestamp`, `level`, `fields`, `span`).
    Json,
}

/// The line `host` prints for a command's error: the error and its causes,
/// with every character that could steer the terminal escaped. Errors
/// quote names and text from stored checkpoints, the network and guests.
pub fn error_line(e: &anyhow::Error) -> String {
    let text = format!("error: {e:#}");
    weir_host::paths::terminal::escape_keeping_lines(&text).into_owned()
}

/// The host settings file: the flag, `$WEIR_CONFIG`, or
/// `./config/host.toml` if it exists; none means built-in defaults.
pub fn host_file(flag: Option<&Path>) -> anyhow::Result<Option<HostFile>> {
    let path = match flag {
        Some(p) => Some(p.to_path_buf()),
        None => match std::env::var_os("WEIR_CONFIG").filter(|v| !v.is_empty()) {
            Some(p) => Some(PathBuf::from(p)),
            None => Some(PathBuf::from("config/host.toml")).filter(|p| p.is_file()),
        },
    };
    match &path {
        Some(p) => tracing::info!(config = %p.display(), "host settings"),
        None => tracing::info!("host settings: built-in defaults"),
    }
    Ok(path.map(|p| HostFile::load(&p)).transpose()?)
}

/// The settings of the host file alone (for commands without a job file).
pub fn host_settings(flag: Option<&Path>) -> anyhow::Result<Settings> {
    Ok(match host_file(flag)? {
        Some(h) => h.resolve()?,
        None => config::default_settings(),
    })
}

/// A job named on the command line: its name, or a job file whose `name`
/// is read.
pub fn job_name(arg: &str) -> anyhow::Result<String> {
    let path = Path::new(arg);
    if !path.is_file() {
        return Ok(arg.to_string());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {arg}"))?;
    let value: toml::Table = toml::from_str(&text).with_context(|| format!("{arg} is not valid TOML"))?;
    value
        .get("name")
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .with_context(|| format!("{arg} has no name = \"...\""))
}

/// A checkpoint or savepoint location given on the command line: a
/// `file://` or `s3://` URI as it is, or a plain local path (relative to
/// the current directory) as the `file://` URI of its absolute path.
pub fn location(arg: &str) -> anyhow::Result<String> {
    if arg.contains("://") {
        return Ok(arg.to_string());
    }
    let path = std::path::absolute(arg).with_context(|| format!("{arg:?} is not a usable path"))?;
    let uri = url::Url::from_file_path(&path)
        .map_err(|()| anyhow::anyhow!("{} cannot be written as a file:// URI", path.display()))?;
    Ok(uri.to_string())
}

/// Milliseconds since the epoch as `2026-11-29 13:05:01.123` (UTC).
pub fn utc(ms: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string().replace('T', " ").trim_end_matches('Z').to_string()
}
