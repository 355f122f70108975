//! `host run`: loads the job, runs it, prints the summary.

use super::{LogFormat, host_file};
use anyhow::Context;
use std::path::Path;
use std::time::Duration;
use weir_host::config;
use weir_host::config::units::human_bytes;
use weir_host::coordinator::progress::human;
use weir_host::coordinator::{JobReport, StartFrom, run_job};

/// Runs the job file `job_path` over the host settings file, from `start`.
pub fn run(
    job_path: &Path,
    config_flag: Option<&Path>,
    parallelism: Option<u32>,
    start: &StartFrom,
    format: LogFormat,
) -> anyhow::Result<()> {
    let host = host_file(config_flag)?;
    let job = config::load_job(job_path, host.as_ref(), parallelism)?;
    if job.spec.cluster.is_some() {
        return run_member(&job, job_path, start);
    }
    let report =
        run_job(&job, start).with_context(|| format!("job '{}' ({}) failed", job.spec.name, job_path.display()))?;
    match format {
        LogFormat::Text => print_summary(&report),
        LogFormat::Json => eprintln!("{}", json_summary(&report)),
    }
    Ok(())
}

/// Runs `job` as one member of its `[cluster]`; each partition resumes
/// from its own checkpoints, so only a plain start is accepted.
fn run_member(job: &config::LoadedJob, job_path: &Path, start: &StartFrom) -> anyhow::Result<()> {
    if !matches!(start, StartFrom::Beginning | StartFrom::Latest) {
        anyhow::bail!(
            "{}: --from-checkpoint and --from-savepoint do not apply to a [cluster] job: each partition resumes from its own latest checkpoint",
            job_path.display()
        );
    }
    #[cfg(feature = "kafka")]
    {
        weir_host::cluster::run_member(job)
            .with_context(|| format!("job '{}' ({}) stopped", job.spec.name, job_path.display()))
    }
    #[cfg(not(feature = "kafka"))]
    {
        let _ = job;
        anyhow::bail!("{}: [cluster] needs a host built with the kafka feature", job_path.display())
    }
}

/// The summary as one log line of the JSON format: the same fields as the
/// text summary, as numbers a collector can graph.
fn json_summary(report: &JobReport) -> serde_json::Value {
    let c = &report.checkpoints;
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    serde_json::json!({
        "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
        "level": "INFO",
        "fields": {
            "message": "job summary",
            "job": report.name,
            "already_finished": report.already_finished,
            "stopped_with": report.stopped_with.as_ref().map(|s| &s.location),
            "elapsed_ms": ms(&report.elapsed),
            "startup_ms": ms(&report.startup),
            "restored_from": report.restored_from,
            "restarts": report.restarts,
            "nodes": report.nodes.iter().map(|n| serde_json::json!({
                "role": n.role,
                "id": n.id,
                "parallelism": n.parallelism,
                "records_in": n.counters.records_in,
                "records_out": n.counters.records_out,
            })).collect::<Vec<_>>(),
            "checkpoints": {
                "completed": c.completed,
                "failed": c.failed,
                "latest": c.latest,
                "sync_pause_ms": c.sync_pauses.iter().map(ms).collect::<Vec<_>>(),
                "duration_ms": c.durations.iter().map(ms).collect::<Vec<_>>(),
                "sizes": c.sizes,
            },
        }
    })
}

fn print_summary(report: &JobReport) {
    if let Some(s) = &report.stopped_with {
        eprintln!(
            "job '{}' stopped with savepoint {} (id {}); continue it with --from-savepoint {}",
            report.name, s.location, s.id, s.location
        );
    }
    if report.already_finished {
        eprintln!(
            "job '{}' had already finished ({}); nothing to run",
            report.name,
            report.restored_from.as_deref().unwrap_or("?")
        );
        return;
    }
    let secs = report.elapsed.as_secs_f64();
    eprintln!("job '{}' finished in {:.3}s (startup {:.0} ms)", report.name, secs, report.startup.as_secs_f64() * 1e3);
    eprintln!("  {:<10} {:<24} {:>4} {:>14} {:>14} {:>12}", "role", "id", "par", "records in", "records out", "in/s");
    for n in &report.nodes {
        let rate = if secs > 0.0 { n.counters.records_in as f64 / secs } else { 0.0 };
        eprintln!(
            "  {:<10} {:<24} {:>4} {:>14} {:>14} {:>12}",
            n.role,
            n.id,
            n.parallelism,
            n.counters.records_in,
            n.counters.records_out,
            human(rate)
        );
    }
    if let Some(from) = &report.restored_from {
        eprintln!("  restored from {from}");
    }
    if report.restarts > 0 {
        eprintln!("  restarted {} time(s) after failures", report.restarts);
    }
    let c = &report.checkpoints;
    if c.completed + c.failed > 0 {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut pauses = c.sync_pauses.clone();
        pauses.sort();
        let mut durations = c.durations.clone();
        durations.sort();
        let mid = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
        eprintln!(
            "  checkpoints: {} completed, {} failed; latest {}; sync pause median {:.3} ms, max {:.3} ms; duration median {:.0} ms, max {:.0} ms; last size {}",
            c.completed,
            c.failed,
            c.latest.map_or("-".to_string(), |l| format!("chk-{l}")),
            ms(mid(&pauses)),
            ms(pauses.last().copied().unwrap_or_default()),
            ms(mid(&durations)),
            ms(durations.last().copied().unwrap_or_default()),
            human_bytes(c.sizes.last().copied().unwrap_or(0))
        );
    }
}
