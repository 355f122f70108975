//! `host checkpoints`: lists a job's checkpoints, damaged ones included.

use super::{host_file, host_settings, utc};
use anyhow::Context;
use std::path::Path;
use weir_host::checkpoint::listing;
use weir_host::checkpoint::restore::origin;
use weir_host::checkpoint::storage::CheckpointStorage;
use weir_host::config::units::human_bytes;
use weir_host::config::{self, StorageSettings};
use weir_host::paths::terminal::escape;

/// Lists the checkpoints of the job that `target` names: a job file (its
/// `state.checkpoints.dir` and name are used) or its `<dir>/<job>`
/// directory, as a URI or a local path.
pub fn list(target: &str, config_flag: Option<&Path>) -> anyhow::Result<()> {
    // A local directory is the job's checkpoint directory; a file, its job file.
    let target = &if Path::new(target).is_dir() { super::location(target)? } else { target.to_string() };
    let (storage_settings, job_name) = if target.starts_with("file://") || target.starts_with("s3://") {
        let (dir, job) = target
            .trim_end_matches('/')
            .rsplit_once('/')
            .filter(|(d, j)| !j.is_empty() && !d.ends_with(':'))
            .with_context(|| format!("{target:?} is not a <dir>/<job> URI such as file:///var/ck/wordcount"))?;
        let base = host_settings(config_flag)?;
        (StorageSettings { dir: Some(dir.to_string()), ..base.storage }, job.to_string())
    } else {
        let host = host_file(config_flag)?;
        let job = config::load_job(Path::new(target), host.as_ref(), None)?;
        if job.settings.storage.dir.is_none() {
            anyhow::bail!(
                "job '{}' ({target}) has no state.checkpoints.dir: its checkpoints, if any, lived in host memory",
                job.spec.name
            );
        }
        (job.settings.storage.clone(), job.spec.name.clone())
    };
    let storage = CheckpointStorage::open(&storage_settings, &job_name)?;
    let checkpoints = listing::list(&storage)?;
    // What --resume would take instead of the latest checkpoint listed.
    if let Some(o) = origin::read(&storage)?
        && !checkpoints.iter().any(|c| c.id > o.after && c.metadata.is_ok())
    {
        eprintln!(
            "the job's last run started from {} and completed no checkpoint since: --resume continues from there",
            escape(&o.uri)
        );
    }
    if checkpoints.is_empty() {
        println!("no checkpoints in {}", storage.display());
        return Ok(());
    }
    println!("checkpoints in {}", storage.display());
    println!("{:>8}  {:<24} {:>12} {:>10}  status", "id", "triggered (UTC)", "size", "duration");
    for c in checkpoints {
        match c.metadata {
            Ok(m) => println!(
                "{:>8}  {:<24} {:>12} {:>8}ms  {}",
                c.id,
                utc(m.triggered_at_ms),
                human_bytes(m.state_size()),
                m.duration_ms,
                if m.finished { "complete (job finished)" } else { "complete" }
            ),
            Err(e) => {
                println!("{:>8}  {:<24} {:>12} {:>10}  unusable: {}", c.id, "-", "-", "-", escape(&e.to_string()))
            }
        }
    }
    Ok(())
}
