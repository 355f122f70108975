//! `host shadow`: starts, follows, stops or promotes a shadow run of a
//! running job, through its control API, and prints the report.

use super::job_name;
use anyhow::Context;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use weir_host::api::{ShadowReport, ShadowRequest};
use weir_host::control::client::Client;
use weir_host::paths::terminal::escape;

/// What `host shadow` was asked to do.
pub enum Action {
    /// Start a shadow run of `module` beside `operator`.
    Start {
        /// The operator's uid.
        operator: String,
        /// The module to try.
        module: PathBuf,
        /// End it after this long, and wait for its report.
        duration: Option<Duration>,
        /// Input batches it may fall behind.
        max_lag: u32,
    },
    /// The report so far.
    Report,
    /// End it; its final report.
    Stop,
    /// End it and swap its module in.
    Promote,
}

/// `host shadow`.
pub fn shadow(job: &str, action: Action, json: bool) -> anyhow::Result<()> {
    let name = job_name(job)?;
    let client = Client::find(&name)?;
    // A run this command waited for fails it when it was dropped.
    let waited = matches!(action, Action::Start { duration: Some(_), .. });
    let report = match action {
        Action::Start { operator, module, duration, max_lag } => {
            // The host resolves paths from its own directory: send an
            // absolute one.
            let module = std::fs::canonicalize(&module).with_context(|| format!("cannot read {}", module.display()))?;
            let request = ShadowRequest {
                operator,
                module: module.display().to_string(),
                duration_ms: duration.map(|d| d.as_millis().max(1) as u64),
                max_lag: Some(max_lag),
            };
            let started = client.shadow(&request).context("shadow run failed to start")?;
            eprintln!(
                "shadow {} of '{}' runs {}, forked at checkpoint {}",
                started.id, started.operator, started.module, started.checkpoint
            );
            let Some(d) = duration else {
                eprintln!("follow it with `host shadow {job} --report`; end it with --stop or --promote");
                return Ok(());
            };
            wait_for_end(&client, started.id, Instant::now() + d)?
        }
        Action::Report => client.shadow_report()?,
        Action::Stop => client.stop_shadow().context("cannot stop the shadow run")?,
        Action::Promote => {
            let done = client.promote_shadow().context("promotion failed")?;
            eprintln!(
                "the shadow's module now runs live; paused {:.1} ms; savepoint {} kept for rollback",
                done.pause_ms, done.savepoint.location
            );
            return Ok(());
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", describe(&report));
    }
    if waited && report.status == "dropped" {
        anyhow::bail!("the shadow run was dropped: {}", report.reason.unwrap_or_default());
    }
    Ok(())
}

/// Polls shadow `id`'s report until it is over: its duration passes
/// (the job ends it) by `until`, or it ended earlier.
fn wait_for_end(client: &Client, id: u64, until: Instant) -> anyhow::Result<ShadowReport> {
    loop {
        let report = client.shadow_report()?;
        if report.id != id || report.is_over() {
            return Ok(report);
        }
        // The job ends it at its deadline; allow it time to collect the
        // subtasks' final reports.
        if Instant::now() > until + Duration::from_secs(60) {
            anyhow::bail!("the shadow run did not end within a minute of its duration");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The report as text.
fn describe(r: &ShadowReport) -> String {
    let mut out = format!(
        "shadow {} of '{}' running {}, forked at checkpoint {}: {}{} after {:.1} s\n",
        r.id,
        r.operator,
        r.module,
        r.checkpoint,
        r.status,
        r.reason.as_ref().map(|w| format!(" ({w})")).unwrap_or_default(),
        r.elapsed_ms as f64 / 1e3
    );
    let c = &r.counts;
    out.push_str(&format!("  input records: {} (lag {} batches)\n", r.records_in, r.lag));
    out.push_str(&format!(
        "  output records: {} equal, {} different, {} only live, {} only shadow\n",
        c.equal, c.different, c.only_live, c.only_shadow
    ));
    let key = |k: &Option<String>| escape(k.as_deref().unwrap_or("(no key)")).into_owned();
    if !r.keys.is_empty() {
        out.push_str(&format!("  keys with differences ({}):\n", r.keys.len()));
        for k in &r.keys {
            out.push_str(&format!(
                "    {}: {} different, {} only live, {} only shadow\n",
                key(&k.key),
                k.different,
                k.only_live,
                k.only_shadow
            ));
        }
    }
    if r.unlisted > 0 {
        out.push_str(&format!("  and {} differences on keys not listed\n", r.unlisted));
    }
    for s in &r.samples {
        let side = |v: &Option<String>| v.as_ref().map_or("(nothing)".to_string(), |v| format!("{v:?}"));
        out.push_str(&format!("  sample {}: live {} / shadow {}\n", key(&s.key), side(&s.live), side(&s.shadow)));
    }
    out
}
