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
//!
//! A driver: it owns the runs and their reports, checks a request against
//! what is [`UnderWay`], and reaches the tasks only through the checkpoints'
//! barrier ([`ShadowBarrier`]).

use super::plan::{Plan, Role};
use super::under_way::UnderWay;
use crate::api::{DEFAULT_MAX_LAG, RequestError, ShadowReport, ShadowRequest, ShadowStarted, SwapRequest};
use crate::checkpoint::protocol::CheckpointId;
use crate::config::JobSpec;
use crate::runtime::TaskId;
use crate::runtime::message::ShadowOrder;
use crate::wasm::module::Loaded;
use crossbeam_channel::Sender;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Who waits for a shadow run to start.
pub type ShadowReply = Sender<Result<ShadowStarted, RequestError>>;

/// Who waits for a shadow run's final report.
pub type StopReply = Sender<Result<ShadowReport, RequestError>>;

/// What a shadow run needs of the checkpoints: its order rides a barrier,
/// and its subtasks hear when to end.
pub trait ShadowBarrier {
    /// Sends `order` with the next checkpoint's barrier, asked for now.
    fn carry(&mut self, order: ShadowOrder);
    /// The checkpoint whose barrier carried the order: once, after it went
    /// out.
    fn carried(&mut self) -> Option<CheckpointId>;
    /// Takes back an order whose barrier has not gone out; whether there
    /// was one.
    fn withdraw(&mut self) -> bool;
    /// Whether the input ended (a savepoint stopped it, or it ran out): no
    /// barrier that forks a shadow goes out any more.
    fn input_stopped(&self) -> bool;
    /// Tells every subtask's shadow of run `id` to report once more and end.
    fn stop(&self, id: u64);
}

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
    checkpoint: Option<CheckpointId>,
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

impl Shadows {
    /// Whether a shadow run is under way and not ending.
    pub fn running(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.ending.is_none())
    }

    /// Why shadow run `request` cannot start now, with `under_way` (and
    /// the operator's wiring in `plan`).
    pub fn check(
        &self,
        request: &ShadowRequest,
        spec: &JobSpec,
        plan: &Plan,
        under_way: &UnderWay,
    ) -> Result<(), RequestError> {
        if plan.node(&request.operator).is_none_or(|n| n.role != Role::Operator) {
            let known = spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>().join(", ");
            return Err(RequestError::UnknownOperator { uid: request.operator.clone(), known });
        }
        if request.max_lag == Some(0) {
            return Err(RequestError::Refused("max_lag must be 1 or more input batches".into()));
        }
        if self.run.is_some() {
            return Err(RequestError::ShadowInProgress);
        }
        if under_way.compiling || under_way.swap {
            return Err(RequestError::SwapInProgress);
        }
        if under_way.rescale {
            return Err(RequestError::RescaleInProgress);
        }
        if !under_way.running {
            return Err(RequestError::Finishing);
        }
        under_way.accepting()
    }

    /// The shadow's module was compiled: checked once more (the job went on
    /// meanwhile), its order rides the next checkpoint's barrier.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        request: ShadowRequest,
        reply: ShadowReply,
        loaded: Loaded,
        spec: &JobSpec,
        plan: &Plan,
        under_way: &UnderWay,
        barrier: &mut impl ShadowBarrier,
    ) {
        if let Err(e) = self.check(&request, spec, plan, under_way) {
            let _ = reply.send(Err(e));
            return;
        }
        let subtasks = plan.node(&request.operator).map_or(1, |n| n.parallelism);
        self.next_id += 1;
        let id = self.next_id;
        let max_lag = request.max_lag.unwrap_or(DEFAULT_MAX_LAG);
        let order = ShadowOrder { id, uid: request.operator.as_str().into(), module: loaded.module, max_lag };
        tracing::info!(shadow = id, operator = %request.operator, module = %request.module, "shadow run requested");
        barrier.carry(order);
        self.run = Some(ShadowRun {
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
    pub fn on_report(&mut self, task: &TaskId, report: ShadowReport, barrier: &impl ShadowBarrier) {
        let Some(run) = self.run.as_mut().filter(|r| r.id == report.id) else { return };
        let dropped = (report.status == "dropped").then(|| report.reason.clone().unwrap_or_default());
        run.parts.insert(task.subtask, report);
        if let Some(why) = dropped
            && run.ending.is_none()
        {
            // One subtask's shadow failed or fell behind: the run is over
            // for every subtask.
            run.ending = Some(format!("subtask {} of the shadow was dropped: {why}", task.subtask));
            barrier.stop(run.id);
        }
        self.settle();
    }

    /// Time passed: the barrier went out (the start is answered), or can no
    /// longer go out; the duration passed.
    pub fn follow(&mut self, barrier: &mut impl ShadowBarrier) {
        let Some(run) = self.run.as_mut() else { return };
        if let Some(id) = barrier.carried() {
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
        } else if run.checkpoint.is_none() && barrier.input_stopped() {
            // The input ended before the barrier went out.
            barrier.withdraw();
            if let Some(reply) = run.start.take() {
                let _ = reply.send(Err(RequestError::Finishing));
            }
            let run = self.run.take().expect("checked");
            for s in run.stops {
                let _ = s.send(Err(RequestError::Finishing));
            }
            return;
        }
        if run.ending.is_none() && run.checkpoint.is_some() && run.duration.is_some_and(|d| run.asked.elapsed() >= d) {
            self.end("its duration passed", barrier);
        }
    }

    /// Ends the shadow run under way (its subtasks report once more and
    /// end); whether there was one.
    fn end(&mut self, why: &str, barrier: &mut impl ShadowBarrier) -> bool {
        let Some(run) = self.run.as_mut().filter(|r| r.ending.is_none()) else { return false };
        run.ending = Some(why.to_string());
        if run.checkpoint.is_none() && barrier.withdraw() {
            // Its barrier has not gone out: it never starts.
            if let Some(reply) = run.start.take() {
                let _ = reply.send(Err(RequestError::Failed(format!("the shadow run ended before it started: {why}"))));
            }
            run.parts.clear();
            run.subtasks = 0;
        } else {
            barrier.stop(run.id);
        }
        self.settle();
        true
    }

    /// `host shadow --stop`: answered with the final report once every
    /// subtask's shadow ended.
    pub fn stop(&mut self, reply: StopReply, barrier: &mut impl ShadowBarrier) {
        if !self.end("stopped on request", barrier) {
            let _ = reply.send(Err(RequestError::NoShadow));
            return;
        }
        match self.run.as_mut() {
            Some(run) => run.stops.push(reply),
            None => {
                let _ = reply.send(self.last.clone().ok_or(RequestError::NoShadow));
            }
        }
    }

    /// `host shadow --promote`: ends the shadow run; the swap of its module
    /// that follows, over the live state (the state that produced what
    /// downstream has seen: the shadow's own output went nowhere, so its
    /// state would not match it), is the caller's.
    pub fn promote(&mut self, barrier: &mut impl ShadowBarrier) -> Result<SwapRequest, RequestError> {
        let Some(run) = self.run.as_ref().filter(|r| r.ending.is_none()) else {
            return Err(RequestError::NoShadow);
        };
        let request = SwapRequest { operator: run.operator.clone(), module: run.module.clone(), dir: None };
        self.end("promoted", barrier);
        Ok(request)
    }

    /// `GET /v1/shadow`.
    pub fn report(&self) -> Option<ShadowReport> {
        self.run.as_ref().map(ShadowRun::report).or_else(|| self.last.clone())
    }

    /// Once every subtask's shadow ended: the final report is kept and
    /// sent to whoever waits for it.
    fn settle(&mut self) {
        if !self.run.as_ref().is_some_and(ShadowRun::is_over) {
            return;
        }
        let run = self.run.take().expect("checked");
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
        self.last = Some(report);
    }

    /// The attempt ended with a shadow run under way: it ends with it.
    pub fn end_with_attempt(&mut self) {
        let Some(mut run) = self.run.take() else { return };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::plan::{plan, tests::word_count};

    fn request(uid: &str, max_lag: Option<u32>) -> ShadowRequest {
        ShadowRequest { operator: uid.into(), module: "new.wasm".into(), duration_ms: None, max_lag }
    }

    #[test]
    fn a_request_is_refused_with_the_first_reason_that_applies() {
        let spec = word_count();
        let plan = plan(&spec);
        let shadows = Shadows::default();
        let idle = UnderWay { running: true, ..UnderWay::default() };
        let check = |req: ShadowRequest, under_way: UnderWay| shadows.check(&req, &spec, &plan, &under_way);

        assert_eq!(check(request("counter", None), idle.clone()), Ok(()));
        // A source or sink has no module to shadow.
        assert!(matches!(check(request("lines", None), idle.clone()), Err(RequestError::UnknownOperator { .. })));
        assert!(matches!(check(request("counter", Some(0)), idle.clone()), Err(RequestError::Refused(_))));
        let busy = UnderWay { swap: true, rescale: true, running: false, ..idle.clone() };
        assert_eq!(check(request("counter", None), busy), Err(RequestError::SwapInProgress));
        let busy = UnderWay { rescale: true, running: false, ..idle.clone() };
        assert_eq!(check(request("counter", None), busy), Err(RequestError::RescaleInProgress));
        // A savepoint under way is no reason to refuse one.
        let busy = UnderWay { savepoint: true, ..idle.clone() };
        assert_eq!(check(request("counter", None), busy), Ok(()));
        assert_eq!(check(request("counter", None), UnderWay::default()), Err(RequestError::Finishing));
        let handing = UnderWay { refused: Some(RequestError::HandingOver), ..idle };
        assert_eq!(check(request("counter", None), handing), Err(RequestError::HandingOver));
    }
}
