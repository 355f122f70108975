//! `host status`, `host savepoint`, `host swap`, `host rescale` and
//! `host cancel`: clients of a running job's control API.

use super::{host_file, job_name};
use anyhow::Context;
use std::path::Path;
use weir_host::api::{RescaleDone, RescaleRequest, SavepointRequest, SwapRequest};
#[cfg(feature = "kafka")]
use weir_host::cluster::overview::{group_view, overview};
use weir_host::config::units::human_bytes;
use weir_host::config::{self, LoadedJob};
use weir_host::control::client::Client;

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
        let cause = weir_host::paths::terminal::escape(r.cause.lines().next().unwrap_or_default());
        println!("  restart {} at {}: {cause}", r.attempt, super::utc(r.time_ms as i64));
    }
    println!("  {:<10} {:<24} {:>4} {:>14} {:>14}", "role", "id", "par", "records in", "records out");
    for n in &s.nodes {
        println!("  {:<10} {:<24} {:>4} {:>14} {:>14}", n.role, n.id, n.parallelism, n.records_in, n.records_out);
    }
    // A cluster member's endpoint: its nodes' subtasks are its partitions.
    if let Some(view) = &s.cluster {
        print!("{}", view.table());
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

/// `host status <cluster job file>`.
#[cfg(feature = "kafka")]
fn cluster_status(job: &LoadedJob, json: bool) -> anyhow::Result<()> {
    let view = group_view(job, |copy| Client::find(copy).and_then(|c| c.status()).ok())?;
    if json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        print!("{}", view.table());
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
    // The host resolves paths from its own directory: send an absolute one.
    let module = std::fs::canonicalize(module).with_context(|| format!("cannot read {}", module.display()))?;
    let request = SwapRequest { operator, module: module.display().to_string(), dir };
    if let Some(loaded) = cluster_job(job)? {
        return cluster_swap(&loaded, &request);
    }
    let client = Client::find(&job_name(job)?)?;
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

/// `host swap <cluster job file>`: swaps the module in every partition's
/// copy that runs on this machine, one after the other, and stops at the
/// first that refuses (the copies before it keep the new module, that one
/// and those after it the old). A partition that moves later resumes from
/// its latest checkpoint, which names the module it ran.
#[cfg(feature = "kafka")]
fn cluster_swap(job: &LoadedJob, request: &SwapRequest) -> anyhow::Result<()> {
    let o = overview(job)?;
    let (mut swapped, mut elsewhere) = (Vec::new(), Vec::new());
    // With repartition topics, the operator runs in one stage's copies.
    let runs_it: Vec<_> = o.partitions.iter().filter(|p| p.operators.contains(&request.operator)).collect();
    if runs_it.is_empty() {
        anyhow::bail!("cluster job '{}' has no operator '{}'", job.spec.name, request.operator);
    }
    for p in runs_it {
        let Ok(client) = Client::find(&p.copy) else {
            elsewhere.push(p.partition);
            continue;
        };
        let done = client.swap(request).with_context(|| {
            format!(
                "module swap failed for partition {} (job '{}'); swapped before it: {swapped:?}, not tried: the partitions after it",
                p.partition, p.copy
            )
        })?;
        println!("{}", done.savepoint.location);
        eprintln!("partition {}: paused {:.1} ms", p.partition, done.pause_ms);
        swapped.push(p.partition);
    }
    if swapped.is_empty() {
        anyhow::bail!(
            "no partition of cluster job '{}' runs on this machine: run this where its members run",
            job.spec.name
        );
    }
    eprintln!(
        "operator '{}' now runs {} in partitions {swapped:?} of '{}' on this machine{}",
        request.operator,
        request.module,
        job.spec.name,
        if elsewhere.is_empty() {
            String::new()
        } else {
            format!("; partitions {elsewhere:?} run elsewhere (or are moving): swap them there")
        }
    );
    Ok(())
}

/// `host swap <cluster job file>` on a host without Kafka.
#[cfg(not(feature = "kafka"))]
fn cluster_swap(job: &LoadedJob, _request: &SwapRequest) -> anyhow::Result<()> {
    anyhow::bail!("{}: [cluster] needs a host built with the kafka feature", job.path.display())
}

/// `host rescale`: one operator, or every operator of the job that can
/// change live.
pub fn rescale(job: &str, operator: Option<String>, parallelism: u32) -> anyhow::Result<()> {
    let client = Client::find(&job_name(job)?)?;
    let said = |done: &RescaleDone| {
        println!(
            "rescaled '{}' from {} to {} subtasks at checkpoint {}; pause {:.1} ms",
            done.operator, done.from, done.to, done.checkpoint, done.pause_ms
        )
    };
    let Some(operator) = operator else {
        let plan = client.rescale_job(parallelism, said).context("rescale failed")?;
        for (uid, why) in &plan.stay {
            eprintln!("'{uid}' {why}");
        }
        return Ok(());
    };
    said(&client.rescale(&RescaleRequest { operator, parallelism }).context("rescale failed")?);
    Ok(())
}

/// `host cancel`.
pub fn cancel(job: &str) -> anyhow::Result<()> {
    let name = job_name(job)?;
    Client::find(&name)?.cancel()?;
    eprintln!("job '{name}' is being cancelled");
    Ok(())
}
