//! Shadow runs (`host shadow`), the coordinator's side: a request is
//! checked, its module compiled (as a swap's), and the order rides on the
//! next checkpoint's barrier, where each subtask of the operator forks its
//! shadow. The subtasks' shadows report what they compared; the
//! coordinator keeps the latest report of each and merges them for the
//! API. It ends the run on `--stop`, `--promote` (which then swaps the
//! module in, over the live state) or when its duration passed; a shadow
//! subtask that is dropped (it failed or fell behind) ends the others. The
//! tasks' side is [`crate::runtime::shadow`].
//!
//! One shadow run at a time, and none while a swap or rescale is under
//! way (each changes the operator a shadow copies).

use super::controller::Controller;
use super::job_state::JobState;
use super::plan::Role;
use crate::api::{DEFAULT_MAX_LAG, RequestError, ShadowReport, ShadowRequest, ShadowStarted, SwapDone, SwapRequest};
use crate::runtime::TaskId;
use crate::runtime::message::{Control, ShadowOrder};
use crate::wasm::module::{Loaded, ModuleCompiler};
use crossbeam_channel::Sender;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Who waits for a shadow run to start.
pub type ShadowReply = Sender<Result<ShadowStarted, RequestError>>;

/// Who waits for a shadow run's final report.
type StopReply = Sender<Result<ShadowReport, RequestError>>;

/// The attempt's shadow runs: the one under way, and the last one's report.
#[derive(Default)]
pub struct Shadows {
    next_id: u64,
    run: Option<ShadowRun>,
    last: Option<ShadowReport>,
}

/// A shadow run under way.
struct ShadowRun {
    id: u64,
    operator: String,
    module: String,
    asked: Instant,
    duration: Option<Duration>,
    /// Answered once the barrier that forks it went out.
    start: Option<ShadowReply>,
    /// That barrier's checkpoint.
    checkpoint: Option<u64>,
    /// The operator's subtasks: one shadow each.
    subtasks: u32,
    /// Each subtask's latest report.
    parts: BTreeMap<u32, ShadowReport>,
    /// Why the coordinator ended it, once it did.
    ending: Option<String>,
    /// Waiting for its final report.
    stops: Vec<StopReply>,
}

impl ShadowRun {
    /// The subtasks' reports merged.
    fn report(&self) -> ShadowReport {
        let mut all = ShadowReport {
            id: self.id,
            operator: self.operator.clone(),
            module: self.module.clone(),
            checkpoint: self.checkpoint.unwrap_or(0),
            elapsed_ms: self.asked.elapsed().as_millis() as u64,
            ..ShadowReport::default()
        };
        for part in self.parts.values() {
            all.absorb(part);
        }
        // Over once every subtask's shadow said it ended: until then a run
        // one subtask dropped still counts as running, the others' final
        // counts to come (they end at their next step).
        let dropped = self.parts.values().find(|p| p.status == "dropped");
        (all.status, all.reason) = match (self.is_over(), dropped) {
            (true, Some(d)) => ("dropped".into(), d.reason.clone()),
            (true, None) => {
                ("ended".into(), self.ending.clone().or_else(|| self.parts.values().find_map(|p| p.reason.clone())))
            }
            (false, _) if self.checkpoint.is_none() => ("starting".into(), None),
            (false, _) => ("running".into(), None),
        };
        all
    }

    /// Whether every subtask's shadow ended.
    fn is_over(&self) -> bool {
        self.parts.len() as u32 == self.subtasks && self.parts.values().all(ShadowReport::is_over)
    }
}

impl Controller<'_> {
    /// Why shadow run `request` cannot start now.
    pub(super) fn check_shadow(&mut self, request: &ShadowRequest) -> Result<(), RequestError> {
        let job = self.job;
        if self.plan.node(&request.operator).is_none_or(|n| n.role != Role::Operator) {
            let known = job.spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>().join(", ");
            return Err(RequestError::UnknownOperator { uid: request.operator.clone(), known });
        }
        if request.max_lag == Some(0) {
            return Err(RequestError::Refused("max_lag must be 1 or more input batches".into()));
        }
        if self.shadows.run.is_some() {
            return Err(RequestError::ShadowInProgress);
        }
        if self.compiling.is_some() || self.checkpoints.swap.is_some() {
            return Err(RequestError::SwapInProgress);
        }
        if self.rescale.is_some() {
            return Err(RequestError::RescaleInProgress);
        }
        if self.state != JobState::Running || self.work_ended || self.checkpoints.stopped {
            return Err(RequestError::Finishing);
        }
        self.accepting().map(|_| ())
    }

    /// The shadow's module was compiled (or could not be): the order rides
    /// the next checkpoint's barrier.
    pub(super) fn shadow_compiled(&mut self, request: ShadowRequest, reply: ShadowReply, loaded: Loaded) {
        if let Err(e) = self.check_shadow(&request) {
            let _ = reply.send(Err(e));
            return;
        }
        let subtasks = self.plan.node(&request.operator).map_or(1, |n| n.parallelism);
        self.shadows.next_id += 1;
        let id = self.shadows.next_id;
        let max_lag = request.max_lag.unwrap_or(DEFAULT_MAX_LAG);
        let order = ShadowOrder { id, uid: request.operator.as_str().into(), module: loaded.module, max_lag };
        tracing::info!(shadow = id, operator = %request.operator, module = %request.module, "shadow run requested");
        self.checkpoints.request_shadow(order);
        self.shadows.run = Some(ShadowRun {
            id,
            operator: request.operator,
            module: loaded.path.display().to_string(),
            asked: Instant::now(),
            duration: request.duration_ms.map(Duration::from_millis),
            start: Some(reply),
            checkpoint: None,
            subtasks,
            parts: BTreeMap::new(),
            ending: None,
            stops: Vec::new(),
        });
    }

    /// A shadow subtask's report.
    pub(super) fn on_shadow_report(&mut self, task: &TaskId, report: ShadowReport) {
        let Some(run) = self.shadows.run.as_mut().filter(|r| r.id == report.id) else { return };
        let dropped = (report.status == "dropped").then(|| report.reason.clone().unwrap_or_default());
        run.parts.insert(task.subtask, report);
        if let Some(why) = dropped
            && run.ending.is_none()
        {
            // One subtask's shadow failed or fell behind: the run is over
            // for every subtask.
            run.ending = Some(format!("subtask {} of the shadow was dropped: {why}", task.subtask));
            self.checkpoints.send_all(Control::ShadowStop(run.id));
        }
        self.settle_shadow();
    }

    /// Time passed: the barrier went out (the start is answered), or can no
    /// longer go out; the duration passed.
    pub(super) fn follow_shadow(&mut self) {
        let Some(run) = self.shadows.run.as_mut() else { return };
        if let Some(id) = self.checkpoints.shadowed_at.take() {
            run.checkpoint = Some(id);
            let started = ShadowStarted {
                id: run.id,
                operator: run.operator.clone(),
                module: run.module.clone(),
                checkpoint: id,
            };
            if let Some(reply) = run.start.take() {
                let _ = reply.send(Ok(started));
            }
        } else if run.checkpoint.is_none() && self.checkpoints.stopped {
            // The input ended before the barrier went out.
            self.checkpoints.shadow = None;
            if let Some(reply) = run.start.take() {
                let _ = reply.send(Err(RequestError::Finishing));
            }
            let run = self.shadows.run.take().expect("checked");
            for s in run.stops {
                let _ = s.send(Err(RequestError::Finishing));
            }
            return;
        }
        if run.ending.is_none() && run.checkpoint.is_some() && run.duration.is_some_and(|d| run.asked.elapsed() >= d) {
            self.end_shadow("its duration passed");
        }
    }

    /// Ends the shadow run under way (its subtasks report once more and
    /// end); whether there was one.
    fn end_shadow(&mut self, why: &str) -> bool {
        let Some(run) = self.shadows.run.as_mut().filter(|r| r.ending.is_none()) else { return false };
        run.ending = Some(why.to_string());
        if run.checkpoint.is_none() && self.checkpoints.shadow.take().is_some() {
            // Its barrier has not gone out: it never starts.
            if let Some(reply) = run.start.take() {
                let _ = reply.send(Err(RequestError::Failed(format!("the shadow run ended before it started: {why}"))));
            }
            run.parts.clear();
            run.subtasks = 0;
        } else {
            self.checkpoints.send_all(Control::ShadowStop(run.id));
        }
        self.settle_shadow();
        true
    }

    /// `host shadow --stop`: answered with the final report once every
    /// subtask's shadow ended.
    pub(super) fn stop_shadow(&mut self, reply: StopReply) {
        if !self.end_shadow("stopped on request") {
            let _ = reply.send(Err(RequestError::NoShadow));
            return;
        }
        match self.shadows.run.as_mut() {
            Some(run) => run.stops.push(reply),
            None => {
                let _ = reply.send(self.shadows.last.clone().ok_or(RequestError::NoShadow));
            }
        }
    }

    /// `host shadow --promote`: ends the shadow run and swaps its module
    /// in at the next barrier, over the live state: the state that
    /// produced what downstream has seen (the shadow's own output went
    /// nowhere, so its state would not match it).
    pub(super) fn promote_shadow(&mut self, reply: Sender<Result<SwapDone, RequestError>>, compiler: &ModuleCompiler) {
        let Some(run) = self.shadows.run.as_ref().filter(|r| r.ending.is_none()) else {
            let _ = reply.send(Err(RequestError::NoShadow));
            return;
        };
        let request = SwapRequest { operator: run.operator.clone(), module: run.module.clone(), dir: None };
        self.end_shadow("promoted");
        self.start_swap(request, reply, compiler);
    }

    /// `GET /v1/shadow`.
    pub(super) fn shadow_report(&self) -> Option<ShadowReport> {
        self.shadows.run.as_ref().map(ShadowRun::report).or_else(|| self.shadows.last.clone())
    }

    /// Once every subtask's shadow ended: the final report is kept and
    /// sent to whoever waits for it.
    fn settle_shadow(&mut self) {
        if !self.shadows.run.as_ref().is_some_and(ShadowRun::is_over) {
            return;
        }
        let run = self.shadows.run.take().expect("checked");
        let report = run.report();
        tracing::info!(
            shadow = run.id,
            operator = %run.operator,
            status = %report.status,
            equal = report.counts.equal,
            different = report.counts.different,
            only_live = report.counts.only_live,
            only_shadow = report.counts.only_shadow,
            keys_with_differences = report.keys.len(),
            "shadow run over: {}",
            report.reason.as_deref().unwrap_or("")
        );
        for s in run.stops {
            let _ = s.send(Ok(report.clone()));
        }
        self.shadows.last = Some(report);
    }

    /// The attempt ended with a shadow run under way: it ends with it.
    pub(super) fn end_shadow_with_attempt(&mut self) {
        let Some(mut run) = self.shadows.run.take() else { return };
        if let Some(reply) = run.start.take() {
            let _ = reply.send(Err(RequestError::Failed("the job stopped before the shadow run started".into())));
        }
        let mut report = run.report();
        if !report.is_over() {
            report.status = "ended".into();
            report.reason = Some("the job stopped".into());
        }
        for s in run.stops {
            let _ = s.send(Ok(report.clone()));
        }
    }
}

impl Shadows {
    /// Whether a shadow run is under way and not ending.
    pub fn running(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.ending.is_none())
    }
}
