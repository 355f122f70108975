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
//!
//! A driver: it owns the rescale under way and the parallelism each
//! rescaled operator runs at, checks a request against what is
//! [`UnderWay`], and reaches the tasks only through the checkpoints'
//! barrier ([`RescaleBarrier`]). Starting the new subtasks is the
//! controller's (it owns the threads).

use super::plan::{Plan, Role};
use super::under_way::UnderWay;
use crate::api::{RequestError, RescaleDone, RescaleRequest};
use crate::checkpoint::protocol::CheckpointId;
use crate::config::{JobSpec, Limits, Partition};
use crate::runtime::TaskId;
use crate::runtime::message::{Control, RescaleOrder};
use crossbeam_channel::Sender;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// Who is waiting for a rescale's outcome.
pub type RescaleReply = Sender<Result<RescaleDone, RequestError>>;

/// What a rescale needs of the checkpoints: its order rides a barrier.
pub trait RescaleBarrier {
    /// Sends `order` with the next checkpoint's barrier, asked for now;
    /// `controls` reach the new subtasks, which take part in it.
    fn carry(&mut self, order: Arc<RescaleOrder>, controls: &[Sender<Control>]);
    /// The checkpoint whose barrier carried the order: once, after it went
    /// out.
    fn carried(&mut self) -> Option<CheckpointId>;
    /// Takes back an order whose barrier has not gone out.
    fn withdraw(&mut self);
    /// Whether the input ended (a savepoint stopped it, or it ran out): no
    /// barrier that rescales goes out any more.
    fn input_stopped(&self) -> bool;
}

/// The attempt's rescales: the one under way, what every operator runs
/// at, and which tasks' ends are a rescale's.
#[derive(Default)]
pub struct Rescales {
    /// Operators at another parallelism than the job file's, by uid.
    rescaled: BTreeMap<String, u32>,
    pending: Option<PendingRescale>,
    /// Tasks whose next `Finished` is no end of the job's work: old
    /// subtasks of a rescale, new ones of an abandoned one.
    quiet_ends: HashMap<TaskId, u32>,
}

/// A rescale asked for and not finished.
struct PendingRescale {
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

impl Rescales {
    /// The rescales of an attempt whose operators run at `rescaled`.
    pub fn new(rescaled: BTreeMap<String, u32>) -> Self {
        Rescales { rescaled, ..Rescales::default() }
    }

    /// Operators at another parallelism than the job file's (the barrier of
    /// a rescale under way gone out), by uid.
    pub fn rescaled(&self) -> &BTreeMap<String, u32> {
        &self.rescaled
    }

    /// Whether a rescale is under way.
    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }

    /// Why `request` cannot be carried out now, with the job wired as
    /// `plan` and `under_way`; else the operator's parallelism.
    pub fn check(
        &self,
        request: &RescaleRequest,
        spec: &JobSpec,
        limits: &Limits,
        plan: &Plan,
        under_way: &UnderWay,
    ) -> Result<u32, RequestError> {
        let uid = request.operator.as_str();
        let Some(node) = plan.node(uid).filter(|n| n.role == Role::Operator) else {
            let known = spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>().join(", ");
            return Err(RequestError::UnknownOperator { uid: uid.to_string(), known });
        };
        let (from, to, max) = (node.parallelism, request.parallelism, spec.max_parallelism);
        let cap = spec.operators.iter().find(|o| o.uid == uid).map_or(max, |o| o.max_parallelism);
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
        let tasks: u64 = plan.nodes.iter().map(|n| u64::from(n.parallelism)).sum();
        if let Some(why) = limits.rescale_problem(uid, to, tasks - u64::from(from) + u64::from(to)) {
            return refuse(why);
        }
        let forward = spec.operators.iter().find_map(|o| {
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
        if under_way.compiling || under_way.swap {
            return Err(RequestError::SwapInProgress);
        }
        if self.pending.is_some() {
            return Err(RequestError::RescaleInProgress);
        }
        if under_way.shadow {
            return Err(RequestError::ShadowInProgress);
        }
        if under_way.savepoint {
            return Err(RequestError::SavepointInProgress);
        }
        if !under_way.running {
            return Err(RequestError::Finishing);
        }
        under_way.accepting()?;
        Ok(from)
    }

    /// What the operators would run at with `request` carried out: the
    /// wiring its new subtasks are started for.
    pub fn with(&self, request: &RescaleRequest) -> BTreeMap<String, u32> {
        let mut rescaled = self.rescaled.clone();
        rescaled.insert(request.operator.clone(), request.parallelism);
        rescaled
    }

    /// The rescale of `request`, its new subtasks started (reached through
    /// `controls`, waiting for `order`): the barrier is asked for once
    /// every one is ready (`on_ready_to_take_over`).
    pub fn begin(
        &mut self,
        request: RescaleRequest,
        from: u32,
        reply: RescaleReply,
        controls: Vec<Sender<Control>>,
        order: Arc<RescaleOrder>,
    ) {
        tracing::info!(operator = %request.operator, from, to = request.parallelism, "rescale requested");
        self.pending = Some(PendingRescale {
            uid: request.operator,
            from,
            to: request.parallelism,
            reply,
            controls,
            order: Some(order),
            prepared: 0,
            id: None,
            ready: 0,
            first_barrier: None,
        });
    }

    /// Time passed: whether a rescale's barrier went out (the wiring is the
    /// new one, [`Rescales::rescaled`], from now on). A rescale whose
    /// barrier can no longer go out is abandoned.
    pub fn follow(&mut self, barrier: &mut impl RescaleBarrier) -> bool {
        let Some(p) = self.pending.as_mut() else { return false };
        if let Some(id) = barrier.carried() {
            p.id = Some(id);
            self.rescaled.insert(p.uid.clone(), p.to);
            return true;
        }
        if p.id.is_none() && barrier.input_stopped() {
            // The input ended before the barrier was sent: the old
            // subtasks go on to the end, the new ones end unstarted.
            let p = self.pending.take().expect("checked");
            barrier.withdraw();
            for (subtask, c) in p.controls.iter().enumerate() {
                *self.quiet_ends.entry(TaskId { node: p.uid.as_str().into(), subtask: subtask as u32 }).or_default() +=
                    1;
                let _ = c.send(Control::RescaleAbandoned);
            }
            let _ = p.reply.send(Err(RequestError::Finishing));
        }
        false
    }

    /// New subtask `task` opened its backend; once all did, the barrier
    /// that carries the rescale is asked for.
    pub fn on_ready_to_take_over(&mut self, task: &TaskId, barrier: &mut impl RescaleBarrier) {
        let Some(p) = self.pending.as_mut().filter(|p| *task.node == *p.uid) else { return };
        p.prepared += 1;
        if p.prepared < p.to {
            return;
        }
        if let Some(order) = p.order.take() {
            barrier.carry(order, &p.controls);
        }
    }

    /// Old subtask `task` handed its state over: its end is the rescale's.
    pub fn on_handed_over(&mut self, task: TaskId) {
        *self.quiet_ends.entry(task).or_default() += 1;
    }

    /// New subtask `task` took over; the request is answered once all did.
    pub fn on_took_over(&mut self, task: &TaskId, barrier_at: Instant) {
        let Some(p) = self.pending.as_mut().filter(|p| *task.node == *p.uid) else { return };
        p.ready += 1;
        p.first_barrier = Some(p.first_barrier.map_or(barrier_at, |f| f.min(barrier_at)));
        if p.ready < p.to {
            return;
        }
        let p = self.pending.take().expect("checked");
        let pause_ms = p.first_barrier.map_or(0.0, |f| f.elapsed().as_secs_f64() * 1e3);
        tracing::info!(operator = %p.uid, from = p.from, to = p.to, pause_ms, "rescaled");
        let done =
            RescaleDone { operator: p.uid, from: p.from, to: p.to, checkpoint: p.id.unwrap_or_default(), pause_ms };
        let _ = p.reply.send(Ok(done));
    }

    /// Whether `task`'s `Finished` is a rescale's (counted once).
    pub fn quiet_end(&mut self, task: &TaskId) -> bool {
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
    /// the old one; either restores from the latest checkpoint. What the
    /// operators run at, for the attempts after this one.
    pub fn end(mut self) -> BTreeMap<String, u32> {
        if let Some(p) = self.pending.take() {
            let now = if p.id.is_some() { p.to } else { p.from };
            let _ = p.reply.send(Err(RequestError::Failed(format!(
                "the job stopped before the rescale of '{}' completed; a restart runs it on {now} subtasks, from \
                 the latest checkpoint",
                p.uid
            ))));
        }
        self.rescaled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::plan::{plan, tests::word_count};
    use std::collections::HashMap;

    /// The checkpoints as a rescale sees them, recording what it asked.
    #[derive(Default)]
    struct FakeBarrier {
        carried: Vec<String>,
        went_out: Option<CheckpointId>,
        withdrawn: bool,
        stopped: bool,
    }

    impl RescaleBarrier for FakeBarrier {
        fn carry(&mut self, order: Arc<RescaleOrder>, controls: &[Sender<Control>]) {
            self.carried.push(format!("{} to {} ({} controls)", order.uid, order.parallelism, controls.len()));
        }
        fn carried(&mut self) -> Option<CheckpointId> {
            self.went_out.take()
        }
        fn withdraw(&mut self) {
            self.withdrawn = true;
        }
        fn input_stopped(&self) -> bool {
            self.stopped
        }
    }

    fn order(uid: &str, from: u32, to: u32) -> Arc<RescaleOrder> {
        Arc::new(RescaleOrder {
            uid: uid.into(),
            from,
            parallelism: to,
            senders: HashMap::new(),
            receivers: HashMap::new(),
            handover: Vec::new(),
            taken: crossbeam_channel::never(),
        })
    }

    fn request(uid: &str, to: u32) -> RescaleRequest {
        RescaleRequest { operator: uid.into(), parallelism: to }
    }

    fn idle() -> UnderWay {
        UnderWay { running: true, ..UnderWay::default() }
    }

    fn task(node: &str, subtask: u32) -> TaskId {
        TaskId { node: node.into(), subtask }
    }

    /// Begins a rescale of `counter` from 3 to `to`; the reply's receiver
    /// and the new subtasks' control receivers.
    type Begun =
        (crossbeam_channel::Receiver<Result<RescaleDone, RequestError>>, Vec<crossbeam_channel::Receiver<Control>>);
    fn begin(r: &mut Rescales, to: u32) -> Begun {
        let (reply, answer) = crossbeam_channel::bounded(1);
        let (controls, receivers): (Vec<_>, Vec<_>) = (0..to).map(|_| crossbeam_channel::unbounded()).unzip();
        r.begin(request("counter", to), 3, reply, controls, order("counter", 3, to));
        (answer, receivers)
    }

    #[test]
    fn the_barrier_is_asked_for_once_every_new_subtask_is_ready_and_the_request_answered_once_all_took_over() {
        let mut r = Rescales::default();
        let mut barrier = FakeBarrier::default();
        let (answer, _) = begin(&mut r, 5);
        for s in 0..4 {
            r.on_ready_to_take_over(&task("counter", s), &mut barrier);
        }
        // Another operator's subtask is no part of it.
        r.on_ready_to_take_over(&task("tokenizer", 0), &mut barrier);
        assert!(barrier.carried.is_empty(), "asked before every new subtask was ready");
        r.on_ready_to_take_over(&task("counter", 4), &mut barrier);
        assert_eq!(barrier.carried, ["counter to 5 (5 controls)"]);

        assert!(!r.follow(&mut barrier), "no barrier went out yet");
        assert!(r.rescaled().is_empty());
        barrier.went_out = Some(7);
        assert!(r.follow(&mut barrier), "the wiring changes with the barrier");
        assert_eq!(r.rescaled().get("counter"), Some(&5));

        let at = Instant::now();
        for s in 0..4 {
            r.on_took_over(&task("counter", s), at);
        }
        assert!(answer.try_recv().is_err(), "answered before every new subtask took over");
        r.on_took_over(&task("counter", 4), at);
        let done = answer.try_recv().expect("answered").expect("done");
        assert_eq!((done.operator.as_str(), done.from, done.to, done.checkpoint), ("counter", 3, 5, 7));
        assert!(!r.busy());
        assert_eq!(r.end().get("counter"), Some(&5));
    }

    #[test]
    fn a_rescale_whose_input_stops_before_its_barrier_is_abandoned_and_its_new_subtasks_end_quietly() {
        let mut r = Rescales::default();
        let mut barrier = FakeBarrier { stopped: true, ..FakeBarrier::default() };
        let (answer, controls) = begin(&mut r, 2);
        assert!(!r.follow(&mut barrier));
        assert!(barrier.withdrawn, "the order is taken back");
        assert!(matches!(answer.try_recv().expect("answered"), Err(RequestError::Finishing)));
        for c in &controls {
            assert!(matches!(c.try_recv(), Ok(Control::RescaleAbandoned)));
        }
        // Each new subtask's end is the rescale's, once.
        assert!(r.quiet_end(&task("counter", 1)));
        assert!(!r.quiet_end(&task("counter", 1)));
        assert!(!r.quiet_end(&task("counter", 2)));
        assert!(r.end().is_empty(), "the operator runs at its old parallelism");
    }

    #[test]
    fn an_attempt_that_ends_mid_rescale_says_what_a_restart_runs_at() {
        let mut r = Rescales::default();
        let (answer, _) = begin(&mut r, 4);
        r.end();
        let Err(RequestError::Failed(why)) = answer.try_recv().expect("answered") else { panic!("not a failure") };
        assert!(why.contains("runs it on 3 subtasks"), "{why}");

        let mut r = Rescales::default();
        let mut barrier = FakeBarrier { went_out: Some(2), ..FakeBarrier::default() };
        let (answer, _) = begin(&mut r, 4);
        r.follow(&mut barrier);
        assert_eq!(r.end().get("counter"), Some(&4));
        let Err(RequestError::Failed(why)) = answer.try_recv().expect("answered") else { panic!("not a failure") };
        assert!(why.contains("runs it on 4 subtasks"), "{why}");
    }

    #[test]
    fn a_request_is_refused_with_the_first_reason_that_applies() {
        let spec = word_count();
        let plan = plan(&spec);
        let limits = Limits::default();
        let r = Rescales::default();
        let check = |req: RescaleRequest, under_way: UnderWay| r.check(&req, &spec, &limits, &plan, &under_way);

        assert_eq!(check(request("counter", 4), idle()), Ok(3));
        assert!(matches!(check(request("lines", 2), idle()), Err(RequestError::UnknownOperator { .. })));
        let refused = |res: Result<u32, RequestError>| match res {
            Err(RequestError::Refused(why)) => why,
            other => panic!("not refused: {other:?}"),
        };
        assert!(refused(check(request("counter", 0), idle())).contains("0 subtasks"));
        assert!(refused(check(request("counter", 3), idle())).contains("already runs on 3"));
        assert!(refused(check(request("counter", 129), idle())).contains("128 key groups"));
        // What is under way, in order: a swap, then a shadow run, then a
        // savepoint, then a job that no longer runs as it started.
        let busy = UnderWay { compiling: true, shadow: true, savepoint: true, ..idle() };
        assert_eq!(check(request("counter", 4), busy), Err(RequestError::SwapInProgress));
        let busy = UnderWay { shadow: true, savepoint: true, ..idle() };
        assert_eq!(check(request("counter", 4), busy), Err(RequestError::ShadowInProgress));
        let busy = UnderWay { savepoint: true, running: false, ..idle() };
        assert_eq!(check(request("counter", 4), busy), Err(RequestError::SavepointInProgress));
        assert_eq!(check(request("counter", 4), UnderWay::default()), Err(RequestError::Finishing));
        let handing = UnderWay { refused: Some(RequestError::HandingOver), ..idle() };
        assert_eq!(check(request("counter", 4), handing), Err(RequestError::HandingOver));

        let mut r = Rescales::default();
        let _answer = begin(&mut r, 4);
        let res = r.check(&request("tokenizer", 3), &spec, &limits, &plan, &idle());
        assert_eq!(res, Err(RequestError::RescaleInProgress));
    }
}
