//! One attempt of a job, from its tasks' start to their end: the
//! controller follows the tasks' events, answers the control API's
//! requests, drives checkpoints, and moves the job through its states
//! ([`JobState`]). Each input has a method of its own; the loop that feeds
//! them is a few lines.

use super::checkpointing::{Attempt as Checkpointing, CheckpointingError};
use super::error::JobError;
use super::hand_over::{self, Ask, HandOver};
use super::job_state::JobState;
use super::modules::SwapModuleError;
use super::plan::{Plan, Role};
use super::progress::Progress;
use super::report::{JobReport, TaskCounters};
use super::rescale::PendingRescale;
use super::run_info::RunInfo;
use super::savepoints::SwapReply;
use super::shadow::{ShadowReply, Shadows};
use super::spawn::Started;
use super::views::{checkpoint_config, graph, run_status};
use crate::api::{JobGraph, Metrics, Request, RequestError, ShadowRequest, Status, SwapRequest};
use crate::checkpoint::metadata::SinkState;
use crate::config::LoadedJob;
use crate::runtime::message::Control;
use crate::runtime::{TaskError, TaskEvent, TaskId};
use crate::wasm::OperatorModule;
use crate::wasm::module::{Loaded, ModuleCompiler};
use crossbeam_channel::{Receiver, Sender};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a swap's module may take to read and compile.
const SWAP_COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// A swap or shadow run waiting for its module to compile.
pub(super) struct Compiling {
    purpose: Purpose,
    started: Instant,
    done: Receiver<Result<Loaded, SwapModuleError>>,
}

/// What a module is compiled for.
enum Purpose {
    Swap(SwapRequest, SwapReply),
    Shadow(ShadowRequest, ShadowReply),
}

impl Purpose {
    /// Answers that the module could not be used.
    fn fail(self, e: RequestError) {
        match self {
            Purpose::Swap(_, reply) => {
                let _ = reply.send(Err(e));
            }
            Purpose::Shadow(_, reply) => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// Runs one attempt.
pub struct Controller<'a> {
    pub(super) job: &'a LoadedJob,
    /// The wiring as it is now (a rescale changes it).
    pub(super) plan: Plan,
    pub(super) state: JobState,
    pub(super) attempt: u32,
    run: &'a RunInfo,
    pub(super) counters: TaskCounters,
    pub(super) controls: Vec<Sender<Control>>,
    pub(super) threads: usize,
    pub(super) ended: usize,
    sources_left: usize,
    sinks: usize,
    /// Sinks that reached their end and wait for the final checkpoint.
    sinks_waiting: usize,
    sink_states: BTreeMap<String, SinkState>,
    /// The final checkpoint (or, after a stop, the sinks' end) was asked for.
    end_sent: bool,
    pub(super) checkpoints: Checkpointing<'a>,
    /// The first root failure; a secondary one until a root one comes.
    failure: Option<JobError>,
    /// A swap's or shadow run's module being compiled.
    pub(super) compiling: Option<Compiling>,
    /// Shadow runs.
    pub(super) shadows: Shadows,
    /// Where tasks send their events, for tasks a rescale starts.
    pub(super) events_tx: Sender<TaskEvent>,
    /// Each operator's module now, by uid.
    pub(super) modules: HashMap<String, OperatorModule>,
    /// Operators at another parallelism than the job file's, by uid.
    pub(super) rescaled: BTreeMap<String, u32>,
    /// A rescale under way.
    pub(super) rescale: Option<PendingRescale>,
    /// The hand-over under way, if one was asked for.
    pub(super) hand_over: Option<HandOver>,
    /// Tasks whose next `Finished` is no end of the job's work: old
    /// subtasks of a rescale, new ones of an abandoned one.
    pub(super) quiet_ends: HashMap<TaskId, u32>,
    /// Threads a rescale started.
    pub(super) spawned: Vec<(TaskId, JoinHandle<()>)>,
    /// A task finished its work or failed (a rescale's ends aside).
    pub(super) work_ended: bool,
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
            compiling: None,
            shadows: Shadows::default(),
            events_tx: started.events_tx.clone(),
            modules: modules.clone(),
            rescaled: rescaled.clone(),
            rescale: None,
            hand_over: None,
            quiet_ends: HashMap::new(),
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
            let compiled = self.compiling.as_ref().map_or_else(crossbeam_channel::never, |c| c.done.clone());
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
        self.end_rescale();
        self.end_shadow_with_attempt();
        rescaled.clone_from(&self.rescaled);
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
            TaskEvent::Finished(task, _) if self.quiet_end(&task) => {
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
                self.on_handed_over(task, c);
                Ok(())
            }
            TaskEvent::ReadyToTakeOver(task) => {
                self.on_ready_to_take_over(&task);
                Ok(())
            }
            TaskEvent::TookOver { task, barrier_at } => {
                self.on_took_over(&task, barrier_at);
                Ok(())
            }
            TaskEvent::Shadow(task, report) => {
                self.on_shadow_report(&task, *report);
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

    /// A request of the control API.
    fn on_request(&mut self, request: Request, compiler: &ModuleCompiler) {
        match request {
            Request::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Request::Metrics(reply) => {
                let _ = reply.send(self.metrics());
            }
            Request::Plan(reply) => {
                let _ = reply.send(self.graph());
            }
            Request::Checkpoints(reply) => {
                let _ = reply.send(self.checkpoints.cp.history.overview());
            }
            Request::CheckpointDetails(id, reply) => {
                let _ = reply.send(self.checkpoints.cp.history.details(id));
            }
            Request::CheckpointConfig(reply) => {
                let _ = reply.send(checkpoint_config(self.job));
            }
            Request::Cancel(reply) => {
                self.cancel();
                let _ = reply.send(());
            }
            Request::Savepoint(_, reply) if self.rescale.is_some() => {
                let _ = reply.send(Err(RequestError::RescaleInProgress));
            }
            Request::Savepoint(request, reply) => {
                let job = self.job;
                let settings = &job.settings;
                match self.accepting() {
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                    Ok(c) => c.request_savepoint(request, settings.savepoint_dir.as_deref(), &settings.storage, reply),
                }
            }
            Request::HandOver(reply) => {
                let refused = match self.accepting() {
                    Err(e) => Some(e),
                    Ok(c) if !c.cp.periodic() => Some(RequestError::Refused("the job takes no checkpoints".into())),
                    Ok(_) => None,
                };
                // A refused request leaves a hand-over under way as it is.
                if let Some(h) = HandOver::start(reply, refused) {
                    self.hand_over = Some(h);
                    self.follow_hand_over();
                }
            }
            Request::Swap(request, reply) => self.start_swap(request, reply, compiler),
            Request::Rescale(request, reply) => self.start_rescale(request, reply),
            Request::Shadow(request, reply) => match self.check_shadow(&request) {
                Ok(()) => self.compile(
                    request.operator.clone(),
                    request.module.clone(),
                    Purpose::Shadow(request, reply),
                    compiler,
                ),
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Request::ShadowReport(reply) => {
                let _ = reply.send(self.shadow_report());
            }
            Request::StopShadow(reply) => self.stop_shadow(reply),
            Request::PromoteShadow(reply) => self.promote_shadow(reply, compiler),
        }
        self.follow_savepoint();
    }

    /// A swap request: the new module is compiled (see
    /// [`Controller::compile`]), then [`Controller::on_compiled`] takes it on.
    pub(super) fn start_swap(&mut self, request: SwapRequest, reply: SwapReply, compiler: &ModuleCompiler) {
        let job = self.job;
        let Some(operator) = job.spec.operators.iter().find(|o| o.uid == request.operator) else {
            let known = job.spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>().join(", ");
            let _ = reply.send(Err(RequestError::UnknownOperator { uid: request.operator, known }));
            return;
        };
        if let Err(e) = self.accepting() {
            let _ = reply.send(Err(e));
            return;
        }
        if self.compiling.is_some() {
            let _ = reply.send(Err(RequestError::SwapInProgress));
            return;
        }
        if self.rescale.is_some() {
            let _ = reply.send(Err(RequestError::RescaleInProgress));
            return;
        }
        if self.shadows.running() {
            let _ = reply.send(Err(RequestError::ShadowInProgress));
            return;
        }
        let uid = operator.uid.clone();
        let module = request.module.clone();
        self.compile(uid, module, Purpose::Swap(request, reply), compiler);
    }

    /// Reads and compiles operator `uid`'s new module on a thread of its
    /// own (a large module, or a file that blocks, must not stop the
    /// coordinator).
    fn compile(&mut self, uid: String, module: String, purpose: Purpose, compiler: &ModuleCompiler) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (compiler, path) = (compiler.clone(), PathBuf::from(module));
        // A swap's module goes into the job's module store, where a resume
        // loads it from, before the swap is asked of the tasks.
        let store = self.checkpoints.cp.module_store().filter(|_| matches!(purpose, Purpose::Swap(..))).cloned();
        let spawned = std::thread::Builder::new().name("weir-compile".into()).spawn(move || {
            let _ = tx.send(super::modules::load_for_swap(&compiler, &uid, &path, store.as_deref()));
        });
        if let Err(e) = spawned {
            purpose.fail(RequestError::Module(format!("cannot start a thread to compile it: {e}")));
            return;
        }
        self.compiling = Some(Compiling { purpose, started: Instant::now(), done: rx });
    }

    /// The swap's module was compiled (or could not be): the swap goes on
    /// riding the next savepoint, or is answered with why not.
    fn on_compiled(&mut self, result: Result<Loaded, SwapModuleError>) {
        let Some(Compiling { purpose, .. }) = self.compiling.take() else { return };
        let (request, reply, loaded) = match (purpose, result) {
            (purpose, Err(e)) => return purpose.fail(RequestError::Module(e.to_string())),
            (Purpose::Shadow(request, reply), Ok(loaded)) => return self.shadow_compiled(request, reply, loaded),
            (Purpose::Swap(request, reply), Ok(loaded)) => (request, reply, loaded),
        };
        let job = self.job;
        let subtasks = self.plan.node(&request.operator).map_or(1, |n| n.parallelism);
        let Some(operator) = job.spec.operators.iter().find(|o| o.uid == request.operator) else {
            let _ = reply.send(Err(RequestError::Failing));
            return;
        };
        // The job may have begun failing, or handing its partition over,
        // while the module compiled.
        let c = match self.accepting() {
            Ok(c) => c,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        c.request_swap(
            &operator.uid,
            loaded,
            subtasks,
            request.dir,
            job.settings.savepoint_dir.as_deref(),
            &job.settings.storage,
            reply,
        );
        self.follow_savepoint();
    }

    /// The checkpointing, if periodic checkpoints are on.
    fn periodic(&self) -> Option<&Checkpointing<'a>> {
        Some(&self.checkpoints).filter(|c| c.cp.periodic())
    }

    /// The checkpointing that takes a savepoint or swap now, or why none
    /// can be taken.
    pub(super) fn accepting(&mut self) -> Result<&mut Checkpointing<'a>, RequestError> {
        match self.state {
            JobState::Failing | JobState::Cancelling => Err(RequestError::Failing),
            JobState::Finishing => Err(RequestError::Finishing),
            _ if self.hand_over.is_some() => Err(RequestError::HandingOver),
            _ => Ok(&mut self.checkpoints),
        }
    }

    /// `host cancel`: every task stops; no restart follows.
    fn cancel(&mut self) {
        if matches!(self.state, JobState::Cancelling) {
            return;
        }
        tracing::warn!(job = %self.job.spec.name, "cancelled on request");
        if !self.state.is_stopping_tasks() {
            self.cancel_all();
        }
        self.move_to(JobState::Cancelling);
    }

    /// Keeps the job's state in step with its savepoint: savepointing or
    /// stopping while one is under way, running again when it failed.
    pub(super) fn follow_savepoint(&mut self) {
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
        if self.compiling.as_ref().is_some_and(|c| c.started.elapsed() > SWAP_COMPILE_TIMEOUT) {
            let c = self.compiling.take().expect("checked");
            c.purpose.fail(RequestError::Module(format!(
                "compiling it took longer than {} s",
                SWAP_COMPILE_TIMEOUT.as_secs()
            )));
        }
        let result = self.drive_checkpoints();
        if let Err(e) = result {
            self.fail(e.into());
        }
        self.follow_hand_over();
        self.follow_rescale();
        self.follow_shadow();
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
            changing: c.savepoint_pending() || self.rescale.is_some(),
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

    fn status(&self) -> Status {
        let (records_read, records_written) = self.counters.totals(&self.plan.nodes);
        Status {
            records_read,
            records_written,
            checkpoints: self.periodic().map(|c| c.status()),
            latest_checkpoint: self.checkpoints.cp.stats.latest,
            nodes: self.counters.status(&self.plan.nodes),
            ..run_status(self.job, self.run, self.attempt, self.state, &self.plan)
        }
    }

    fn graph(&self) -> JobGraph {
        graph(self.job, &self.plan, self.run, self.checkpoints.cp)
    }

    fn metrics(&self) -> Metrics {
        Metrics {
            job: self.job.spec.name.clone(),
            restarts: self.attempt,
            uptime_ms: self.run.uptime_ms(),

            tasks: self.task_metrics(),
            checkpoints: self.periodic().map(|c| c.metrics()),
        }
    }

    /// Every subtask's metrics, operators' with their state's size in the
    /// latest checkpoint and the run's guest failures.
    fn task_metrics(&self) -> Vec<crate::api::TaskMetrics> {
        let mut tasks = self.counters.per_task(&self.plan.nodes);
        let sizes = self.checkpoints.cp.history.latest_task_sizes();
        for t in tasks.iter_mut().filter(|t| t.role == "operator") {
            let key = (t.node.clone(), t.subtask);
            let g = t.guest.get_or_insert_with(Default::default);
            g.state_bytes = sizes.get(&key).copied();
            if let Some(&(traps, interruptions)) = self.run.guest_failures.get(&key) {
                (g.traps, g.interruptions) = (traps, interruptions);
            }
        }
        tasks
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
