//! The coordinator (the JobManager role): loads modules, builds the task
//! graph, starts one thread per task, follows their events, cancels every
//! task when one fails, and reports the outcome.

use super::batch::Message;
use super::events::{Control, Counters, TaskError, TaskEvent, TaskId};
use super::progress::Progress;
use super::router::{Edge, Router};
use super::task::{Inputs, OperatorTask, Reporter};
use crate::config::{LoadedJob, Partition, SourceKind};
use crate::connectors::{self, SourceContext};
use crate::wasm::engine::{EpochTicker, new_engine};
use crate::wasm::{Limits, ModuleLoader, OperatorModule, WasmError};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
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

/// Runs a loaded job to completion.
pub fn run_job(job: &LoadedJob) -> Result<JobReport, JobError> {
    let started = Instant::now();
    let spec = &job.spec;
    let settings = &job.settings;
    for w in &settings.warnings {
        tracing::warn!(job = %spec.name, "{w}");
    }
    let engine = new_engine().map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let _ticker = EpochTicker::start(&engine);
    let mut loader =
        ModuleLoader::new(&engine, settings.cache_dir.clone()).map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let mut modules: HashMap<&str, OperatorModule> = HashMap::new();
    for op in &spec.operators {
        modules.insert(&op.uid, loader.load(&op.uid, &op.module)?);
    }

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
    let mut threads: Vec<(TaskId, JoinHandle<()>)> = Vec::new();
    let limits = Limits { call_timeout: settings.call_timeout, memory_limit: settings.memory_limit };
    let mut take_router =
        |id: &str, u: u32| Router::new(edges.remove(&(id.to_string(), u)).unwrap_or_default(), settings.batch_size);
    let mut take_inputs = |id: &str, d: u32, control| {
        Inputs::new(receivers.remove(&(id.to_string(), d)).unwrap_or_default(), control, settings.idle_timeout)
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
        let (ctl_tx, ctl_rx) = bounded(1);
        controls.push(ctl_tx);
        let inputs = take_inputs(&s.id, 0, ctl_rx);
        let task_id = TaskId { node: id.clone(), subtask: 0 };
        let reporter = Reporter::new(task_id.clone(), events_tx.clone(), settings.progress_interval);
        let kind = s.kind.clone();
        spawn(task_id, Box::new(move || connectors::sink::run(id, &kind, inputs, reporter)), events_tx.clone());
    }
    for o in &spec.operators {
        let uid: Arc<str> = o.uid.as_str().into();
        for sub in 0..o.parallelism {
            let (ctl_tx, ctl_rx) = bounded(1);
            controls.push(ctl_tx);
            let task_id = TaskId { node: uid.clone(), subtask: sub };
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
            };
            spawn(task_id, Box::new(move || task.run()), events_tx.clone());
        }
    }
    for s in &spec.sources {
        let id: Arc<str> = s.id.as_str().into();
        let (ctl_tx, ctl_rx) = bounded(1);
        controls.push(ctl_tx);
        let task_id = TaskId { node: id.clone(), subtask: 0 };
        let ctx = SourceContext::new(
            id,
            take_router(&s.id, 0),
            Reporter::new(task_id.clone(), events_tx.clone(), settings.progress_interval),
            ctl_rx,
            settings.batch_size,
            s.watermark_lag_ms,
        )
        .with_rate(s.records_per_second);
        let kind = s.kind.clone();
        spawn(
            task_id,
            Box::new(move || match kind {
                SourceKind::File { path, format, key_field, timestamp_field } => {
                    connectors::file_source::run(ctx, &path, format, key_field.as_deref(), timestamp_field.as_deref())
                }
                SourceKind::Generator { count, keys, seed, event_time_step_ms } => {
                    connectors::generator::run(ctx, count, keys, seed, event_time_step_ms)
                }
            }),
            events_tx.clone(),
        );
    }
    drop(events_tx);
    let startup = started.elapsed();
    tracing::info!(job = %spec.name, tasks = threads.len(), startup_ms = startup.as_millis() as u64, "job started");

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
    while ended < total {
        match events_rx.recv_timeout(settings.progress_interval) {
            Ok(TaskEvent::Progress(id, c)) => {
                latest.insert(id, c);
            }
            Ok(TaskEvent::Finished(id, c)) => {
                tracing::debug!(task = %id, records_in = c.records_in, records_out = c.records_out, "task finished");
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
                    if failure.is_none() {
                        for c in &controls {
                            let _ = c.try_send(Control::Cancel);
                        }
                    }
                    failure = Some(e);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last_draw.elapsed() >= settings.progress_interval {
            last_draw = Instant::now();
            let (r, w) = totals(&latest);
            progress.update(r, w);
        }
    }
    progress.finish();
    for (id, t) in threads {
        if t.join().is_err() {
            tracing::error!(task = %id, "task thread panicked outside its body");
        }
    }
    if let Some(e) = failure {
        return Err(JobError::Task(e));
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
    };
    Ok(report)
}
