//! Host settings: `config/host.toml` defaults, overridden per job by the same
//! keys in `job.toml`. Keys follow Flink's dotted names (`state.backend`,
//! `state.checkpoints.dir`) written as valid TOML.

use super::dirs::{default_cache_dir, default_savepoint_dir};
use super::units::{ByteSize, HumanDuration};
pub use super::wasm::{CacheSection, GuestBudgets, WasmSection};

/// Settings that parse but that this host cannot run with; the message
/// names the files and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// A [`SettingsError`] with a formatted message.
macro_rules! bad {
    ($($arg:tt)*) => { SettingsError(format!($($arg)*)) };
}
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
    /// `restart-strategy.*`.
    #[serde(default, rename = "restart-strategy")]
    pub restart: RestartSection,
    /// `rest.*`.
    #[serde(default)]
    pub rest: super::rest::RestSection,
    /// `limits.*` (host file only: a job file's sections never reach it).
    #[serde(default)]
    pub limits: super::limits::LimitsSection,
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
    /// `state.savepoints.*`.
    #[serde(default)]
    pub savepoints: SavepointsSection,
}

/// `state.savepoints.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavepointsSection {
    /// Where `host savepoint` puts savepoints unless given `--dir`
    /// (`file://...` or `s3://...`; S3 options from `state.checkpoints.s3`).
    pub dir: Option<String>,
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
    /// `state.backend.incremental`: RocksDB checkpoints upload only new files.
    pub incremental: Option<bool>,
    /// `state.backend.rocksdb.*`.
    #[serde(default)]
    pub rocksdb: RocksDbSection,
}

/// `state.backend.rocksdb.*`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocksDbSection {
    /// Where subtasks keep their working databases.
    pub localdir: Option<PathBuf>,
    /// Block cache per subtask.
    pub block_cache: Option<ByteSize>,
    /// Memtables per subtask, all column families together.
    pub write_buffers: Option<ByteSize>,
    /// Write-back cache of value states per subtask.
    pub write_cache: Option<ByteSize>,
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
    /// State handles up to this size are written into `_metadata` instead
    /// of files of their own (Flink's `state.storage.fs.memory-threshold`).
    pub inline_threshold: Option<ByteSize>,
    /// Without `dir`, checkpoints are kept in host memory; each subtask's
    /// state may be at most this large there.
    pub memory_max_state_size: Option<ByteSize>,
    /// Whether what is written to a `file://` directory is fsynced before
    /// it is published (default true).
    pub fsync: Option<bool>,
    /// The largest stored file a restore or `host inspect` reads (default
    /// 64 GiB); what `_metadata` says is larger is refused unread.
    pub max_file_size: Option<ByteSize>,
    /// The largest part of a stored file held in memory whole to be
    /// checked before use (default 1 GiB): a snapshot's section (one key
    /// group's state), or a Kafka sink's held output, all batches together.
    pub max_section_size: Option<ByteSize>,
    /// `state.checkpoints.s3.*`: for `s3://` directories.
    #[serde(default)]
    pub s3: S3Section,
}

/// `state.checkpoints.s3.*`. Anything unset comes from the standard AWS
/// environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_REGION`, `AWS_ENDPOINT_URL`, ...).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Section {
    /// Endpoint of an S3-compatible store, such as `http://127.0.0.1:9000`.
    pub endpoint: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Allow plain `http://` endpoints.
    pub allow_http: Option<bool>,
}

/// `restart-strategy.*` in `host.toml`, `[restart-strategy]` in a job.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartSection {
    /// `"fixed-delay"` or `"none"`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Restarts allowed before the job fails.
    pub attempts: Option<u32>,
    /// Wait before each restart.
    pub delay: Option<HumanDuration>,
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
    /// The longest a record waits in a partly filled batch before it is
    /// sent.
    pub max_batch_delay: Option<HumanDuration>,
}

/// Which state backend runs a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// In-memory hash maps.
    HashMap,
    /// Embedded RocksDB on local disk.
    RocksDb,
}

impl BackendKind {
    /// As `state.backend` names it.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::HashMap => "hashmap",
            BackendKind::RocksDb => "rocksdb",
        }
    }

    /// The backend `state.backend` names.
    pub fn from_name(name: &str) -> Option<BackendKind> {
        match name {
            "hashmap" => Some(BackendKind::HashMap),
            "rocksdb" => Some(BackendKind::RocksDb),
            _ => None,
        }
    }
}

/// The settings a job runs with, after merging built-in defaults, the host
/// file and the job file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The state backend.
    pub backend: BackendKind,
    /// RocksDB options (used when `backend` is RocksDB).
    pub rocksdb: RocksDbSettings,
    /// Checkpointing, when an interval is set.
    pub checkpointing: Option<CheckpointSettings>,
    /// Where checkpoints are stored.
    pub storage: StorageSettings,
    /// Default directory for savepoints.
    pub savepoint_dir: Option<String>,
    /// What happens when a task fails.
    pub restart: RestartStrategy,
    /// Deadline per guest call.
    pub call_timeout: Duration,
    /// Memory limit per guest instance, in bytes.
    pub memory_limit: u64,
    /// Output limit per guest call, in bytes.
    pub max_output_bytes: u64,
    /// Output limit per guest call, in records.
    pub max_output_records: u64,
    /// What a guest may make the host hold on its behalf (`wasm.max_state_bytes`, ...).
    pub budgets: GuestBudgets,
    /// Seed of the guests' randomness, if reproducible.
    pub random_seed: Option<u64>,
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
    /// The longest a record waits in a partly filled batch.
    pub max_batch_delay: Duration,
    /// The control API's server.
    pub rest: super::rest::RestSettings,
    /// The host's ceilings and roots (`limits.*`), which `load_job` checks.
    pub limits: super::limits::Limits,
    /// Deprecation and other notes to log once the job starts.
    pub warnings: Vec<String>,
}

/// `state.backend.rocksdb.*`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocksDbSettings {
    /// Parent of the subtasks' working directories.
    pub localdir: PathBuf,
    /// Block cache per subtask, in bytes.
    pub block_cache: u64,
    /// Memtables per subtask, in bytes.
    pub write_buffers: u64,
    /// Write-back cache of value states per subtask, in bytes.
    pub write_cache: u64,
    /// Incremental checkpoints.
    pub incremental: bool,
}

/// How barriers are aligned at operators with several inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Aligned barriers: state reflects every record exactly once.
    ExactlyOnce,
    /// Unaligned: no waiting, records may be counted twice after recovery.
    AtLeastOnce,
}

impl CheckpointMode {
    /// The name used in settings files.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointMode::ExactlyOnce => "exactly-once",
            CheckpointMode::AtLeastOnce => "at-least-once",
        }
    }
}

/// `execution.checkpointing.*`, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointSettings {
    /// Time between triggers.
    pub interval: Duration,
    /// Barrier alignment.
    pub mode: CheckpointMode,
    /// A checkpoint taking longer is aborted.
    pub timeout: Duration,
    /// Least time between one checkpoint's end and the next trigger.
    pub min_pause: Duration,
    /// Completed checkpoints kept.
    pub retained: u32,
    /// Failed checkpoints in a row tolerated before the job fails.
    pub tolerable_failures: u32,
}

/// `state.checkpoints.*`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSettings {
    /// `file://` or `s3://` URI; none keeps checkpoints in host memory.
    pub dir: Option<String>,
    /// Handles up to this many bytes are inlined in `_metadata`.
    pub inline_threshold: u64,
    /// Largest subtask state in in-memory storage.
    pub memory_max_state_size: u64,
    /// Fsync what is written to a local directory before publishing it.
    pub fsync: bool,
    /// S3 options.
    pub s3: S3Settings,
    /// Cluster mode: commit through the commit log, as this owner (never
    /// from a file: set for each partition's copy of a job).
    pub fenced_by: Option<String>,
    /// What reading a stored checkpoint may cost at most.
    pub limits: ReadLimits,
}

/// `state.checkpoints.max_file_size` and `max_section_size`, resolved:
/// bounds on what reading a stored checkpoint costs, whatever its
/// `_metadata` claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// The largest stored file read, in bytes.
    pub max_file_size: u64,
    /// The largest part of one held in memory whole, in bytes.
    pub max_section_size: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits { max_file_size: DEFAULT_MAX_FILE_SIZE, max_section_size: DEFAULT_MAX_SECTION_SIZE }
    }
}

/// `state.checkpoints.s3.*`, resolved (unset fields fall back to the AWS
/// environment variables).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// Endpoint URL.
    pub endpoint: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Allow `http://`.
    pub allow_http: bool,
}

/// What the host does when a task fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartStrategy {
    /// Fail the job.
    None,
    /// Restart every task from the latest completed checkpoint, after
    /// `delay`, at most `attempts` times.
    FixedDelay {
        /// Restarts allowed.
        attempts: u32,
        /// Wait before each.
        delay: Duration,
    },
}

/// Default checkpoint timeout (Flink's: ten minutes).
pub const DEFAULT_CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default inline threshold (Flink's `fileStateThreshold`: 20 KiB).
pub const DEFAULT_INLINE_THRESHOLD: u64 = 20 << 10;
/// Default largest state per subtask kept in host memory (5 MiB).
pub const DEFAULT_MEMORY_MAX_STATE_SIZE: u64 = 5 << 20;
/// Default largest stored file read (64 GiB).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 << 30;
/// Default largest part of a stored file held in memory whole (1 GiB):
/// past any one key group's state Weir writes in practice, and the writer
/// held each section whole too.
pub const DEFAULT_MAX_SECTION_SIZE: u64 = 1 << 30;
/// Default restarts when checkpointing is on.
pub const DEFAULT_RESTART_ATTEMPTS: u32 = 3;
/// Default wait before a restart.
pub const DEFAULT_RESTART_DELAY: Duration = Duration::from_secs(1);

/// Default deadline for one guest call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Default memory limit per guest instance.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;
/// Default output limit per guest call, in bytes.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 64 << 20;
/// Default output limit per guest call, in records.
pub const DEFAULT_MAX_OUTPUT_RECORDS: u64 = 1_000_000;
/// Default records per batch.
pub const DEFAULT_BATCH_SIZE: usize = 1024;
/// Default longest wait of a record in a partly filled batch: short enough
/// that batching adds about a millisecond of latency to a slow stream, long
/// enough that a fast one fills its batches first.
pub const DEFAULT_MAX_BATCH_DELAY: Duration = Duration::from_millis(1);
/// Default channel capacity, in batches.
pub const DEFAULT_CHANNEL_CAPACITY: usize = 8;

impl SettingsFile {
    /// Resolves the merged file into [`Settings`], rejecting choices this
    /// host cannot honour. `origin` names where the values came from, for
    /// error messages.
    pub fn resolve(&self, origin: &str) -> Result<Settings, SettingsError> {
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
                return Err(bad!(
                    "{origin}: state.backend = \"{other}\" is not a state backend (use \"hashmap\" or \"rocksdb\")"
                ));
            }
        };
        if backend == BackendKind::RocksDb && !cfg!(feature = "rocksdb") {
            return Err(bad!(
                "{origin}: state.backend = \"rocksdb\": this host was built without RocksDB (build it with the default features: cargo build --release -p weir-host)"
            ));
        }
        let (rocks, incremental) = match &self.state.backend {
            Some(BackendSetting::Table(t)) => (t.rocksdb.clone(), t.incremental),
            _ => (RocksDbSection::default(), None),
        };
        if incremental == Some(true) && backend != BackendKind::RocksDb {
            return Err(bad!(
                "{origin}: state.backend.incremental = true needs state.backend.type = \"rocksdb\" (the hashmap backend takes full checkpoints)"
            ));
        }
        let rocksdb = RocksDbSettings {
            // Per user: a directory shared by every user of the machine
            // could be planted first, or changed under the host. The
            // directory is created 0700 and checked (owner, mode, no link)
            // before a backend opens in it (`checkpoint::restore::backend`).
            localdir: rocks.localdir.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("weir-rocksdb-{}", rustix::process::geteuid().as_raw()))
            }),
            block_cache: rocks.block_cache.map(|b| b.0).unwrap_or(64 << 20),
            write_buffers: rocks.write_buffers.map(|b| b.0).unwrap_or(64 << 20),
            write_cache: rocks.write_cache.map(|b| b.0).unwrap_or(64 << 20),
            incremental: incremental.unwrap_or(false),
        };
        let checkpointing = self.resolve_checkpointing(origin)?;
        let storage = self.resolve_storage(origin)?;
        let savepoint_dir = self.state.savepoints.dir.clone().or_else(default_savepoint_dir);
        if let Some(dir) = &savepoint_dir
            && !(dir.starts_with("file://") || dir.starts_with("s3://"))
        {
            return Err(bad!(
                "{origin}: state.savepoints.dir = \"{dir}\" must start with file:// (e.g. file:///var/lib/weir/savepoints) or s3:// (e.g. s3://bucket/savepoints)"
            ));
        }
        let restart = self.resolve_restart(origin, checkpointing.is_some())?;
        let batch_size = self.pipeline.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
        if !(1..=65_536).contains(&batch_size) {
            return Err(bad!("{origin}: pipeline.batch_size must be between 1 and 65536"));
        }
        let max_batch_delay = self.pipeline.max_batch_delay.map(|d| d.0).unwrap_or(DEFAULT_MAX_BATCH_DELAY);
        if max_batch_delay > Duration::from_secs(60) {
            return Err(bad!("{origin}: pipeline.max_batch_delay must be at most 60s"));
        }
        let channel_capacity = self.pipeline.channel_capacity.unwrap_or(DEFAULT_CHANNEL_CAPACITY);
        if !(1..=4096).contains(&channel_capacity) {
            return Err(bad!("{origin}: pipeline.channel_capacity must be between 1 and 4096"));
        }
        let call_timeout = self.wasm.call_timeout.map(|d| d.0).unwrap_or(DEFAULT_CALL_TIMEOUT);
        if call_timeout.is_zero() {
            return Err(bad!("{origin}: wasm.call_timeout must be more than zero"));
        }
        let memory_limit = self.wasm.memory_limit.map(|b| b.0).unwrap_or(DEFAULT_MEMORY_LIMIT);
        if !(1 << 20..=64 << 30).contains(&memory_limit) {
            return Err(bad!("{origin}: wasm.memory_limit must be between 1MiB and 64GiB"));
        }
        let max_output_bytes = self.wasm.max_output_bytes.map(|b| b.0).unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
        if !(1 << 10..=1 << 30).contains(&max_output_bytes) {
            return Err(bad!("{origin}: wasm.max_output_bytes must be between 1KiB and 1GiB"));
        }
        let max_output_records = self.wasm.max_output_records.unwrap_or(DEFAULT_MAX_OUTPUT_RECORDS);
        if !(1..=100_000_000).contains(&max_output_records) {
            return Err(bad!("{origin}: wasm.max_output_records must be between 1 and 100000000"));
        }
        let budgets = self.wasm.budgets(origin)?;
        let cache_dir = if self.wasm.cache.enabled.unwrap_or(true) {
            self.wasm.cache.dir.clone().or_else(default_cache_dir)
        } else {
            None
        };
        let rest = self.rest.resolve(origin)?;
        Ok(Settings {
            rest,
            limits: self.limits.resolve(origin)?,
            backend,
            rocksdb,
            checkpointing,
            storage,
            savepoint_dir,
            restart,
            call_timeout,
            memory_limit,
            max_output_bytes,
            max_output_records,
            budgets,
            random_seed: self.wasm.random_seed,
            cache_dir,
            batch_size,
            channel_capacity,
            progress_interval: self.pipeline.progress_interval.map(|d| d.0).unwrap_or(Duration::from_secs(1)),
            idle_timeout: self.pipeline.idle_timeout.map(|d| d.0),
            max_batch_delay,
            warnings,
        })
    }
}

impl SettingsFile {
    fn resolve_checkpointing(&self, origin: &str) -> Result<Option<CheckpointSettings>, SettingsError> {
        let c = &self.execution.checkpointing;
        let Some(interval) = c.interval.map(|d| d.0) else {
            if !c.is_empty() {
                return Err(bad!(
                    "{origin}: execution.checkpointing.interval ([checkpointing] interval in a job) is not set, so checkpointing is off, but other checkpointing options are: set an interval such as \"1s\""
                ));
            }
            return Ok(None);
        };
        if interval < Duration::from_millis(10) {
            return Err(bad!(
                "{origin}: execution.checkpointing.interval must be at least 10ms (got {})",
                HumanDuration(interval)
            ));
        }
        let mode = match c.mode.as_deref().unwrap_or("exactly-once") {
            "exactly-once" | "exactly_once" => CheckpointMode::ExactlyOnce,
            "at-least-once" | "at_least_once" => CheckpointMode::AtLeastOnce,
            other => {
                return Err(bad!(
                    "{origin}: execution.checkpointing.mode = \"{other}\" is not a mode (use \"exactly-once\" or \"at-least-once\")"
                ));
            }
        };
        let timeout = c.timeout.map(|d| d.0).unwrap_or(DEFAULT_CHECKPOINT_TIMEOUT);
        if timeout.is_zero() {
            return Err(bad!("{origin}: execution.checkpointing.timeout must be more than zero"));
        }
        let retained = c.retained.unwrap_or(1);
        if retained == 0 {
            return Err(bad!("{origin}: execution.checkpointing.retained must be at least 1"));
        }
        Ok(Some(CheckpointSettings {
            interval,
            mode,
            timeout,
            min_pause: c.min_pause.map(|d| d.0).unwrap_or_default(),
            retained,
            tolerable_failures: c.tolerable_failures.unwrap_or(0),
        }))
    }

    fn resolve_storage(&self, origin: &str) -> Result<StorageSettings, SettingsError> {
        let c = &self.state.checkpoints;
        if let Some(dir) = &c.dir
            && !(dir.starts_with("file://") || dir.starts_with("s3://"))
        {
            return Err(bad!(
                "{origin}: state.checkpoints.dir = \"{dir}\" must start with file:// (e.g. file:///var/lib/weir/checkpoints) or s3:// (e.g. s3://bucket/prefix)"
            ));
        }
        let s3 = &c.s3;
        Ok(StorageSettings {
            dir: c.dir.clone(),
            inline_threshold: c.inline_threshold.map(|b| b.0).unwrap_or(DEFAULT_INLINE_THRESHOLD),
            memory_max_state_size: c.memory_max_state_size.map(|b| b.0).unwrap_or(DEFAULT_MEMORY_MAX_STATE_SIZE),
            fsync: c.fsync.unwrap_or(true),
            s3: S3Settings {
                endpoint: s3.endpoint.clone(),
                region: s3.region.clone(),
                access_key_id: s3.access_key_id.clone(),
                secret_access_key: s3.secret_access_key.clone(),
                allow_http: s3.allow_http.unwrap_or(false),
            },
            fenced_by: None,
            limits: ReadLimits {
                max_file_size: c.max_file_size.map_or(DEFAULT_MAX_FILE_SIZE, |b| b.0),
                max_section_size: c.max_section_size.map_or(DEFAULT_MAX_SECTION_SIZE, |b| b.0),
            },
        })
    }

    fn resolve_restart(&self, origin: &str, checkpointing: bool) -> Result<RestartStrategy, SettingsError> {
        let r = &self.restart;
        // As Flink: with checkpointing on, failed jobs restart by default.
        let default = if checkpointing { "fixed-delay" } else { "none" };
        match r.kind.as_deref().unwrap_or(default) {
            "none" | "disable" => Ok(RestartStrategy::None),
            "fixed-delay" => Ok(RestartStrategy::FixedDelay {
                attempts: r.attempts.unwrap_or(DEFAULT_RESTART_ATTEMPTS),
                delay: r.delay.map(|d| d.0).unwrap_or(DEFAULT_RESTART_DELAY),
            }),
            other => Err(bad!(
                "{origin}: restart-strategy.type = \"{other}\" is not a restart strategy (use \"fixed-delay\" or \"none\")"
            )),
        }
    }
}
