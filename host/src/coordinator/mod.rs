//! The coordinator (Flink's JobManager role): everything about a job as a
//! whole. It loads the modules a run starts with ([`modules`]), plans the
//! wiring ([`plan`]), starts the tasks ([`spawn`]),
//! follows one attempt ([`controller`]) through the job's states
//! ([`job_state`]), drives checkpoints and savepoints ([`checkpointing`],
//! [`savepoints`]), live rescales ([`rescale`]) and shadow runs
//! ([`shadow`]), restarts the job from
//! its latest checkpoint as the restart strategy allows ([`restarting`]), and reports
//! ([`report`], [`progress`], [`views`]).
//!
//! [`run_job`] is the library's entry point: `host run` is a thin layer
//! over it.

pub mod checkpointing;
pub mod controller;
pub mod hand_over;
pub mod history;
pub mod job_state;
pub mod modules;
pub mod plan;
pub mod progress;
pub mod report;
pub mod rescale;
pub mod restarting;
pub mod savepoints;
pub mod shadow;
pub mod spawn;
pub mod start;
pub mod views;

pub use job_state::JobState;
pub use report::{JobReport, NodeReport};
pub use start::{StartError, StartFrom};

use crate::api::Request;
use crate::api::{ModuleInfo, Restart, RestoredCheckpoint};
use crate::checkpoint::restore::{self, RestoreError};
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::clock::now_ms;
use crate::config::{ConfigError, LoadedJob, RestartStrategy, StorageSettings};
use crate::connectors;
use crate::control::server::{ControlError, ControlServer};
use crate::fault::{Classify, Domain, RetryHint};
use crate::runtime::TaskError;
use crate::runtime::sink::{OpenAt, SinkRestore};
use crate::wasm::engine::{EpochTicker, new_engine};
use crate::wasm::{FailureKind, ModuleLoader, OperatorModule, WasmError};
use checkpointing::{CheckpointingError, Checkpoints};
use controller::{Controller, RunInfo};
use crossbeam_channel::unbounded;
use spawn::Connectors;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use thiserror::Error;

/// Why a job did not complete.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum JobError {
    /// A source or sink entry of the job file cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A module could not be loaded.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// A task failed; this is the first, root failure.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// The engine could not start.
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
    /// Checkpoint storage failed outside a checkpoint (opening, listing).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The checkpoint to restore from cannot be used.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// The job cannot start as asked.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The control endpoint could not start (or the job runs already).
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Checkpointing failed the job.
    #[error(transparent)]
    Checkpoints(#[from] CheckpointingError),
    /// Cancelled through the control API (`host cancel`).
    #[error("cancelled on request (host cancel)")]
    Cancelled,
    /// The restart strategy gave up.
    #[error("{cause}\n(gave up after {restarts} restart(s), restart-strategy.attempts = {attempts})")]
    RestartsExhausted {
        /// The last failure.
        cause: Box<JobError>,
        /// Restarts made.
        restarts: u32,
        /// Allowed.
        attempts: u32,
    },
}

impl Classify for JobError {
    fn domain(&self) -> Domain {
        match self {
            JobError::Config(e) => e.domain(),
            JobError::Wasm(_) | JobError::Start(_) | JobError::Cancelled => Domain::User,
            JobError::Task(e) => e.domain(),
            JobError::Engine(_) => Domain::Internal,
            JobError::Storage(e) => e.domain(),
            JobError::Restore(e) => e.domain(),
            JobError::Control(_) => Domain::External,
            JobError::Checkpoints(e) => e.domain(),
            JobError::RestartsExhausted { cause, .. } => cause.domain(),
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            JobError::Task(e) => e.retry(),
            JobError::Storage(e) => e.retry(),
            JobError::Restore(e) => e.retry(),
            JobError::Checkpoints(e) => e.retry(),
            JobError::Config(_)
            | JobError::Wasm(_)
            | JobError::Engine(_)
            | JobError::Start(_)
            | JobError::Control(_)
            | JobError::Cancelled
            | JobError::RestartsExhausted { .. } => RetryHint::NoRetry,
        }
    }
}

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
    let run_started = Instant::now();
    let spec = &job.spec;
    let settings = &job.settings;
    for w in &settings.warnings {
        tracing::warn!(job = %spec.name, "{w}");
    }
    // First, so a second run of the same job is refused before it touches
    // anything.
    let (requests_tx, requests) = requests;
    let _control = ControlServer::start(&spec.name, requests_tx, &settings.rest)?;
    let connectors = resolve_connectors(job)?;
    let start_with = start::prepare(job, start)?;
    let initial = start_with.restored.clone();
    if let Some(r) = initial.as_ref().filter(|r| r.metadata.finished) {
        for (id, state) in &r.metadata.sinks {
            if let Some(sink) = connectors.sinks.get(id) {
                let restore = SinkRestore { id: r.metadata.id, state, storage: &r.storage };
                let fence = start_with.storage.as_ref().filter(|s| s.is_fenced());
                sink.publish_finished(OpenAt {
                    job: &spec.name,
                    subtask: 0,
                    restore: Some(restore),
                    fence,
                    log: start_with.log,
                    checkpoint_interval: settings.checkpointing.map(|c| c.interval),
                    cancelled: &|| false,
                })
                .map_err(|source| TaskError::Sink { id: id.as_str().into(), cause: source })?;
            }
        }
        tracing::info!(checkpoint = %r.location, "the job had already finished; its output is published");
        return Ok(JobReport {
            name: spec.name.clone(),
            elapsed: run_started.elapsed(),
            startup: run_started.elapsed(),
            restored_from: Some(r.location.clone()),
            already_finished: true,
            ..JobReport::default()
        });
    }
    // Without checkpointing, savepoints and swaps still ride on barriers;
    // their state goes to the savepoint's own storage, so the checkpoint
    // storage is host memory that nothing is written to.
    let storage = match &start_with.storage {
        Some(s) => s.clone(),
        None => {
            let memory = StorageSettings { dir: None, ..settings.storage.clone() };
            Arc::new(CheckpointStorage::open(&memory, &spec.name)?)
        }
    };
    let pinned = initial.as_ref().map(|r| r.metadata.shared_files()).unwrap_or_default();
    let checkpoints = Checkpoints::new(
        settings.checkpointing,
        storage.clone(),
        &spec.name,
        spec.max_parallelism,
        start_with.highest_id,
        (initial.as_ref().map(|r| r.metadata.id), pinned.into_iter().collect()),
    );

    let engine = new_engine().map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let _ticker = EpochTicker::start(&engine);
    let mut loader =
        ModuleLoader::new(&engine, settings.cache_dir.clone()).map_err(|e| JobError::Engine(format!("{e:#}")))?;
    let run_modules = modules::load(spec, &mut loader, initial.as_deref(), checkpoints.module_store().map(|s| &**s))?;
    let mut checkpoints = checkpoints.with_modules(&run_modules).inheriting(start_with.inherited.clone());
    checkpoints.recordings = spec.operators.iter().any(|o| o.record.is_some());
    checkpoints.log = start_with.log;
    if checkpoints.recordings && !(settings.checkpointing.is_some() && storage.is_durable()) {
        // Not an error: the job runs as it would without recording.
        tracing::warn!(
            "replay.record is set, but recorded input is kept beside checkpoints and this job writes none to disk: \
             set [checkpointing] interval and state.checkpoints.dir to record"
        );
    }
    let mut run = RunInfo {
        started: run_started,
        start_time_ms: now_ms().max(0) as u64 - run_started.elapsed().as_millis() as u64,
        restarts: Vec::new(),
        guest_failures: BTreeMap::new(),
        modules: spec
            .operators
            .iter()
            .map(|o| {
                let sha256 = run_modules.job_file.get(&o.uid).cloned().unwrap_or_default();
                (o.uid.clone(), ModuleInfo { path: o.module.display().to_string(), sha256 })
            })
            .chain(
                run_modules
                    .swapped
                    .iter()
                    .map(|(uid, m)| (uid.clone(), ModuleInfo { path: m.path.clone(), sha256: m.sha256.clone() })),
            )
            .collect(),
    };
    // By uid; a committed module swap replaces an entry, so a restart
    // after it runs the new module.
    let mut modules: HashMap<String, OperatorModule> = run_modules.by_uid;
    // Operators a live rescale moved to another parallelism: a restart
    // keeps it.
    let mut rescaled: BTreeMap<String, u32> = BTreeMap::new();

    let mut restore_from = initial.clone();
    let mut attempt = 0u32;
    loop {
        let plan = plan::plan_rescaled(spec, &rescaled);
        if let Some(r) = &restore_from {
            checkpoints.history.restored(RestoredCheckpoint {
                id: r.metadata.id,
                location: r.location.clone(),
                restore_time_ms: now_ms().max(0) as u64,
                savepoint: r.metadata.savepoint,
            });
        }
        let started = spawn::start(spawn::Attempt {
            job,
            plan: &plan,
            connectors: &connectors,
            modules: &modules,
            attempt,
            restore: restore_from.clone(),
            storage: storage.clone(),
            log: checkpoints.log(),
        });
        let startup = run_started.elapsed();
        tracing::info!(job = %spec.name, tasks = started.threads.len(), startup_ms = startup.as_millis() as u64, attempt, "job started");
        let mut cp = checkpoints.attempt(started.tasks.clone(), started.sources.clone(), started.controls.clone());
        // Its state is stored already, in this job's own checkpoints (a
        // savepoint is elsewhere: the job checkpoints at once to have a
        // place of its own to resume from).
        if restore_from.as_ref().is_some_and(|r| !r.metadata.savepoint) {
            let now = cp.now_ms();
            cp.protocol.first_after_interval(now);
        }
        let controller = Controller::new(job, &plan, &started, attempt, &run, cp, &modules, &rescaled);
        let (ended, outcome) =
            controller.run(&started.events, &requests, &loader.compiler(), &mut modules, &mut rescaled);
        for (id, t) in started.threads {
            if t.join().is_err() {
                tracing::error!(task = %id, "task thread panicked outside its body");
            }
        }
        let mut state = ended;
        let failure = match outcome {
            Ok(mut report) => {
                state.to(JobState::Finished).expect("an attempt that ends well finishes the job");
                report.startup = startup;
                report.restarts = attempt;
                report.restored_from = initial.as_ref().map(|r| r.location.clone());
                report.checkpoints = checkpoints.stats.clone();
                return Ok(report);
            }
            Err(e) => e,
        };
        if state == JobState::Cancelling {
            let _ = state.to(JobState::Cancelled);
            return Err(failure);
        }
        let RestartStrategy::FixedDelay { attempts, delay } = settings.restart else {
            let _ = state.to(JobState::Failed);
            return Err(failure);
        };
        if failure.retry() == RetryHint::NoRetry {
            tracing::warn!(job = %spec.name, "not restarting: a restart cannot help ({:?} error)", failure.domain());
            let _ = state.to(JobState::Failed);
            return Err(failure);
        }
        if attempt >= attempts {
            let _ = state.to(JobState::Failed);
            return Err(JobError::RestartsExhausted { cause: Box::new(failure), restarts: attempt, attempts });
        }
        let _ = state.to(JobState::Restarting);
        attempt += 1;
        let failed_at = now_ms().max(0) as u64;
        if let JobError::Task(TaskError::Guest { uid, subtask, failure, .. }) = &failure {
            let counts = run.guest_failures.entry((uid.to_string(), *subtask)).or_default();
            match failure.kind {
                FailureKind::Trap => counts.0 += 1,
                FailureKind::Timeout => counts.1 += 1,
                FailureKind::Returned | FailureKind::OutOfMemory | FailureKind::OverBudget => {}
            }
        }
        // The latest checkpoint this run completed, else where it started.
        restore_from = match checkpoints.latest_created() {
            Some(id) => Some(Arc::new(restore::load(checkpoints.storage(), id)?)),
            None => initial.clone(),
        };
        let from =
            restore_from.as_ref().map_or("the beginning (no checkpoint yet)".to_string(), |r| r.location.clone());
        tracing::warn!(
            "job '{}' failed: {failure}; restart {attempt} of {attempts} in {} ms, from {from}",
            spec.name,
            delay.as_millis()
        );
        run.restarts.push(Restart {
            attempt,
            time_ms: failed_at,
            cause: failure.to_string(),
            restored_from: restore_from.as_ref().map(|r| r.location.clone()),
        });
        if !restarting::wait_to_restart(delay, &requests, job, &plan, attempt, &run, &checkpoints) {
            let _ = state.to(JobState::Cancelled);
            return Err(JobError::Cancelled);
        }
        state.to(JobState::Starting).expect("a restarting job starts");
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
