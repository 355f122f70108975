//! What a run reports: counters per node summed over subtasks (the one
//! place they are summed, for `host status`, the progress line and the
//! final report), and the [`JobReport`] of a finished run.

use super::checkpointing::CheckpointStats;
use super::plan::{Node, Role};
use crate::api::{GuestMetrics, NodeStatus, SavepointDone, TaskMetrics, TaskRates};
use crate::runtime::{Counters, TaskId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Per node: its counters summed over subtasks.
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
#[derive(Debug, Clone, Default)]
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

/// The latest counters of every task, as they report them.
#[derive(Debug, Default)]
pub struct TaskCounters(
    HashMap<TaskId, Counters>,
    HashMap<TaskId, Sample>,
    HashMap<TaskId, GuestMetrics>,
    /// Per node, the counts of subtasks a rescale retired.
    HashMap<Arc<str>, Counters>,
);

/// A task's counters when it reported them, and its rates over the
/// interval before.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    counters: Counters,
    rates: Option<Rates>,
}

/// A task's rates over its last reporting interval, as Flink's meters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Records received per second.
    pub records_in: f64,
    /// Records sent per second.
    pub records_out: f64,
    /// Milliseconds per second spent working: neither idle nor blocked.
    pub busy_ms: f64,
    /// Milliseconds per second blocked on a full output channel.
    pub backpressured_ms: f64,
    /// Milliseconds per second with nothing to do.
    pub idle_ms: f64,
}

/// Rates from two samples `dt` apart.
fn rates(old: &Counters, new: &Counters, dt: Duration) -> Rates {
    let secs = dt.as_secs_f64();
    let per_second = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
    let ms_per_second = |a: u64, b: u64| (per_second(a, b) / 1e6).min(1000.0);
    let idle_ms = ms_per_second(old.idle_ns, new.idle_ns);
    let backpressured_ms = ms_per_second(old.backpressured_ns, new.backpressured_ns);
    Rates {
        records_in: per_second(old.records_in, new.records_in),
        records_out: per_second(old.records_out, new.records_out),
        busy_ms: (1000.0 - idle_ms - backpressured_ms).max(0.0),
        backpressured_ms,
        idle_ms,
    }
}

/// Rates are taken over at least this long, so that two reports in quick
/// succession (a task's last before it ends) do not make a meter jump.
const MIN_RATE_INTERVAL: Duration = Duration::from_millis(200);

impl TaskCounters {
    /// Task `task` reported `c`.
    pub fn set(&mut self, task: TaskId, c: Counters) {
        let now = Instant::now();
        let old = self.1.get(&task);
        if old.is_none_or(|old| now.duration_since(old.at) >= MIN_RATE_INTERVAL) {
            let rates = old.map(|old| rates(&old.counters, &c, now - old.at));
            self.1.insert(task.clone(), Sample { at: now, counters: c, rates });
        }
        self.0.insert(task, c);
    }

    /// Subtask `task` ended at a rescale with `c`: its counts stay in its
    /// node's, its meters go (a new subtask may take its index).
    pub fn retire(&mut self, task: &TaskId, c: Counters) {
        self.0.remove(task);
        self.1.remove(task);
        self.2.remove(task);
        // Counts only: a retired subtask holds no node's watermark back.
        let carried = self.3.entry(task.node.clone()).or_default();
        carried.records_in += c.records_in;
        carried.records_out += c.records_out;
        carried.idle_ns += c.idle_ns;
        carried.backpressured_ns += c.backpressured_ns;
    }

    /// Operator subtask `task` reported its guest's metrics.
    pub fn set_guest(&mut self, task: TaskId, m: GuestMetrics) {
        self.2.insert(task, m);
    }

    /// Every node's counters, summed over its subtasks.
    pub fn per_node(&self, nodes: &[Node]) -> Vec<NodeReport> {
        nodes
            .iter()
            .map(|n| {
                let mut counters = Counters::default();
                for (_, c) in self.0.iter().filter(|(t, _)| t.node == n.id) {
                    counters += *c;
                }
                if let Some(retired) = self.3.get(&n.id) {
                    counters.records_in += retired.records_in;
                    counters.records_out += retired.records_out;
                    counters.idle_ns += retired.idle_ns;
                    counters.backpressured_ns += retired.backpressured_ns;
                }
                NodeReport { id: n.id.to_string(), role: n.role.name(), parallelism: n.parallelism, counters }
            })
            .collect()
    }

    /// Records read by the sources and written by the sinks.
    pub fn totals(&self, nodes: &[Node]) -> (u64, u64) {
        let of = |role| {
            let ids: Vec<&str> = nodes.iter().filter(|n| n.role == role).map(|n| &*n.id).collect();
            self.0.iter().filter(|(t, _)| ids.contains(&&*t.node)).map(|(_, c)| c.records_in).sum()
        };
        (of(Role::Source), of(Role::Sink))
    }

    /// Per subtask, for `GET /metrics`.
    pub fn per_task(&self, nodes: &[Node]) -> Vec<TaskMetrics> {
        let mut out = Vec::new();
        for n in nodes {
            for subtask in 0..n.parallelism {
                let task = TaskId { node: n.id.clone(), subtask };
                let c = self.0.get(&task).copied().unwrap_or_default();
                let rates = self.1.get(&task).and_then(|s| s.rates);
                out.push(TaskMetrics {
                    node: n.id.to_string(),
                    role: n.role.name().to_string(),
                    subtask,
                    records_in: c.records_in,
                    records_out: c.records_out,
                    rates: rates.map(|r| TaskRates {
                        records_in_per_second: r.records_in,
                        records_out_per_second: r.records_out,
                        busy_ms_per_second: r.busy_ms,
                        backpressured_ms_per_second: r.backpressured_ms,
                        idle_ms_per_second: r.idle_ms,
                    }),
                    input_watermark: Some(c.input_watermark).filter(|&w| w != i64::MIN),
                    output_watermark: Some(c.output_watermark).filter(|&w| w != i64::MIN),
                    guest: self.2.get(&task).cloned(),
                });
            }
        }
        out
    }

    /// Per node, for `host status`.
    pub fn status(&self, nodes: &[Node]) -> Vec<NodeStatus> {
        self.per_node(nodes)
            .into_iter()
            .map(|n| NodeStatus {
                role: n.role.to_string(),
                id: n.id,
                parallelism: n.parallelism,
                records_in: n.counters.records_in,
                records_out: n.counters.records_out,
            })
            .collect()
    }
}
