//! Configuration: the host file (`config/host.toml`), the job file
//! (`job.toml`), how the second overrides the first within the bounds the
//! first sets (`limits`, `roots`), and validation. This
//! module reads files and reports errors that name the file and field; it
//! never starts anything.

mod dirs;
pub mod job;
pub mod kafka_properties;
pub mod limits;
pub mod rest;
pub mod roots;
pub mod settings;
pub mod units;
pub mod wasm;

pub use job::{ClusterSpec, ConnectorSpec, InputSpec, InvalidJob, JobSpec, OperatorSpec, Partition, SinkSpec};
pub use limits::{Limits, SetBy};
pub use rest::{RestAuth, RestSettings};
pub use settings::{
    BackendKind, CheckpointMode, CheckpointSettings, RestartStrategy, RocksDbSettings, S3Settings, Settings,
    SettingsError, SettingsFile, StorageSettings,
};
pub use wasm::GuestBudgets;

use crate::fault::{Classify, Domain, RetryHint};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A configuration problem. Always the user's to fix; retrying cannot help.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// A file is not valid TOML or does not match the schema (unknown field,
    /// missing field, wrong type); the message has the line and column.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said, with position.
        message: String,
    },
    /// The merged host and job settings ask for something this host cannot
    /// do; the message names both files and the key.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The values parse but do not make a runnable job.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the node and field.
        message: String,
    },
}

impl Classify for ConfigError {
    fn domain(&self) -> Domain {
        Domain::User
    }

    fn retry(&self) -> RetryHint {
        RetryHint::NoRetry
    }
}

/// A job ready to build: its validated graph and the merged settings.
#[derive(Debug, Clone)]
pub struct LoadedJob {
    /// The job file it came from.
    pub path: PathBuf,
    /// The validated graph.
    pub spec: JobSpec,
    /// Merged host and job settings.
    pub settings: Settings,
}

/// A host settings file (`config/host.toml`), read and checked.
#[derive(Debug, Clone)]
pub struct HostFile {
    path: PathBuf,
    table: toml::Table,
}

impl HostFile {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read(path)?;
        // Checked against the schema first, for errors with a position.
        let file = parse::<SettingsFile>(path, &text)?;
        file.limits.resolve(&path.display().to_string())?;
        Ok(HostFile { path: path.to_path_buf(), table: parse(path, &text)? })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The settings it gives on its own (for commands without a job).
    pub fn resolve(&self) -> Result<Settings, ConfigError> {
        let file: SettingsFile = from_table(&self.path, self.table.clone())?;
        Ok(file.resolve(&self.path.display().to_string())?)
    }
}

/// The built-in defaults, when no host file is given.
pub fn default_settings() -> Settings {
    SettingsFile::default().resolve("built-in defaults").expect("the built-in defaults are valid")
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|cause| ConfigError::Read { path: path.to_path_buf(), cause })
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text)
        .map_err(|e| ConfigError::Parse { path: path.to_path_buf(), message: e.to_string().trim_end().to_string() })
}

fn from_table<T: serde::de::DeserializeOwned>(path: &Path, table: toml::Table) -> Result<T, ConfigError> {
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Parse { path: path.to_path_buf(), message: e.to_string() })
}

/// Lays `over` on `base`, key by key, tables merged all the way down: a
/// job file sets only what it changes.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// A job file's settings sections, under the keys the host file uses:
/// `[checkpointing]` is `execution.checkpointing`.
fn job_overrides(mut job: toml::Table) -> toml::Table {
    let mut over = toml::Table::new();
    for key in ["state", "wasm", "pipeline", "restart-strategy", "rest"] {
        if let Some(v) = job.remove(key) {
            over.insert(key.to_string(), v);
        }
    }
    if let Some(c) = job.remove("checkpointing") {
        let mut execution = toml::Table::new();
        execution.insert("checkpointing".into(), c);
        over.insert("execution".into(), toml::Value::Table(execution));
    }
    over
}

/// Parses and validates the text of job file `path`, resolving its
/// relative paths against `base`.
pub fn parse_job(
    path: &Path,
    text: &str,
    base: &Path,
    parallelism_override: Option<u32>,
) -> Result<JobSpec, ConfigError> {
    let file: job::JobFile = parse(path, text)?;
    job::validate(&file, base, parallelism_override)
        .map_err(|e| ConfigError::Invalid { path: path.to_path_buf(), message: e.0 })
}

/// Loads `job_path`, layered over `host` (the host file, if any), with the
/// job's default parallelism replaced by `parallelism_override`.
pub fn load_job(
    job_path: &Path,
    host: Option<&HostFile>,
    parallelism_override: Option<u32>,
) -> Result<LoadedJob, ConfigError> {
    let text = read(job_path)?;
    let invalid = |message: String| ConfigError::Invalid { path: job_path.to_path_buf(), message };
    let table: toml::Table = parse(job_path, &text)?;
    // Asked before the schema, so the job file hears why rather than
    // "unknown field".
    if table.contains_key("limits") {
        return Err(invalid(
            "[limits]: the ceilings and roots are the host's (limits.* in the host settings file): a job file cannot set or raise them".into(),
        ));
    }
    let base = job_path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let spec = parse_job(job_path, &text, &base, parallelism_override)?;
    let overrides = job_overrides(table);
    if overrides.get("wasm").and_then(|w| w.get("cache")).is_some() {
        return Err(invalid("[wasm] cache: the compiled-module cache is a host setting (wasm.cache in config/host.toml): it holds native code the host runs, so a job file cannot choose it".into()));
    }
    // Bounds on what reading a stored checkpoint may cost protect the
    // host from the checkpoint, which a job file may name: its author
    // must not also raise them.
    if let Some(key) = HOST_ONLY_KEYS.iter().find(|key| sets(&overrides, key)) {
        return Err(invalid(format!(
            "{key}: it bounds what the host reads from stored checkpoints, which a job file may name, so it is a host setting (set it in the host settings file)"
        )));
    }
    if let Some(rest) = overrides.get("rest") {
        let section: rest::RestSection = from_table(job_path, rest.as_table().cloned().unwrap_or_default())?;
        if let Some(problem) = section.job_problem() {
            return Err(invalid(problem));
        }
    }
    let mut merged = host.map(|h| h.table.clone()).unwrap_or_default();
    merge(&mut merged, overrides.clone());
    let origin = match host {
        Some(h) => format!("{} (over {})", job_path.display(), h.path.display()),
        None => job_path.display().to_string(),
    };
    let merged: SettingsFile = from_table(job_path, merged)?;
    let mut settings = merged.resolve(&origin)?;
    // The ceilings hold whoever set a value: the error goes to that file.
    let set_by = |key: &str| match host {
        _ if sets(&overrides, key) => SetBy::Job(job_path),
        Some(h) if sets(&h.table, key) => SetBy::Host(&h.path),
        _ => SetBy::Default,
    };
    let limits_from = |key: &str| host.filter(|h| sets(&h.table, key)).map(|h| h.path.clone());
    let limits = &settings.limits;
    limits.check_settings(&settings, &set_by, &limits_from)?;
    limits.check_job(&spec, parallelism_override, &limits_from).map_err(|e| invalid(e.0))?;
    roots::check_paths(&spec, limits).map_err(|e| invalid(e.0))?;
    settings.warnings.extend(job::unconsumed(&spec));
    Ok(LoadedJob { path: job_path.to_path_buf(), spec, settings })
}

/// Settings only the host file may set, beside `[limits]`, `wasm.cache` and
/// what `rest.*` allows.
const HOST_ONLY_KEYS: &[&str] = &["state.checkpoints.max_file_size", "state.checkpoints.max_section_size"];

/// Whether `table` sets the dotted `key` (`wasm.memory_limit`).
fn sets(table: &toml::Table, key: &str) -> bool {
    let mut at = table;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        match (at.get(part), parts.peek()) {
            (Some(_), None) => return true,
            (Some(toml::Value::Table(inner)), Some(_)) => at = inner,
            _ => return false,
        }
    }
    false
}

// The one test here reads RocksDB settings, which exist only with the
// feature.
#[cfg(all(test, feature = "rocksdb"))]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn job_settings_lay_over_the_host_file_key_by_key() {
        let mut host = table(
            "state.backend = { type = \"rocksdb\", rocksdb = { localdir = \"/var/weir\" } }\nexecution.checkpointing.interval = \"1s\"\nexecution.checkpointing.retained = 3\n",
        );
        let job = table("name = \"j\"\n[checkpointing]\ninterval = \"200ms\"\n[state.backend]\nincremental = true\n");
        merge(&mut host, job_overrides(job));
        let file: SettingsFile = from_table(Path::new("job.toml"), host).unwrap();
        let s = file.resolve("job.toml").unwrap();
        let c = s.checkpointing.unwrap();
        assert_eq!(c.interval, std::time::Duration::from_millis(200), "the job's interval wins");
        assert_eq!(c.retained, 3, "the host's retained stays");
        assert_eq!(s.backend, BackendKind::RocksDb);
        assert!(s.rocksdb.incremental, "a table merges into the host's table");
        assert_eq!(s.rocksdb.localdir, PathBuf::from("/var/weir"));
    }
}
