//! What a run reports: counters per node summed over subtasks (the one
//! place they are summed, for `host status`, the progress line and the
//! final report), and the [`JobReport`] of a finished run.

use super::checkpointing::CheckpointStats;
use super::plan::{Node, Role};
use crate::control::{NodeStatus, SavepointDone, TaskMetrics};
use crate::runtime::{Counters, TaskId};
use std::collections::HashMap;
use std::time::Duration;

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
pub struct TaskCounters(HashMap<TaskId, Counters>);

impl TaskCounters {
    /// Task `task` reported `c`.
    pub fn set(&mut self, task: TaskId, c: Counters) {
        self.0.insert(task, c);
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
                let c = self.0.get(&TaskId { node: n.id.clone(), subtask }).copied().unwrap_or_default();
                out.push(TaskMetrics {
                    node: n.id.to_string(),
                    role: n.role.name().to_string(),
                    subtask,
                    records_in: c.records_in,
                    records_out: c.records_out,
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
