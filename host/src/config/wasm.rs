//! `wasm.*`: the limits on guests (`call_timeout`, `memory_limit`, output
//! per call) and the budgets of host memory a guest can make the host hold
//! on its behalf ([`GuestBudgets`]: state, state written per call, timers,
//! log per call), with their defaults and the ranges they are checked
//! against. Parsing and checking only: the wasm layer enforces them.

use super::settings::SettingsError;
use super::units::{ByteSize, HumanDuration};
use serde::Deserialize;
use std::path::PathBuf;

/// `wasm.*`: limits on guests and the compiled-module cache.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasmSection {
    /// Longest a single call into a guest may run before it is interrupted.
    pub call_timeout: Option<HumanDuration>,
    /// Most linear memory one guest instance may grow to, all its memories
    /// together.
    pub memory_limit: Option<ByteSize>,
    /// Most bytes (payloads and keys) one call into a guest may emit.
    pub max_output_bytes: Option<ByteSize>,
    /// Most records one call into a guest may emit.
    pub max_output_records: Option<u64>,
    /// Most bytes of state one subtask may hold on the hashmap backend.
    pub max_state_bytes: Option<ByteSize>,
    /// Most bytes one call into a guest may write to state.
    pub max_state_write_bytes: Option<ByteSize>,
    /// Most timers one subtask may have pending.
    pub max_timers: Option<u64>,
    /// Most lines of stdout and stderr one call may log.
    pub max_log_lines: Option<u64>,
    /// Most bytes of stdout and stderr one call may log.
    pub max_log_bytes: Option<ByteSize>,
    /// Seeds the guests' randomness, for reproducible runs (unset: the
    /// operating system's secure randomness).
    pub random_seed: Option<u64>,
    /// `wasm.cache.*` (host file only: the cache holds native code).
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

/// Default state per subtask on the hashmap backend: 1 GiB. The hashmap
/// backend is for state that fits in memory with room to spare (a snapshot
/// may hold a second copy of the key groups written while it runs); a
/// subtask past a gigabyte belongs on RocksDB, and a host running `p`
/// subtasks of one operator holds at most `p` GiB of it.
pub const DEFAULT_MAX_STATE_BYTES: u64 = 1 << 30;
/// Default bytes written to state per call: 64 MiB, as `max_output_bytes`.
pub const DEFAULT_MAX_STATE_WRITE_BYTES: u64 = 64 << 20;
/// Default pending timers per subtask: a million (about 100 MiB on the
/// hashmap backend with short keys).
pub const DEFAULT_MAX_TIMERS: u64 = 1_000_000;
/// Default log lines per call.
pub const DEFAULT_MAX_LOG_LINES: u64 = 1000;
/// Default log bytes per call: 1 MiB.
pub const DEFAULT_MAX_LOG_BYTES: u64 = 1 << 20;

/// What a guest may make the host hold or write on its behalf, beyond its
/// own linear memory. Past one the call fails and the job stops (no
/// restart: the same input would pass it again), except the log budgets,
/// past which lines are dropped and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestBudgets {
    /// `wasm.max_state_bytes`: state (timers included) one subtask holds on
    /// a backend that keeps it in memory (the hashmap backend).
    pub max_state_bytes: u64,
    /// `wasm.max_state_write_bytes`: keys and values one call writes to
    /// state (any backend).
    pub max_state_write_bytes: u64,
    /// `wasm.max_timers`: timers pending in one subtask, both domains
    /// together (any backend).
    pub max_timers: u64,
    /// `wasm.max_log_lines`: lines of stdout and stderr together one call
    /// logs; later ones are dropped and counted.
    pub max_log_lines: u64,
    /// `wasm.max_log_bytes`: bytes of those lines.
    pub max_log_bytes: u64,
}

impl Default for GuestBudgets {
    fn default() -> Self {
        GuestBudgets {
            max_state_bytes: DEFAULT_MAX_STATE_BYTES,
            max_state_write_bytes: DEFAULT_MAX_STATE_WRITE_BYTES,
            max_timers: DEFAULT_MAX_TIMERS,
            max_log_lines: DEFAULT_MAX_LOG_LINES,
            max_log_bytes: DEFAULT_MAX_LOG_BYTES,
        }
    }
}

impl WasmSection {
    /// The budgets this section sets, each checked against its range (the
    /// same ceilings as the limits beside them: state as `memory_limit`,
    /// bytes per call as `max_output_bytes`, counts as
    /// `max_output_records`). `origin` names the files, for errors.
    pub fn budgets(&self, origin: &str) -> Result<GuestBudgets, SettingsError> {
        let d = GuestBudgets::default();
        let bytes = |v: Option<ByteSize>, default: u64| v.map(|b| b.0).unwrap_or(default);
        let b = GuestBudgets {
            max_state_bytes: bytes(self.max_state_bytes, d.max_state_bytes),
            max_state_write_bytes: bytes(self.max_state_write_bytes, d.max_state_write_bytes),
            max_timers: self.max_timers.unwrap_or(d.max_timers),
            max_log_lines: self.max_log_lines.unwrap_or(d.max_log_lines),
            max_log_bytes: bytes(self.max_log_bytes, d.max_log_bytes),
        };
        let checks: [(&str, u64, std::ops::RangeInclusive<u64>, &str); 5] = [
            ("max_state_bytes", b.max_state_bytes, 1 << 20..=64 << 30, "1MiB and 64GiB"),
            ("max_state_write_bytes", b.max_state_write_bytes, 1 << 10..=1 << 30, "1KiB and 1GiB"),
            ("max_timers", b.max_timers, 1..=100_000_000, "1 and 100000000"),
            ("max_log_lines", b.max_log_lines, 0..=1_000_000, "0 and 1000000"),
            ("max_log_bytes", b.max_log_bytes, 0..=64 << 20, "0 and 64MiB"),
        ];
        for (name, value, range, between) in checks {
            if !range.contains(&value) {
                return Err(SettingsError(format!("{origin}: wasm.{name} must be between {between}")));
            }
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml: &str) -> WasmSection {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn budgets_default_and_are_range_checked_with_the_setting_named() {
        assert_eq!(section("").budgets("job.toml").unwrap(), GuestBudgets::default());
        let b = section("max_state_bytes = \"2GiB\"\nmax_timers = 5\nmax_log_lines = 0").budgets("j").unwrap();
        assert_eq!((b.max_state_bytes, b.max_timers, b.max_log_lines), (2 << 30, 5, 0));
        for (toml, named) in [
            ("max_state_bytes = \"65GiB\"", "wasm.max_state_bytes must be between 1MiB and 64GiB"),
            ("max_state_bytes = 1000", "wasm.max_state_bytes"),
            ("max_state_write_bytes = \"2GiB\"", "wasm.max_state_write_bytes must be between 1KiB and 1GiB"),
            ("max_timers = 0", "wasm.max_timers must be between 1 and 100000000"),
            ("max_log_lines = 1000001", "wasm.max_log_lines"),
            ("max_log_bytes = \"65MiB\"", "wasm.max_log_bytes must be between 0 and 64MiB"),
        ] {
            let e = section(toml).budgets("job.toml").unwrap_err().to_string();
            assert!(e.starts_with("job.toml: ") && e.contains(named), "{toml}: {e}");
        }
    }
}
