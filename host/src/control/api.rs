//! The control API's resources: the JSON bodies its endpoints take and
//! answer, shaped after Flink's REST API where Flink has an equivalent
//! (`docs/rest-api.md` shows one of each). The coordinator fills them in;
//! the server, the `host` commands and the dashboard read them.
//!
//! Times are milliseconds: `*_time_ms` since the Unix epoch, `*_ms`
//! durations. Watermarks are event-time milliseconds, absent until the
//! first one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A request for a savepoint; every field may be left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SavepointRequest {
    /// Parent directory (`file://` or `s3://`); the job's
    /// `state.savepoints.dir` if none.
    pub dir: Option<String>,
    /// Stop the job once the savepoint completed.
    pub stop: bool,
    /// With `stop`: advance event time to the end first, firing every
    /// event-time timer, as Flink's `stop --drain`.
    pub drain: bool,
}

/// A completed savepoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavepointDone {
    /// Its checkpoint id.
    pub id: u64,
    /// Its directory, to give to `host run --from-savepoint`.
    pub location: String,
    /// Bytes of state.
    pub size: u64,
    /// Trigger to completion, in milliseconds.
    pub duration_ms: u64,
    /// The job stopped with it.
    pub stopped: bool,
}

/// A request to replace one operator's module while the job runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapRequest {
    /// The operator's uid.
    pub operator: String,
    /// The new component, as an absolute path on the host's machine.
    pub module: String,
    /// Parent directory of the swap's savepoint; the job's
    /// `state.savepoints.dir` if none.
    #[serde(default)]
    pub dir: Option<String>,
}

/// A module swap that took effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwapDone {
    /// The savepoint taken at the swap (the state before it, for rollback).
    pub savepoint: SavepointDone,
    /// How long the operator stopped processing, in milliseconds: from the
    /// first subtask's barrier to the new module taking over everywhere.
    pub pause_ms: f64,
}

/// A request to change one operator's parallelism while the job runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RescaleRequest {
    /// The operator's uid.
    pub operator: String,
    /// Its new number of subtasks; the job refuses 0 and more than its
    /// `max_parallelism`.
    pub parallelism: u32,
}

/// A rescale that took effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RescaleDone {
    /// The operator's uid.
    pub operator: String,
    /// Its parallelism before.
    pub from: u32,
    /// Its parallelism after.
    pub to: u32,
    /// The id of the checkpoint whose barrier carried the rescale.
    pub checkpoint: u64,
    /// How long the operator stopped processing, in milliseconds: from the
    /// first old subtask's barrier to the first record processed at the
    /// new parallelism.
    pub pause_ms: f64,
}

/// A running job's state, as `host status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// Job name.
    pub job: String,
    /// Host process id.
    pub pid: u32,
    /// Restarts so far (0 on the first attempt).
    pub attempt: u32,
    /// Where the job is in its life: running, savepointing, stopping, ...
    #[serde(default)]
    pub state: String,
    /// Time since the run started, in milliseconds.
    pub uptime_ms: u64,
    /// Records read by the sources.
    pub records_read: u64,
    /// Records written by the sinks.
    pub records_written: u64,
    /// The checkpoint line of the progress display (none without
    /// checkpointing).
    pub checkpoints: Option<String>,
    /// The id of the latest checkpoint this run completed.
    #[serde(default)]
    pub latest_checkpoint: Option<u64>,
    /// Per node: role, id, parallelism, records in and out.
    pub nodes: Vec<NodeStatus>,
    /// When the run started.
    #[serde(default)]
    pub start_time_ms: u64,
    /// The largest parallelism of any node.
    #[serde(default)]
    pub parallelism: u32,
    /// Key groups: the most subtasks a keyed operator can be rescaled to.
    #[serde(default)]
    pub max_parallelism: u32,
    /// The run's restarts so far, oldest first, with their causes.
    #[serde(default)]
    pub restarts: Vec<Restart>,
    /// On a cluster member's own endpoint: the whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<super::group::GroupView>,
}

/// One restart of the job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restart {
    /// The attempt it started (1 for the first restart).
    pub attempt: u32,
    /// When the failure that caused it happened.
    pub time_ms: u64,
    /// The failure.
    pub cause: String,
    /// The checkpoint it restored, if any.
    pub restored_from: Option<String>,
}

/// One node of a running job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    /// "source", "operator" or "sink".
    pub role: String,
    /// Source id, operator uid or sink id.
    pub id: String,
    /// Subtasks.
    pub parallelism: u32,
    /// Records in, summed over subtasks.
    pub records_in: u64,
    /// Records out, summed over subtasks.
    pub records_out: u64,
}

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

/// The job's checkpoints in this run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointMetrics {
    /// Completed.
    pub completed: u64,
    /// Failed or aborted.
    pub failed: u64,
    /// Triggered and not yet completed or failed.
    pub in_progress: u64,
    /// The latest completed one's id.
    pub last_completed_id: Option<u64>,
    /// The latest completed one's trigger-to-completion time, milliseconds.
    pub last_duration_ms: Option<u64>,
    /// The latest completed one's state bytes (Flink's
    /// `lastCheckpointFullSize`).
    pub last_size: Option<u64>,
    /// Bytes the latest completed one stored that no earlier one had
    /// (`lastCheckpointSize`: equal to the full size unless incremental).
    #[serde(default)]
    pub last_incremental_size: Option<u64>,
    /// When the run last restored a checkpoint (at start or on a restart).
    #[serde(default)]
    pub last_restore_time_ms: Option<u64>,
}

/// `GET /v1/job/plan`: the job graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobGraph {
    /// Job name.
    pub job: String,
    /// Key groups.
    pub max_parallelism: u32,
    /// Sources, operators and sinks, in topological order.
    pub nodes: Vec<GraphNode>,
    /// The edges between them.
    pub edges: Vec<GraphEdge>,
}

/// A node of the job graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphNode {
    /// Source id, operator uid or sink id.
    pub id: String,
    /// "source", "operator" or "sink".
    pub role: String,
    /// A connector's kind ("file", "generator", ...); "wasm" for operators.
    pub kind: String,
    /// Subtasks.
    pub parallelism: u32,
    /// An operator's most subtasks: its own `max_parallelism` in the job
    /// file, else the job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallelism: Option<u32>,
    /// An operator's module, as it runs now (after any swap).
    pub module: Option<ModuleInfo>,
    /// An operator's state backend.
    pub backend: Option<String>,
}

/// A WebAssembly component.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleInfo {
    /// Where it was loaded from.
    pub path: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
}

/// An edge of the job graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphEdge {
    /// The upstream node.
    pub from: String,
    /// The downstream node.
    pub to: String,
    /// How records are spread over the downstream subtasks, as the job
    /// file names it: "forward", "key", "rebalance" or "broadcast".
    pub partitioning: String,
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

/// `GET /v1/checkpoints`: counts, the latest of each kind, and the history.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointOverview {
    /// Counts over the run.
    pub counts: CheckpointCounts,
    /// The latest completed checkpoint (not savepoint).
    pub latest_completed: Option<CheckpointSummary>,
    /// The latest savepoint.
    pub latest_savepoint: Option<CheckpointSummary>,
    /// The latest failed checkpoint or savepoint.
    pub latest_failed: Option<CheckpointSummary>,
    /// The latest restore.
    pub latest_restored: Option<RestoredCheckpoint>,
    /// The last checkpoints and savepoints, newest first.
    pub history: Vec<CheckpointSummary>,
}

/// Counts of checkpoints over the run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct CheckpointCounts {
    /// Completed checkpoints and savepoints.
    pub completed: u64,
    /// Failed or aborted ones.
    pub failed: u64,
    /// Triggered and not yet completed or failed.
    pub in_progress: u64,
    /// Restores (at start and on restarts).
    pub restored: u64,
}

/// One checkpoint or savepoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointSummary {
    /// Its id.
    pub id: u64,
    /// "in-progress", "completed" or "failed".
    pub status: String,
    /// A savepoint (or a swap's).
    pub savepoint: bool,
    /// When it was triggered.
    pub trigger_time_ms: u64,
    /// Trigger to completion (or failure); so far while in progress.
    pub duration_ms: u64,
    /// Bytes of state it holds.
    pub size: u64,
    /// Bytes it stored that no earlier checkpoint of the run had.
    pub incremental_size: u64,
    /// Subtasks that acknowledged it.
    pub acknowledged: u32,
    /// Subtasks that must.
    pub subtasks: u32,
    /// Where it is, once completed.
    pub location: Option<String>,
    /// Why it failed.
    pub failure: Option<String>,
}

/// `GET /v1/checkpoints/{id}`: one checkpoint and each subtask's part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointDetails {
    /// The checkpoint.
    #[serde(flatten)]
    pub summary: CheckpointSummary,
    /// The subtasks that acknowledged it, by node and index.
    pub tasks: Vec<SubtaskCheckpoint>,
}

/// One subtask's part of a checkpoint, as Flink's checkpoint details.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubtaskCheckpoint {
    /// Node id.
    pub node: String,
    /// Subtask index.
    pub subtask: u32,
    /// Trigger to its acknowledgement.
    pub ack_ms: u64,
    /// Trigger to its barrier being aligned: how long the barrier took to
    /// reach it.
    pub start_delay_ms: u64,
    /// First to last barrier of its inputs.
    pub alignment_ms: f64,
    /// The synchronous part: the subtask stopped processing for it.
    pub sync_ms: f64,
    /// The asynchronous part: writing its state while it went on.
    pub async_ms: f64,
    /// Bytes of state.
    pub size: u64,
    /// Bytes stored that no earlier checkpoint of the run had.
    pub incremental_size: u64,
}

/// A checkpoint the run restored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoredCheckpoint {
    /// Its id.
    pub id: u64,
    /// Where it is.
    pub location: String,
    /// When it was restored.
    pub restore_time_ms: u64,
    /// A savepoint.
    pub savepoint: bool,
}

/// `GET /v1/checkpoints/config`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// Periodic checkpoints are on.
    pub enabled: bool,
    /// "exactly-once".
    pub mode: String,
    /// Between triggers.
    pub interval_ms: Option<u64>,
    /// A checkpoint not complete by then fails.
    pub timeout_ms: Option<u64>,
    /// Least time from one checkpoint's end to the next trigger.
    pub min_pause_ms: Option<u64>,
    /// Failures in a row before the job restarts.
    pub tolerable_failures: Option<u32>,
    /// Completed checkpoints kept.
    pub retained: Option<u32>,
    /// "hashmap" or "rocksdb".
    pub backend: String,
    /// RocksDB checkpoints store only new files.
    pub incremental: bool,
    /// Where checkpoints go.
    pub checkpoints_dir: Option<String>,
    /// Where savepoints go unless a request names a directory.
    pub savepoints_dir: Option<String>,
}

/// `POST /v1/savepoints`, `/v1/swaps`, `/v1/rescales`, `/v1/shadows` and
/// `/v1/shadow/promote` answer where to follow the action.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accepted {
    /// The action's id.
    pub request_id: String,
    /// Its resource: `GET` it until its status is no longer "in-progress".
    pub location: String,
}

/// An action (savepoint, stop with savepoint, swap, rescale, the start of
/// a shadow run) and its outcome: `GET /v1/savepoints/{request_id}`,
/// `GET /v1/swaps/{request_id}`, `GET /v1/rescales/{request_id}`,
/// `GET /v1/shadows/{request_id}`, `GET /v1/operations`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operation {
    /// Its id.
    pub request_id: String,
    /// "savepoint", "stop", "swap", "rescale" or "shadow".
    pub kind: String,
    /// "in-progress", "completed" or "failed".
    pub status: String,
    /// When it was asked for.
    pub start_time_ms: u64,
    /// When it ended.
    pub end_time_ms: Option<u64>,
    /// A savepoint's outcome.
    pub savepoint: Option<SavepointDone>,
    /// A swap's outcome.
    pub swap: Option<SwapDone>,
    /// A rescale's outcome.
    pub rescale: Option<RescaleDone>,
    /// A shadow run that started.
    #[serde(default)]
    pub shadow: Option<super::ShadowStarted>,
    /// Why it failed.
    pub error: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rescale_request_takes_an_operator_and_a_parallelism_and_nothing_else() {
        let r: RescaleRequest = serde_json::from_str(r#"{"operator": "counter", "parallelism": 4}"#).unwrap();
        assert_eq!((r.operator.as_str(), r.parallelism), ("counter", 4));
        // 0 parses; the coordinator refuses it, saying why.
        let zero: RescaleRequest = serde_json::from_str(r#"{"operator": "counter", "parallelism": 0}"#).unwrap();
        assert_eq!(zero.parallelism, 0);
        for bad in [
            r#"{"operator": "counter", "parallelism": 4, "dir": null}"#,
            r#"{"operator": "counter"}"#,
            r#"{"parallelism": 4}"#,
            r#"{"operator": "counter", "parallelism": -1}"#,
            r#"{"operator": "counter", "parallelism": "4"}"#,
        ] {
            assert!(serde_json::from_str::<RescaleRequest>(bad).is_err(), "{bad}");
        }
    }
}
