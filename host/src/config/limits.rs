//! `[limits]`: the host file's ceilings on what a job file may ask for.
//! The host file speaks for the machine's operator; a job file is not
//! trusted (`docs/security.md`, "Who sets what"). So every setting that
//! spends the host's memory, time or threads has a ceiling here that the
//! merged settings cannot pass, whoever set them, and the operator
//! chooses the directories file connectors may use ([`super::roots`]). A
//! job file cannot set `[limits]` (`load_job` refuses it). Parsing and
//! checking only: `load_job` applies the ceilings before anything starts,
//! and the coordinator asks [`Limits::rescale_problem`] before a rescale.

use super::job::{InvalidJob, JobSpec};
use super::settings::{Settings, SettingsError};
use super::units::{ByteSize, HumanDuration, human_bytes};
use super::wasm::GuestBudgets;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `limits.*` as written in the host file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// Most subtasks of one source or operator.
    pub parallelism: Option<u32>,
    /// Most tasks (each a thread) one job runs: every source, operator
    /// and sink subtask.
    pub tasks: Option<u32>,
    /// Least `execution.checkpointing.interval`.
    pub min_checkpoint_interval: Option<HumanDuration>,
    /// Directories file sinks may write beneath, beside the job file's own.
    pub sink_roots: Option<Vec<PathBuf>>,
    /// When set, file sources read only beneath these, the sink roots and
    /// the job file's directory; unset, any file the host's user can read.
    pub source_roots: Option<Vec<PathBuf>>,
    /// Whether the job file's own directory is a root (default true).
    pub job_dir_is_root: Option<bool>,
    /// `limits.wasm.*`: ceilings of `wasm.*`.
    #[serde(default)]
    pub wasm: WasmCeilings,
    /// `limits.rocksdb.*`: ceilings of `state.backend.rocksdb.*`.
    #[serde(default)]
    pub rocksdb: RocksDbCeilings,
}

/// `limits.wasm.*`: each the ceiling of the `wasm.*` key of its name.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasmCeilings {
    /// Ceiling of `wasm.call_timeout`.
    pub call_timeout: Option<HumanDuration>,
    /// Ceiling of `wasm.memory_limit`.
    pub memory_limit: Option<ByteSize>,
    /// Ceiling of `wasm.max_output_bytes`.
    pub max_output_bytes: Option<ByteSize>,
    /// Ceiling of `wasm.max_output_records`.
    pub max_output_records: Option<u64>,
    /// Ceiling of `wasm.max_state_bytes`.
    pub max_state_bytes: Option<ByteSize>,
    /// Ceiling of `wasm.max_state_write_bytes`.
    pub max_state_write_bytes: Option<ByteSize>,
    /// Ceiling of `wasm.max_timers`.
    pub max_timers: Option<u64>,
    /// Ceiling of `wasm.max_log_lines`.
    pub max_log_lines: Option<u64>,
    /// Ceiling of `wasm.max_log_bytes`.
    pub max_log_bytes: Option<ByteSize>,
}

/// `limits.rocksdb.*`: each the ceiling of the
/// `state.backend.rocksdb.*` key of its name (per subtask).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RocksDbCeilings {
    /// Ceiling of `state.backend.rocksdb.block_cache`.
    pub block_cache: Option<ByteSize>,
    /// Ceiling of `state.backend.rocksdb.write_buffers`.
    pub write_buffers: Option<ByteSize>,
    /// Ceiling of `state.backend.rocksdb.write_cache`.
    pub write_cache: Option<ByteSize>,
}

// The built-in ceilings: generous for real jobs (each is 4 to 20 times
// the setting's default), and low enough that a job file cannot make the
// host allocate gigabytes per subtask or spawn thousands of threads.

/// Ceiling of a source's or operator's parallelism: 128, the default
/// number of key groups.
pub const CEILING_PARALLELISM: u32 = 128;
/// Ceiling of a job's tasks (threads): 512.
pub const CEILING_TASKS: u32 = 512;
/// Floor of the checkpoint interval: 10 ms, the least any host takes.
pub const FLOOR_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(10);
/// Ceiling of `wasm.call_timeout`: 5 minutes (default 10 s).
pub const CEILING_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Ceiling of `wasm.memory_limit`: 4 GiB, all a 32-bit memory can address
/// (default 256 MiB).
pub const CEILING_MEMORY_LIMIT: u64 = 4 << 30;
/// Ceiling of `wasm.max_output_bytes`: 256 MiB (default 64 MiB).
pub const CEILING_MAX_OUTPUT_BYTES: u64 = 256 << 20;
/// Ceiling of `wasm.max_output_records`: 10 million (default 1 million).
pub const CEILING_MAX_OUTPUT_RECORDS: u64 = 10_000_000;
/// Ceiling of `wasm.max_state_bytes`: 8 GiB a subtask (default 1 GiB).
pub const CEILING_MAX_STATE_BYTES: u64 = 8 << 30;
/// Ceiling of `wasm.max_state_write_bytes`: 256 MiB (default 64 MiB).
pub const CEILING_MAX_STATE_WRITE_BYTES: u64 = 256 << 20;
/// Ceiling of `wasm.max_timers`: 10 million (default 1 million).
pub const CEILING_MAX_TIMERS: u64 = 10_000_000;
/// Ceiling of `wasm.max_log_lines`: 10,000 a call (default 1000).
pub const CEILING_MAX_LOG_LINES: u64 = 10_000;
/// Ceiling of `wasm.max_log_bytes`: 8 MiB a call (default 1 MiB).
pub const CEILING_MAX_LOG_BYTES: u64 = 8 << 20;
/// Ceiling of each of `state.backend.rocksdb.block_cache`,
/// `write_buffers` and `write_cache`: 4 GiB a subtask (default 64 MiB).
pub const CEILING_ROCKSDB_MEMORY: u64 = 4 << 30;

/// `limits.*`, resolved: the built-in ceilings where the host file sets
/// none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most subtasks of one source or operator.
    pub parallelism: u32,
    /// Most tasks of one job.
    pub tasks: u32,
    /// Least checkpoint interval.
    pub min_checkpoint_interval: Duration,
    /// Ceiling of `wasm.call_timeout`.
    pub call_timeout: Duration,
    /// Ceiling of `wasm.memory_limit`.
    pub memory_limit: u64,
    /// Ceiling of `wasm.max_output_bytes`.
    pub max_output_bytes: u64,
    /// Ceiling of `wasm.max_output_records`.
    pub max_output_records: u64,
    /// Ceilings of the guest budgets (`wasm.max_state_bytes`, ...).
    pub budgets: GuestBudgets,
    /// Ceiling of `state.backend.rocksdb.block_cache`.
    pub rocksdb_block_cache: u64,
    /// Ceiling of `state.backend.rocksdb.write_buffers`.
    pub rocksdb_write_buffers: u64,
    /// Ceiling of `state.backend.rocksdb.write_cache`.
    pub rocksdb_write_cache: u64,
    /// Directories file sinks may write beneath (absolute).
    pub sink_roots: Vec<PathBuf>,
    /// With `limits.source_roots`: the directories file sources may read
    /// beneath (absolute); none, any.
    pub source_roots: Option<Vec<PathBuf>>,
    /// Whether the job file's directory is a root.
    pub job_dir_is_root: bool,
}

impl Default for Limits {
    fn default() -> Self {
        LimitsSection::default().resolve("built-in defaults").expect("the built-in limits are valid")
    }
}

impl LimitsSection {
    /// The ceilings, each more than zero; roots must be absolute. `origin`
    /// names the host file.
    pub(super) fn resolve(&self, origin: &str) -> Result<Limits, SettingsError> {
        let bytes = |v: Option<ByteSize>, default: u64| v.map_or(default, |b| b.0);
        let w = &self.wasm;
        let r = &self.rocksdb;
        let limits = Limits {
            parallelism: self.parallelism.unwrap_or(CEILING_PARALLELISM),
            tasks: self.tasks.unwrap_or(CEILING_TASKS),
            min_checkpoint_interval: self.min_checkpoint_interval.map_or(FLOOR_CHECKPOINT_INTERVAL, |d| d.0),
            call_timeout: w.call_timeout.map_or(CEILING_CALL_TIMEOUT, |d| d.0),
            memory_limit: bytes(w.memory_limit, CEILING_MEMORY_LIMIT),
            max_output_bytes: bytes(w.max_output_bytes, CEILING_MAX_OUTPUT_BYTES),
            max_output_records: w.max_output_records.unwrap_or(CEILING_MAX_OUTPUT_RECORDS),
            budgets: GuestBudgets {
                max_state_bytes: bytes(w.max_state_bytes, CEILING_MAX_STATE_BYTES),
                max_state_write_bytes: bytes(w.max_state_write_bytes, CEILING_MAX_STATE_WRITE_BYTES),
                max_timers: w.max_timers.unwrap_or(CEILING_MAX_TIMERS),
                max_log_lines: w.max_log_lines.unwrap_or(CEILING_MAX_LOG_LINES),
                max_log_bytes: bytes(w.max_log_bytes, CEILING_MAX_LOG_BYTES),
            },
            rocksdb_block_cache: bytes(r.block_cache, CEILING_ROCKSDB_MEMORY),
            rocksdb_write_buffers: bytes(r.write_buffers, CEILING_ROCKSDB_MEMORY),
            rocksdb_write_cache: bytes(r.write_cache, CEILING_ROCKSDB_MEMORY),
            sink_roots: self.sink_roots.clone().unwrap_or_default(),
            source_roots: self.source_roots.clone(),
            job_dir_is_root: self.job_dir_is_root.unwrap_or(true),
        };
        if limits.parallelism == 0 || limits.tasks == 0 || limits.call_timeout.is_zero() {
            return Err(SettingsError(format!(
                "{origin}: limits.parallelism, limits.tasks and limits.wasm.call_timeout must be more than zero"
            )));
        }
        let roots = limits.sink_roots.iter().map(|r| ("sink_roots", r));
        let roots = roots.chain(limits.source_roots.iter().flatten().map(|r| ("source_roots", r)));
        for (key, root) in roots {
            if !root.is_absolute() {
                return Err(SettingsError(format!(
                    "{origin}: limits.{key}: {} is not an absolute path (a root is a directory named in full, such as /srv/weir/output)",
                    root.display()
                )));
            }
        }
        Ok(limits)
    }
}

/// Who set a setting, for an error that tells the reader what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy<'a> {
    /// The job file at this path.
    Job(&'a Path),
    /// The host settings file at this path.
    Host(&'a Path),
    /// Nobody: the built-in default.
    Default,
}

/// What a setting measures, for comparing and printing it.
#[derive(Debug, Clone, Copy)]
enum Amount {
    Bytes(u64),
    Count(u64),
    Time(Duration),
}

impl Amount {
    fn key(self) -> u128 {
        match self {
            Amount::Bytes(n) | Amount::Count(n) => u128::from(n),
            Amount::Time(d) => d.as_nanos(),
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Amount::Bytes(n) => f.write_str(&human_bytes(n)),
            Amount::Count(n) => write!(f, "{n}"),
            Amount::Time(d) => write!(f, "{}", HumanDuration(d)),
        }
    }
}

/// The built-in ceiling's note: where to raise it.
const RAISE_BUILT_IN: &str =
    "the built-in ceiling; a host settings file (--config, $WEIR_CONFIG or ./config/host.toml) raises it";

impl Limits {
    /// Checks the merged `settings` against the ceilings. `set_by` says who
    /// set a key (host-file spelling, `wasm.memory_limit`); `limits_from`
    /// is the host file when it sets that `limits.*` key itself.
    pub fn check_settings<'p>(
        &self,
        settings: &Settings,
        set_by: &dyn Fn(&str) -> SetBy<'p>,
        limits_from: &dyn Fn(&str) -> Option<PathBuf>,
    ) -> Result<(), SettingsError> {
        use Amount::{Bytes, Count, Time};
        let (b, cb) = (&settings.budgets, &self.budgets);
        let r = &settings.rocksdb;
        let ceilings = [
            ("wasm.call_timeout", Time(settings.call_timeout), Time(self.call_timeout)),
            ("wasm.memory_limit", Bytes(settings.memory_limit), Bytes(self.memory_limit)),
            ("wasm.max_output_bytes", Bytes(settings.max_output_bytes), Bytes(self.max_output_bytes)),
            ("wasm.max_output_records", Count(settings.max_output_records), Count(self.max_output_records)),
            ("wasm.max_state_bytes", Bytes(b.max_state_bytes), Bytes(cb.max_state_bytes)),
            ("wasm.max_state_write_bytes", Bytes(b.max_state_write_bytes), Bytes(cb.max_state_write_bytes)),
            ("wasm.max_timers", Count(b.max_timers), Count(cb.max_timers)),
            ("wasm.max_log_lines", Count(b.max_log_lines), Count(cb.max_log_lines)),
            ("wasm.max_log_bytes", Bytes(b.max_log_bytes), Bytes(cb.max_log_bytes)),
            ("state.backend.rocksdb.block_cache", Bytes(r.block_cache), Bytes(self.rocksdb_block_cache)),
            ("state.backend.rocksdb.write_buffers", Bytes(r.write_buffers), Bytes(self.rocksdb_write_buffers)),
            ("state.backend.rocksdb.write_cache", Bytes(r.write_cache), Bytes(self.rocksdb_write_cache)),
        ];
        for (key, value, ceiling) in ceilings {
            if value.key() > ceiling.key() {
                let limit_key = format!("limits.{}", key.trim_start_matches("state.backend."));
                return Err(over(key, value, &limit_key, ceiling, set_by(key), limits_from(&limit_key)));
            }
        }
        if let Some(c) = &settings.checkpointing
            && c.interval < self.min_checkpoint_interval
        {
            let key = "execution.checkpointing.interval";
            let floor = "limits.min_checkpoint_interval";
            let (value, least) = (HumanDuration(c.interval), HumanDuration(self.min_checkpoint_interval));
            let whose = ceiling_origin(limits_from(floor));
            return Err(SettingsError(match set_by(key) {
                SetBy::Job(path) => format!(
                    "{}: [checkpointing] interval = {value} is below the host's floor {floor} = {least} ({whose}); checkpoint less often",
                    path.display()
                ),
                // Checkpointing has no default interval: the host file set it.
                SetBy::Host(path) => format!(
                    "{}: {key} = {value} is below {floor} = {least} ({whose}); set {key} to at least {least}",
                    path.display()
                ),
                SetBy::Default => format!("{key} = {value} is below {floor} = {least} ({whose})"),
            }));
        }
        Ok(())
    }

    /// Checks the subtasks of `spec` against `limits.parallelism` and
    /// `limits.tasks`; `flag` is `--parallelism`. The message names the
    /// node and says where the ceiling comes from (`limits_from`).
    pub fn check_job(
        &self,
        spec: &JobSpec,
        flag: Option<u32>,
        limits_from: &dyn Fn(&str) -> Option<PathBuf>,
    ) -> Result<(), InvalidJob> {
        let ceiling = self.parallelism;
        let whose = || ceiling_origin(limits_from("limits.parallelism"));
        if let Some(p) = flag.filter(|p| *p > ceiling) {
            return Err(InvalidJob(format!(
                "--parallelism {p} is above the host's ceiling limits.parallelism = {ceiling} ({}); ask for {ceiling} or fewer",
                whose()
            )));
        }
        let nodes = spec.sources.iter().map(|s| ("source", s.id.as_str(), s.parallelism));
        let nodes = nodes.chain(spec.operators.iter().map(|o| ("operator", o.uid.as_str(), o.parallelism)));
        for (role, id, p) in nodes {
            if p > ceiling {
                return Err(InvalidJob(format!(
                    "{role} '{id}': parallelism {p} is above the host's ceiling limits.parallelism = {ceiling} ({}); set parallelism (its own or the job's) to {ceiling} or less",
                    whose()
                )));
            }
        }
        let sources: u64 = spec.sources.iter().map(|s| u64::from(s.parallelism)).sum();
        let operators: u64 = spec.operators.iter().map(|o| u64::from(o.parallelism)).sum();
        let tasks = sources + operators + spec.sinks.len() as u64;
        if tasks > u64::from(self.tasks) {
            return Err(InvalidJob(format!(
                "the job would run {tasks} tasks, one thread each ({sources} source, {operators} operator and {} sink subtasks), above the host's ceiling limits.tasks = {} ({}); lower the parallelism",
                spec.sinks.len(),
                self.tasks,
                ceiling_origin(limits_from("limits.tasks"))
            )));
        }
        Ok(())
    }

    /// Why a live rescale of operator `uid` to `to` subtasks, after which
    /// the job runs `tasks` tasks, would pass a ceiling, if it would.
    pub fn rescale_problem(&self, uid: &str, to: u32, tasks: u64) -> Option<String> {
        if to > self.parallelism {
            return Some(format!(
                "'{uid}' cannot run on {to} subtasks: the host's ceiling is {} (limits.parallelism in the host settings file); ask for {} or fewer",
                self.parallelism, self.parallelism
            ));
        }
        (tasks > u64::from(self.tasks)).then(|| {
            format!(
                "'{uid}' cannot run on {to} subtasks: the job would run {tasks} tasks, above the host's ceiling of {} (limits.tasks in the host settings file)",
                self.tasks
            )
        })
    }
}

/// Where a ceiling was set, as a note in an error.
fn ceiling_origin(host: Option<PathBuf>) -> String {
    match host {
        Some(path) => format!("set in {}", path.display()),
        None => RAISE_BUILT_IN.to_string(),
    }
}

/// The error for `key = value` above `limit_key = ceiling`, told to whoever
/// set the value.
fn over(
    key: &str,
    value: Amount,
    limit_key: &str,
    ceiling: Amount,
    set_by: SetBy<'_>,
    limits_from: Option<PathBuf>,
) -> SettingsError {
    let whose = ceiling_origin(limits_from.clone());
    SettingsError(match set_by {
        SetBy::Job(path) => format!(
            "{}: {key} = {value} is above the host's ceiling {limit_key} = {ceiling} ({whose}); ask for {ceiling} or less, or have the host's operator raise {limit_key}",
            path.display()
        ),
        SetBy::Host(path) => format!(
            "{}: {key} = {value} is above {limit_key} = {ceiling} ({whose}); set {key} to at most {ceiling}, or raise {limit_key}",
            path.display()
        ),
        // Only a host file lowers a ceiling below a built-in default.
        SetBy::Default => format!(
            "{}: {limit_key} = {ceiling} is below the built-in default {key} = {value}: set {key} to at most {ceiling} in the same file",
            limits_from.as_deref().unwrap_or(Path::new("built-in defaults")).display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{ConfigError, HostFile, LoadedJob, load_job};
    use std::path::Path;

    /// Loads a job of one generator, one operator (`parallelism` subtasks)
    /// and a discard sink, with `settings` before the graph, over the host
    /// file `host` if given.
    fn load(dir: &Path, settings: &str, host: Option<&str>, flag: Option<u32>) -> Result<LoadedJob, ConfigError> {
        std::fs::write(dir.join("op.wasm"), b"").unwrap();
        let job = dir.join("job.toml");
        std::fs::write(
            &job,
            format!(
                "name = \"j\"\n{settings}\n\n[[sources]]\nid = \"gen\"\nkind = \"generator\"\ncount = 1\nkeys = 1\n\n\
                 [[operators]]\nuid = \"op\"\nmodule = \"op.wasm\"\ninput = \"gen\"\n\n\
                 [[sinks]]\nid = \"out\"\nkind = \"discard\"\ninput = \"op\"\n"
            ),
        )
        .unwrap();
        let host = host.map(|text| {
            std::fs::write(dir.join("host.toml"), text).unwrap();
            HostFile::load(&dir.join("host.toml")).unwrap()
        });
        load_job(&job, host.as_ref(), flag)
    }

    fn refused(dir: &Path, settings: &str, host: Option<&str>, flag: Option<u32>) -> String {
        load(dir, settings, host, flag).expect_err("refused").to_string()
    }

    #[test]
    fn a_value_past_a_ceiling_is_told_to_whoever_set_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let job = dir.join("job.toml").display().to_string();
        let host = dir.join("host.toml").display().to_string();
        // The job's own value, against the built-in ceiling.
        let e = refused(dir, "[wasm]\nmemory_limit = \"5GiB\"", None, None);
        assert!(
            e.starts_with(&format!(
                "{job}: wasm.memory_limit = 5.0 GiB is above the host's ceiling limits.wasm.memory_limit = 4.0 GiB (the built-in ceiling"
            )),
            "{e}"
        );
        // The host's value merged under a job that leaves it alone: the host
        // file hears it, with its own key to change.
        let e = refused(dir, "", Some("wasm.max_timers = 20000000\n"), None);
        assert!(
            e.starts_with(&format!("{host}: wasm.max_timers = 20000000 is above limits.wasm.max_timers = 10000000")),
            "{e}"
        );
        // A job lowering what the host set past its ceiling is fine: the
        // merged value is what counts.
        load(dir, "[wasm]\nmax_timers = 5", Some("wasm.max_timers = 20000000\n"), None).unwrap();
        // A ceiling the host lowered below a default it leaves in force.
        let e = refused(dir, "", Some("[limits.wasm]\nmax_output_bytes = \"1MiB\"\n"), None);
        assert!(
            e.starts_with(&format!(
                "{host}: limits.wasm.max_output_bytes = 1.0 MiB is below the built-in default wasm.max_output_bytes = 64.0 MiB"
            )),
            "{e}"
        );
        // A ceiling the host raised lets the job through; one it lowered
        // names the host file as where it was set.
        load(dir, "[wasm]\ncall_timeout = \"20min\"", Some("[limits.wasm]\ncall_timeout = \"1h\"\n"), None).unwrap();
        let e = refused(
            dir,
            "[wasm]\ncall_timeout = \"3s\"",
            Some("wasm.call_timeout = \"1s\"\nlimits.wasm.call_timeout = \"2s\"\n"),
            None,
        );
        assert!(e.contains(&format!("limits.wasm.call_timeout = 2s (set in {host})")), "{e}");
    }

    #[test]
    fn parallelism_and_tasks_are_bounded_from_the_job_the_flag_and_the_host() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let e = refused(dir, "max_parallelism = 1024\nparallelism = 129", None, None);
        assert!(
            e.contains("operator 'op': parallelism 129 is above the host's ceiling limits.parallelism = 128"),
            "{e}"
        );
        let e = refused(dir, "max_parallelism = 1024", None, Some(200));
        assert!(e.contains("--parallelism 200 is above the host's ceiling limits.parallelism = 128"), "{e}");
        load(dir, "max_parallelism = 1024\nparallelism = 200", Some("limits.parallelism = 256\n"), None).unwrap();
        // 1 source + 3 operator subtasks + 1 sink.
        let e = refused(dir, "parallelism = 3", Some("limits.tasks = 4\n"), None);
        assert!(e.contains("the job would run 5 tasks"), "{e}");
        load(dir, "parallelism = 3", Some("limits.tasks = 5\n"), None).unwrap();
    }

    #[test]
    fn limits_and_an_open_control_api_are_the_host_files_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for (settings, says) in [
            ("[limits]\ntasks = 100000", "[limits]: the ceilings and roots are the host's"),
            ("[rest]\nauth = \"none\"", "rest.auth = \"none\": only the host settings file may open"),
            (
                "[rest]\nbind = \"192.0.2.1:8081\"",
                "rest.bind = \"192.0.2.1:8081\": a job file may bind the control API only to a loopback",
            ),
        ] {
            let e = refused(dir, settings, None, None);
            assert!(e.contains(says), "{settings}: {e}");
        }
        let job = load(dir, "[rest]\nbind = \"[::1]:0\"", Some("rest.auth = \"none\"\n"), None).unwrap();
        assert!(job.settings.rest.bind.ip().is_loopback());
        assert_eq!(job.settings.rest.auth, crate::config::RestAuth::ReadOpen, "the host's choice stands");
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "limits.sink_roots = [\"out\"]\n").unwrap();
        let e = HostFile::load(&bad).expect_err("a relative root").to_string();
        assert!(e.contains("limits.sink_roots: out is not an absolute path"), "{e}");
    }

    #[test]
    fn the_built_in_settings_are_within_the_built_in_ceilings() {
        let tmp = tempfile::tempdir().unwrap();
        let job = load(tmp.path(), "", None, None).unwrap();
        assert_eq!(job.settings.limits, super::Limits::default());
    }
}
