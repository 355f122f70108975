//! Host settings: `config/host.toml` defaults, overridden per job by the same
//! keys in `job.toml`. Keys follow Flink's dotted names (`state.backend`,
//! `state.checkpoints.dir`) written as valid TOML.

use super::units::{ByteSize, HumanDuration};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The overridable sections, as written in a file: every field optional so a
/// job file sets only what it changes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    /// `state.*`.
    #[serde(default)]
    pub state: StateSection,
    /// `execution.*`.
    #[serde(default)]
    pub execution: ExecutionSection,
    /// `wasm.*`.
    #[serde(default)]
    pub wasm: WasmSection,
    /// `pipeline.*`.
    #[serde(default)]
    pub pipeline: PipelineSection,
}

/// `state.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// `state.backend = "hashmap"`, or a table `state.backend.type = ...`.
    pub backend: Option<BackendSetting>,
    /// `state.checkpoints.*`.
    #[serde(default)]
    pub checkpoints: CheckpointsSection,
}

/// `state.backend`: a name, or a table whose `type` is the name (the table
/// form leaves room for backend options such as `state.backend.incremental`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum BackendSetting {
    /// `state.backend = "hashmap"`.
    Name(String),
    /// `[state.backend] type = "hashmap"`.
    Table(BackendTable),
}

/// The table form of `state.backend`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendTable {
    /// The backend name.
    #[serde(rename = "type")]
    pub kind: String,
}

impl BackendSetting {
    fn name(&self) -> &str {
        match self {
            BackendSetting::Name(n) => n,
            BackendSetting::Table(t) => &t.kind,
        }
    }
}

/// `state.checkpoints.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointsSection {
    /// Where checkpoints go (`file://...` or `s3://...`).
    pub dir: Option<String>,
}

/// `execution.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSection {
    /// `execution.checkpointing.*`.
    #[serde(default)]
    pub checkpointing: CheckpointingSection,
}

/// `execution.checkpointing.*` in `host.toml`, `[checkpointing]` in a job.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointingSection {
    /// Time between checkpoints; unset means checkpointing is off.
    pub interval: Option<HumanDuration>,
    /// `"exactly-once"` or `"at-least-once"`.
    pub mode: Option<String>,
    /// How long a checkpoint may take.
    pub timeout: Option<HumanDuration>,
    /// Least time between the end of one checkpoint and the next.
    pub min_pause: Option<HumanDuration>,
    /// Completed checkpoints kept.
    pub retained: Option<u32>,
    /// Failed checkpoints tolerated before the job fails.
    pub tolerable_failures: Option<u32>,
}

impl CheckpointingSection {
    fn is_empty(&self) -> bool {
        self.interval.is_none()
            && self.mode.is_none()
            && self.timeout.is_none()
            && self.min_pause.is_none()
            && self.retained.is_none()
            && self.tolerable_failures.is_none()
    }
}

/// `wasm.*`: limits on guests and the compiled-module cache.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasmSection {
    /// Longest a single call into a guest may run before it is interrupted.
    pub call_timeout: Option<HumanDuration>,
    /// Most linear memory one guest instance may grow to.
    pub memory_limit: Option<ByteSize>,
    /// `wasm.cache.*`.
    #[serde(default)]
    pub cache: CacheSection,
}

/// `wasm.cache.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// Whether compiled modules are cached on disk.
    pub enabled: Option<bool>,
    /// Where; defaults to `$XDG_CACHE_HOME/weir/components` or
    /// `~/.cache/weir/components`.
    pub dir: Option<PathBuf>,
}

/// `pipeline.*`: how records move between tasks.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSection {
    /// Records per batch between tasks and per guest call.
    pub batch_size: Option<usize>,
    /// Batches a channel between two subtasks holds before the sender waits.
    pub channel_capacity: Option<usize>,
    /// How often progress is reported.
    pub progress_interval: Option<HumanDuration>,
    /// An input channel silent this long stops holding back its operator's
    /// watermark (unset: inputs never go idle).
    pub idle_timeout: Option<HumanDuration>,
}

/// Which state backend runs a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// In-memory hash maps.
    HashMap,
    /// Embedded RocksDB on local disk.
    RocksDb,
}

/// The settings a job runs with, after merging built-in defaults, the host
/// file and the job file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The state backend.
    pub backend: BackendKind,
    /// `state.checkpoints.dir`, if set.
    pub checkpoints_dir: Option<String>,
    /// Deadline per guest call.
    pub call_timeout: Duration,
    /// Memory limit per guest instance, in bytes.
    pub memory_limit: u64,
    /// Compiled-module cache directory; none disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Records per batch.
    pub batch_size: usize,
    /// Channel capacity in batches.
    pub channel_capacity: usize,
    /// Progress report period.
    pub progress_interval: Duration,
    /// Idle-input timeout for watermarks.
    pub idle_timeout: Option<Duration>,
    /// Deprecation and other notes to log once the job starts.
    pub warnings: Vec<String>,
}

/// Default deadline for one guest call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default memory limit per guest instance.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;
/// Default records per batch.
pub const DEFAULT_BATCH_SIZE: usize = 1024;
/// Default channel capacity, in batches.
pub const DEFAULT_CHANNEL_CAPACITY: usize = 8;

impl SettingsFile {
    /// Layers `over` on top of `self`: every field `over` sets wins.
    pub fn overlay(mut self, over: &SettingsFile) -> SettingsFile {
        fn pick<T: Clone>(base: &mut Option<T>, over: &Option<T>) {
            if over.is_some() {
                base.clone_from(over);
            }
        }
        pick(&mut self.state.backend, &over.state.backend);
        pick(&mut self.state.checkpoints.dir, &over.state.checkpoints.dir);
        let (c, o) = (&mut self.execution.checkpointing, &over.execution.checkpointing);
        pick(&mut c.interval, &o.interval);
        pick(&mut c.mode, &o.mode);
        pick(&mut c.timeout, &o.timeout);
        pick(&mut c.min_pause, &o.min_pause);
        pick(&mut c.retained, &o.retained);
        pick(&mut c.tolerable_failures, &o.tolerable_failures);
        pick(&mut self.wasm.call_timeout, &over.wasm.call_timeout);
        pick(&mut self.wasm.memory_limit, &over.wasm.memory_limit);
        pick(&mut self.wasm.cache.enabled, &over.wasm.cache.enabled);
        pick(&mut self.wasm.cache.dir, &over.wasm.cache.dir);
        pick(&mut self.pipeline.batch_size, &over.pipeline.batch_size);
        pick(&mut self.pipeline.channel_capacity, &over.pipeline.channel_capacity);
        pick(&mut self.pipeline.progress_interval, &over.pipeline.progress_interval);
        pick(&mut self.pipeline.idle_timeout, &over.pipeline.idle_timeout);
        self
    }

    /// Resolves the merged file into [`Settings`], rejecting choices this
    /// host cannot honour. `origin` names where the values came from, for
    /// error messages.
    pub fn resolve(&self, origin: &str) -> Result<Settings, String> {
        let mut warnings = Vec::new();
        let backend_name = self.state.backend.as_ref().map(|b| b.name()).unwrap_or("hashmap");
        let backend = match backend_name {
            "hashmap" => BackendKind::HashMap,
            "rocksdb" => BackendKind::RocksDb,
            // Flink's legacy names: both kept working state on the heap; they
            // differed in where checkpoints went, which `state.checkpoints.dir`
            // now says on its own.
            "jobmanager" | "filesystem" => {
                warnings.push(format!(
                    "state.backend = \"{backend_name}\" is deprecated: it means state.backend = \"hashmap\" {}",
                    if backend_name == "jobmanager" {
                        "with checkpoints kept in host memory (leave state.checkpoints.dir unset)"
                    } else {
                        "with checkpoints in state.checkpoints.dir"
                    }
                ));
                BackendKind::HashMap
            }
            other => {
                return Err(format!(
                    "{origin}: state.backend = \"{other}\" is not a state backend (use \"hashmap\" or \"rocksdb\")"
                ));
            }
        };
        if backend == BackendKind::RocksDb {
            return Err(format!(
                "{origin}: state.backend = \"rocksdb\" is not available in this version of Weir yet; use \"hashmap\""
            ));
        }
        if !self.execution.checkpointing.is_empty() {
            return Err(format!(
                "{origin}: checkpointing (execution.checkpointing.* / [checkpointing]) is not available in this version of Weir yet; remove it to run without checkpoints"
            ));
        }
        let batch_size = self.pipeline.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
        if batch_size == 0 {
            return Err(format!("{origin}: pipeline.batch_size must be at least 1"));
        }
        let channel_capacity = self.pipeline.channel_capacity.unwrap_or(DEFAULT_CHANNEL_CAPACITY);
        if channel_capacity == 0 {
            return Err(format!("{origin}: pipeline.channel_capacity must be at least 1"));
        }
        let call_timeout = self.wasm.call_timeout.map(|d| d.0).unwrap_or(DEFAULT_CALL_TIMEOUT);
        if call_timeout.is_zero() {
            return Err(format!("{origin}: wasm.call_timeout must be more than zero"));
        }
        let memory_limit = self.wasm.memory_limit.map(|b| b.0).unwrap_or(DEFAULT_MEMORY_LIMIT);
        if memory_limit < 1 << 20 {
            return Err(format!("{origin}: wasm.memory_limit must be at least 1MiB"));
        }
        let cache_dir = if self.wasm.cache.enabled.unwrap_or(true) {
            self.wasm.cache.dir.clone().or_else(default_cache_dir)
        } else {
            None
        };
        Ok(Settings {
            backend,
            checkpoints_dir: self.state.checkpoints.dir.clone(),
            call_timeout,
            memory_limit,
            cache_dir,
            batch_size,
            channel_capacity,
            progress_interval: self.pipeline.progress_interval.map(|d| d.0).unwrap_or(Duration::from_secs(1)),
            idle_timeout: self.pipeline.idle_timeout.map(|d| d.0),
            warnings,
        })
    }
}

/// `$XDG_CACHE_HOME/weir/components`, else `$HOME/.cache/weir/components`.
fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("weir").join("components"))
}
