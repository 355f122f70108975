//! The page's test fixture: a running job of four nodes (two of them
//! operators with guests), a savepoint, a failed checkpoint and one restart.

use crate::control::dashboard::PageData;

/// A running job of two operators, a savepoint, a failed checkpoint,
/// and one restart.
pub(in crate::control::dashboard) fn fixture() -> PageData {
    use crate::api::*;
    let task = |node: &str, role: &str, subtask, guest: Option<GuestMetrics>| TaskMetrics {
        node: node.into(),
        role: role.into(),
        subtask,
        records_in: 1000,
        records_out: 900,
        rates: Some(TaskRates {
            records_in_per_second: 250.0,
            records_out_per_second: 240.0,
            busy_ms_per_second: 300.0,
            backpressured_ms_per_second: if node == "parse" { 600.0 } else { 0.0 },
            idle_ms_per_second: 100.0,
        }),
        input_watermark: Some(1_700_000_000_000),
        output_watermark: Some(1_700_000_000_500),
        guest,
    };
    let guest = GuestMetrics {
        memory_bytes: 2 << 20,
        memory_peak_bytes: 3 << 20,
        backend: "rocksdb".into(),
        key_groups: 64,
        state_bytes: Some(5 << 20),
        ..Default::default()
    };
    let summary = |id, status: &str, savepoint| CheckpointSummary {
        id,
        status: status.into(),
        savepoint,
        trigger_time_ms: 1_700_000_000_000 + id * 1000,
        duration_ms: 40 + id,
        size: 10_000 * id,
        incremental_size: 2_000,
        acknowledged: 4,
        subtasks: 4,
        location: (status == "completed").then(|| format!("file:///ck/chk-{id}")),
        failure: (status == "failed").then(|| "expired before completing".to_string()),
    };
    let node = |id: &str, role: &str, kind: &str| GraphNode {
        id: id.into(),
        role: role.into(),
        kind: kind.into(),
        parallelism: 2,
        max_parallelism: (role == "operator").then_some(128),
        module: (role == "operator").then(|| ModuleInfo { path: format!("/m/{id}.wasm"), sha256: "ab".repeat(32) }),
        backend: (role == "operator").then(|| "rocksdb".into()),
    };
    PageData {
        status: Status {
            job: "orders".into(),
            pid: 1,
            attempt: 1,
            state: "running".into(),
            uptime_ms: 3_723_000,
            records_read: 1_234_567,
            records_written: 7,
            checkpoints: None,
            latest_checkpoint: Some(3),
            nodes: vec![],
            start_time_ms: 1_700_000_000_000,
            parallelism: 2,
            max_parallelism: 128,
            restarts: vec![Restart {
                attempt: 1,
                time_ms: 1_700_000_001_000,
                cause: "operator 'parse' trapped: unreachable".into(),
                restored_from: Some("file:///ck/chk-2".into()),
            }],
            cluster: None,
        },
        graph: JobGraph {
            job: "orders".into(),
            max_parallelism: 128,
            nodes: vec![
                node("in", "source", "generator"),
                node("parse", "operator", "wasm"),
                node("total", "operator", "wasm"),
                node("sink", "sink", "file"),
            ],
            edges: vec![
                GraphEdge { from: "in".into(), to: "parse".into(), partitioning: "rebalance".into() },
                GraphEdge { from: "parse".into(), to: "total".into(), partitioning: "key".into() },
                GraphEdge { from: "total".into(), to: "sink".into(), partitioning: "forward".into() },
            ],
        },
        metrics: Metrics {
            job: "orders".into(),
            restarts: 1,
            uptime_ms: 3_723_000,
            tasks: vec![
                task("in", "source", 0, None),
                task("parse", "operator", 0, Some(guest.clone())),
                task("parse", "operator", 1, Some(guest.clone())),
                task("total", "operator", 0, Some(guest)),
                task("sink", "sink", 0, None),
            ],
            checkpoints: None,
        },
        checkpoints: CheckpointOverview {
            counts: CheckpointCounts { completed: 2, failed: 1, in_progress: 0, restored: 1 },
            latest_completed: Some(summary(3, "completed", false)),
            latest_savepoint: Some(summary(2, "completed", true)),
            latest_failed: Some(summary(4, "failed", false)),
            latest_restored: None,
            history: vec![summary(4, "failed", false), summary(3, "completed", false), summary(2, "completed", true)],
        },
    }
}
