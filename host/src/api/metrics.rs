//! A running job's metrics at one instant (`GET /v1/job/metrics`, and as
//! Prometheus text `GET /metrics`): each subtask's counters, meters and
//! watermarks, what an operator's WebAssembly instance and state backend
//! use; and the back-pressure and watermark views made from them.
//!
//! Watermarks are event-time milliseconds, absent until the first one.

use super::checkpoints::CheckpointMetrics;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A running job's metrics at one instant, for `GET /metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Metrics {
    /// Job name.
    pub job: String,
    /// Restarts so far.
    pub restarts: u32,
    /// Time since the run started, in milliseconds.
    pub uptime_ms: u64,
    /// Every subtask of the current attempt (none while restarting).
    pub tasks: Vec<TaskMetrics>,
    /// With checkpointing.
    pub checkpoints: Option<CheckpointMetrics>,
}

/// One subtask's counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskMetrics {
    /// Source id, operator uid or sink id.
    pub node: String,
    /// "source", "operator" or "sink".
    pub role: String,
    /// Subtask index.
    pub subtask: u32,
    /// Records received (a source: records read).
    pub records_in: u64,
    /// Records sent on (a sink: records written).
    pub records_out: u64,
    /// Over the subtask's last reporting interval (`pipeline.progress_interval`);
    /// none before its second report.
    pub rates: Option<TaskRates>,
    /// The watermark of its input: the minimum over its input channels
    /// (Flink's `currentInputWatermark`); a source has none.
    #[serde(default)]
    pub input_watermark: Option<i64>,
    /// The latest watermark it sent on (`currentOutputWatermark`).
    #[serde(default)]
    pub output_watermark: Option<i64>,
    /// An operator subtask's guest and state.
    #[serde(default)]
    pub guest: Option<GuestMetrics>,
}

/// What an operator subtask's WebAssembly instance and state backend use:
/// the metrics no JVM stream processor has.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestMetrics {
    /// Bytes of linear memory the instance has now.
    pub memory_bytes: u64,
    /// The most it had (the instance is replaced on a swap or restart).
    pub memory_peak_bytes: u64,
    /// Calls into the guest and the time spent in them, per export
    /// (`process-batch`, `on-timer`, ...).
    pub calls: BTreeMap<String, CallMetrics>,
    /// Traps of the subtask's guest that failed an attempt of this run.
    pub traps: u64,
    /// Calls interrupted at `wasm.call_timeout` that failed an attempt.
    pub interruptions: u64,
    /// Lines of guest stdout and stderr dropped past `wasm.max_log_lines`
    /// or `wasm.max_log_bytes` in a call.
    #[serde(default)]
    pub log_lines_dropped: u64,
    /// The state backend: "hashmap" or "rocksdb".
    pub backend: String,
    /// Bytes of the subtask's state in the latest completed checkpoint
    /// (none before the first).
    pub state_bytes: Option<u64>,
    /// Key groups the subtask owns.
    pub key_groups: u32,
}

/// Calls of one export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CallMetrics {
    /// How many.
    pub count: u64,
    /// Their total time, in nanoseconds.
    pub time_ns: u64,
}

/// A subtask's meters, as Flink's.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TaskRates {
    /// Records received per second.
    pub records_in_per_second: f64,
    /// Records sent on per second.
    pub records_out_per_second: f64,
    /// Milliseconds per second working.
    pub busy_ms_per_second: f64,
    /// Milliseconds per second blocked on a full output channel.
    pub backpressured_ms_per_second: f64,
    /// Milliseconds per second with nothing to do.
    pub idle_ms_per_second: f64,
}

/// `GET /v1/job/backpressure`: per node, as Flink's back-pressure tab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackPressure {
    /// Per node, in the graph's order.
    pub nodes: Vec<NodeBackPressure>,
}

/// One node's back-pressure: its worst subtask's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeBackPressure {
    /// Node id.
    pub id: String,
    /// "ok" (ratio at most 0.10), "low" (at most 0.50) or "high".
    pub level: String,
    /// The highest ratio of its subtasks.
    pub ratio: f64,
    /// Per subtask.
    pub subtasks: Vec<SubtaskBackPressure>,
}

/// One subtask's share of time, over its last reporting interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubtaskBackPressure {
    /// Subtask index.
    pub subtask: u32,
    /// "ok", "low" or "high".
    pub level: String,
    /// Share of time blocked on a full output channel, 0 to 1.
    pub ratio: f64,
    /// Share of time working.
    pub busy_ratio: f64,
    /// Share of time with nothing to do.
    pub idle_ratio: f64,
}

/// `GET /v1/job/watermarks`: per node and subtask.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Watermarks {
    /// Per node, in the graph's order.
    pub nodes: Vec<NodeWatermarks>,
}

/// One node's watermarks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeWatermarks {
    /// Node id.
    pub id: String,
    /// The lowest input watermark over its subtasks (none until every
    /// subtask has one).
    pub min_input: Option<i64>,
    /// How far `min_input` trails the wall clock, in milliseconds.
    pub lag_ms: Option<i64>,
    /// Per subtask.
    pub subtasks: Vec<SubtaskWatermark>,
}

/// One subtask's watermarks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubtaskWatermark {
    /// Subtask index.
    pub subtask: u32,
    /// The minimum over its inputs.
    pub input: Option<i64>,
    /// The latest it sent on.
    pub output: Option<i64>,
}

/// Flink's back-pressure level of a ratio: "ok" up to 10 %, "low" up to
/// 50 %, "high" above.
pub fn back_pressure_level(ratio: f64) -> &'static str {
    if ratio <= 0.10 {
        "ok"
    } else if ratio <= 0.50 {
        "low"
    } else {
        "high"
    }
}

/// The nodes of `metrics`, in their order, each with its subtasks.
fn by_node(metrics: &Metrics) -> Vec<(&str, Vec<&TaskMetrics>)> {
    let mut nodes: Vec<(&str, Vec<&TaskMetrics>)> = Vec::new();
    for t in &metrics.tasks {
        match nodes.last_mut() {
            Some((id, tasks)) if *id == t.node => tasks.push(t),
            _ => nodes.push((&t.node, vec![t])),
        }
    }
    nodes
}

impl BackPressure {
    /// The back-pressure view of `metrics`.
    pub fn of(metrics: &Metrics) -> Self {
        let nodes = by_node(metrics)
            .into_iter()
            .map(|(id, tasks)| {
                let subtasks: Vec<SubtaskBackPressure> = tasks
                    .iter()
                    .map(|t| {
                        let r = t.rates.unwrap_or_default();
                        let ratio = r.backpressured_ms_per_second / 1000.0;
                        SubtaskBackPressure {
                            subtask: t.subtask,
                            level: back_pressure_level(ratio).to_string(),
                            ratio,
                            busy_ratio: r.busy_ms_per_second / 1000.0,
                            idle_ratio: r.idle_ms_per_second / 1000.0,
                        }
                    })
                    .collect();
                let ratio = subtasks.iter().map(|s| s.ratio).fold(0.0, f64::max);
                NodeBackPressure { id: id.to_string(), level: back_pressure_level(ratio).to_string(), ratio, subtasks }
            })
            .collect();
        BackPressure { nodes }
    }
}

impl Watermarks {
    /// The watermark view of `metrics`, lags measured against `now_ms`
    /// (event time as wall-clock milliseconds).
    pub fn of(metrics: &Metrics, now_ms: i64) -> Self {
        let nodes = by_node(metrics)
            .into_iter()
            .map(|(id, tasks)| {
                let min_input = tasks.iter().map(|t| t.input_watermark).min().flatten();
                NodeWatermarks {
                    id: id.to_string(),
                    min_input,
                    // End of input is `i64::MAX`: no lag to show.
                    lag_ms: min_input.filter(|&w| w < i64::MAX).map(|w| now_ms.saturating_sub(w)),
                    subtasks: tasks
                        .iter()
                        .map(|t| SubtaskWatermark {
                            subtask: t.subtask,
                            input: t.input_watermark,
                            output: t.output_watermark,
                        })
                        .collect(),
                }
            })
            .collect();
        Watermarks { nodes }
    }
}
