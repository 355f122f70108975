//! The coordinator (the JobManager role): loads modules, builds the task
//! graph, starts one thread per task, follows their events, drives
//! checkpoints, cancels every task when one fails, restarts the job from
//! its latest checkpoint as the restart strategy allows, answers the
//! control API (status, savepoint, stop, cancel), and reports the outcome.

use super::batch::Message;
use super::checkpoints::{CheckpointStats, Checkpoints, human_bytes, shared_files};
use super::events::{Control, Counters, TaskError, TaskEvent, TaskId};
use super::inputs::Alignment;
use super::progress::Progress;
use super::router::{Edge, Router};
use super::task::{Inputs, OperatorRestore, OperatorTask, Reporter};
use crate::checkpoint::metadata::SinkState;
use crate::checkpoint::restore::{self, RestoreError, Restored};
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::uploader::Uploader;
use crate::config::{CheckpointMode, LoadedJob, Partition, RestartStrategy, SinkKind, SourceKind};
use crate::connectors::sink::SinkTask;
use crate::connectors::{self, SourceContext};
use crate::control::server::ControlServer;
use crate::control::{NodeStatus, Request, SavepointDone, Status};
use crate::wasm::engine::{EpochTicker, new_engine};
use crate::wasm::{Limits, ModuleLoader, OperatorModule, WasmError};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a job did not complete.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum JobError {
    /// A module could not be loaded.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// A task failed; this is the first, root failure.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// The engine could not start.
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
    /// Checkpoint storage failed outside a checkpoint (opening, listing).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The checkpoint to restore from cannot be used.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// The job cannot start as asked.
    #[error("{0}")]
    Start(String),
    /// Too many checkpoints failed in a row.
    #[error("{0}")]
    Checkpoints(String),
    /// Cancelled through the control API (`host cancel`).
    #[error("cancelled on request (host cancel)")]
    Cancelled,
    /// The restart strategy gave up.
    #[error("{cause}\n(gave up after {restarts} restart(s), restart-strategy.attempts = {attempts})")]
    RestartsExhausted {
        /// The last failure.
        cause: Box<JobError>,
        /// Restarts made.
        restarts: u32,
        /// Allowed.
        attempts: u32,
    },
}

/// Where a run starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StartFrom {
    /// The beginning (refused if the job already has checkpoints in a
    /// durable directory, which a fresh run would collide with).
    #[default]
    Beginning,
    /// The latest usable checkpoint of the job (`--resume`); the
    /// beginning if it has none.
    Latest,
    /// A given checkpoint (`--from-checkpoint <uri>`).
    Checkpoint {
        /// `<dir>/<job>/chk-<n>`.
        uri: String,
        /// State of operators the job no longer has is dropped, not refused.
        allow_non_restored_state: bool,
    },
    /// A savepoint (`--from-savepoint <uri>`).
    Savepoint {
        /// The savepoint's directory.
        uri: String,
        /// State of operators the job no longer has is dropped, not refused.
        allow_non_restored_state: bool,
    },
}

impl StartFrom {
    fn allows_non_restored_state(&self) -> bool {
        matches!(
            self,
            StartFrom::Checkpoint { allow_non_restored_state: true, .. }
                | StartFrom::Savepoint { allow_non_restored_state: true, .. }
        )
    }
}

/// Per-node outcome.
#[derive(Debug, Clone)]
pub struct NodeReport {
    /// Source id, operator uid or sink id.
    pub id: String,
    /// "source", "operator" or "sink".
    pub role: &'static str,
    /// Subtasks.
    pub parallelism: u32,
    /// Summed counters.
    pub counters: Counters,
}

/// The outcome of a completed job.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Job name.
    pub name: String,
    /// Nodes in graph order.
    pub nodes: Vec<NodeReport>,
    /// Wall time from start to the last task's end.
    pub elapsed: Duration,
    /// Time from start until every module was loaded and tasks started.
    pub startup: Duration,
    /// Restarts after failures.
    pub restarts: u32,
    /// The checkpoint the run started from, if any.
    pub restored_from: Option<String>,
    /// Checkpoint statistics (empty without checkpointing).
    pub checkpoints: CheckpointStats,
    /// The job had finished in an earlier run: nothing ran.
    pub already_finished: bool,
    /// The job stopped with this savepoint (`host savepoint --stop`).
    pub stopped_with: Option<SavepointDone>,
}

impl JobReport {
    /// The counters of node `id`.
    pub fn node(&self, id: &str) -> Option<&NodeReport> {
        self.nodes.iter().find(|n| n.id == id)
    }
}

/// One input channel of a task and whether its edge is broadcast.
type InputChannel = (Receiver<Message>, bool);

struct Node {
    id: Arc<str>,
    role: &'static str,
    parallelism: u32,
}

/// Runs a loaded job to completion, from where `start` says.
pub fn run_job(job: &LoadedJob, start: &StartFrom) -> Result<JobReport, JobError> {
    let started = Instant::now();
    let spec = &job.spec;
    let settings = &job.settings;
    for w in &settings.warnings {
        tracing::warn!(job = %spec.name, "{w}");
    }
    // First, so a second run of the same job is refused before it touches
    // anything.
    let (requests_tx, requests) = unbounded::<Request>();
    let _control = ControlServer::start(&spec.name, requests_tx).map_err(|e| JobError::Start(e.to_string()))?;

    // Storage and the checkpoint to start from, before anything is compiled:
    // a bad directory or checkpoint is reported at once.
    let wants_restore = *start != StartFrom::Beginning;
    let storage = if settings.checkpointing.is_some() || wants_restore {
        if wants_restore && settings.storage.dir.is_none() && matches!(start, StartFrom::Latest) {
            return Err(JobError::Start(format!(
                "--resume needs state.checkpoints.dir: job '{}' keeps checkpoints in host memory, which end with the process",
                spec.name
            )));
        }
        Some(Arc::new(CheckpointStorage::open(&settings.storage, &spec.name)?))
    } else {
        None
    };
    let existing = match &storage {
        Some(s) if s.is_durable() => s.list_checkpoints()?,
        _ => Vec::new(),
    };
    let initial: Option<Arc<Restored>> = match start {
        StartFrom::Beginning => {
            if let Some(last) = existing.last() {
                let dir = storage.as_ref().map(|s| s.display().to_string()).unwrap_or_default();
                return Err(JobError::Start(format!(
                    "job '{}' already has checkpoints in {dir} (latest chk-{last}): run with --resume to continue from them, or delete that directory to start over",
                    spec.name
                )));
            }
            None
        }
        StartFrom::Latest => {
            let s = storage.as_ref().expect("opened for a restore");
            match restore::load_latest(s)? {
                Some(r) => Some(Arc::new(r)),
                None => {
                    tracing::warn!(dir = %s.display(), "--resume: no checkpoint yet; starting from the beginning");
                    None
                }
            }
        }
        StartFrom::Checkpoint { uri, .. } => {
            let (from, job_name, id) = restore::open_uri(uri, &settings.storage)?;
            if job_name != spec.name {
                tracing::warn!(checkpoint = %uri, "restoring a checkpoint of job '{job_name}' into job '{}'", spec.name);
            }
            Some(Arc::new(restore::load(&from, id)?))
        }
        StartFrom::Savepoint { uri, .. } => {
            let r = restore::load_savepoint(uri, &settings.storage)?;
            if r.metadata.job != spec.name {
                tracing::warn!(savepoint = %uri, "restoring a savepoint of job '{}' into job '{}'", r.metadata.job, spec.name);
            }
            Some(Arc::new(r))
        }
    };
    if let Some(r) = &initial {
        check_compatible(job, r, start.allows_non_restored_state())?;
        tracing::info!(checkpoint = %r.location, size = %human_bytes(r.metadata.state_size()), "restoring");
        if r.metadata.finished {
            publish_finished(job, r)?;
            tracing::info!(checkpoint = %r.location, "the job had already finished; its output is published");
            return Ok(JobReport {
                name: spec.name.clone(),
                nodes: Vec::new(),
                elapsed: started.elapsed(),
                startup: started.elapsed(),
                restarts: 0,
                restored_from: Some(r.location.clone()),
                checkpoints: CheckpointStats::default(),
                already_finished: true,
                stopped_with: None,
            });
        }
    }
    let highest = existing.last().copied().unwrap_or(0).max(initial.as_ref().map_or(0, |r| r.metadata.id));
    let mut checkpoints = match (&settings.checkpointing, &storage) {
        (Some(c), Some(s)) => {
            let pinned = initial.as_ref().map(|r| shared_files(&r.metadata)).unwrap_or_default();
            Some(Checkpoints::new(
                *c,
                s.clone(),
                &spec.name,
                spec.max_parallelism,
                highest,
                pinned.into_iter().collect(),
            ))
        }
        _ => None,
    };

    let engine = new_engine().map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let _ticker = EpochTicker::start(&engine);
    let mut loader =
        ModuleLoader::new(&engine, settings.cache_dir.clone()).map_err(|e| JobError::Engine(format!("{e:#}")))?;
    // By uid; a committed module swap replaces an entry, so a restart
    // after it runs the new module.
    let mut modules: HashMap<String, OperatorModule> = HashMap::new();
    for op in &spec.operators {
        modules.insert(op.uid.clone(), loader.load(&op.uid, &op.module)?);
    }

    let mut restore_from = initial.clone();
    let mut attempt = 0u32;
    loop {
        let outcome = run_attempt(
            job,
            (&mut modules, &mut loader),
            attempt,
            restore_from.clone(),
            checkpoints.as_mut(),
            started,
            &requests,
        );
        let failure = match outcome {
            Ok(mut report) => {
                report.restarts = attempt;
                report.restored_from = initial.as_ref().map(|r| r.location.clone());
                if let Some(c) = &checkpoints {
                    report.checkpoints = c.stats.clone();
                }
                return Ok(report);
            }
            Err(e) => e,
        };
        let RestartStrategy::FixedDelay { attempts, delay } = settings.restart else {
            return Err(failure);
        };
        if matches!(failure, JobError::Cancelled) {
            return Err(failure);
        }
        if attempt >= attempts {
            return Err(JobError::RestartsExhausted { cause: Box::new(failure), restarts: attempt, attempts });
        }
        attempt += 1;
        // The latest checkpoint this run completed, else where it started.
        restore_from = match checkpoints.as_ref().and_then(|c| c.latest_created().map(|id| (c, id))) {
            Some((c, id)) => Some(Arc::new(restore::load(c.storage(), id)?)),
            None => initial.clone(),
        };
        let from =
            restore_from.as_ref().map_or("the beginning (no checkpoint yet)".to_string(), |r| r.location.clone());
        tracing::warn!(
            "job '{}' failed: {failure}; restart {attempt} of {attempts} in {} ms, from {from}",
            spec.name,
            delay.as_millis()
        );
        std::thread::sleep(delay);
    }
}

/// Refuses a checkpoint this job cannot take.
fn check_compatible(job: &LoadedJob, r: &Restored, allow_non_restored_state: bool) -> Result<(), JobError> {
    let m = &r.metadata;
    let spec = &job.spec;
    if m.max_parallelism != spec.max_parallelism {
        tracing::info!(
            "{} was taken with max_parallelism = {}, the job has {}: every key is re-hashed into the new key groups",
            r.location,
            m.max_parallelism,
            spec.max_parallelism
        );
    }
    let orphans: Vec<&String> =
        m.operators.keys().filter(|uid| !spec.operators.iter().any(|o| &o.uid == *uid)).collect();
    if !orphans.is_empty() {
        let list = orphans.iter().map(|u| format!("'{u}'")).collect::<Vec<_>>().join(", ");
        if !allow_non_restored_state {
            return Err(JobError::Start(format!(
                "{} holds state of operator(s) {list}, which the job no longer has (operators are matched by uid): restore with --allow-non-restored-state to drop it",
                r.location
            )));
        }
        for uid in orphans {
            let size: u64 = m.operators[uid].subtasks.iter().map(|h| h.size()).sum();
            tracing::warn!(operator = %uid, size = %human_bytes(size), "not restored: the job has no operator of this uid (--allow-non-restored-state)");
        }
    }
    for o in &spec.operators {
        if let Some(state) = m.operators.get(&o.uid)
            && state.parallelism != o.parallelism
        {
            tracing::warn!(
                operator = %o.uid,
                "parallelism changed from {} to {}: keyed state is redistributed by key group, operator lists are dealt out anew (union lists to every subtask), broadcast state is copied",
                state.parallelism,
                o.parallelism
            );
        }
    }
    Ok(())
}

/// A finished job's final checkpoint: publish what its sinks held.
fn publish_finished(job: &LoadedJob, r: &Restored) -> Result<(), JobError> {
    for s in &job.spec.sinks {
        if let (SinkKind::TransactionalFile(dir), Some(SinkState::Parts { pending })) =
            (&s.kind, r.metadata.sinks.get(&s.id))
        {
            connectors::part_files::PartFiles::restore(dir, None, pending)
                .map_err(|message| JobError::Task(TaskError::Sink { id: s.id.as_str().into(), message }))?;
        }
    }
    Ok(())
}

/// One attempt: builds and starts every task (restored from `restore`),
/// follows them to the end, and drives checkpoints.
fn run_attempt(
    job: &LoadedJob,
    (modules, loader): (&mut HashMap<String, OperatorModule>, &mut ModuleLoader),
    attempt: u32,
    restore: Option<Arc<Restored>>,
    checkpoints: Option<&mut Checkpoints>,
    started: Instant,
    requests: &Receiver<Request>,
) -> Result<JobReport, JobError> {
    let spec = &job.spec;
    let settings = &job.settings;
    let alignment = match settings.checkpointing.map(|c| c.mode) {
        Some(CheckpointMode::AtLeastOnce) => Alignment::AtLeastOnce,
        _ => Alignment::ExactlyOnce,
    };
    // Nodes and parallelism.
    let mut nodes: Vec<Node> = Vec::new();
    for s in &spec.sources {
        nodes.push(Node { id: s.id.as_str().into(), role: "source", parallelism: 1 });
    }
    for o in &spec.operators {
        nodes.push(Node { id: o.uid.as_str().into(), role: "operator", parallelism: o.parallelism });
    }
    for s in &spec.sinks {
        nodes.push(Node { id: s.id.as_str().into(), role: "sink", parallelism: 1 });
    }
    let parallelism: HashMap<&str, u32> = nodes.iter().map(|n| (&*n.id, n.parallelism)).collect();

    // Channels: for every edge, one per (upstream subtask, downstream
    // subtask) pair it connects.
    // Per (node, subtask): its input channels, each marked whether broadcast.
    let mut receivers: HashMap<(String, u32), Vec<InputChannel>> = HashMap::new();
    let mut edges: HashMap<(String, u32), Vec<Edge>> = HashMap::new();
    let mut connect = |from: &str, to: &str, partition: Partition| {
        let (pu, pd) = (parallelism[from], parallelism[to]);
        for u in 0..pu {
            let targets: Vec<u32> = if partition == Partition::Forward { vec![u] } else { (0..pd).collect() };
            let mut senders = Vec::new();
            for d in targets {
                let (tx, rx) = bounded(settings.channel_capacity);
                senders.push(tx);
                receivers.entry((to.to_string(), d)).or_default().push((rx, partition == Partition::Broadcast));
            }
            edges.entry((from.to_string(), u)).or_default().push(Edge::new(
                to.into(),
                partition,
                senders,
                spec.max_parallelism,
                settings.batch_size,
            ));
        }
    };
    for o in &spec.operators {
        for i in &o.inputs {
            connect(&i.from, &o.uid, i.partition);
        }
    }
    for s in &spec.sinks {
        let partition = if parallelism[s.input.as_str()] == 1 { Partition::Forward } else { Partition::Rebalance };
        connect(&s.input, &s.id, partition);
    }

    let (events_tx, events_rx) = unbounded::<TaskEvent>();
    let mut controls: Vec<Sender<Control>> = Vec::new();
    let mut source_controls: Vec<(String, Sender<Control>)> = Vec::new();
    let mut checkpoint_tasks: Vec<(TaskId, u32)> = Vec::new();
    let mut threads: Vec<(TaskId, JoinHandle<()>)> = Vec::new();
    let limits = Limits { call_timeout: settings.call_timeout, memory_limit: settings.memory_limit };
    let mut take_router =
        |id: &str, u: u32| Router::new(edges.remove(&(id.to_string(), u)).unwrap_or_default(), settings.batch_size);
    let mut take_inputs = |id: &str, d: u32, control| {
        Inputs::new(receivers.remove(&(id.to_string(), d)).unwrap_or_default(), control, settings.idle_timeout)
            .with_alignment(alignment)
    };

    let mut spawn =
        |id: TaskId, body: Box<dyn FnOnce() -> Result<Counters, TaskError> + Send>, events: Sender<TaskEvent>| {
            let tid = id.clone();
            let handle = std::thread::Builder::new()
                .name(format!("weir-{}", id))
                .spawn(move || {
                    // A panic in a task is a task failure, reported like any other.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "unknown panic".into());
                        Err(TaskError::Sink { id: tid.node.clone(), message: format!("task panicked: {msg}") })
                    });
                    let event = match result {
                        Ok(c) => TaskEvent::Finished(tid, c),
                        Err(e) => TaskEvent::Failed(tid, e),
                    };
                    let _ = events.send(event);
                })
                .expect("spawn a task thread");
            threads.push((id, handle));
        };

    // Sinks and operators first, so sources never wait on a missing reader.
    for s in &spec.sinks {
        let id: Arc<str> = s.id.as_str().into();
        let (ctl_tx, ctl_rx) = unbounded();
        controls.push(ctl_tx);
        let task_id = TaskId { node: id.clone(), subtask: 0 };
        checkpoint_tasks.push((task_id.clone(), 1));
        let task = SinkTask {
            id,
            kind: s.kind.clone(),
            inputs: take_inputs(&s.id, 0, ctl_rx),
            reporter: Reporter::new(task_id.clone(), events_tx.clone(), settings.progress_interval),
            checkpointing: checkpoints.is_some(),
            restore: restore.as_ref().and_then(|r| Some((r.metadata.id, sink_restore(r, &s.id, &s.kind)?))),
        };
        spawn(task_id, Box::new(move || task.run()), events_tx.clone());
    }
    for o in &spec.operators {
        let uid: Arc<str> = o.uid.as_str().into();
        let restored = restore.as_ref().and_then(|r| {
            let snapshots = r.states.get(&o.uid)?.clone();
            let same_parallelism = r.metadata.operators.get(&o.uid)?.parallelism == o.parallelism;
            let same_key_groups = r.metadata.max_parallelism == spec.max_parallelism;
            Some((snapshots, same_parallelism, same_key_groups))
        });
        for sub in 0..o.parallelism {
            let (ctl_tx, ctl_rx) = unbounded();
            controls.push(ctl_tx);
            let task_id = TaskId { node: uid.clone(), subtask: sub };
            checkpoint_tasks.push((task_id.clone(), o.parallelism));
            let task = OperatorTask {
                id: task_id.clone(),
                parallelism: o.parallelism,
                max_parallelism: spec.max_parallelism,
                module: modules[o.uid.as_str()].clone(),
                params: o.params.clone(),
                limits,
                inputs: take_inputs(&o.uid, sub, ctl_rx),
                router: take_router(&o.uid, sub),
                reporter: Reporter::new(task_id.clone(), events_tx.clone(), settings.progress_interval),
                attempt,
                swaps: checkpoints.as_ref().map(|c| c.swaps().clone()),
                uploader: checkpoints.as_ref().map(|c| {
                    Uploader::new(
                        task_id.clone(),
                        c.storage().clone(),
                        c.savepoints().clone(),
                        events_tx.clone(),
                        spec.max_parallelism,
                    )
                }),
                restore: restored.as_ref().map(|(sources, same_parallelism, same_key_groups)| OperatorRestore {
                    sources: sources.clone(),
                    operator_state_from: (*same_parallelism && *same_key_groups).then_some(sub as usize),
                    rescaled: !same_parallelism,
                    storage: restore.as_ref().expect("restored").storage.clone(),
                    adopted: None,
                }),
                backend: settings.backend,
                rocksdb: settings.rocksdb.clone(),
            };
            spawn(task_id, Box::new(move || task.run()), events_tx.clone());
        }
    }
    for s in &spec.sources {
        let id: Arc<str> = s.id.as_str().into();
        let (ctl_tx, ctl_rx) = unbounded();
        source_controls.push((s.id.clone(), ctl_tx.clone()));
        controls.push(ctl_tx);
        let task_id = TaskId { node: id.clone(), subtask: 0 };
        checkpoint_tasks.push((task_id.clone(), 1));
        let mut ctx = SourceContext::new(
            id,
            take_router(&s.id, 0),
            Reporter::new(task_id.clone(), events_tx.clone(), settings.progress_interval),
            ctl_rx,
            settings.batch_size,
            s.watermark_lag_ms,
        )
        .with_rate(s.records_per_second);
        if let Some(offset) = restore.as_ref().and_then(|r| r.metadata.sources.get(&s.id)) {
            ctx.position = *offset;
        }
        let kind = s.kind.clone();
        spawn(
            task_id,
            Box::new(move || {
                let result = match kind {
                    SourceKind::File { path, format, key_field, timestamp_field } => connectors::file_source::run(
                        ctx,
                        &path,
                        format,
                        key_field.as_deref(),
                        timestamp_field.as_deref(),
                    ),
                    SourceKind::Generator { count, keys, seed, event_time_step_ms } => {
                        connectors::generator::run(ctx, count, keys, seed, event_time_step_ms)
                    }
                };
                // A stop with savepoint ends a source early, successfully.
                match result {
                    Err(TaskError::Stopped(counters)) => Ok(counters),
                    other => other,
                }
            }),
            events_tx.clone(),
        );
    }
    drop(events_tx);
    let startup = started.elapsed();
    tracing::info!(job = %spec.name, tasks = threads.len(), startup_ms = startup.as_millis() as u64, attempt, "job started");
    let source_ids: Vec<String> = spec.sources.iter().map(|s| s.id.clone()).collect();
    let sink_count = spec.sinks.len();
    let mut cp = checkpoints.map(|c| c.attempt(checkpoint_tasks, source_controls, controls.clone()));
    let mut sinks_ended: BTreeMap<String, SinkState> = BTreeMap::new();
    let mut sinks_waiting = 0usize;
    let mut final_written = false;
    let mut job_failure: Option<JobError> = None;

    // Follow events until every task has ended.
    let total = threads.len();
    let mut ended = 0;
    let mut latest: HashMap<TaskId, Counters> = HashMap::new();
    let mut failure: Option<TaskError> = None;
    let mut progress = Progress::new();
    let mut last_draw = Instant::now();
    let totals = |latest: &HashMap<TaskId, Counters>| {
        let read: u64 = latest
            .iter()
            .filter(|(t, _)| spec.sources.iter().any(|s| *t.node == *s.id))
            .map(|(_, c)| c.records_in)
            .sum();
        let written: u64 =
            latest.iter().filter(|(t, _)| spec.sinks.iter().any(|s| *t.node == *s.id)).map(|(_, c)| c.records_in).sum();
        (read, written)
    };
    let cancel_all = |controls: &[Sender<Control>]| {
        for c in controls {
            let _ = c.send(Control::Cancel);
        }
    };
    let wait = match &cp {
        Some(a) => a.poll_interval().min(settings.progress_interval),
        None => settings.progress_interval,
    };
    while ended < total {
        let event = crossbeam_channel::select! {
            recv(events_rx) -> e => e.map_err(|_| RecvTimeoutError::Disconnected),
            recv(requests) -> r => {
                match r {
                    Ok(Request::Status(reply)) => {
                        let (read, written) = totals(&latest);
                        let _ = reply.send(Status {
                            job: spec.name.clone(),
                            pid: std::process::id(),
                            attempt,
                            uptime_ms: started.elapsed().as_millis() as u64,
                            records_read: read,
                            records_written: written,
                            checkpoints: cp.as_ref().map(|a| a.status()),
                            nodes: node_status(&nodes, &latest),
                        });
                    }
                    Ok(Request::Swap(request, reply)) => {
                        let operator = spec.operators.iter().find(|o| o.uid == request.operator);
                        match (cp.as_mut(), operator) {
                            (None, _) => {
                                let _ = reply.send(Err(
                                    "a module swap needs checkpointing: set [checkpointing] interval in the job file"
                                        .into(),
                                ));
                            }
                            (_, None) => {
                                let uids: Vec<&str> = spec.operators.iter().map(|o| o.uid.as_str()).collect();
                                let _ = reply.send(Err(format!(
                                    "the job has no operator '{}' (it has: {})",
                                    request.operator,
                                    uids.join(", ")
                                )));
                            }
                            (Some(_), Some(_)) if failure.is_some() || job_failure.is_some() => {
                                let _ = reply.send(Err("the job is failing".into()));
                            }
                            (Some(a), Some(o)) => match loader.load(&o.uid, std::path::Path::new(&request.module)) {
                                Err(e) => {
                                    let _ = reply.send(Err(format!("cannot load the new module: {e}")));
                                }
                                Ok(module) => a.request_swap(
                                    &o.uid,
                                    module,
                                    o.parallelism,
                                    request.dir,
                                    settings.savepoint_dir.as_deref(),
                                    &settings.storage,
                                    reply,
                                ),
                            },
                        }
                    }
                    Ok(Request::Cancel(reply)) => {
                        if job_failure.is_none() {
                            tracing::warn!(job = %spec.name, "cancelled on request");
                            cancel_all(&controls);
                            job_failure = Some(JobError::Cancelled);
                        }
                        let _ = reply.send(());
                    }
                    Ok(Request::Savepoint(request, reply)) => match cp.as_mut() {
                        Some(a) if failure.is_none() && job_failure.is_none() => {
                            a.request_savepoint(request, settings.savepoint_dir.as_deref(), &settings.storage, reply)
                        }
                        Some(_) => {
                            let _ = reply.send(Err("the job is failing".into()));
                        }
                        None => {
                            let _ = reply.send(Err(
                                "savepoints need checkpointing: set [checkpointing] interval in the job file".into(),
                            ));
                        }
                    },
                    Err(_) => {}
                }
                Err(RecvTimeoutError::Timeout)
            }
            default(wait) => Err(RecvTimeoutError::Timeout),
        };
        let failing = failure.is_some() || job_failure.is_some();
        let mut checkpoint_result = Ok(());
        match event {
            Ok(TaskEvent::Progress(id, c)) => {
                latest.insert(id, c);
            }
            Ok(TaskEvent::Finished(id, c)) => {
                tracing::debug!(task = %id, records_in = c.records_in, records_out = c.records_out, "task finished");
                if let Some(a) = cp.as_mut()
                    && source_ids.iter().any(|s| *s == *id.node)
                {
                    a.on_source_finished(&id);
                }
                latest.insert(id, c);
                ended += 1;
            }
            Ok(TaskEvent::Failed(id, e)) => {
                ended += 1;
                if e.is_secondary() {
                    tracing::debug!(task = %id, error = %e, "task stopped");
                } else {
                    tracing::error!(task = %id, error = %e, "task failed");
                }
                let first_root = failure.as_ref().is_none_or(|f| f.is_secondary() && !e.is_secondary());
                if first_root {
                    if failure.is_none() && job_failure.is_none() {
                        cancel_all(&controls);
                    }
                    failure = Some(e);
                }
            }
            Ok(TaskEvent::Acknowledged { task, id, snapshot, sync }) => {
                if let Some(a) = cp.as_mut().filter(|_| !failing) {
                    checkpoint_result = a.on_ack(&task, id, snapshot, sync);
                }
            }
            Ok(TaskEvent::Declined { task, id, reason }) => {
                if let Some(a) = cp.as_mut().filter(|_| !failing) {
                    checkpoint_result = a.on_decline(&task, id, &reason);
                }
            }
            Ok(TaskEvent::SwapPrepared { task, id, result }) => {
                if let Some(a) = cp.as_mut() {
                    a.on_swap_prepared(&task, id, result);
                }
            }
            Ok(TaskEvent::SinkEnded { task, state, counters }) => {
                sinks_waiting += 1;
                if let Some(s) = state {
                    sinks_ended.insert(task.node.to_string(), s);
                }
                latest.insert(task, counters);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if let Some(a) = cp.as_mut().filter(|_| failure.is_none() && job_failure.is_none()) {
            if checkpoint_result.is_ok() {
                checkpoint_result = a.tick();
            }
            // Every task but the sinks is done and the sinks wait: once no
            // checkpoint is in flight, the final one ends the job.
            if checkpoint_result.is_ok()
                && !final_written
                && sink_count > 0
                && sinks_waiting == sink_count
                && ended == total - sink_count
                && !a.in_flight()
            {
                final_written = true;
                if a.stopped_with().is_some() {
                    // Stopped with a savepoint: not the end of the input,
                    // so no final checkpoint; sinks drop what followed it.
                    for c in &controls {
                        let _ = c.send(Control::EndStopped);
                    }
                } else {
                    checkpoint_result = a.finish(std::mem::take(&mut sinks_ended)).map(|_| ());
                }
            }
            if let Err(reason) = checkpoint_result {
                tracing::error!(job = %spec.name, "{reason}");
                cancel_all(&controls);
                job_failure = Some(JobError::Checkpoints(reason));
            }
        }
        if let Some(a) = cp.as_mut() {
            for (uid, module) in a.take_committed_swaps() {
                modules.insert(uid, module);
            }
        }
        if last_draw.elapsed() >= settings.progress_interval {
            last_draw = Instant::now();
            let (r, w) = totals(&latest);
            progress.set_checkpoints(cp.as_ref().map(|a| a.status()));
            progress.update(r, w);
        }
    }
    progress.finish();
    let stopped_with = cp.as_ref().and_then(|a| a.stopped_with().cloned());
    drop(cp);
    for (id, t) in threads {
        if t.join().is_err() {
            tracing::error!(task = %id, "task thread panicked outside its body");
        }
    }
    if let Some(e) = failure.filter(|e| !e.is_secondary() || job_failure.is_none()) {
        return Err(JobError::Task(e));
    }
    if let Some(e) = job_failure {
        return Err(e);
    }
    let report = JobReport {
        name: spec.name.clone(),
        nodes: nodes
            .iter()
            .map(|n| {
                let mut c = Counters::default();
                for (t, tc) in &latest {
                    if t.node == n.id {
                        c.records_in += tc.records_in;
                        c.records_out += tc.records_out;
                    }
                }
                NodeReport { id: n.id.to_string(), role: n.role, parallelism: n.parallelism, counters: c }
            })
            .collect(),
        elapsed: progress.elapsed(),
        startup,
        restarts: 0,
        restored_from: None,
        checkpoints: CheckpointStats::default(),
        already_finished: false,
        stopped_with,
    };
    Ok(report)
}

/// What sink `id` restores from `r`. A savepoint can be restored by a job
/// writing elsewhere (it was copied, or the job moved): pending files of
/// the savepoint that are not in the sink's directory belonged to the run
/// that took it, which published them there; they are left out, with a
/// warning. A checkpoint missing them is damaged, and the sink says so.
fn sink_restore(r: &Restored, id: &str, kind: &SinkKind) -> Option<SinkState> {
    let state = r.metadata.sinks.get(id)?.clone();
    let (SinkKind::TransactionalFile(dir), SinkState::Parts { pending }, true) = (kind, &state, r.metadata.savepoint)
    else {
        return Some(state);
    };
    let (here, elsewhere): (Vec<String>, Vec<String>) = pending.iter().cloned().partition(|name| {
        let published = connectors::part_files::published_name(name);
        dir.join(name).exists() || published.is_some_and(|p| dir.join(p).exists())
    });
    if !elsewhere.is_empty() {
        tracing::warn!(
            sink = %id,
            dir = %dir.display(),
            files = ?elsewhere,
            "the savepoint's pending output is not in this sink's directory (it belongs to the run that took the savepoint); not published here"
        );
    }
    Some(SinkState::Parts { pending: here })
}

/// Per node, its counters summed over subtasks, for `host status`.
fn node_status(nodes: &[Node], latest: &HashMap<TaskId, Counters>) -> Vec<NodeStatus> {
    nodes
        .iter()
        .map(|n| {
            let (mut records_in, mut records_out) = (0, 0);
            for (t, c) in latest {
                if t.node == n.id {
                    records_in += c.records_in;
                    records_out += c.records_out;
                }
            }
            NodeStatus {
                role: n.role.to_string(),
                id: n.id.to_string(),
                parallelism: n.parallelism,
                records_in,
                records_out,
            }
        })
        .collect()
}
