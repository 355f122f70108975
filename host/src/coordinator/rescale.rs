//! Live rescale (`host rescale`), the coordinator's side: a request is
//! checked, the operator's new subtasks are started (waiting for their
//! state), and once each has opened its state backend the order rides on
//! the next checkpoint's barrier; the request is answered once every new
//! subtask took over. The tasks' side is [`crate::runtime::rescale`].
//!
//! Refused, with the reason: an unknown operator, a parallelism of 0, the
//! same one, or one above the job's max parallelism (key groups are the
//! unit that moves), the operator's own, or the host's ceilings
//! (`limits.parallelism`, `limits.tasks`); an operator joined to a
//! neighbour by a forward edge (forward pairs subtask i with subtask i, so
//! both sides would have to change); while a savepoint, swap, shadow run
//! or other rescale is under way; once any task has finished (the input is
//! ending). A whole-job rescale is the client's: one request per operator
//! ([`crate::control::client::Client::rescale_job`]).

use super::controller::Controller;
use super::job_state::JobState;
use super::plan::{Role, plan_rescaled};
use super::spawn::{Attempt, Connectors, start_rescaled};
use crate::api::{RequestError, RescaleDone, RescaleRequest};
use crate::checkpoint::protocol::CheckpointId;
use crate::config::Partition;
use crate::runtime::message::{Control, RescaleOrder};
use crate::runtime::{Counters, TaskId};
use crossbeam_channel::Sender;
use std::sync::Arc;
use std::time::Instant;

/// Who is waiting for a rescale's outcome.
pub type RescaleReply = Sender<Result<RescaleDone, RequestError>>;

/// A rescale asked for and not finished.
pub struct PendingRescale {
    uid: String,
    from: u32,
    to: u32,
    reply: RescaleReply,
    /// The new subtasks' control channels.
    controls: Vec<Sender<Control>>,
    /// The order the barrier carries, until every new subtask is ready
    /// for it (its backend open).
    order: Option<Arc<RescaleOrder>>,
    /// New subtasks ready for the barrier so far.
    prepared: u32,
    /// The checkpoint whose barrier carries it, once triggered.
    id: Option<CheckpointId>,
    /// New subtasks that took over so far.
    ready: u32,
    /// When the first old subtask's barrier came.
    first_barrier: Option<Instant>,
}

impl Controller<'_> {
    /// `host rescale`: checks the request, starts the new subtasks, and
    /// asks for the barrier that moves the state to them.
    pub(super) fn start_rescale(&mut self, request: RescaleRequest, reply: RescaleReply) {
        match self.check_rescale(&request) {
            Err(e) => {
                let _ = reply.send(Err(e));
            }
            Ok(from) => self.begin_rescale(request, from, reply),
        }
    }

    /// Why `request` cannot be carried out now; else the operator's
    /// parallelism.
    fn check_rescale(&mut self, request: &RescaleRequest) -> Result<u32, RequestError> {
        let job = self.job;
        let uid = request.operator.as_str();
        let Some(node) = self.plan.node(uid).filter(|n| n.role == Role::Operator) else {
            let known = job.spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>().join(", ");
            return Err(RequestError::UnknownOperator { uid: uid.to_string(), known });
        };
        let (from, to, max) = (node.parallelism, request.parallelism, job.spec.max_parallelism);
        let cap = job.spec.operators.iter().find(|o| o.uid == uid).map_or(max, |o| o.max_parallelism);
        let refuse = |why: String| Err(RequestError::Refused(why));
        if to == 0 {
            return refuse(format!("'{uid}' cannot run on 0 subtasks: give a parallelism of 1 or more"));
        }
        if to > cap && cap < max {
            return refuse(format!(
                "'{uid}' cannot run on {to} subtasks: its max_parallelism is {cap} (its [[operators]] entry in the \
                 job file); ask for {cap} or fewer"
            ));
        }
        if to > max {
            return refuse(format!(
                "'{uid}' cannot run on {to} subtasks: the job has {max} key groups (max_parallelism = {max}), \
                 and a subtask owns at least one; raise max_parallelism in the job file (this needs a restart \
                 from a savepoint) or ask for {max} or fewer"
            ));
        }
        if to == from {
            return refuse(format!("'{uid}' already runs on {from} subtasks"));
        }
        // The host's ceilings bind a rescale as they bind the job file.
        let tasks: u64 = self.plan.nodes.iter().map(|n| u64::from(n.parallelism)).sum();
        if let Some(why) = job.settings.limits.rescale_problem(uid, to, tasks - u64::from(from) + u64::from(to)) {
            return refuse(why);
        }
        let forward = job.spec.operators.iter().find_map(|o| {
            o.inputs
                .iter()
                .find(|i| i.partition == Partition::Forward && (o.uid == uid || i.from == uid))
                .map(|i| if o.uid == uid { format!("'{}' feeds it", i.from) } else { format!("it feeds '{}'", o.uid) })
        });
        if let Some(edge) = forward {
            return refuse(format!(
                "'{uid}' is joined to a neighbour by a forward edge ({edge} with partition = \"forward\"), which \
                 pairs subtask i with subtask i; use partition = \"rebalance\" or \"key\" there to rescale it alone"
            ));
        }
        if self.compiling.is_some() || self.checkpoints.swap.is_some() {
            return Err(RequestError::SwapInProgress);
        }
        if self.rescale.is_some() {
            return Err(RequestError::RescaleInProgress);
        }
        if self.shadows.running() {
            return Err(RequestError::ShadowInProgress);
        }
        if self.checkpoints.savepoint_pending() {
            return Err(RequestError::SavepointInProgress);
        }
        if self.state != JobState::Running || self.work_ended || self.checkpoints.stopped {
            return Err(RequestError::Finishing);
        }
        self.accepting()?;
        Ok(from)
    }

    fn begin_rescale(&mut self, request: RescaleRequest, from: u32, reply: RescaleReply) {
        let job = self.job;
        let uid = request.operator;
        let mut rescaled = self.rescaled.clone();
        rescaled.insert(uid.clone(), request.parallelism);
        let plan = plan_rescaled(&job.spec, &rescaled);
        let connectors = Connectors::default();
        let started = start_rescaled(
            &Attempt {
                job,
                plan: &plan,
                connectors: &connectors,
                modules: &self.modules,
                attempt: self.attempt,
                restore: None,
                storage: self.checkpoints.cp.storage().clone(),
                log: self.checkpoints.cp.log(),
            },
            &uid,
            from,
            &self.events_tx,
        );
        tracing::info!(operator = %uid, from, to = request.parallelism, "rescale requested");
        self.threads += started.threads.len();
        self.controls.extend(started.controls.iter().cloned());
        self.spawned.extend(started.threads);
        // The barrier is asked for once every new subtask is ready
        // (`on_ready_to_take_over`).
        self.rescale = Some(PendingRescale {
            uid,
            from,
            to: request.parallelism,
            reply,
            controls: started.controls,
            order: Some(started.order),
            prepared: 0,
            id: None,
            ready: 0,
            first_barrier: None,
        });
    }

    /// Time passed: a rescale's barrier went out (the wiring is the new
    /// one from now on), or can no longer go out.
    pub(super) fn follow_rescale(&mut self) {
        let Some(p) = self.rescale.as_mut() else { return };
        if let Some(id) = self.checkpoints.rescaled_at.take() {
            p.id = Some(id);
            self.rescaled.insert(p.uid.clone(), p.to);
            self.plan = plan_rescaled(&self.job.spec, &self.rescaled);
            return;
        }
        if p.id.is_none() && self.checkpoints.stopped {
            // The input ended before the barrier was sent: the old
            // subtasks go on to the end, the new ones end unstarted.
            let p = self.rescale.take().expect("checked");
            self.checkpoints.rescale = None;
            for (subtask, c) in p.controls.iter().enumerate() {
                *self.quiet_ends.entry(TaskId { node: p.uid.as_str().into(), subtask: subtask as u32 }).or_default() +=
                    1;
                let _ = c.send(Control::RescaleAbandoned);
            }
            let _ = p.reply.send(Err(RequestError::Finishing));
        }
    }

    /// New subtask `task` opened its backend; once all did, the barrier
    /// that carries the rescale is asked for.
    pub(super) fn on_ready_to_take_over(&mut self, task: &TaskId) {
        let Some(p) = self.rescale.as_mut().filter(|p| *task.node == *p.uid) else { return };
        p.prepared += 1;
        if p.prepared < p.to {
            return;
        }
        if let Some(order) = p.order.take() {
            self.checkpoints.request_rescale(order, &p.controls);
        }
    }

    /// Old subtask `task` hands its state over and ends.
    pub(super) fn on_handed_over(&mut self, task: TaskId, c: Counters) {
        self.counters.retire(&task, c);
        *self.quiet_ends.entry(task).or_default() += 1;
    }

    /// New subtask `task` took over; the request is answered once all did.
    pub(super) fn on_took_over(&mut self, task: &TaskId, barrier_at: Instant) {
        let Some(p) = self.rescale.as_mut().filter(|p| *task.node == *p.uid) else { return };
        p.ready += 1;
        p.first_barrier = Some(p.first_barrier.map_or(barrier_at, |f| f.min(barrier_at)));
        if p.ready < p.to {
            return;
        }
        let p = self.rescale.take().expect("checked");
        let pause_ms = p.first_barrier.map_or(0.0, |f| f.elapsed().as_secs_f64() * 1e3);
        tracing::info!(operator = %p.uid, from = p.from, to = p.to, pause_ms, "rescaled");
        let done =
            RescaleDone { operator: p.uid, from: p.from, to: p.to, checkpoint: p.id.unwrap_or_default(), pause_ms };
        let _ = p.reply.send(Ok(done));
    }

    /// Whether `task`'s `Finished` is a rescale's (counted once).
    pub(super) fn quiet_end(&mut self, task: &TaskId) -> bool {
        match self.quiet_ends.get_mut(task) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// The attempt ended with a rescale under way. A restart runs the
    /// operator at the new parallelism if the barrier went out, else at
    /// the old one; either restores from the latest checkpoint.
    pub(super) fn end_rescale(&mut self) {
        if let Some(p) = self.rescale.take() {
            let now = if p.id.is_some() { p.to } else { p.from };
            let _ = p.reply.send(Err(RequestError::Failed(format!(
                "the job stopped before the rescale of '{}' completed; a restart runs it on {now} subtasks, from \
                 the latest checkpoint",
                p.uid
            ))));
        }
    }
}
