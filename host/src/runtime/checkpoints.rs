//! The coordinator's checkpoint edge: feeds task events and time into the
//! pure [`Protocol`], carries out its commands (triggers to sources,
//! `_metadata` writes, completion notices to every task), keeps completed
//! checkpoints to `retained`, and writes the job's final checkpoint. Takes
//! savepoints on request: the same protocol, with the state sent to the
//! savepoint's own directory and the request answered when it completes.
//!
//! Lives across restarts of one `host run`: ids keep growing and retention
//! keeps counting, while the [`Protocol`] is rebuilt for each attempt.

use super::events::{Control, TaskId};
use crate::checkpoint::metadata::{CheckpointMetadata, OperatorState, SinkState, StateHandle, TaskSnapshot};
use crate::checkpoint::protocol::{CheckpointId, Command, Protocol, ProtocolConfig};
use crate::checkpoint::savepoint::{SavepointTargets, new_savepoint_uri};
use crate::checkpoint::storage::CheckpointStorage;
use crate::config::{CheckpointSettings, StorageSettings};
use crate::control::{SavepointDone, SavepointRequest, SwapDone};
use crate::runtime::swap::{SwapTarget, SwapTargets};
use crate::wasm::OperatorModule;
use crossbeam_channel::Sender;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    storage: Arc<CheckpointStorage>,
    job: String,
    max_parallelism: u32,
    /// Highest id used or seen in storage: the next trigger takes the one after.
    highest_id: CheckpointId,
    /// Completed by this run, oldest first, with the shared files each
    /// uses (retention deletes only these: a checkpoint restored from but
    /// not created is never deleted).
    created: VecDeque<(CheckpointId, Vec<String>)>,
    /// Shared files of the checkpoint the run started from: never deleted.
    pinned: HashSet<String>,
    /// Savepoints in flight, which uploaders consult.
    savepoints: Arc<SavepointTargets>,
    /// Module swaps in flight, which operator subtasks consult.
    swaps: Arc<SwapTargets>,
    /// Statistics.
    pub stats: CheckpointStats,
}

/// Who is waiting for a savepoint's outcome.
pub type SavepointReply = Sender<Result<SavepointDone, String>>;

/// Who is waiting for a module swap's outcome.
pub type SwapReply = Sender<Result<SwapDone, String>>;

/// A savepoint asked for and not finished yet.
struct PendingSavepoint {
    request: SavepointRequest,
    /// None for a swap's savepoint (the swap answers).
    reply: Option<SavepointReply>,
    storage: Arc<CheckpointStorage>,
    /// Set once triggered.
    id: Option<CheckpointId>,
    /// The module swap it carries.
    swap: Option<PendingSwap>,
}

/// A module swap: its savepoint, then every subtask's preparation.
struct PendingSwap {
    target: SwapTarget,
    subtasks: u32,
    reply: SwapReply,
    /// Set once triggered.
    id: Option<CheckpointId>,
    /// Per subtask that reported: when its barrier came, or why it failed.
    prepared: Vec<Result<Instant, String>>,
    /// The savepoint, once complete.
    done: Option<SavepointDone>,
    /// Set once committed: the pause it caused.
    pause_ms: Option<f64>,
}

/// One attempt's view: the protocol and the tasks to talk to.
pub struct Attempt<'a> {
    cp: &'a mut Checkpoints,
    protocol: Protocol<TaskSnapshot>,
    tasks: HashMap<String, TaskId>,
    parallelism: HashMap<String, u32>,
    sources: Vec<(String, Sender<Control>)>,
    everyone: Vec<Sender<Control>>,
    triggered: HashMap<CheckpointId, (Instant, i64)>,
    /// Files stored for checkpoints in flight, to delete if they abort.
    stored: HashMap<CheckpointId, Vec<String>>,
    /// Shared files of checkpoints whose metadata was written.
    shared_of: HashMap<CheckpointId, Vec<String>>,
    /// Set once a source finished: no more triggers.
    stopped: bool,
    started: Instant,
    savepoint: Option<PendingSavepoint>,
    /// The savepoint the job stopped with.
    stopped_with: Option<SavepointDone>,
    /// A triggered module swap, until it commits or aborts.
    swap: Option<PendingSwap>,
    /// Swaps committed: (operator uid, new module), for the coordinator.
    committed: Vec<(String, OperatorModule)>,
}

impl Checkpoints {
    /// Checkpointing for job `job` into `storage`, numbering after
    /// `highest_id`.
    pub fn new(
        settings: CheckpointSettings,
        storage: Arc<CheckpointStorage>,
        job: &str,
        max_parallelism: u32,
        highest_id: CheckpointId,
        pinned: HashSet<String>,
    ) -> Self {
        Checkpoints {
            settings,
            storage,
            job: job.to_string(),
            max_parallelism,
            highest_id,
            created: VecDeque::new(),
            pinned,
            savepoints: Arc::default(),
            swaps: Arc::default(),
            stats: CheckpointStats::default(),
        }
    }

    /// Savepoints in flight, for the uploaders.
    pub fn savepoints(&self) -> &Arc<SavepointTargets> {
        &self.savepoints
    }

    /// Module swaps in flight, for operator subtasks.
    pub fn swaps(&self) -> &Arc<SwapTargets> {
        &self.swaps
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
    /// checkpoint); `sources` receive triggers, `everyone` completion notices.
    pub fn attempt(
        &mut self,
        tasks: Vec<(TaskId, u32)>,
        sources: Vec<(String, Sender<Control>)>,
        everyone: Vec<Sender<Control>>,
    ) -> Attempt<'_> {
        let config = ProtocolConfig {
            interval_ms: self.settings.interval.as_millis() as u64,
            min_pause_ms: self.settings.min_pause.as_millis() as u64,
            timeout_ms: self.settings.timeout.as_millis() as u64,
            tolerable_failures: self.settings.tolerable_failures,
        };
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
            cp: self,
        }
    }

    /// Deletes checkpoints beyond `retained`: the checkpoint first
    /// (`_metadata` first), then the shared files no kept checkpoint uses,
    /// so a deletion cut short leaves unused files, never a checkpoint
    /// pointing at a missing one.
    fn retain(&mut self) {
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
    }
}

impl Attempt<'_> {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Time passed: triggers and timeouts. Returns a reason if the job must
    /// fail (too many checkpoints failed).
    pub fn tick(&mut self) -> Result<(), String> {
        if self.stopped {
            return Ok(());
        }
        let now = self.now_ms();
        let commands = self.protocol.tick(now);
        self.execute(commands)
    }

    /// Asks for a savepoint into `request.dir` (else `default_dir`), with
    /// the S3 options of `storage`; `reply` hears how it went.
    pub fn request_savepoint(
        &mut self,
        request: SavepointRequest,
        default_dir: Option<&str>,
        storage: &StorageSettings,
        reply: SavepointReply,
    ) {
        if let Err(why) = self.plan_savepoint(request, default_dir, storage, None) {
            let _ = reply.send(Err(why));
        } else if let Some(p) = self.savepoint.as_mut() {
            p.reply = Some(reply);
        }
    }

    /// Asks for a module swap of operator `uid` (with `subtasks` subtasks)
    /// to `module`, riding on a savepoint into `dir` (else `default_dir`).
    #[allow(clippy::too_many_arguments)]
    pub fn request_swap(
        &mut self,
        uid: &str,
        module: OperatorModule,
        subtasks: u32,
        dir: Option<String>,
        default_dir: Option<&str>,
        storage: &StorageSettings,
        reply: SwapReply,
    ) {
        if self.swap.is_some() {
            let _ = reply.send(Err("a module swap is already in progress".into()));
            return;
        }
        let swap = PendingSwap {
            target: SwapTarget { uid: uid.into(), module },
            subtasks,
            reply: reply.clone(),
            id: None,
            prepared: Vec::new(),
            done: None,
            pause_ms: None,
        };
        let request = SavepointRequest { dir, stop: false, drain: false };
        if let Err(why) = self.plan_savepoint(request, default_dir, storage, Some(swap)) {
            let _ = reply.send(Err(why));
        }
    }

    fn plan_savepoint(
        &mut self,
        request: SavepointRequest,
        default_dir: Option<&str>,
        storage: &StorageSettings,
        swap: Option<PendingSwap>,
    ) -> Result<(), String> {
        if self.stopped {
            return Err("the job's input is exhausted and it is finishing".into());
        }
        if self.savepoint.is_some() {
            return Err("a savepoint is already in progress".into());
        }
        let Some(dir) = request.dir.as_deref().or(default_dir) else {
            return Err("no savepoint directory: pass --dir, or set state.savepoints.dir".into());
        };
        let uri = new_savepoint_uri(dir, &self.cp.job, super::task::now_ms());
        let target = Arc::new(CheckpointStorage::open_savepoint(storage, &uri).map_err(|e| e.to_string())?);
        tracing::info!(savepoint = %uri, stop = request.stop, drain = request.drain, swap = swap.is_some(), "savepoint requested");
        self.savepoint = Some(PendingSavepoint { request, reply: None, storage: target, id: None, swap });
        self.protocol.request_savepoint();
        Ok(())
    }

    /// Swaps committed since the last call: (operator uid, new module).
    pub fn take_committed_swaps(&mut self) -> Vec<(String, OperatorModule)> {
        std::mem::take(&mut self.committed)
    }

    /// Subtask `task` prepared module swap `id` (or failed to).
    pub fn on_swap_prepared(&mut self, task: &TaskId, id: CheckpointId, result: Result<Instant, String>) {
        let Some(swap) = self.swap.as_mut().filter(|s| s.id == Some(id)) else { return };
        if let Err(e) = &result {
            tracing::warn!(task = %task, "module swap failed: {e}");
        }
        swap.prepared.push(result.map_err(|e| format!("subtask {}: {e}", task.subtask)));
        self.settle_swap();
    }

    /// Commits the swap when its savepoint completed and every subtask
    /// prepared; aborts it when any subtask failed.
    fn settle_swap(&mut self) {
        let Some(swap) = self.swap.as_mut() else { return };
        let id = swap.id.expect("triggered");
        if swap.pause_ms.is_none() {
            // Every subtask must be waiting before any is told: the others
            // may still be opening the new module.
            if swap.prepared.len() < swap.subtasks as usize {
                return;
            }
            let failed: Vec<String> = swap.prepared.iter().filter_map(|r| r.as_ref().err().cloned()).collect();
            if !failed.is_empty() {
                let swap = self.swap.take().expect("checked");
                self.abort_swap(swap, format!("the new module was refused: {}", failed.join("; ")));
                return;
            }
            // The commit does not wait for the savepoint: a failed swap rolls
            // back to each subtask's frozen view, and the savepoint is the
            // user's way back later. The pause is the preparation only.
            self.cp.swaps.remove(id);
            for tx in &self.everyone {
                let _ = tx.send(Control::SwapCommit(id));
            }
            let first =
                swap.prepared.iter().filter_map(|r| r.as_ref().ok()).min().copied().unwrap_or_else(Instant::now);
            let pause_ms = first.elapsed().as_secs_f64() * 1e3;
            swap.pause_ms = Some(pause_ms);
            tracing::info!(operator = %swap.target.uid, pause_ms, "module swapped");
            self.committed.push((swap.target.uid.to_string(), swap.target.module.clone()));
        }
        if let (Some(done), Some(pause_ms)) = (swap.done.clone(), swap.pause_ms) {
            let swap = self.swap.take().expect("checked");
            let _ = swap.reply.send(Ok(SwapDone { savepoint: done, pause_ms }));
        }
    }

    fn abort_swap(&mut self, swap: PendingSwap, reason: String) {
        if swap.pause_ms.is_some() {
            // Committed already: the new module runs; only the savepoint
            // of the state before it failed.
            let _ = swap.reply.send(Err(format!(
                "'{}' now runs the new module, but the savepoint of the state before the swap failed: {reason}",
                swap.target.uid
            )));
            return;
        }
        if let Some(id) = swap.id {
            self.cp.swaps.remove(id);
            for tx in &self.everyone {
                let _ = tx.send(Control::SwapAbort(id));
            }
        }
        tracing::warn!(operator = %swap.target.uid, "module swap rolled back: {reason}");
        let _ = swap.reply.send(Err(format!("{reason}; '{}' keeps running its old module", swap.target.uid)));
    }

    /// The savepoint the job stopped with, once it completed.
    pub fn stopped_with(&self) -> Option<&SavepointDone> {
        self.stopped_with.as_ref()
    }

    /// The pending savepoint if `id` is it.
    fn savepoint_of(&self, id: CheckpointId) -> Option<&PendingSavepoint> {
        self.savepoint.as_ref().filter(|p| p.id == Some(id))
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
        sync: Duration,
    ) -> Result<(), String> {
        if let TaskSnapshot::Operator(handle) = &snapshot {
            self.cp.stats.sync_pauses.push(sync);
            self.stored.entry(id).or_default().extend(handle.paths().iter().map(|p| p.to_string()));
        }
        let commands = self.protocol.on_ack(id, &task.to_string(), snapshot);
        self.execute(commands)
    }

    /// A task declined checkpoint `id`.
    pub fn on_decline(&mut self, task: &TaskId, id: CheckpointId, reason: &str) -> Result<(), String> {
        let now = self.now_ms();
        if self.stopped {
            // The input is done and tasks are ending: the final checkpoint
            // covers everything, so a checkpoint lost now is no failure.
            if self.protocol.in_flight() == Some(id) {
                self.protocol.cancel_in_flight(now);
                tracing::debug!(checkpoint = id, task = %task, "abandoned while the job ends: {reason}");
                self.discard(id);
                if self.savepoint_of(id).is_some() {
                    self.fail_savepoint(format!("declined by {task}: {reason}"));
                }
            }
            return Ok(());
        }
        let commands = self.protocol.on_decline(id, &task.to_string(), reason, now);
        self.execute(commands)
    }

    /// Source `task` finished: nothing more is triggered, and a checkpoint
    /// it never saw cannot complete.
    pub fn on_source_finished(&mut self, task: &TaskId) {
        self.stopped = true;
        if self.protocol.awaits(&task.to_string()) {
            let now = self.now_ms();
            if let Some(id) = self.protocol.cancel_in_flight(now) {
                tracing::debug!(checkpoint = id, "abandoned: a source finished before its barrier");
                self.discard(id);
            }
        }
        // A savepoint not triggered, or abandoned above, cannot complete.
        let in_flight = self.protocol.in_flight();
        if self.savepoint.as_ref().is_some_and(|p| p.id.is_none() || p.id != in_flight) {
            self.fail_savepoint("the job's input ended before the savepoint was taken".into());
        }
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

    /// Whether a checkpoint is in flight.
    pub fn in_flight(&self) -> bool {
        self.protocol.in_flight().is_some()
    }

    fn execute(&mut self, commands: Vec<Command<TaskSnapshot>>) -> Result<(), String> {
        let mut queue: VecDeque<_> = commands.into();
        while let Some(c) = queue.pop_front() {
            match c {
                Command::Trigger { id, savepoint } => {
                    self.cp.highest_id = self.cp.highest_id.max(id);
                    self.triggered.insert(id, (Instant::now(), super::task::now_ms()));
                    let mut control = Control::Trigger(id);
                    if let Some(p) = self.savepoint.as_mut().filter(|_| savepoint) {
                        p.id = Some(id);
                        self.cp.savepoints.insert(id, p.storage.clone());
                        if p.request.stop {
                            control = Control::Stop { id, drain: p.request.drain };
                        }
                        if let Some(mut swap) = p.swap.take() {
                            swap.id = Some(id);
                            self.cp.swaps.insert(id, swap.target.clone());
                            self.swap = Some(swap);
                        }
                    }
                    tracing::debug!(checkpoint = id, savepoint, "triggered");
                    for (_, tx) in &self.sources {
                        let _ = tx.send(control);
                    }
                }
                Command::WriteMetadata { id, handles } if self.savepoint_of(id).is_some() => {
                    let mut metadata = self.metadata(id, handles, false);
                    metadata.savepoint = true;
                    let p = self.savepoint_of(id).expect("checked");
                    let result = p.storage.write_metadata(id, metadata.encode()).map_err(|e| e.to_string());
                    if result.is_ok() {
                        let done = SavepointDone {
                            id,
                            location: p.storage.display().to_string(),
                            size: metadata.state_size(),
                            duration_ms: metadata.duration_ms,
                            stopped: p.request.stop,
                        };
                        tracing::info!(
                            savepoint = %done.location,
                            size = %human_bytes(done.size),
                            duration_ms = done.duration_ms,
                            "savepoint complete"
                        );
                        if done.stopped {
                            // Sources end on the completion notice: nothing
                            // is triggered after the savepoint.
                            self.stopped = true;
                            self.stopped_with = Some(done.clone());
                        }
                        let p = self.savepoint.take().expect("checked");
                        self.cp.savepoints.remove(id);
                        if let Some(reply) = p.reply {
                            let _ = reply.send(Ok(done.clone()));
                        }
                        if let Some(swap) = self.swap.as_mut().filter(|s| s.id == Some(id)) {
                            swap.done = Some(done);
                            self.settle_swap();
                        }
                    }
                    let now = self.now_ms();
                    queue.extend(self.protocol.on_metadata_written(id, result, now));
                }
                Command::WriteMetadata { id, handles } => {
                    let metadata = self.metadata(id, handles, false);
                    let result = self.cp.storage.write_metadata(id, metadata.encode()).map_err(|e| e.to_string());
                    if result.is_ok() {
                        crate::crash_point::crash_point("checkpoint.metadata-written");
                        self.shared_of.insert(id, shared_files(&metadata));
                        self.cp.stats.sizes.push(metadata.state_size());
                        self.cp.stats.durations.push(Duration::from_millis(metadata.duration_ms));
                        tracing::info!(
                            checkpoint = id,
                            size = %human_bytes(metadata.state_size()),
                            duration_ms = metadata.duration_ms,
                            "checkpoint complete"
                        );
                    }
                    let now = self.now_ms();
                    queue.extend(self.protocol.on_metadata_written(id, result, now));
                }
                Command::NotifyComplete { id } => {
                    self.stored.retain(|&c, _| c > id);
                    self.triggered.retain(|&c, _| c > id);
                    // A savepoint is not one of the job's checkpoints:
                    // retention never deletes it.
                    if let Some(shared) = self.shared_of.remove(&id) {
                        self.cp.stats.completed += 1;
                        self.cp.stats.latest = Some(id);
                        self.cp.created.push_back((id, shared));
                    }
                    for tx in &self.everyone {
                        let _ = tx.send(Control::Complete(id));
                    }
                    self.cp.retain();
                }
                Command::Abort { id, reason } if self.savepoint_of(id).is_some() => {
                    self.discard(id);
                    self.fail_savepoint(reason);
                }
                Command::Abort { id, reason } => {
                    self.cp.stats.failed += 1;
                    tracing::warn!(checkpoint = id, "checkpoint failed: {reason}");
                    if !reason.contains("already exists") {
                        self.discard(id);
                    }
                }
                Command::FailJob { reason } => return Err(reason),
            }
        }
        Ok(())
    }

    /// Answers the pending savepoint with `reason`; sources waiting on it
    /// to stop carry on.
    fn fail_savepoint(&mut self, reason: String) {
        let Some(mut p) = self.savepoint.take() else { return };
        tracing::warn!(savepoint = %p.storage.display(), "savepoint failed: {reason}");
        if let Some(id) = p.id {
            self.cp.savepoints.remove(id);
            if p.request.stop {
                for (_, tx) in &self.sources {
                    let _ = tx.send(Control::Resume);
                }
            }
        }
        let swap = p.swap.take().or_else(|| self.swap.take_if(|s| s.id.is_some() && s.id == p.id));
        if let Some(swap) = swap {
            self.abort_swap(swap, format!("its savepoint failed: {reason}"));
        }
        if let Some(reply) = p.reply {
            let _ = reply.send(Err(reason));
        }
    }

    /// Deletes what this run stored for an abandoned checkpoint or savepoint.
    fn discard(&mut self, id: CheckpointId) {
        self.triggered.remove(&id);
        let storage = self.savepoint_of(id).map_or_else(|| self.cp.storage.clone(), |p| p.storage.clone());
        if self.stored.remove(&id).is_some()
            && let Err(e) = storage.delete_checkpoint(id)
        {
            tracing::debug!(checkpoint = id, error = %e, "cannot delete the files of a failed checkpoint");
        }
    }

    fn metadata(
        &self,
        id: CheckpointId,
        handles: BTreeMap<String, TaskSnapshot>,
        finished: bool,
    ) -> CheckpointMetadata {
        let (at, at_ms) = self.triggered.get(&id).copied().unwrap_or((Instant::now(), super::task::now_ms()));
        let mut operators: BTreeMap<String, Vec<(u32, StateHandle)>> = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut sinks = BTreeMap::new();
        for (name, snapshot) in handles {
            let Some(task) = self.tasks.get(&name) else { continue };
            match snapshot {
                TaskSnapshot::Operator(h) => {
                    operators.entry(task.node.to_string()).or_default().push((task.subtask, h))
                }
                TaskSnapshot::Source(offset) => {
                    sources.insert(task.node.to_string(), offset);
                }
                TaskSnapshot::Sink(Some(state)) => {
                    sinks.insert(task.node.to_string(), state);
                }
                TaskSnapshot::Sink(None) => {}
            }
        }
        let operators = operators
            .into_iter()
            .map(|(uid, mut subtasks)| {
                subtasks.sort_by_key(|(i, _)| *i);
                let parallelism = self.parallelism.get(&uid).copied().unwrap_or(subtasks.len() as u32);
                (uid, OperatorState { parallelism, subtasks: subtasks.into_iter().map(|(_, h)| h).collect() })
            })
            .collect();
        CheckpointMetadata {
            job: self.cp.job.clone(),
            id,
            triggered_at_ms: at_ms,
            duration_ms: at.elapsed().as_millis() as u64,
            finished,
            savepoint: false,
            max_parallelism: self.cp.max_parallelism,
            operators,
            sources,
            sinks,
        }
    }

    /// The job's input is fully processed and every sink is waiting with
    /// `sinks`: records the end as a final checkpoint, so a crash from here
    /// on only publishes what the sinks hold. Retries a failing store a few
    /// times before giving up.
    pub fn finish(&mut self, sinks: BTreeMap<String, SinkState>) -> Result<CheckpointId, String> {
        let id = self.protocol.next_id().max(self.cp.highest_id + 1);
        self.cp.highest_id = id;
        let mut metadata = self.metadata(id, BTreeMap::new(), true);
        metadata.sinks = sinks;
        let mut last = String::new();
        for attempt in 0..5 {
            if attempt > 0 {
                std::thread::sleep(Duration::from_secs(1));
            }
            match self.cp.storage.write_metadata(id, metadata.encode()) {
                Ok(()) => {
                    tracing::info!(checkpoint = id, "final checkpoint complete");
                    self.cp.created.push_back((id, Vec::new()));
                    self.cp.stats.latest = Some(id);
                    for tx in &self.everyone {
                        let _ = tx.send(Control::Complete(id));
                    }
                    self.cp.retain();
                    return Ok(id);
                }
                Err(e) => {
                    tracing::warn!(checkpoint = id, error = %e, "cannot write the final checkpoint");
                    last = e.to_string();
                }
            }
        }
        Err(format!("cannot write the final checkpoint {id}: {last}"))
    }
}

/// The shared files (incremental RocksDB state) `metadata` uses.
pub fn shared_files(metadata: &CheckpointMetadata) -> Vec<String> {
    metadata.files().filter(|p| p.starts_with("shared/")).map(str::to_string).collect()
}

/// "1.5 MiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}
