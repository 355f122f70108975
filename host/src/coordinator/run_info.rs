//! What every attempt of a run knows of the run as a whole: when it
//! started, its restarts, its modules, the guest failures that failed an
//! attempt. The run keeps it; an attempt's controller and the views read it.

use crate::api::{ModuleInfo, Restart};
use std::collections::BTreeMap;
use std::time::Instant;

/// What the controller of each attempt knows of the run as a whole.
#[derive(Debug)]
pub struct RunInfo {
    /// When the run (not the attempt) started.
    pub started: Instant,
    /// The same, in milliseconds since the epoch.
    pub start_time_ms: u64,
    /// Its restarts so far.
    pub restarts: Vec<Restart>,
    /// Each operator's module as the run started it, by uid.
    pub modules: BTreeMap<String, ModuleInfo>,
    /// Guest traps and interruptions that failed an attempt, by operator
    /// subtask.
    pub guest_failures: BTreeMap<(String, u32), (u64, u64)>,
}

impl RunInfo {
    pub(super) fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}
