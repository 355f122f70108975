//! The control API's requests, as the controller answers them: what it
//! reports (status, metrics, the graph), and the changes it starts (a
//! savepoint, a swap, a rescale, a shadow run, a hand-over, a cancel),
//! each checked against what is [`UnderWay`] and handed to its driver.

use super::Controller;
use crate::api::{JobGraph, Metrics, Request, RequestError, RescaleRequest, Status, SwapRequest};
use crate::coordinator::checkpointing::{Attempt as Checkpointing, SwapReply};
use crate::coordinator::compiling::Purpose;
use crate::coordinator::hand_over::HandOver;
use crate::coordinator::job_state::JobState;
use crate::coordinator::modules::SwapModuleError;
use crate::coordinator::plan::plan_rescaled;
use crate::coordinator::rescale::RescaleReply;
use crate::coordinator::spawn::{self, Connectors};
use crate::coordinator::under_way::UnderWay;
use crate::coordinator::views::{checkpoint_config, graph, run_status};
use crate::wasm::module::{Loaded, ModuleCompiler};

impl<'a> Controller<'a> {
    /// A request of the control API.
    pub(super) fn on_request(&mut self, request: Request, compiler: &ModuleCompiler) {
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
            Request::Savepoint(_, reply) if self.rescales.busy() => {
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
            Request::Shadow(request, reply) => {
                match self.shadows.check(&request, &self.job.spec, &self.plan, &self.under_way()) {
                    Ok(()) => self.compile(
                        request.operator.clone(),
                        request.module.clone(),
                        Purpose::Shadow(request, reply),
                        compiler,
                    ),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Request::ShadowReport(reply) => {
                let _ = reply.send(self.shadows.report());
            }
            Request::StopShadow(reply) => self.shadows.stop(reply, &mut self.checkpoints),
            // The shadow run ends; its module is swapped in over the live
            // state at the next barrier.
            Request::PromoteShadow(reply) => match self.shadows.promote(&mut self.checkpoints) {
                Ok(swap) => self.start_swap(swap, reply, compiler),
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
        }
        self.follow_savepoint();
    }

    /// What changes of the job are under way, for a request to start one.
    fn under_way(&self) -> UnderWay {
        let c = &self.checkpoints;
        UnderWay {
            compiling: self.compiling.busy(),
            swap: c.swap.is_some(),
            rescale: self.rescales.busy(),
            shadow: self.shadows.running(),
            savepoint: c.savepoint_pending(),
            running: self.state == JobState::Running && !self.work_ended && !c.stopped,
            refused: self.refusal(),
        }
    }

    /// A swap request: the new module is compiled (see
    /// [`Controller::compile`]), then [`Controller::on_compiled`] takes it on.
    fn start_swap(&mut self, request: SwapRequest, reply: SwapReply, compiler: &ModuleCompiler) {
        let job = self.job;
        let Some(operator) = job.spec.operators.iter().find(|o| o.uid == request.operator) else {
            let known = job.spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>().join(", ");
            let _ = reply.send(Err(RequestError::UnknownOperator { uid: request.operator, known }));
            return;
        };
        let under_way = self.under_way();
        let refused = match under_way.accepting() {
            Err(e) => Some(e),
            Ok(()) if under_way.compiling => Some(RequestError::SwapInProgress),
            Ok(()) if under_way.rescale => Some(RequestError::RescaleInProgress),
            Ok(()) if under_way.shadow => Some(RequestError::ShadowInProgress),
            Ok(()) => None,
        };
        if let Some(e) = refused {
            let _ = reply.send(Err(e));
            return;
        }
        let uid = operator.uid.clone();
        let module = request.module.clone();
        self.compile(uid, module, Purpose::Swap(request, reply), compiler);
    }

    /// Reads and compiles operator `uid`'s new module off the coordinator's
    /// thread.
    fn compile(&mut self, uid: String, module: String, purpose: Purpose, compiler: &ModuleCompiler) {
        self.compiling.start(compiler, uid, module, purpose, self.checkpoints.cp.module_store());
    }

    /// The swap's module was compiled (or could not be): the swap goes on
    /// riding the next savepoint, or is answered with why not.
    pub(super) fn on_compiled(&mut self, result: Result<Loaded, SwapModuleError>) {
        let Some(purpose) = self.compiling.finish() else { return };
        let (request, reply, loaded) = match (purpose, result) {
            (purpose, Err(e)) => return purpose.fail(RequestError::Module(e.to_string())),
            (Purpose::Shadow(request, reply), Ok(loaded)) => {
                let under_way = self.under_way();
                let (spec, plan) = (&self.job.spec, &self.plan);
                return self.shadows.start(request, reply, loaded, spec, plan, &under_way, &mut self.checkpoints);
            }
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

    /// Why the job takes no savepoint, swap or other change now, if it
    /// takes none.
    fn refusal(&self) -> Option<RequestError> {
        match self.state {
            JobState::Failing | JobState::Cancelling => Some(RequestError::Failing),
            JobState::Finishing => Some(RequestError::Finishing),
            _ if self.hand_over.is_some() => Some(RequestError::HandingOver),
            _ => None,
        }
    }

    /// The checkpointing that takes a savepoint or swap now, or why none
    /// can be taken.
    fn accepting(&mut self) -> Result<&mut Checkpointing<'a>, RequestError> {
        match self.refusal() {
            Some(e) => Err(e),
            None => Ok(&mut self.checkpoints),
        }
    }

    /// `host rescale`: checks the request, starts the new subtasks (they
    /// wait for their state), and hands the rescale to its driver, which
    /// asks for the barrier that moves the state to them.
    fn start_rescale(&mut self, request: RescaleRequest, reply: RescaleReply) {
        let (job, under_way) = (self.job, self.under_way());
        let from = match self.rescales.check(&request, &job.spec, &job.settings.limits, &self.plan, &under_way) {
            Ok(from) => from,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let plan = plan_rescaled(&job.spec, &self.rescales.with(&request));
        let connectors = Connectors::default();
        let started = spawn::start_rescaled(
            &spawn::Attempt {
                job,
                plan: &plan,
                connectors: &connectors,
                modules: &self.modules,
                attempt: self.attempt,
                restore: None,
                storage: self.checkpoints.cp.storage().clone(),
                log: self.checkpoints.cp.log(),
            },
            &request.operator,
            from,
            &self.events_tx,
        );
        self.threads += started.threads.len();
        self.controls.extend(started.controls.iter().cloned());
        self.spawned.extend(started.threads);
        self.rescales.begin(request, from, reply, started.controls, started.order);
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
}
