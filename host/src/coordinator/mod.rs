//! The coordinator (Flink's JobManager role): everything about a job as a
//! whole. It loads the modules a run starts with ([`modules`]), plans the
//! wiring ([`plan`]), starts the tasks ([`spawn`]),
//! follows one attempt ([`controller`]) through the job's states
//! ([`job_state`]), drives checkpoints and savepoints ([`checkpointing`],
//! [`savepoints`]), live rescales ([`rescale`]) and shadow runs
//! ([`shadow`]), carries a run across its attempts ([`run`]), restarts the
//! job from its latest checkpoint as the restart policy decides
//! ([`restart_policy`], [`restarting`]), and reports
//! ([`report`], [`progress`], [`views`]).
//!
//! [`run_job`] is the library's entry point: `host run` is a thin layer
//! over it.

pub mod checkpointing;
pub mod compiling;
pub mod controller;
pub mod error;
pub mod hand_over;
pub mod history;
pub mod job_state;
pub mod modules;
pub mod plan;
pub mod progress;
pub mod report;
pub mod rescale;
pub mod restart_policy;
pub mod restarting;
pub mod run;
pub mod run_info;
pub mod shadow;
pub mod spawn;
pub mod start;
pub mod under_way;
pub mod views;

pub use error::{JobError, StartError};
pub use job_state::JobState;
pub use report::{JobReport, NodeReport};
pub use start::StartFrom;

use crate::api::Request;
use crate::config::{ConfigError, LoadedJob};
use crate::connectors;
use crate::control::server::ControlServer;
use crate::wasm::ModuleLoader;
use crate::wasm::engine::{EpochTicker, new_engine};
use crossbeam_channel::unbounded;
use run::Run;
use spawn::Connectors;
use std::time::Instant;

/// Runs a loaded job to completion, from where `start` says.
pub fn run_job(job: &LoadedJob, start: &StartFrom) -> Result<JobReport, JobError> {
    run_job_with(job, start, unbounded())
}

/// [`run_job`], taking requests (besides the control API's) from the
/// other end of `requests`: a process running several jobs stops one with
/// [`Request::Cancel`].
pub fn run_job_with(
    job: &LoadedJob,
    start: &StartFrom,
    requests: (crossbeam_channel::Sender<Request>, crossbeam_channel::Receiver<Request>),
) -> Result<JobReport, JobError> {
    let started = Instant::now();
    for w in &job.settings.warnings {
        tracing::warn!(job = %job.spec.name, "{w}");
    }
    // First, so a second run of the same job is refused before it touches
    // anything.
    let (requests_tx, requests) = requests;
    let _control = ControlServer::start(&job.spec.name, requests_tx, &job.settings.rest)?;
    let connectors = resolve_connectors(job)?;
    let start = start::prepare(job, start)?;
    if let Some(r) = start.restored.clone().filter(|r| r.metadata.finished) {
        return run::publish_finished(job, &connectors, &start, &r, started);
    }
    let engine = new_engine().map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let _ticker = EpochTicker::start(&engine);
    let mut loader =
        ModuleLoader::new(&engine, job.settings.cache_dir.clone()).map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let mut run = Run::new(job, start, &mut loader, started)?;
    loop {
        match run.attempt(&connectors, &requests, &loader) {
            Ok(report) => return Ok(report),
            Err(failure) => run.restart_after(failure, &requests)?,
        }
    }
}

/// Every source and sink of the job, built from its entry by the connector
/// registry; an entry that cannot be used names the job file.
fn resolve_connectors(job: &LoadedJob) -> Result<Connectors, ConfigError> {
    let invalid = |e: connectors::OptionsError| ConfigError::Invalid { path: job.path.clone(), message: e.to_string() };
    let mut c = Connectors::default();
    for s in &job.spec.sources {
        c.sources.insert(s.id.clone(), connectors::source(s, &job.spec.base).map_err(invalid)?);
    }
    let interval = job.settings.checkpointing.map(|c| c.interval);
    for s in &job.spec.sinks {
        let spec = &s.connector;
        let sink = connectors::sink(spec, &job.spec.base).map_err(invalid)?;
        sink.check(interval).map_err(|e| {
            invalid(connectors::OptionsError { node: format!("sink '{}'", spec.id), message: e.to_string() })
        })?;
        c.sinks.insert(spec.id.clone(), sink);
    }
    Ok(c)
}
