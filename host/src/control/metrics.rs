//! A job's [`Metrics`] in the Prometheus text format (`prometheus-client`),
//! under Flink's metric names so that dashboards built on Flink's
//! Prometheus reporter carry over: Flink's `flink_taskmanager_job_task_`
//! and `flink_jobmanager_job_` prefixes become `weir_task_` and `weir_job_`,
//! the names after them are Flink's, and the labels are Flink's
//! (`job_name`, `task_name`, `subtask_index`). As Flink's reporter does,
//! every value is a gauge. `docs/metrics.md` lists them.

use crate::api::{GuestMetrics, Metrics, TaskRates};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Labels of a job-wide metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    job_name: String,
}

/// Labels of a subtask's metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    job_name: String,
    task_name: String,
    subtask_index: String,
    /// "source", "operator" or "sink" (not a Flink label: Flink's tasks
    /// chain several operators; here a task is one node).
    role: String,
}

/// Labels of a guest export's calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    job_name: String,
    task_name: String,
    subtask_index: String,
    export: String,
}

/// A gauge of the guest: its name, help, series, and how to read it.
type GuestGauge = (&'static str, &'static str, Family<TaskLabels, Gauge>, fn(&GuestMetrics) -> Option<u64>);

/// A per-second meter: its name, help, series, and how to read it.
type Meter = (&'static str, &'static str, Family<TaskLabels, Gauge<f64, AtomicU64>>, fn(&TaskRates) -> f64);

/// One job-wide gauge.
fn job_gauge(registry: &mut Registry, name: &str, help: &str, job: &JobLabels, value: i64) {
    let family = Family::<JobLabels, Gauge>::default();
    family.get_or_create(job).set(value);
    registry.register(name, help, family);
}

/// Saturates at `i64::MAX`: a gauge is signed.
fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The text exposition of `m`.
pub fn encode(m: &Metrics) -> String {
    let mut registry = Registry::with_prefix("weir");
    let job = JobLabels { job_name: m.job.clone() };
    job_gauge(&mut registry, "job_uptime", "Milliseconds since the run started", &job, signed(m.uptime_ms));
    job_gauge(&mut registry, "job_numRestarts", "Restarts of the job in this run", &job, i64::from(m.restarts));
    if let Some(c) = &m.checkpoints {
        let gauges = [
            ("numberOfCompletedCheckpoints", "Checkpoints completed in this run", Some(c.completed)),
            ("numberOfFailedCheckpoints", "Checkpoints failed or aborted in this run", Some(c.failed)),
            ("numberOfInProgressCheckpoints", "Checkpoints triggered and not yet done", Some(c.in_progress)),
            ("lastCompletedCheckpointId", "Id of the latest completed checkpoint", c.last_completed_id),
            ("lastCheckpointDuration", "Trigger to completion of the latest, in milliseconds", c.last_duration_ms),
            (
                "lastCheckpointSize",
                "Bytes the latest completed checkpoint stored anew (its full size unless incremental)",
                c.last_incremental_size,
            ),
            ("lastCheckpointFullSize", "State bytes of the latest completed checkpoint", c.last_size),
            (
                "lastCheckpointRestoreTimestamp",
                "When the run last restored a checkpoint, in milliseconds since the epoch",
                c.last_restore_time_ms,
            ),
        ];
        for (name, help, value) in gauges {
            // Flink reports -1 until there is a completed checkpoint.
            let value = value.map_or(-1, signed);
            job_gauge(&mut registry, &format!("job_{name}"), help, &job, value);
        }
    }
    let records_in = Family::<TaskLabels, Gauge>::default();
    let records_out = Family::<TaskLabels, Gauge>::default();
    let input_watermark = Family::<TaskLabels, Gauge>::default();
    let output_watermark = Family::<TaskLabels, Gauge>::default();
    // Per operator subtask: what no JVM stream processor has.
    let guest_gauges: [GuestGauge; 7] = [
        ("task_guestMemoryBytes", "Bytes of linear memory the guest instance has", Family::default(), |g| {
            Some(g.memory_bytes)
        }),
        ("task_guestMemoryPeakBytes", "The most linear memory the subtask's guest had", Family::default(), |g| {
            Some(g.memory_peak_bytes)
        }),
        ("task_guestTraps", "Guest traps that failed an attempt of this run", Family::default(), |g| Some(g.traps)),
        (
            "task_guestInterruptions",
            "Guest calls interrupted at wasm.call_timeout that failed an attempt",
            Family::default(),
            |g| Some(g.interruptions),
        ),
        (
            "task_guestLogLinesDropped",
            "Lines of guest log dropped past wasm.max_log_lines or wasm.max_log_bytes in a call",
            Family::default(),
            |g| Some(g.log_lines_dropped),
        ),
        ("task_stateSize", "Bytes of the subtask's state in the latest completed checkpoint", Family::default(), |g| {
            g.state_bytes
        }),
        ("task_keyGroups", "Key groups the subtask owns", Family::default(), |g| Some(u64::from(g.key_groups))),
    ];
    let calls = Family::<CallLabels, Gauge>::default();
    let call_time = Family::<CallLabels, Gauge<f64, AtomicU64>>::default();
    let meters: [Meter; 5] = [
        ("task_numRecordsInPerSecond", "Records received per second", Family::default(), |r| r.records_in_per_second),
        ("task_numRecordsOutPerSecond", "Records sent on per second", Family::default(), |r| r.records_out_per_second),
        ("task_busyTimeMsPerSecond", "Milliseconds per second working", Family::default(), |r| r.busy_ms_per_second),
        (
            "task_backPressuredTimeMsPerSecond",
            "Milliseconds per second blocked on a full output channel",
            Family::default(),
            |r| r.backpressured_ms_per_second,
        ),
        ("task_idleTimeMsPerSecond", "Milliseconds per second with nothing to do", Family::default(), |r| {
            r.idle_ms_per_second
        }),
    ];
    for t in &m.tasks {
        let labels = TaskLabels {
            job_name: m.job.clone(),
            task_name: t.node.clone(),
            subtask_index: t.subtask.to_string(),
            role: t.role.clone(),
        };
        records_in.get_or_create(&labels).set(signed(t.records_in));
        records_out.get_or_create(&labels).set(signed(t.records_out));
        // As Flink's: absent until the first watermark (Flink reports
        // `Long.MIN_VALUE`, which no graph wants).
        if let Some(w) = t.input_watermark {
            input_watermark.get_or_create(&labels).set(w);
        }
        if let Some(w) = t.output_watermark {
            output_watermark.get_or_create(&labels).set(w);
        }
        if let Some(g) = &t.guest {
            for (_, _, family, value) in &guest_gauges {
                if let Some(v) = value(g) {
                    family.get_or_create(&labels).set(signed(v));
                }
            }
            for (export, c) in &g.calls {
                let labels = CallLabels {
                    job_name: m.job.clone(),
                    task_name: t.node.clone(),
                    subtask_index: t.subtask.to_string(),
                    export: export.clone(),
                };
                calls.get_or_create(&labels).set(signed(c.count));
                call_time.get_or_create(&labels).set(c.time_ns as f64 / 1e6);
            }
        }
        if let Some(r) = &t.rates {
            for (_, _, family, value) in &meters {
                family.get_or_create(&labels).set(value(r));
            }
        }
    }
    registry.register("task_numRecordsIn", "Records the subtask received (a source: read)", records_in);
    registry.register("task_numRecordsOut", "Records the subtask sent on (a sink: wrote)", records_out);
    registry.register(
        "task_currentInputWatermark",
        "The minimum watermark over the subtask's inputs, event-time milliseconds",
        input_watermark,
    );
    registry.register("task_currentOutputWatermark", "The latest watermark the subtask sent on", output_watermark);
    for (name, help, family, _) in guest_gauges {
        registry.register(name, help, family);
    }
    registry.register("task_guestCalls", "Calls into the guest, per export", calls);
    registry.register("task_guestCallTimeMs", "Milliseconds spent in guest calls, per export", call_time);
    for (name, help, family, _) in meters {
        registry.register(name, help, family);
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("writing to a String cannot fail");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CheckpointMetrics, TaskMetrics};

    #[test]
    fn names_labels_and_values_are_flinks() {
        let m = Metrics {
            job: "wc".into(),
            restarts: 2,
            uptime_ms: 1500,
            tasks: vec![TaskMetrics {
                node: "counter".into(),
                role: "operator".into(),
                subtask: 1,
                records_in: 42,
                records_out: 40,
                rates: Some(TaskRates {
                    records_in_per_second: 10.5,
                    records_out_per_second: 10.0,
                    busy_ms_per_second: 200.0,
                    backpressured_ms_per_second: 700.0,
                    idle_ms_per_second: 100.0,
                }),
                input_watermark: Some(1_700_000_000_000),
                output_watermark: None,
                guest: Some(GuestMetrics {
                    memory_bytes: 1 << 20,
                    memory_peak_bytes: 2 << 20,
                    calls: [("process-batch".to_string(), crate::api::CallMetrics { count: 5, time_ns: 2_500_000 })]
                        .into(),
                    traps: 1,
                    log_lines_dropped: 9000,
                    backend: "rocksdb".into(),
                    state_bytes: None,
                    key_groups: 64,
                    ..Default::default()
                }),
            }],
            checkpoints: Some(CheckpointMetrics {
                completed: 3,
                last_completed_id: Some(7),
                last_size: Some(900),
                last_incremental_size: Some(90),
                ..Default::default()
            }),
        };
        let text = encode(&m);
        for line in [
            r#"weir_job_uptime{job_name="wc"} 1500"#,
            r#"weir_job_numRestarts{job_name="wc"} 2"#,
            r#"weir_job_numberOfCompletedCheckpoints{job_name="wc"} 3"#,
            r#"weir_job_lastCompletedCheckpointId{job_name="wc"} 7"#,
            r#"weir_job_lastCheckpointSize{job_name="wc"} 90"#,
            r#"weir_job_lastCheckpointFullSize{job_name="wc"} 900"#,
            r#"weir_job_lastCheckpointDuration{job_name="wc"} -1"#,
            r#"weir_job_lastCheckpointRestoreTimestamp{job_name="wc"} -1"#,
            r#"weir_task_currentInputWatermark{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 1700000000000"#,
            r#"weir_task_guestMemoryBytes{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 1048576"#,
            r#"weir_task_guestMemoryPeakBytes{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 2097152"#,
            r#"weir_task_guestTraps{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 1"#,
            r#"weir_task_guestLogLinesDropped{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 9000"#,
            r#"weir_task_keyGroups{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 64"#,
            r#"weir_task_guestCalls{job_name="wc",task_name="counter",subtask_index="1",export="process-batch"} 5"#,
            r#"weir_task_guestCallTimeMs{job_name="wc",task_name="counter",subtask_index="1",export="process-batch"} 2.5"#,
            r#"weir_task_numRecordsIn{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 42"#,
            r#"weir_task_numRecordsOut{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 40"#,
            r#"weir_task_numRecordsInPerSecond{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 10.5"#,
            r#"weir_task_backPressuredTimeMsPerSecond{job_name="wc",task_name="counter",subtask_index="1",role="operator"} 700.0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
        assert!(!text.contains("weir_task_currentOutputWatermark{"), "no watermark, no series: {text}");
        assert!(!text.contains("weir_task_stateSize{"), "no checkpoint, no state size: {text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
