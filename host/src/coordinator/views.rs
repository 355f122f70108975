//! The job as the control API shows it apart from its tasks' counters: the
//! status line, the job graph with the modules that run now, and the
//! checkpoint settings. The controller of an attempt and a restarting job
//! both answer with these.

use super::checkpointing::Checkpoints;
use super::job_state::JobState;
use super::plan::{Plan, Role};
use super::run_info::RunInfo;
use crate::api::{CheckpointConfig, GraphEdge, GraphNode, JobGraph, Status};
use crate::config::{BackendKind, LoadedJob};
use std::time::Duration;

/// The job's status apart from its tasks' counters.
pub(super) fn run_status(job: &LoadedJob, run: &RunInfo, attempt: u32, state: JobState, plan: &Plan) -> Status {
    Status {
        job: job.spec.name.clone(),
        pid: std::process::id(),
        attempt,
        state: state.to_string(),
        uptime_ms: run.uptime_ms(),
        records_read: 0,
        records_written: 0,
        checkpoints: None,
        latest_checkpoint: None,
        nodes: Vec::new(),
        start_time_ms: run.start_time_ms,
        parallelism: plan.nodes.iter().map(|n| n.parallelism).max().unwrap_or(1),
        max_parallelism: job.spec.max_parallelism,
        restarts: run.restarts.clone(),
        cluster: None,
    }
}

/// The job graph, with each operator's module as it runs now.
pub(super) fn graph(job: &LoadedJob, plan: &Plan, run: &RunInfo, checkpoints: &Checkpoints) -> JobGraph {
    let spec = &job.spec;
    let swapped = checkpoints.swapped_modules();
    let backend = job.settings.backend.name();
    let nodes = plan
        .nodes
        .iter()
        .map(|n| {
            let id = n.id.to_string();
            let kind = match n.role {
                Role::Source => spec.sources.iter().find(|s| s.id == id).map(|s| s.kind.clone()),
                Role::Sink => spec.sinks.iter().find(|s| s.connector.id == id).map(|s| s.connector.kind.clone()),
                Role::Operator => Some("wasm".to_string()),
            };
            let operator = n.role == Role::Operator;
            let module = swapped.get(&id).or_else(|| run.modules.get(&id)).cloned().filter(|_| operator);
            GraphNode {
                role: n.role.name().to_string(),
                kind: kind.unwrap_or_default(),
                parallelism: n.parallelism,
                max_parallelism: spec.operators.iter().find(|o| o.uid == id).map(|o| o.max_parallelism),
                module,
                backend: operator.then(|| backend.to_string()),
                id,
            }
        })
        .collect();
    let edges = plan
        .edges
        .iter()
        .map(|e| GraphEdge {
            from: e.from.to_string(),
            to: e.to.to_string(),
            partitioning: e.partition.name().to_string(),
        })
        .collect();
    JobGraph { job: spec.name.clone(), max_parallelism: spec.max_parallelism, nodes, edges }
}

/// `GET /v1/checkpoints/config`: the settings the job checkpoints with.
pub(super) fn checkpoint_config(job: &LoadedJob) -> CheckpointConfig {
    let s = &job.settings;
    let c = s.checkpointing.as_ref();
    let ms = |d: Duration| d.as_millis() as u64;
    CheckpointConfig {
        enabled: c.is_some(),
        mode: c.map_or("exactly-once", |c| c.mode.name()).to_string(),
        interval_ms: c.map(|c| ms(c.interval)),
        timeout_ms: c.map(|c| ms(c.timeout)),
        min_pause_ms: c.map(|c| ms(c.min_pause)),
        tolerable_failures: c.map(|c| c.tolerable_failures),
        retained: c.map(|c| c.retained),
        backend: s.backend.name().to_string(),
        incremental: s.backend == BackendKind::RocksDb && s.rocksdb.incremental,
        checkpoints_dir: s.storage.dir.clone(),
        savepoints_dir: s.savepoint_dir.clone(),
    }
}
