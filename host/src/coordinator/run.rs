//! A run of a job: what crosses its attempts (the checkpoints and their
//! history, the modules with the swaps committed so far, the operators a
//! live rescale moved, the restarts), one attempt at a time from where the
//! last one left, and the restart between two attempts as the restart
//! policy ([`restart_policy`](super::restart_policy)) decides. Every move
//! of the job's state here is checked: one it refuses is an error.

use super::checkpointing::Checkpoints;
use super::controller::Controller;
use super::error::JobError;
use super::job_state::JobState;
use super::report::JobReport;
use super::restart_policy::{self, Verdict};
use super::run_info::RunInfo;
use super::spawn::{self, Connectors};
use super::start::Start;
use super::{modules, plan, restarting};
use crate::api::{ModuleInfo, Request, Restart, RestoredCheckpoint};
use crate::checkpoint::restore::{self, Restored};
use crate::checkpoint::storage::CheckpointStorage;
use crate::clock::now_ms;
use crate::config::{LoadedJob, StorageSettings};
use crate::fault::Classify;
use crate::runtime::TaskError;
use crate::runtime::sink::{OpenAt, SinkRestore};
use crate::wasm::{FailureKind, ModuleLoader, OperatorModule};
use crossbeam_channel::Receiver;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// What crosses the attempts of one run.
pub struct Run<'j> {
    job: &'j LoadedJob,
    info: RunInfo,
    checkpoints: Checkpoints,
    storage: Arc<CheckpointStorage>,
    /// By uid; a committed module swap replaces an entry, so a restart
    /// after it runs the new module.
    modules: HashMap<String, OperatorModule>,
    /// Operators a live rescale moved to another parallelism: a restart
    /// keeps it.
    rescaled: BTreeMap<String, u32>,
    /// What the run started from, and what the next attempt restores.
    initial: Option<Arc<Restored>>,
    restore_from: Option<Arc<Restored>>,
    attempt: u32,
    state: JobState,
}

impl<'j> Run<'j> {
    /// A run of `job` from `start`, its modules loaded with `loader`.
    pub fn new(
        job: &'j LoadedJob,
        start: Start,
        loader: &mut ModuleLoader,
        started: Instant,
    ) -> Result<Self, JobError> {
        let spec = &job.spec;
        let settings = &job.settings;
        let initial = start.restored.clone();
        // Without checkpointing, savepoints and swaps still ride on
        // barriers; their state goes to the savepoint's own storage, so
        // the checkpoint storage is host memory that nothing is written to.
        let storage = match &start.storage {
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
            start.highest_id,
            (initial.as_ref().map(|r| r.metadata.id), pinned.into_iter().collect()),
        );
        let run_modules = modules::load(spec, loader, initial.as_deref(), checkpoints.module_store().map(|s| &**s))?;
        let mut checkpoints = checkpoints.with_modules(&run_modules).inheriting(start.inherited);
        checkpoints.recordings = spec.operators.iter().any(|o| o.record.is_some());
        checkpoints.log = start.log;
        if checkpoints.recordings && !(settings.checkpointing.is_some() && storage.is_durable()) {
            // Not an error: the job runs as it would without recording.
            tracing::warn!(
                "replay.record is set, but recorded input is kept beside checkpoints and this job writes none to \
                 disk: set [checkpointing] interval and state.checkpoints.dir to record"
            );
        }
        let from_job_file = spec.operators.iter().map(|o| {
            let sha256 = run_modules.job_file.get(&o.uid).cloned().unwrap_or_default();
            (o.uid.clone(), ModuleInfo { path: o.module.display().to_string(), sha256 })
        });
        let swapped = run_modules
            .swapped
            .iter()
            .map(|(uid, m)| (uid.clone(), ModuleInfo { path: m.path.clone(), sha256: m.sha256.clone() }));
        let info = RunInfo {
            started,
            start_time_ms: now_ms().max(0) as u64 - started.elapsed().as_millis() as u64,
            restarts: Vec::new(),
            guest_failures: BTreeMap::new(),
            modules: from_job_file.chain(swapped).collect(),
        };
        Ok(Run {
            job,
            info,
            checkpoints,
            storage,
            modules: run_modules.by_uid,
            rescaled: BTreeMap::new(),
            restore_from: initial.clone(),
            initial,
            attempt: 0,
            state: JobState::Starting,
        })
    }

    /// Runs one attempt to its end: the job's report if it finished, else
    /// why it failed (the job is then failing or cancelling).
    pub fn attempt(
        &mut self,
        connectors: &Connectors,
        requests: &Receiver<Request>,
        loader: &ModuleLoader,
    ) -> Result<JobReport, JobError> {
        let (job, attempt) = (self.job, self.attempt);
        let plan = plan::plan_rescaled(&job.spec, &self.rescaled);
        if let Some(r) = &self.restore_from {
            self.checkpoints.history.restored(RestoredCheckpoint {
                id: r.metadata.id,
                location: r.location.clone(),
                restore_time_ms: now_ms().max(0) as u64,
                savepoint: r.metadata.savepoint,
            });
        }
        let started = spawn::start(spawn::Attempt {
            job,
            plan: &plan,
            connectors,
            modules: &self.modules,
            attempt,
            restore: self.restore_from.clone(),
            storage: self.storage.clone(),
            log: self.checkpoints.log(),
        });
        let startup = self.info.started.elapsed();
        tracing::info!(job = %job.spec.name, tasks = started.threads.len(), startup_ms = startup.as_millis() as u64, attempt, "job started");
        let mut cp = self.checkpoints.attempt(started.tasks.clone(), started.sources.clone(), started.controls.clone());
        // Its state is stored already, in this job's own checkpoints (a
        // savepoint is elsewhere: the job checkpoints at once to have a
        // place of its own to resume from).
        if self.restore_from.as_ref().is_some_and(|r| !r.metadata.savepoint) {
            let now = cp.now_ms();
            cp.protocol.first_after_interval(now);
        }
        let controller = Controller::new(job, &plan, &started, attempt, &self.info, cp, &self.modules, &self.rescaled);
        let (ended, outcome) =
            controller.run(&started.events, requests, &loader.compiler(), &mut self.modules, &mut self.rescaled);
        for (id, t) in started.threads {
            if t.join().is_err() {
                tracing::error!(task = %id, "task thread panicked outside its body");
            }
        }
        self.state = ended;
        let mut report = outcome?;
        self.state.to(JobState::Finished)?;
        report.startup = startup;
        report.restarts = attempt;
        report.restored_from = self.initial.as_ref().map(|r| r.location.clone());
        report.checkpoints = self.checkpoints.stats.clone();
        Ok(report)
    }

    /// After `failure` of the attempt that just ended: waits as the restart
    /// strategy says, answering `requests`, and readies the next attempt
    /// from the latest checkpoint; or ends the run with the error to
    /// report.
    pub fn restart_after(&mut self, failure: JobError, requests: &Receiver<Request>) -> Result<(), JobError> {
        let job = self.job;
        if self.state == JobState::Cancelling {
            self.state.to(JobState::Cancelled)?;
            return Err(failure);
        }
        let (attempt, attempts, delay, failure) = match restart_policy::decide(
            &job.settings.restart,
            failure,
            self.attempt,
        ) {
            Verdict::Restart { attempt, attempts, delay, failure } => (attempt, attempts, delay, failure),
            Verdict::Fail { error, hopeless } => {
                if hopeless {
                    tracing::warn!(job = %job.spec.name, "not restarting: a restart cannot help ({:?} error)", error.domain());
                }
                self.state.to(JobState::Failed)?;
                return Err(error);
            }
        };
        self.state.to(JobState::Restarting)?;
        self.attempt = attempt;
        self.count_guest_failure(&failure);
        let failed_at = now_ms().max(0) as u64;
        // The latest checkpoint this run completed, else where it started.
        self.restore_from = match self.checkpoints.latest_created() {
            Some(id) => Some(Arc::new(restore::load(self.checkpoints.storage(), id)?)),
            None => self.initial.clone(),
        };
        let restored_from = self.restore_from.as_ref().map(|r| r.location.clone());
        let from = restored_from.as_deref().unwrap_or("the beginning (no checkpoint yet)");
        tracing::warn!(
            "job '{}' failed: {failure}; restart {attempt} of {attempts} in {} ms, from {from}",
            job.spec.name,
            delay.as_millis()
        );
        let cause = failure.to_string();
        self.info.restarts.push(Restart { attempt, time_ms: failed_at, cause, restored_from });
        let plan = plan::plan_rescaled(&job.spec, &self.rescaled);
        if !restarting::wait_to_restart(delay, requests, job, &plan, attempt, &self.info, &self.checkpoints) {
            self.state.to(JobState::Cancelled)?;
            return Err(JobError::Cancelled);
        }
        self.state.to(JobState::Starting)?;
        Ok(())
    }

    /// Counts a guest's trap or interruption that failed the attempt, for
    /// the operator's metrics.
    fn count_guest_failure(&mut self, failure: &JobError) {
        if let JobError::Task(TaskError::Guest { uid, subtask, failure, .. }) = failure {
            let counts = self.info.guest_failures.entry((uid.to_string(), *subtask)).or_default();
            match failure.kind {
                FailureKind::Trap => counts.0 += 1,
                FailureKind::Timeout => counts.1 += 1,
                FailureKind::Returned | FailureKind::OutOfMemory | FailureKind::OverBudget => {}
            }
        }
    }
}

/// A run restored from a checkpoint that records the job's end: the sinks
/// publish what it holds and the run ends, having run nothing.
pub fn publish_finished(
    job: &LoadedJob,
    connectors: &Connectors,
    start: &Start,
    r: &Restored,
    started: Instant,
) -> Result<JobReport, JobError> {
    for (id, state) in &r.metadata.sinks {
        if let Some(sink) = connectors.sinks.get(id) {
            let restore = SinkRestore { id: r.metadata.id, state, storage: &r.storage };
            let fence = start.storage.as_ref().filter(|s| s.is_fenced());
            sink.publish_finished(OpenAt {
                job: &job.spec.name,
                subtask: 0,
                restore: Some(restore),
                fence,
                log: start.log,
                checkpoint_interval: job.settings.checkpointing.map(|c| c.interval),
                cancelled: &|| false,
            })
            .map_err(|source| TaskError::Sink { id: id.as_str().into(), cause: source })?;
        }
    }
    tracing::info!(checkpoint = %r.location, "the job had already finished; its output is published");
    Ok(JobReport {
        name: job.spec.name.clone(),
        elapsed: started.elapsed(),
        startup: started.elapsed(),
        restored_from: Some(r.location.clone()),
        already_finished: true,
        ..JobReport::default()
    })
}
