//! `host status`, `host savepoint`, `host swap`, `host rescale` and
//! `host cancel`: clients of a running job's control API.

use super::{host_file, job_name};
use anyhow::Context;
#[cfg(feature = "kafka")]
use serde::Serialize;
use std::path::Path;
#[cfg(feature = "kafka")]
use weir_host::cluster::overview::overview;
use weir_host::config::units::human_bytes;
use weir_host::config::{self, LoadedJob};
#[cfg(feature = "kafka")]
use weir_host::control::Status;
use weir_host::control::client::Client;
use weir_host::control::{RescaleRequest, SavepointRequest, SwapRequest};

/// `host status`.
pub fn status(job: &str, json: bool) -> anyhow::Result<()> {
    if let Some(loaded) = cluster_job(job)? {
        return cluster_status(&loaded, json);
    }
    let client = Client::find(&job_name(job)?)?;
    let s = client.status()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "job '{}' {} (pid {}, attempt {}, up {:.1}s): {} records read, {} written",
        s.job,
        s.state,
        s.pid,
        s.attempt,
        s.uptime_ms as f64 / 1e3,
        s.records_read,
        s.records_written
    );
    if let Some(c) = &s.checkpoints {
        println!("  {c}");
    }
    println!("  dashboard: {}", client.run_file().dashboard_url());
    for r in &s.restarts {
        let cause = r.cause.lines().next().unwrap_or_default();
        println!("  restart {} at {}: {cause}", r.attempt, super::utc(r.time_ms as i64));
    }
    println!("  {:<10} {:<24} {:>4} {:>14} {:>14}", "role", "id", "par", "records in", "records out");
    for n in &s.nodes {
        println!("  {:<10} {:<24} {:>4} {:>14} {:>14}", n.role, n.id, n.parallelism, n.records_in, n.records_out);
    }
    Ok(())
}

/// The job `arg` names, if it is the job file of a cluster job.
fn cluster_job(arg: &str) -> anyhow::Result<Option<LoadedJob>> {
    let path = Path::new(arg);
    if !path.is_file() {
        return Ok(None);
    }
    let job = config::load_job(path, host_file(None)?.as_ref(), None)?;
    Ok(job.spec.cluster.is_some().then_some(job))
}

/// One partition of a cluster job, as `host status --json` prints it.
#[cfg(feature = "kafka")]
#[derive(Serialize)]
struct PartitionStatus {
    partition: i32,
    /// Its copy's job name.
    job: String,
    /// Who wrote the last entry of its commit log.
    owner: Option<String>,
    /// Whether that entry is a claim (its run started, nothing committed since).
    claimed: bool,
    /// The latest committed checkpoint.
    checkpoint: Option<u64>,
    /// The input offset that checkpoint resumes at.
    offset: Option<i64>,
    /// The partition's end offset at the broker.
    end: i64,
    /// Records past the committed offset.
    lag: Option<i64>,
    /// The input ended before the latest committed checkpoint.
    input_ended: bool,
    /// The copy's status, when it runs on this machine.
    here: Option<Status>,
}

/// `host status <cluster job file>`.
#[cfg(feature = "kafka")]
fn cluster_status(job: &LoadedJob, json: bool) -> anyhow::Result<()> {
    let o = overview(job)?;
    let partitions: Vec<PartitionStatus> = o
        .partitions
        .into_iter()
        .map(|p| PartitionStatus {
            lag: p.lag(),
            partition: p.partition,
            here: Client::find(&p.copy).and_then(|c| c.status()).ok(),
            job: p.copy,
            owner: p.last.as_ref().map(|l| l.owner.clone()),
            claimed: p.last.as_ref().is_some_and(|l| l.claim),
            offset: p.committed,
            end: p.end,
            input_ended: p.input_ended,
            checkpoint: p.last.and_then(|l| l.checkpoint),
        })
        .collect();
    if json {
        let all =
            serde_json::json!({ "job": job.spec.name, "group": o.group, "topic": o.topic, "partitions": partitions });
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    println!(
        "cluster job '{}' (group '{}'): {} partitions of topic '{}'",
        job.spec.name,
        o.group,
        partitions.len(),
        o.topic
    );
    println!(
        "  {:>9}  {:<16} {:<28} {:>14} {:>10} {:>8}  on this machine",
        "partition", "job", "last written by", "checkpoint", "offset", "lag"
    );
    for p in &partitions {
        let checkpoint = match (p.checkpoint, p.claimed) {
            (Some(c), false) => c.to_string(),
            (Some(c), true) => format!("{c} (claimed)"),
            (None, _) => "-".into(),
        };
        let here = p.here.as_ref().map_or("-".to_string(), |s| {
            format!("{}: {} records read, {} written", s.state, s.records_read, s.records_written)
        });
        let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let (offset, lag) =
            if p.input_ended { ("ended".to_string(), "-".to_string()) } else { (dash(p.offset), dash(p.lag)) };
        println!(
            "  {:>9}  {:<16} {:<28} {:>14} {:>10} {:>8}  {here}",
            p.partition,
            p.job,
            p.owner.as_deref().unwrap_or("nobody yet"),
            checkpoint,
            offset,
            lag
        );
    }
    Ok(())
}

/// `host status <cluster job file>` on a host without Kafka.
#[cfg(not(feature = "kafka"))]
fn cluster_status(job: &LoadedJob, _json: bool) -> anyhow::Result<()> {
    anyhow::bail!("{}: [cluster] needs a host built with the kafka feature", job.path.display())
}

/// `host savepoint`.
pub fn savepoint(job: &str, request: SavepointRequest) -> anyhow::Result<()> {
    let client = Client::find(&job_name(job)?)?;
    let started = std::time::Instant::now();
    let done = client.savepoint(&request).context("savepoint failed")?;
    println!("{}", done.location);
    eprintln!(
        "savepoint {} of {} complete in {} ms (asked {} ms ago){}",
        done.id,
        human_bytes(done.size),
        done.duration_ms,
        started.elapsed().as_millis(),
        if done.stopped { "; the job stops" } else { "" }
    );
    Ok(())
}

/// `host swap`.
pub fn swap(job: &str, operator: String, module: &Path, dir: Option<String>) -> anyhow::Result<()> {
    let client = Client::find(&job_name(job)?)?;
    // The host resolves paths from its own directory: send an absolute one.
    let module = std::fs::canonicalize(module).with_context(|| format!("cannot read {}", module.display()))?;
    let request = SwapRequest { operator, module: module.display().to_string(), dir };
    let done = client.swap(&request).context("module swap failed")?;
    println!("{}", done.savepoint.location);
    eprintln!(
        "operator '{}' now runs {}; paused {:.1} ms; savepoint {} kept for rollback",
        request.operator,
        module.display(),
        done.pause_ms,
        done.savepoint.location
    );
    Ok(())
}

/// `host rescale`.
pub fn rescale(job: &str, operator: String, parallelism: u32) -> anyhow::Result<()> {
    let client = Client::find(&job_name(job)?)?;
    let done = client.rescale(&RescaleRequest { operator, parallelism }).context("rescale failed")?;
    println!(
        "rescaled '{}' from {} to {} subtasks at checkpoint {}; pause {:.1} ms",
        done.operator, done.from, done.to, done.checkpoint, done.pause_ms
    );
    Ok(())
}

/// `host cancel`.
pub fn cancel(job: &str) -> anyhow::Result<()> {
    let name = job_name(job)?;
    Client::find(&name)?.cancel()?;
    eprintln!("job '{name}' is being cancelled");
    Ok(())
}
