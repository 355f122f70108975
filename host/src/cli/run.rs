//! `host run`: loads the job, runs it, prints the summary.

use super::host_file;
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
) -> anyhow::Result<()> {
    let host = host_file(config_flag)?;
    let job = config::load_job(job_path, host.as_ref(), parallelism)?;
    let report =
        run_job(&job, start).with_context(|| format!("job '{}' ({}) failed", job.spec.name, job_path.display()))?;
    print_summary(&report);
    Ok(())
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
