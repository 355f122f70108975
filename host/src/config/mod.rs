//! Configuration: the host file (`config/host.toml`), the job file
//! (`job.toml`), how the second overrides the first, and validation. This
//! module reads files and reports errors that name the file and field; it
//! never starts anything.

pub mod job;
pub mod settings;
pub mod units;

pub use job::{Format, InputSpec, JobSpec, OperatorSpec, Partition, SinkKind, SinkSpec, SourceKind, SourceSpec};
pub use settings::{
    BackendKind, CheckpointMode, CheckpointSettings, RestartStrategy, RocksDbSettings, S3Settings, Settings,
    SettingsFile, StorageSettings,
};

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
    #[error("{message}")]
    Settings {
        /// What is wrong.
        message: String,
    },
    /// The values parse but do not make a runnable job.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the node and field.
        message: String,
    },
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

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|cause| ConfigError::Read { path: path.to_path_buf(), cause })
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text)
        .map_err(|e| ConfigError::Parse { path: path.to_path_buf(), message: e.to_string().trim_end().to_string() })
}

/// Reads a host settings file.
pub fn load_host_file(path: &Path) -> Result<SettingsFile, ConfigError> {
    parse(path, &read(path)?)
}

/// Loads `job_path`, layered over `host` (the parsed host file, if any).
pub fn load_job(
    job_path: &Path,
    host: Option<(&Path, &SettingsFile)>,
    parallelism_override: Option<u32>,
) -> Result<LoadedJob, ConfigError> {
    let text = read(job_path)?;
    let file: job::JobFile = parse(job_path, &text)?;
    let base = job_path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let invalid = |message: String| ConfigError::Invalid { path: job_path.to_path_buf(), message };
    let spec = job::validate(&file, &base, parallelism_override).map_err(invalid)?;
    let merged = match host {
        Some((_, h)) => h.clone().overlay(&file.settings_overrides()),
        None => file.settings_overrides(),
    };
    let origin = match host {
        Some((p, _)) => format!("{} (over {})", job_path.display(), p.display()),
        None => job_path.display().to_string(),
    };
    let mut settings = merged.resolve(&origin).map_err(|message| ConfigError::Settings { message })?;
    settings.warnings.extend(job::unconsumed(&spec));
    Ok(LoadedJob { path: job_path.to_path_buf(), spec, settings })
}
