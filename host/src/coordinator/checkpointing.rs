//! The coordinator's checkpoint edge: feeds task events and time into the
//! pure [`Protocol`], carries out its commands (barriers into the sources,
//! `_metadata` writes, completion notices to every task), keeps completed
//! checkpoints to `retained`, and writes the job's final checkpoint.
//! Savepoints and module swaps ride on the same protocol ([`super::savepoints`]);
//! the modules its checkpoints name are kept in [`swapped`].
//!
//! [`Checkpoints`] lives for a whole `host run` (ids keep growing and
//! retention keeps counting); each attempt gets an [`Attempt`] with a fresh
//! [`Protocol`] and the channels to that attempt's tasks.

use super::history::History;
use crate::api::{CheckpointMetrics, SavepointDone};
use crate::checkpoint::metadata::{CheckpointMetadata, RecordedModule, SwappedModule};
use crate::checkpoint::protocol::{CheckpointId, Command, Protocol, ProtocolConfig};
use crate::checkpoint::storage::{CheckpointStorage, LogPosition, StorageError};
use crate::checkpoint::upload::CheckpointError;
use crate::clock::now_ms;
use crate::config::settings::DEFAULT_CHECKPOINT_TIMEOUT;
use crate::config::units::human_bytes;
use crate::config::{CheckpointMode, CheckpointSettings};
use crate::fault::{Classify, Domain, RetryHint};
use crate::runtime::TaskId;
use crate::runtime::events::{AckTiming, TaskSnapshot};
use crate::runtime::message::{Barrier, BarrierKind, Control, RescaleOrder, ShadowOrder};
use crate::wasm::OperatorModule;
use crossbeam_channel::Sender;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

mod finished;
mod metadata;
mod orders;
mod pending;
mod savepoints;
mod swapped;

use pending::{PendingSavepoint, PendingSwap};
pub use pending::{SavepointReply, SwapReply};

/// Why checkpointing fails the job.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CheckpointingError {
    /// More checkpoints failed in a row than `tolerable_failures` allows.
    #[error("{reason}")]
    TooManyFailures {
        /// The count and the last failure.
        reason: String,
    },
    /// Another run took the job over (cluster mode); this one must stop.
    #[error("{0}")]
    Fenced(StorageError),
    /// The final checkpoint, which ends the job, could not be written.
    #[error("cannot write the final checkpoint {id}: {cause}")]
    FinalCheckpoint {
        /// Its id.
        id: CheckpointId,
        /// Why.
        cause: StorageError,
    },
}

impl Classify for CheckpointingError {
    fn domain(&self) -> Domain {
        match self {
            CheckpointingError::TooManyFailures { .. } => Domain::External,
            CheckpointingError::Fenced(cause) | CheckpointingError::FinalCheckpoint { cause, .. } => cause.domain(),
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            // As Flink: past the tolerable failures, the job restarts from
            // its latest checkpoint.
            CheckpointingError::TooManyFailures { .. } => RetryHint::Restart,
            CheckpointingError::Fenced(cause) | CheckpointingError::FinalCheckpoint { cause, .. } => cause.retry(),
        }
    }
}

/// Statistics of the checkpoints of one run, for logs and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct CheckpointStats {
    /// Completed checkpoints.
    pub completed: u64,
    /// Failed (aborted) checkpoints.
    pub failed: u64,
    /// Synchronous pauses of operator subtasks, one per acknowledgement.
    pub sync_pauses: Vec<Duration>,
    /// Trigger-to-complete durations.
    pub durations: Vec<Duration>,
    /// State bytes per completed checkpoint.
    pub sizes: Vec<u64>,
    /// The latest completed checkpoint.
    pub latest: Option<CheckpointId>,
}

/// State kept across the attempts of one run.
pub struct Checkpoints {
    settings: CheckpointSettings,
    /// Periodic checkpoints are on; without, only savepoints (and the
    /// swaps that ride on them) are taken, when asked for.
    periodic: bool,
    storage: Arc<CheckpointStorage>,
    pub(super) job: String,
    max_parallelism: u32,
    /// Highest id used or seen in storage: the next trigger takes the one after.
    highest_id: CheckpointId,
    /// Completed by this run, after those an earlier run left (`--resume`),
    /// oldest first, with their shared files: all that retention deletes.
    created: VecDeque<(CheckpointId, Vec<String>)>,
    /// The checkpoint the run started from and its shared files: never deleted.
    restored: Option<CheckpointId>,
    pinned: HashSet<String>,
    /// SHA-256 of each operator's module as the job file names it.
    job_modules: BTreeMap<String, String>,
    /// Modules swapped in, by operator uid, with the barrier each took
    /// effect at: checkpoints after it record it, so a resume runs it.
    swapped: BTreeMap<String, (CheckpointId, SwappedModule)>,
    /// The stored job-file modules of operators recording their input.
    recorded: BTreeMap<String, RecordedModule>,
    /// Whether an operator records its input beside the checkpoints
    /// (retention then deletes the recordings no kept checkpoint starts).
    pub recordings: bool,
    /// Statistics.
    pub stats: CheckpointStats,
    /// What the control API shows.
    pub history: History,
    /// Cluster mode: where the run stands in the storage's commit log.
    /// Owned here, moved on by each commit; tasks get copies by message.
    pub(super) log: Option<LogPosition>,
}

/// One attempt's view: the protocol and the tasks to talk to.
pub struct Attempt<'a> {
    pub(super) cp: &'a mut Checkpoints,
    pub(super) protocol: Protocol<TaskSnapshot>,
    pub(super) tasks: HashMap<String, TaskId>,
    pub(super) parallelism: HashMap<String, u32>,
    pub(super) sources: Vec<Sender<Control>>,
    pub(super) everyone: Vec<Sender<Control>>,
    triggered: HashMap<CheckpointId, (Instant, i64)>,
    /// Files stored for checkpoints in flight, to delete if they abort.
    pub(super) stored: HashMap<CheckpointId, Vec<String>>,
    /// Shared files of checkpoints whose metadata was written.
    shared_of: HashMap<CheckpointId, Vec<String>>,
    /// Set once every source finished, a task other than a source finished
    /// its work, or a stop completed: no more triggers ([`finished`]).
    pub(super) stopped: bool,
    started: Instant,
    /// The savepoint asked for and not finished.
    pub(super) savepoint: Option<PendingSavepoint>,
    /// The savepoint the job stopped with.
    pub(super) stopped_with: Option<SavepointDone>,
    /// A triggered module swap, until it commits or aborts.
    pub(super) swap: Option<PendingSwap>,
    /// Swaps committed: (operator uid, new module), for the coordinator.
    pub(super) committed: Vec<(String, OperatorModule)>,
    /// A rescale for the next barrier.
    pub(super) rescale: Option<Arc<RescaleOrder>>,
    /// The checkpoint whose barrier carried the latest rescale, until the
    /// coordinator takes it.
    pub(super) rescaled_at: Option<CheckpointId>,
    /// Operators rescaled while the attempt ran: (uid, from this
    /// checkpoint's barrier on, parallelism).
    rescales: Vec<(String, CheckpointId, u32)>,
    /// A shadow run to fork at the next barrier.
    pub(super) shadow: Option<Arc<ShadowOrder>>,
    /// The checkpoint whose barrier forked the latest shadow run, until the
    /// coordinator takes it.
    pub(super) shadowed_at: Option<CheckpointId>,
}

impl Checkpoints {
    /// Checkpointing for job `job` into `storage`, numbering after
    /// `highest_id`; the checkpoint `restored` from (id, shared files) is
    /// never deleted. Without `settings`, only savepoints are taken.
    pub fn new(
        settings: Option<CheckpointSettings>,
        storage: Arc<CheckpointStorage>,
        job: &str,
        max_parallelism: u32,
        highest_id: CheckpointId,
        (restored, pinned): (Option<CheckpointId>, HashSet<String>),
    ) -> Self {
        let periodic = settings.is_some();
        // A savepoint of a job without checkpointing gets the defaults'
        // timeout; nothing else of these applies to it.
        let settings = settings.unwrap_or(CheckpointSettings {
            interval: Duration::from_secs(1),
            mode: CheckpointMode::ExactlyOnce,
            timeout: DEFAULT_CHECKPOINT_TIMEOUT,
            min_pause: Duration::ZERO,
            retained: 1,
            tolerable_failures: 0,
        });
        Checkpoints {
            settings,
            periodic,
            storage,
            job: job.to_string(),
            max_parallelism,
            highest_id,
            created: VecDeque::new(),
            restored,
            pinned: pinned.clone(),
            job_modules: BTreeMap::new(),
            swapped: BTreeMap::new(),
            recorded: BTreeMap::new(),
            recordings: false,
            stats: CheckpointStats::default(),
            history: History::new(pinned.iter().cloned().collect()),
            log: None,
        }
    }

    /// Retention takes the checkpoints an earlier run left as its oldest.
    pub fn inheriting(mut self, inherited: Vec<crate::checkpoint::leftovers::Inherited>) -> Self {
        self.created.extend(inherited);
        self
    }

    /// Whether periodic checkpoints are on.
    pub fn periodic(&self) -> bool {
        self.periodic
    }

    /// Cluster mode: where the run stands in the commit log now.
    pub fn log(&self) -> Option<LogPosition> {
        self.log
    }

    /// The storage.
    pub fn storage(&self) -> &Arc<CheckpointStorage> {
        &self.storage
    }

    /// The latest checkpoint this run completed.
    pub fn latest_created(&self) -> Option<CheckpointId> {
        self.created.back().map(|(id, _)| *id)
    }

    /// Starts an attempt over `tasks` (every task acknowledges every
    /// checkpoint, each with its node's parallelism); `sources` receive
    /// triggers, `everyone` completion notices.
    pub fn attempt(
        &mut self,
        tasks: Vec<(TaskId, u32)>,
        sources: Vec<Sender<Control>>,
        everyone: Vec<Sender<Control>>,
    ) -> Attempt<'_> {
        let config = ProtocolConfig {
            interval_ms: self.periodic.then_some(self.settings.interval.as_millis() as u64),
            min_pause_ms: self.settings.min_pause.as_millis() as u64,
            timeout_ms: self.settings.timeout.as_millis() as u64,
            tolerable_failures: self.settings.tolerable_failures,
        };
        self.history.attempt_ended();
        let names: Vec<String> = tasks.iter().map(|(t, _)| t.to_string()).collect();
        let protocol = Protocol::new(config, names, Some(self.highest_id));
        Attempt {
            protocol,
            parallelism: tasks.iter().map(|(t, p)| (t.node.to_string(), *p)).collect(),
            tasks: tasks.into_iter().map(|(t, _)| (t.to_string(), t)).collect(),
            sources,
            everyone,
            triggered: HashMap::new(),
            stored: HashMap::new(),
            shared_of: HashMap::new(),
            stopped: false,
            started: Instant::now(),
            savepoint: None,
            stopped_with: None,
            swap: None,
            committed: Vec::new(),
            rescale: None,
            rescaled_at: None,
            rescales: Vec::new(),
            shadow: None,
            shadowed_at: None,
            cp: self,
        }
    }

    /// Deletes checkpoints beyond `retained`: the checkpoint first
    /// (`_metadata` first), then the shared files no kept checkpoint uses,
    /// so a deletion cut short leaves unused files, never a checkpoint
    /// pointing at a missing one.
    fn retain(&mut self) {
        let created = self.created.len();
        while self.created.len() > self.settings.retained as usize {
            let (old, shared) = self.created.pop_front().expect("longer than retained");
            if let Err(e) = self.storage.delete_checkpoint(old) {
                tracing::warn!(checkpoint = old, error = %e, "cannot delete an old checkpoint");
                continue;
            }
            tracing::debug!(checkpoint = old, "deleted (beyond retained)");
            let in_use: HashSet<&str> = self
                .created
                .iter()
                .flat_map(|(_, files)| files.iter().map(String::as_str))
                .chain(self.pinned.iter().map(String::as_str))
                .collect();
            for path in shared.iter().filter(|p| !in_use.contains(p.as_str())) {
                if let Err(e) = self.storage.delete_object(path) {
                    tracing::warn!(file = %path, error = %e, "cannot delete an unused shared file");
                }
                crate::crash_point::crash_point("retention.shared-file-deleted");
            }
        }
        // A replay starts from a kept checkpoint (the restored one too): older input is no use.
        if self.recordings
            && self.created.len() < created
            && let Some(oldest) = self.created.front().map(|(id, _)| *id).into_iter().chain(self.restored).min()
            && let Err(e) = crate::checkpoint::recording::delete_before(&self.storage, oldest)
        {
            tracing::warn!(error = %e, "cannot delete recorded input older than the checkpoints kept");
        }
    }
}

impl Attempt<'_> {
    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Time passed: triggers and timeouts.
    pub fn tick(&mut self) -> Result<(), CheckpointingError> {
        let now = self.now_ms();
        if self.stopped {
            // Nothing is triggered once the input ended. A checkpoint still
            // in flight that times out is abandoned, not failed (the final
            // checkpoint covers everything), so the job ends rather than
            // waiting for it.
            if self.protocol.timed_out(now)
                && let Some(id) = self.protocol.cancel_in_flight(now)
            {
                tracing::warn!(checkpoint = id, "abandoned while the job ends: timed out");
                self.discard(id, "abandoned while the job ends: timed out");
                if self.savepoint_of(id).is_some() {
                    self.fail_savepoint("it timed out while the job was ending".into());
                }
            }
            return Ok(());
        }
        let commands = self.protocol.tick(now);
        self.execute(commands)
    }

    /// How long the coordinator may wait for events before calling `tick`.
    pub fn poll_interval(&self) -> Duration {
        (self.cp.settings.interval / 4).clamp(Duration::from_millis(2), Duration::from_millis(100))
    }

    /// A task acknowledged checkpoint `id`.
    pub fn on_ack(
        &mut self,
        task: &TaskId,
        id: CheckpointId,
        snapshot: TaskSnapshot,
        timing: AckTiming,
    ) -> Result<(), CheckpointingError> {
        self.cp.history.acknowledged(id, task, &snapshot, timing);
        if let TaskSnapshot::Operator(handle) = &snapshot {
            self.cp.stats.sync_pauses.push(timing.sync);
            self.stored.entry(id).or_default().extend(handle.paths().iter().map(|p| p.to_string()));
        }
        let commands = self.protocol.on_ack(id, &task.to_string(), snapshot);
        self.execute(commands)
    }

    /// The barrier of checkpoint `id` carried `order`: the operator's new
    /// subtasks acknowledge every checkpoint after it, its old ones this
    /// one.
    fn rescaled(&mut self, id: CheckpointId, order: &RescaleOrder) {
        let uid = &order.uid;
        // The tasks that acknowledge from the next checkpoint on: the
        // others as before, the operator's new subtasks. Old subtasks stay
        // known by name: their part of this checkpoint is still to come.
        let mut current: Vec<String> = self
            .protocol
            .tasks()
            .filter(|name| self.tasks.get(*name).is_none_or(|t| t.node != *uid))
            .cloned()
            .collect();
        for subtask in 0..order.parallelism {
            let t = TaskId { node: uid.clone(), subtask };
            current.push(t.to_string());
            self.tasks.insert(t.to_string(), t);
        }
        self.protocol.set_tasks(current);
        self.rescales.push((uid.to_string(), id, order.parallelism));
        self.rescaled_at = Some(id);
        tracing::info!(operator = %uid, checkpoint = id, from = order.from, to = order.parallelism, "rescale barrier sent");
    }

    /// Operator `uid`'s parallelism in checkpoint `id`.
    fn parallelism_in(&self, uid: &str, id: CheckpointId) -> Option<u32> {
        let rescaled = self.rescales.iter().rev().find(|(u, since, _)| u == uid && *since < id).map(|(_, _, p)| *p);
        rescaled.or_else(|| self.parallelism.get(uid).copied())
    }

    /// A task declined checkpoint `id`.
    pub fn on_decline(
        &mut self,
        task: &TaskId,
        id: CheckpointId,
        reason: &CheckpointError,
    ) -> Result<(), CheckpointingError> {
        let now = self.now_ms();
        if self.stopped {
            // The input is done and tasks are ending: the final checkpoint
            // covers everything, so a checkpoint lost now is no failure.
            if self.protocol.in_flight() == Some(id) {
                self.protocol.cancel_in_flight(now);
                tracing::debug!(checkpoint = id, task = %task, "abandoned while the job ends: {reason}");
                self.discard(id, &format!("abandoned while the job ends: declined by {task}: {reason}"));
                if self.savepoint_of(id).is_some() {
                    self.fail_savepoint(format!("declined by {task}: {reason}"));
                }
            }
            return Ok(());
        }
        let commands = self.protocol.on_decline(id, &task.to_string(), &reason.to_string(), now);
        self.execute(commands)
    }

    /// One line for the progress display: the latest checkpoint, failures.
    pub fn status(&self) -> String {
        let s = &self.cp.stats;
        let latest = match s.latest {
            Some(id) => format!("checkpoint chk-{id} ({})", human_bytes(s.sizes.last().copied().unwrap_or(0))),
            None => "no checkpoint yet".to_string(),
        };
        match (s.failed, self.protocol.in_flight()) {
            (0, None) => latest,
            (0, Some(n)) => format!("{latest}, chk-{n} in flight"),
            (f, _) => format!("{latest}, {f} failed"),
        }
    }

    /// The counts and the latest completed checkpoint, for `GET /metrics`.
    pub fn metrics(&self) -> CheckpointMetrics {
        let s = &self.cp.stats;
        CheckpointMetrics {
            completed: s.completed,
            failed: s.failed,
            in_progress: u64::from(self.protocol.in_flight().is_some()),
            last_completed_id: s.latest,
            last_duration_ms: s.durations.last().map(|d| d.as_millis() as u64),
            last_size: s.sizes.last().copied(),
            last_incremental_size: self.cp.history.last_incremental_size(),
            last_restore_time_ms: self.cp.history.last_restore_time_ms(),
        }
    }

    /// Whether a checkpoint is in flight.
    pub fn in_flight(&self) -> bool {
        self.protocol.in_flight().is_some()
    }

    pub(super) fn send_all(&self, c: Control) {
        for tx in &self.everyone {
            let _ = tx.send(c.clone());
        }
    }

    pub(super) fn execute(&mut self, commands: Vec<Command<TaskSnapshot>>) -> Result<(), CheckpointingError> {
        let mut queue: VecDeque<_> = commands.into();
        while let Some(c) = queue.pop_front() {
            match c {
                Command::Trigger { id, savepoint } => {
                    self.cp.highest_id = self.cp.highest_id.max(id);
                    self.triggered.insert(id, (Instant::now(), now_ms()));
                    // Finished sources acknowledge through the protocol, not as tasks.
                    let acks = self.protocol.tasks().filter(|t| !self.protocol.has_finished(t)).count();
                    self.cp.history.triggered(id, savepoint, acks as u32);
                    let kind = if savepoint { self.savepoint_barrier(id) } else { BarrierKind::Checkpoint };
                    tracing::debug!(checkpoint = id, savepoint, "triggered");
                    let rescale = self.rescale.take();
                    let shadow = self.shadow.take();
                    if shadow.is_some() {
                        self.shadowed_at = Some(id);
                    }
                    let barrier = Arc::new(Barrier { id, kind, rescale: rescale.clone(), shadow });
                    for tx in &self.sources {
                        let _ = tx.send(Control::Trigger(barrier.clone()));
                    }
                    drop(barrier);
                    if let Some(order) = rescale {
                        self.rescaled(id, &order);
                    }
                }
                Command::WriteMetadata { id, handles } if self.savepoint_of(id).is_some() => {
                    let metadata = CheckpointMetadata {
                        savepoint: true,
                        swapped: BTreeMap::new(),
                        recorded: BTreeMap::new(),
                        ..self.metadata(id, handles, false)
                    };
                    let storage = self.savepoint_of(id).expect("checked").storage.clone();
                    let result = storage.write_metadata(id, metadata.encode(), None);
                    if result.is_ok() {
                        crate::crash_point::crash_point("savepoint.committed");
                        self.cp.history.completed(id, storage.display().to_string());
                        self.savepoint_complete(id, &storage, &metadata);
                    }
                    let now = self.now_ms();
                    queue.extend(self.protocol.on_metadata_written(id, result, now));
                }
                Command::WriteMetadata { id, handles } => {
                    let metadata = self.metadata(id, handles, false);
                    let result = self.cp.storage.write_metadata(id, metadata.encode(), self.cp.log.as_mut());
                    match &result {
                        Ok(()) => {
                            crate::crash_point::crash_point("checkpoint.metadata-written");
                            self.shared_of.insert(id, metadata.shared_files());
                            self.cp.stats.sizes.push(metadata.state_size());
                            self.cp.stats.durations.push(Duration::from_millis(metadata.duration_ms));
                            self.cp.history.completed(id, self.cp.storage.checkpoint_location(id));
                            let size = human_bytes(metadata.state_size());
                            tracing::info!(checkpoint = id, %size, duration_ms = metadata.duration_ms, "checkpoint complete");
                        }
                        // Another run committed this id: not ours to delete.
                        Err(StorageError::AlreadyCommitted { .. }) => _ = self.stored.remove(&id),
                        Err(_) => {}
                    }
                    if let Err(cause @ StorageError::Fenced { .. }) = result {
                        self.discard(id, "fenced");
                        return Err(CheckpointingError::Fenced(cause));
                    }
                    let now = self.now_ms();
                    queue.extend(self.protocol.on_metadata_written(id, result, now));
                }
                Command::NotifyComplete { id } => {
                    self.stored.retain(|&c, _| c > id);
                    self.triggered.retain(|&c, _| c > id);
                    // A savepoint is not a checkpoint: retention never deletes it, and
                    // sinks publish only at what a run restarts from (a checkpoint, or
                    // the savepoint the job stops with), not at one the job goes on from.
                    let checkpoint = self.shared_of.remove(&id);
                    if checkpoint.is_some() || self.stopped_with.as_ref().is_some_and(|s| s.id == id) {
                        self.send_all(Control::Complete { id, log: self.cp.log });
                    }
                    if let Some(shared) = checkpoint {
                        self.cp.stats.completed += 1;
                        self.cp.stats.latest = Some(id);
                        self.cp.created.push_back((id, shared));
                    }
                    self.cp.retain();
                }
                Command::Abort { id, reason } if self.savepoint_of(id).is_some() => {
                    self.discard(id, &reason);
                    self.fail_savepoint(reason);
                }
                Command::Abort { id, reason } => {
                    self.cp.stats.failed += 1;
                    tracing::warn!(checkpoint = id, "checkpoint failed: {reason}");
                    self.discard(id, &reason);
                }
                Command::FailJob { reason } => return Err(CheckpointingError::TooManyFailures { reason }),
            }
        }
        Ok(())
    }

    /// Deletes what this run stored for an abandoned checkpoint or savepoint.
    pub(super) fn discard(&mut self, id: CheckpointId, reason: &str) {
        self.cp.history.failed(id, reason);
        self.triggered.remove(&id);
        let storage = self.savepoint_of(id).map_or_else(|| self.cp.storage.clone(), |p| p.storage.clone());
        if self.stored.remove(&id).is_some()
            && let Err(e) = storage.delete_checkpoint(id)
        {
            tracing::debug!(checkpoint = id, error = %e, "cannot delete the files of a failed checkpoint");
        }
    }
}
