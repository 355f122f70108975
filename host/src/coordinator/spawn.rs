//! Starting one attempt of a job from its wiring plan: a bounded channel per
//! planned channel, each task built from its connector or module (restored
//! as the restore plan says), one named thread per task. A panic in a task
//! is caught at the thread's edge and reported as that task's failure.
//! A live rescale starts an operator's new subtasks the same way, wired
//! into the running tasks through the order its barrier carries.

use super::plan::{Plan, Role, TaskPlan};
use crate::checkpoint::recording::{FORMAT_VERSION, SegmentHeader};
use crate::checkpoint::restore::Restored;
use crate::checkpoint::restore::backend::{BackendSpec, SubtaskRestore};
use crate::checkpoint::storage::{CheckpointStorage, LogPosition};
use crate::checkpoint::upload::Uploader;
use crate::config::{CheckpointMode, LoadedJob};
use crate::runtime::TaskError;
use crate::runtime::TaskId;
use crate::runtime::events::{Counters, Reporter, TaskEvent};
use crate::runtime::inputs::{Alignment, Inputs};
use crate::runtime::message::TakeOver;
use crate::runtime::message::{Control, Handover, Message, RescaleOrder};
use crate::runtime::operator::OperatorTask;
use crate::runtime::recording::Recorder;
use crate::runtime::router::{Edge, Router};
use crate::runtime::sink::{Sink, SinkTask};
use crate::runtime::source::{Source, SourceContext, SubtaskInfo, run_source};
use crate::runtime::taps::Taps;
use crate::state::key_group::KeyGroupRange;
use crate::wasm::{Limits, OperatorModule};
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The configured connectors of a job, by node id.
#[derive(Default)]
pub struct Connectors {
    /// Sources.
    pub sources: HashMap<String, Arc<dyn Source>>,
    /// Sinks.
    pub sinks: HashMap<String, Arc<dyn Sink>>,
}

/// What one attempt starts from.
pub struct Attempt<'a> {
    /// The job.
    pub job: &'a LoadedJob,
    /// Its wiring.
    pub plan: &'a Plan,
    /// Its sources and sinks.
    pub connectors: &'a Connectors,
    /// Each operator's module, by uid.
    pub modules: &'a HashMap<String, OperatorModule>,
    /// Restarts so far.
    pub attempt: u32,
    /// The checkpoint to restore every task from.
    pub restore: Option<Arc<Restored>>,
    /// Where checkpoints go (host memory for a job without checkpointing:
    /// its savepoints go to their own storage).
    pub storage: Arc<CheckpointStorage>,
    /// Cluster mode: where the run stands in the storage's commit log, for
    /// the sinks (a copy; later ones come with `Control::Complete`).
    pub log: Option<LogPosition>,
}

/// The tasks of a started attempt.
pub struct Started {
    /// Each task's thread.
    pub threads: Vec<(TaskId, JoinHandle<()>)>,
    /// What the tasks tell the coordinator.
    pub events: Receiver<TaskEvent>,
    /// Every task's control channel.
    pub controls: Vec<Sender<Control>>,
    /// The sources' control channels.
    pub sources: Vec<Sender<Control>>,
    /// Every task with its node's parallelism (each acknowledges every
    /// checkpoint).
    pub tasks: Vec<(TaskId, u32)>,
    /// Where tasks send their events (for tasks started later: a
    /// rescale's).
    pub events_tx: Sender<TaskEvent>,
}

/// Builds and starts every task of `a`.
pub fn start(a: Attempt<'_>) -> Started {
    let settings = &a.job.settings;
    let alignment = match settings.checkpointing.map(|c| c.mode) {
        Some(CheckpointMode::AtLeastOnce) => Alignment::AtLeastOnce,
        _ => Alignment::ExactlyOnce,
    };
    let mut senders: Vec<Option<Sender<Message>>> = Vec::new();
    let mut receivers: Vec<Option<Receiver<Message>>> = Vec::new();
    for _ in &a.plan.channels {
        let (tx, rx) = bounded(settings.channel_capacity);
        senders.push(Some(tx));
        receivers.push(Some(rx));
    }
    let (events_tx, events) = unbounded::<TaskEvent>();
    let mut started = Started {
        threads: Vec::new(),
        events,
        controls: Vec::new(),
        sources: Vec::new(),
        tasks: Vec::new(),
        events_tx: events_tx.clone(),
    };
    for t in &a.plan.tasks {
        let (ctl_tx, ctl_rx) = unbounded();
        started.controls.push(ctl_tx.clone());
        if t.role == Role::Source {
            started.sources.push(ctl_tx);
        }
        let parallelism = a.plan.node(&t.id.node).map_or(1, |n| n.parallelism);
        started.tasks.push((t.id.clone(), parallelism));
        let inputs = t
            .inputs
            .iter()
            .map(|&c| (receivers[c].take().expect("one reader per channel"), a.plan.channels[c].broadcast))
            .collect();
        let outputs = t
            .outputs
            .iter()
            .map(|o| o.channels.iter().map(|&c| senders[c].take().expect("one writer per channel")).collect())
            .collect();
        let (inputs, router) = wire(&a, t, inputs, outputs, ctl_rx, alignment);
        let reporter = Reporter::new(t.id.clone(), events_tx.clone(), settings.progress_interval);
        let body = task_body(&a, t, parallelism, inputs, router, reporter, None);
        started.threads.push((t.id.clone(), spawn(t.id.clone(), body, events_tx.clone())));
    }
    started
}

/// Task `t`'s input and output sides over its channels' ends.
fn wire(
    a: &Attempt<'_>,
    t: &TaskPlan,
    inputs: Vec<(Receiver<Message>, bool)>,
    outputs: Vec<Vec<Sender<Message>>>,
    control: Receiver<Control>,
    alignment: Alignment,
) -> (Inputs, Router) {
    let settings = &a.job.settings;
    let from = t.inputs.iter().map(|&c| a.plan.channels[c].from.node.clone()).collect();
    let inputs =
        Inputs::new(inputs, control, settings.idle_timeout).with_alignment(alignment).owned_by(t.id.clone(), from);
    let edges = t
        .outputs
        .iter()
        .zip(outputs)
        .map(|(o, tx)| Edge::new(o.to.clone(), o.partition, tx, a.job.spec.max_parallelism, settings.batch_size))
        .collect();
    (inputs, Router::new(edges, settings.batch_size).owned_by(t.id.clone()))
}

/// The new subtasks of a rescaled operator, started and waiting for their
/// state, and the order their barrier carries.
pub struct Rescaled {
    /// The order for the barrier.
    pub order: Arc<RescaleOrder>,
    /// Each new subtask's control channel.
    pub controls: Vec<Sender<Control>>,
    /// Each new subtask's thread.
    pub threads: Vec<(TaskId, JoinHandle<()>)>,
}

/// Starts operator `uid`'s subtasks of `a.plan` (the plan with its new
/// parallelism), which take over from its `from` running subtasks at the
/// barrier that carries the returned order. The channels between them and
/// the operator's neighbours are new; the neighbours get their ends from
/// the order.
pub fn start_rescaled(a: &Attempt<'_>, uid: &str, from: u32, events_tx: &Sender<TaskEvent>) -> Rescaled {
    let settings = &a.job.settings;
    let alignment = match settings.checkpointing.map(|c| c.mode) {
        Some(CheckpointMode::AtLeastOnce) => Alignment::AtLeastOnce,
        _ => Alignment::ExactlyOnce,
    };
    let touches = |c: &super::plan::Channel| &*c.from.node == uid || &*c.to.node == uid;
    let mut senders: HashMap<usize, Sender<Message>> = HashMap::new();
    let mut receivers: HashMap<usize, Receiver<Message>> = HashMap::new();
    for (i, _) in a.plan.channels.iter().enumerate().filter(|(_, c)| touches(c)) {
        let (tx, rx) = bounded(settings.channel_capacity);
        senders.insert(i, tx);
        receivers.insert(i, rx);
    }
    let parallelism = a.plan.node(uid).map_or(1, |n| n.parallelism);
    let (taken_tx, taken) = bounded::<()>(0);
    let mut order = RescaleOrder {
        uid: uid.into(),
        from,
        parallelism,
        senders: HashMap::new(),
        receivers: HashMap::new(),
        handover: Vec::new(),
        taken,
    };
    let mut new_tasks = Vec::new();
    for t in &a.plan.tasks {
        if &*t.id.node == uid {
            new_tasks.push(t);
            continue;
        }
        for o in t.outputs.iter().filter(|o| &*o.to == uid) {
            order.senders.insert(t.id.clone(), o.channels.iter().map(|c| senders[c].clone()).collect());
        }
        let from_uid: Vec<_> = t
            .inputs
            .iter()
            .filter(|&&c| &*a.plan.channels[c].from.node == uid)
            .map(|c| (receivers[c].clone(), a.plan.channels[*c].broadcast))
            .collect();
        if !from_uid.is_empty() {
            order.receivers.insert(t.id.clone(), from_uid);
        }
    }
    let mut handovers = Vec::new();
    for _ in &new_tasks {
        let (tx, rx) = unbounded::<Handover>();
        order.handover.push(tx);
        handovers.push(rx);
    }
    let mut rescaled = Rescaled { order: Arc::new(order), controls: Vec::new(), threads: Vec::new() };
    for (t, handover) in new_tasks.into_iter().zip(handovers) {
        let (ctl_tx, ctl_rx) = unbounded();
        rescaled.controls.push(ctl_tx);
        let inputs = t.inputs.iter().map(|c| (receivers[c].clone(), a.plan.channels[*c].broadcast)).collect();
        let outputs = t.outputs.iter().map(|o| o.channels.iter().map(|c| senders[c].clone()).collect()).collect();
        let (inputs, router) = wire(a, t, inputs, outputs, ctl_rx, alignment);
        let reporter = Reporter::new(t.id.clone(), events_tx.clone(), settings.progress_interval);
        let take_over = TakeOver { from, handover, taken: taken_tx.clone() };
        let body = task_body(a, t, parallelism, inputs, router, reporter, Some(take_over));
        rescaled.threads.push((t.id.clone(), spawn(t.id.clone(), body, events_tx.clone())));
    }
    rescaled
}

type Body = Box<dyn FnOnce() -> Result<Counters, TaskError> + Send>;

/// The body of task `t`: its connector or its operator.
fn task_body(
    a: &Attempt<'_>,
    t: &TaskPlan,
    parallelism: u32,
    inputs: Inputs,
    router: Router,
    reporter: Reporter,
    take_over: Option<TakeOver>,
) -> Body {
    let settings = &a.job.settings;
    let node = &*t.id.node;
    match t.role {
        Role::Source => {
            let source = a.connectors.sources[node].clone();
            let position = a.restore.as_ref().and_then(|r| r.metadata.sources.get(node)).cloned().unwrap_or_default();
            let finished = a.restore.as_ref().is_some_and(|r| r.metadata.finished_sources.contains(node));
            let (lag, rate) = (source.watermark_lag_ms(), source.records_per_second());
            let id = t.id.node.clone();
            let batching = (settings.batch_size, settings.max_batch_delay);
            let info = SubtaskInfo { subtask: t.id.subtask, parallelism, idle_timeout: settings.idle_timeout };
            Box::new(move || {
                let control = inputs.into_control();
                let ctx = SourceContext::new(id, info, router, reporter, control, batching, position, lag, rate)
                    .finished_before(finished);
                run_source(source.as_ref(), ctx)
            })
        }
        Role::Sink => {
            let sink = a.connectors.sinks[node].clone();
            let restore = a.restore.as_ref().and_then(|r| {
                let state = r.metadata.sinks.get(node)?;
                Some((r.metadata.id, sink.restore_state(state, r.metadata.savepoint), r.storage.clone()))
            });
            let task = SinkTask {
                id: t.id.node.clone(),
                sink,
                inputs,
                reporter,
                checkpoint_interval: settings.checkpointing.map(|c| c.interval),
                restore,
                job: a.job.spec.name.as_str().into(),
                subtask: t.id.subtask,
                storage: a.storage.clone(),
                log: a.log,
            };
            Box::new(move || task.run())
        }
        Role::Operator => {
            let spec = a.job.spec.operators.iter().find(|o| o.uid == node).expect("planned from the spec");
            let max_parallelism = a.job.spec.max_parallelism;
            let range = KeyGroupRange::for_subtask(t.id.subtask, parallelism, max_parallelism);
            // A recorded operator holds processing time per turn of its
            // loop, for its guest and its state's TTL alike.
            let pinned = spec.record.map(|_| crate::clock::Pinned::default());
            let backend = BackendSpec {
                kind: settings.backend,
                rocksdb: settings.rocksdb.clone(),
                max_parallelism,
                clock: pinned.as_ref().map_or_else(crate::clock::system, crate::clock::Pinned::clock),
            };
            // A recorded guest's randomness is seeded, so that its replay
            // draws the same numbers: from `wasm.random_seed`, else a seed
            // the recording keeps.
            let random_seed = match (spec.record, settings.random_seed) {
                (Some(_), None) => Some(rand::random::<u64>()),
                (_, seed) => seed,
            };
            let recorder = spec.record.zip(pinned.clone()).map(|(max_bytes, pinned)| {
                let template = SegmentHeader {
                    version: FORMAT_VERSION,
                    operator: spec.uid.clone(),
                    subtask: t.id.subtask,
                    parallelism,
                    max_parallelism,
                    start: 0,
                    end: None,
                    attempt: a.attempt,
                    run: rand::random(),
                    resumed: false,
                    started_at_ms: 0,
                    watermark: i64::MIN,
                    seed: random_seed,
                    module: spec.module.display().to_string(),
                    swapped: a.restore.as_ref().is_some_and(|r| r.metadata.swapped.contains_key(node)),
                    params: spec.params.clone(),
                    backend: settings.backend.name().to_string(),
                    steps: 0,
                    records_in: 0,
                    cut_short: false,
                };
                Recorder::new(template, max_bytes, pinned)
            });
            let restore = a.restore.as_ref().and_then(|r| {
                SubtaskRestore::plan(r, node, t.id.subtask, parallelism, max_parallelism, settings.backend)
            });
            let task = OperatorTask {
                id: t.id.clone(),
                parallelism,
                max_parallelism,
                range,
                module: a.modules[node].clone(),
                params: spec.params.clone(),
                limits: Limits {
                    call_timeout: settings.call_timeout,
                    memory_limit: settings.memory_limit,
                    max_output_bytes: settings.max_output_bytes,
                    max_output_records: settings.max_output_records,
                    budgets: settings.budgets,
                    random_seed,
                },
                inputs,
                router,
                reporter,
                attempt: a.attempt,
                uploader: Uploader::new(format!("{}-{}", t.id.node, t.id.subtask), a.storage.clone(), max_parallelism),
                backend,
                restore,
                take_over,
                guest: Default::default(),
                taps: Taps::new(recorder),
                pinned,
            };
            Box::new(move || task.run())
        }
    }
}

/// Runs `body` on a thread named after task `id`; its outcome, a panic
/// included, becomes the task's last event.
fn spawn(id: TaskId, body: Body, events: Sender<TaskEvent>) -> JoinHandle<()> {
    let task = id.clone();
    // The job's span (a cluster copy's partition) goes with its tasks.
    let span = tracing::Span::current();
    std::thread::Builder::new()
        .name(format!("weir-{id}"))
        .spawn(move || {
            let _entered = span.enter();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|p| {
                let message = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                Err(TaskError::Panicked { task: task.clone(), message })
            });
            let event = match result {
                Ok(c) => TaskEvent::Finished(task, c),
                Err(e) => TaskEvent::Failed(task, e),
            };
            let _ = events.send(event);
        })
        .expect("spawn a task thread")
}
