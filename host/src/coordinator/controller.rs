//! One attempt of a job, from its tasks' start to their end: the
//! controller follows the tasks' events, answers the control API's
//! requests, drives checkpoints, and moves the job through its states
//! ([`JobState`]). Each input has a method of its own; the loop that feeds
//! them is a few lines.

mod requests;

use super::checkpointing::{Attempt as Checkpointing, CheckpointingError};
use super::compiling::Compiling;
use super::error::JobError;
use super::hand_over::{self, Ask, HandOver};
use super::job_state::JobState;
use super::plan::{Plan, Role, plan_rescaled};
use super::progress::Progress;
use super::report::{JobReport, TaskCounters};
use super::rescale::Rescales;
use super::run_info::RunInfo;
use super::shadow::Shadows;
use super::spawn::Started;
use crate::api::Request;
use crate::checkpoint::metadata::SinkState;
use crate::config::LoadedJob;
use crate::runtime::message::Control;
use crate::runtime::{TaskError, TaskEvent, TaskId};
use crate::wasm::OperatorModule;
use crate::wasm::module::ModuleCompiler;
use crossbeam_channel::{Receiver, Sender};
use std::collections::{BTreeMap, HashMap};
use std::thread::JoinHandle;
use std::time::Instant;

/// Runs one attempt.
pub struct Controller<'a> {
    pub(super) job: &'a LoadedJob,
    /// The wiring as it is now (a rescale changes it).
    plan: Plan,
    state: JobState,
    attempt: u32,
    run: &'a RunInfo,
    counters: TaskCounters,
    controls: Vec<Sender<Control>>,
    threads: usize,
    ended: usize,
    sources_left: usize,
    sinks: usize,
    /// Sinks that reached their end and wait for the final checkpoint.
    sinks_waiting: usize,
    sink_states: BTreeMap<String, SinkState>,
    /// The final checkpoint (or, after a stop, the sinks' end) was asked for.
    end_sent: bool,
    checkpoints: Checkpointing<'a>,
    /// The first root failure; a secondary one until a root one comes.
    failure: Option<JobError>,
    /// A swap's or shadow run's module being compiled.
    compiling: Compiling,
    /// Shadow runs.
    shadows: Shadows,
    /// Where tasks send their events, for tasks a rescale starts.
    events_tx: Sender<TaskEvent>,
    /// Each operator's module now, by uid.
    modules: HashMap<String, OperatorModule>,
    /// Rescales, and what each operator runs at.
    rescales: Rescales,
    /// The hand-over under way, if one was asked for.
    hand_over: Option<HandOver>,
    /// Threads a rescale started.
    spawned: Vec<(TaskId, JoinHandle<()>)>,
    /// A task finished its work or failed (a rescale's ends aside).
    work_ended: bool,
    progress: Progress,
    last_draw: Instant,
}

impl<'a> Controller<'a> {
    /// A controller for the started tasks of attempt `attempt`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        job: &'a LoadedJob,
        plan: &Plan,
        started: &Started,
        attempt: u32,
        run: &'a RunInfo,
        checkpoints: Checkpointing<'a>,
        modules: &HashMap<String, OperatorModule>,
        rescaled: &BTreeMap<String, u32>,
    ) -> Self {
        let count = |role| plan.nodes.iter().filter(|n| n.role == role).map(|n| n.parallelism as usize).sum();
        let mut state = JobState::Starting;
        state.to(JobState::Running).expect("a starting job runs");
        Controller {
            job,
            plan: plan.clone(),
            state,
            attempt,
            run,
            counters: TaskCounters::default(),
            controls: started.controls.clone(),
            threads: started.threads.len(),
            ended: 0,
            sources_left: count(Role::Source),
            sinks: count(Role::Sink),
            sinks_waiting: 0,
            sink_states: BTreeMap::new(),
            end_sent: false,
            checkpoints,
            failure: None,
            compiling: Compiling::default(),
            shadows: Shadows::default(),
            events_tx: started.events_tx.clone(),
            modules: modules.clone(),
            rescales: Rescales::new(rescaled.clone()),
            hand_over: None,
            spawned: Vec::new(),
            work_ended: false,
            progress: Progress::new(),
            last_draw: Instant::now(),
        }
    }

    /// Follows the attempt until every task ended; answers `requests`
    /// meanwhile, loading swapped-in modules with `loader`. Modules swapped
    /// in go into `modules`, operators rescaled into `rescaled`, for the
    /// attempts after this one.
    pub fn run(
        mut self,
        events: &Receiver<TaskEvent>,
        requests: &Receiver<Request>,
        compiler: &ModuleCompiler,
        modules: &mut HashMap<String, OperatorModule>,
        rescaled: &mut BTreeMap<String, u32>,
    ) -> (JobState, Result<JobReport, JobError>) {
        let wait = self.checkpoints.poll_interval().min(self.job.settings.progress_interval);
        while self.ended < self.threads {
            let compiled = self.compiling.done();
            crossbeam_channel::select! {
                recv(events) -> e => match e {
                    Ok(e) => self.on_event(e),
                    Err(_) => break,
                },
                recv(requests) -> r => {
                    if let Ok(r) = r {
                        self.on_request(r, compiler);
                    }
                }
                recv(compiled) -> c => {
                    if let Ok(c) = c {
                        self.on_compiled(c);
                    }
                }
                default(wait) => {}
            }
            self.on_tick();
            let swapped = self.checkpoints.take_committed_swaps();
            self.modules.extend(swapped.iter().cloned());
            modules.extend(swapped);
        }
        self.progress.finish();
        for (id, t) in std::mem::take(&mut self.spawned) {
            if t.join().is_err() {
                tracing::error!(task = %id, "task thread panicked outside its body");
            }
        }
        *rescaled = std::mem::take(&mut self.rescales).end();
        self.shadows.end_with_attempt();
        self.outcome()
    }

    /// A task's event.
    fn on_event(&mut self, event: TaskEvent) {
        let failing = self.state.is_stopping_tasks();
        let result = match event {
            TaskEvent::Progress(task, c) => {
                self.counters.set(task, c);
                Ok(())
            }
            TaskEvent::Guest(task, m) => {
                self.counters.set_guest(task, *m);
                Ok(())
            }
            TaskEvent::Finished(task, _) if self.rescales.quiet_end(&task) => {
                self.ended += 1;
                Ok(())
            }
            TaskEvent::Finished(task, c) => {
                tracing::debug!(task = %task, records_in = c.records_in, records_out = c.records_out, "task finished");
                self.ended += 1;
                self.work_ended = true;
                if self.plan.node(&task.node).is_some_and(|n| n.role == Role::Source) {
                    self.on_source_finished(&task);
                } else if !failing {
                    self.checkpoints.on_task_ended(&task);
                }
                self.counters.set(task, c);
                Ok(())
            }
            TaskEvent::Failed(task, e) => {
                self.ended += 1;
                self.work_ended = true;
                self.on_task_failed(task, e);
                Ok(())
            }
            TaskEvent::Acknowledged { task, id, snapshot, timing } if !failing => {
                self.checkpoints.on_ack(&task, id, snapshot, timing)
            }
            TaskEvent::Declined { task, id, reason } if !failing => self.checkpoints.on_decline(&task, id, &reason),
            TaskEvent::Acknowledged { .. } | TaskEvent::Declined { .. } => Ok(()),
            TaskEvent::HandedOver(task, c) => {
                // An old subtask of a rescale hands its state over and ends.
                self.counters.retire(&task, c);
                self.rescales.on_handed_over(task);
                Ok(())
            }
            TaskEvent::ReadyToTakeOver(task) => {
                self.rescales.on_ready_to_take_over(&task, &mut self.checkpoints);
                Ok(())
            }
            TaskEvent::TookOver { task, barrier_at } => {
                self.rescales.on_took_over(&task, barrier_at);
                Ok(())
            }
            TaskEvent::Shadow(task, report) => {
                self.shadows.on_report(&task, *report, &self.checkpoints);
                Ok(())
            }
            TaskEvent::SwapPrepared { task, id, result } => {
                self.checkpoints.on_swap_prepared(&task, id, result);
                Ok(())
            }
            TaskEvent::SourceEnded { task, position } if !failing => self.checkpoints.on_source_ended(&task, position),
            TaskEvent::SourceEnded { .. } => Ok(()),
            TaskEvent::SinkEnded { task, state, counters } => {
                self.checkpoints.on_task_ended(&task);
                self.sinks_waiting += 1;
                if let Some(s) = state {
                    self.sink_states.insert(task.node.to_string(), s);
                }
                self.counters.set(task, counters);
                Ok(())
            }
        };
        if let Err(e) = result {
            self.fail(e.into());
        }
    }

    /// Source subtask `task` ended (its input read to the end, or stopped
    /// with a savepoint): checkpoints go on while another source runs.
    fn on_source_finished(&mut self, task: &TaskId) {
        self.sources_left -= 1;
        tracing::debug!(task = %task, sources_left = self.sources_left, "source ended");
        if self.sources_left == 0 {
            self.checkpoints.on_sources_done();
        }
        let stopped = self.checkpoints.stopped_with().is_some();
        if self.sources_left == 0 && !stopped && self.state.allows(JobState::Finishing) {
            self.move_to(JobState::Finishing);
        }
    }

    /// Keeps the first root failure (a root failure replaces a secondary
    /// one) and stops every task once.
    fn on_task_failed(&mut self, task: TaskId, e: TaskError) {
        if e.is_secondary() {
            tracing::debug!(task = %task, error = %e, "task stopped");
        } else {
            tracing::error!(task = %task, error = %e, "task failed");
        }
        if self.state == JobState::Cancelling {
            return;
        }
        let replaces = match &self.failure {
            None => true,
            Some(JobError::Task(f)) => f.is_secondary() && !e.is_secondary(),
            Some(_) => false,
        };
        if replaces {
            self.fail(JobError::Task(e));
        }
    }

    /// The attempt fails with `e` (kept if it is the first, or replaces a
    /// secondary task failure); every task is told to stop, once.
    fn fail(&mut self, e: JobError) {
        if !self.state.is_stopping_tasks() {
            if let JobError::Checkpoints(c) = &e {
                tracing::error!(job = %self.job.spec.name, "{c}");
            }
            self.move_to(JobState::Failing);
            self.cancel_all();
        }
        if self.state == JobState::Failing {
            self.failure = Some(e);
        }
    }

    fn cancel_all(&self) {
        for c in &self.controls {
            let _ = c.send(Control::Cancel);
        }
    }

    fn move_to(&mut self, to: JobState) {
        if let Err(e) = self.state.to(to) {
            // A transition the controller should never ask for.
            tracing::error!(job = %self.job.spec.name, "{e}");
        }
    }

    /// The checkpointing, if periodic checkpoints are on.
    fn periodic(&self) -> Option<&Checkpointing<'a>> {
        Some(&self.checkpoints).filter(|c| c.cp.periodic())
    }

    /// Keeps the job's state in step with its savepoint: savepointing or
    /// stopping while one is under way, running again when it failed.
    fn follow_savepoint(&mut self) {
        let c = &self.checkpoints;
        let (pending, stop, stopped) = (c.savepoint_pending(), c.stop_pending(), c.stopped_with().is_some());
        let next = match self.state {
            JobState::Running if pending && stop => JobState::Stopping,
            JobState::Running if pending => JobState::Savepointing,
            JobState::Savepointing if !pending => JobState::Running,
            JobState::Stopping if !pending && !stopped => JobState::Running,
            _ => return,
        };
        self.move_to(next);
    }

    /// Time passed: checkpoints, a compile that takes too long, the job's
    /// end, the progress line.
    fn on_tick(&mut self) {
        self.compiling.expire();
        let result = self.drive_checkpoints();
        if let Err(e) = result {
            self.fail(e.into());
        }
        self.follow_hand_over();
        if self.rescales.follow(&mut self.checkpoints) {
            // The rescale's barrier went out: the wiring is the new one.
            self.plan = plan_rescaled(&self.job.spec, self.rescales.rescaled());
        }
        self.shadows.follow(&mut self.checkpoints);
        self.follow_savepoint();
        if self.last_draw.elapsed() >= self.job.settings.progress_interval {
            self.last_draw = Instant::now();
            let (read, written) = self.counters.totals(&self.plan.nodes);
            self.progress.set_checkpoints(self.periodic().map(|c| c.status()));
            self.progress.update(read, written);
        }
    }

    /// Shows the hand-over under way the checkpoints, and triggers the one
    /// it asks for.
    fn follow_hand_over(&mut self) {
        let Some(h) = self.hand_over.as_mut() else { return };
        let c = &mut self.checkpoints;
        let view = hand_over::View {
            changing: c.savepoint_pending() || self.rescales.busy(),
            in_flight: c.protocol.in_flight(),
            next_id: c.protocol.next_id(),
            latest: c.cp.stats.latest,
        };
        if h.follow(view) == Ask::Checkpoint {
            c.protocol.request_checkpoint();
        }
    }

    fn drive_checkpoints(&mut self) -> Result<(), CheckpointingError> {
        if self.state.is_stopping_tasks() {
            return Ok(());
        }
        let c = &mut self.checkpoints;
        c.tick()?;
        // Every task but the sinks is done and the sinks wait: once no
        // checkpoint is in flight, the final one ends the job.
        let only_sinks_left =
            self.sinks > 0 && self.sinks_waiting == self.sinks && self.ended == self.threads - self.sinks;
        if self.end_sent || !only_sinks_left || c.in_flight() {
            return Ok(());
        }
        self.end_sent = true;
        if c.stopped_with().is_some() {
            // Stopped with a savepoint: not the end of the input, so no
            // final checkpoint; sinks drop what followed it.
            for tx in &self.controls {
                let _ = tx.send(Control::EndStopped);
            }
            Ok(())
        } else {
            c.finish(std::mem::take(&mut self.sink_states)).map(|_| ())
        }
    }

    /// The attempt's end: its report, or why it failed.
    fn outcome(self) -> (JobState, Result<JobReport, JobError>) {
        let state = self.state;
        let result = match state {
            JobState::Cancelling => Err(JobError::Cancelled),
            JobState::Failing => Err(self.failure.unwrap_or(JobError::Task(TaskError::Cancelled))),
            _ => Ok(JobReport {
                name: self.job.spec.name.clone(),
                nodes: self.counters.per_node(&self.plan.nodes),
                elapsed: self.progress.elapsed(),
                stopped_with: self.checkpoints.stopped_with().cloned(),
                ..JobReport::default()
            }),
        };
        (state, result)
    }
}
