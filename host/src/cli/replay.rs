//! `host replay`: runs one operator again from a checkpoint over the input
//! it recorded, and prints how the output compares with the recorded one.
//! The module is the one `--module` names, or the one that ran, which only
//! the job's module store supplies (`runtime::replay`).

use super::host_settings;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_host::checkpoint::restore::{Target, parse_checkpoint_uri};
use weir_host::paths::terminal::escape;
use weir_host::runtime::replay::{ReplayReport, ReplayRequest, replay as run_replay};

/// What `host replay` was asked.
pub struct Args {
    /// The checkpoint URI.
    pub checkpoint: String,
    /// The operator's uid.
    pub operator: String,
    /// Another module to run.
    pub module: Option<PathBuf>,
    /// `name=value` params that replace the recorded ones.
    pub params: Vec<String>,
    /// The checkpoint to stop at.
    pub until: Option<u64>,
    /// Fail unless the output is the recorded one byte for byte.
    pub check: bool,
    /// Print JSON.
    pub json: bool,
    /// Host settings file.
    pub config: Option<PathBuf>,
}

/// `host replay`.
pub fn replay(args: Args) -> anyhow::Result<()> {
    let settings = host_settings(args.config.as_deref())?;
    parse_checkpoint_uri(&args.checkpoint).with_context(|| {
        format!("{}: replay starts from a checkpoint (<dir>/<job>/chk-<n>), not a savepoint", args.checkpoint)
    })?;
    let from = Arc::new(Target::parse(&args.checkpoint).load(&settings.storage)?);
    let params = args
        .params
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("--param {p:?}: write name=value"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let module = args.module.map(|m| std::path::absolute(&m).unwrap_or(m));
    if let Some(m) = &module
        && !Path::new(m).is_file()
    {
        anyhow::bail!("--module {}: no such file", m.display());
    }
    let request = ReplayRequest { from, operator: args.operator, module, params, until: args.until };
    let report = run_replay(&request, &settings)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if args.check && !report.identical {
        anyhow::bail!(
            "the replayed output differs from the recorded one in {} of {} steps",
            report.differing_steps,
            report.steps
        );
    }
    Ok(())
}

fn print_report(r: &ReplayReport) {
    let reached: Vec<String> = r
        .reached
        .iter()
        .enumerate()
        .map(|(s, at)| match at {
            Some(b) => format!("subtask {s} to barrier {b}"),
            None => format!("subtask {s} to the end of input"),
        })
        .collect();
    println!(
        "replayed operator '{}' from checkpoint {} with {}: {} subtasks, {} segments, {} steps, {} records in, {} out, in {} ms",
        r.operator, r.checkpoint, r.module, r.subtasks, r.segments, r.steps, r.records_in, r.records_out, r.elapsed_ms
    );
    match &r.recorded_sha256 {
        Some(ran) if *ran == r.module_sha256 => println!("module: SHA-256 {}, the module that ran", r.module_sha256),
        Some(ran) => println!("module: SHA-256 {}, not the module that ran (SHA-256 {ran})", r.module_sha256),
        None => println!("module: SHA-256 {}", r.module_sha256),
    }
    println!("reached: {}", reached.join(", "));
    for s in &r.stopped {
        println!("stopped early: {s}");
    }
    if r.identical {
        println!("output: identical to the recorded output, byte for byte ({} records)", r.counts.equal);
        return;
    }
    println!(
        "output: differs in {} of {} steps; per key: {} equal, {} different, {} only recorded, {} only replayed",
        r.differing_steps, r.steps, r.counts.equal, r.counts.different, r.counts.only_live, r.counts.only_shadow
    );
    for k in &r.keys {
        println!(
            "  key {}: {} different, {} only recorded, {} only replayed",
            escape(k.key.as_deref().unwrap_or("(none)")),
            k.different,
            k.only_live,
            k.only_shadow
        );
    }
    if r.unlisted > 0 {
        println!("  ... and {} differences on further keys", r.unlisted);
    }
    for s in &r.samples {
        println!(
            "  sample, key {}: recorded {:?}, replayed {:?}",
            escape(s.key.as_deref().unwrap_or("(none)")),
            s.live.as_deref().unwrap_or("-"),
            s.shadow.as_deref().unwrap_or("-")
        );
    }
}
