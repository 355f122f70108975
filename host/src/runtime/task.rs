//! Task bodies: the input side shared by operators and sinks, and the loop of
//! one operator subtask (open, process batches, end of input).

use super::batch::{Batch, Message};
use super::events::{Control, Counters, TaskError, TaskEvent, TaskId};
use super::router::{RouteError, Router};
use crate::state::TimeDomain;
use crate::state::hashmap::HashMapBackend;
use crate::state::key_group::KeyGroupRange;
use crate::state::ttl::TtlBackend;
use crate::wasm::{GuestFailure, Limits, OperatorInfo, OperatorInstance, OperatorModule};
use crossbeam_channel::{Receiver, Select, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the input side yields next.
pub enum Next {
    /// A batch from some upstream subtask; `broadcast` when it came over a
    /// broadcast edge.
    Batch {
        /// The records.
        batch: Batch,
        /// Whether the edge is `partition = "broadcast"`.
        broadcast: bool,
    },
    /// The minimum watermark over the input channels advanced to this.
    Watermark(i64),
    /// The deadline passed with nothing to do.
    Timeout,
    /// Every upstream subtask sent end-of-input.
    Ended,
    /// An upstream task vanished without ending (it failed).
    Disconnected,
    /// The coordinator cancelled the job.
    Cancelled,
}

/// The receiving side of a task: one channel per upstream subtask (each
/// marked whether it is a broadcast edge), plus the control channel.
pub struct Inputs {
    receivers: Vec<(Receiver<Message>, bool)>,
    /// The latest watermark each receiver delivered.
    watermarks: Vec<i64>,
    /// When each receiver last delivered anything.
    last_seen: Vec<Instant>,
    /// Receivers silent for longer than `idle_timeout`: left out of the
    /// watermark until they send again.
    idle: Vec<bool>,
    idle_timeout: Option<Duration>,
    /// The minimum over `watermarks`, as last reported.
    watermark: i64,
    control: Receiver<Control>,
}

impl Inputs {
    /// Inputs over `receivers`; with `idle_timeout`, a receiver that sends
    /// nothing for that long stops holding the watermark back.
    pub fn new(
        receivers: Vec<(Receiver<Message>, bool)>,
        control: Receiver<Control>,
        idle_timeout: Option<Duration>,
    ) -> Self {
        let n = receivers.len();
        Inputs {
            receivers,
            watermarks: vec![i64::MIN; n],
            last_seen: vec![Instant::now(); n],
            idle: vec![false; n],
            idle_timeout,
            watermark: i64::MIN,
            control,
        }
    }

    /// The task's watermark: the minimum over its inputs.
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// Reports the minimum watermark over the active receivers if it
    /// advanced. When every receiver is idle, the largest watermark any of
    /// them sent stands (as Flink's watermark valve does): nothing holds it
    /// back any more.
    fn advanced(&mut self) -> Option<Next> {
        let min = if self.receivers.is_empty() {
            i64::MAX
        } else if self.idle.iter().all(|&i| i) {
            self.watermarks.iter().copied().max()?
        } else {
            self.watermarks.iter().zip(&self.idle).filter(|(_, idle)| !**idle).map(|(w, _)| *w).min()?
        };
        if min > self.watermark {
            self.watermark = min;
            Some(Next::Watermark(min))
        } else {
            None
        }
    }

    fn take(&mut self, i: usize, message: Result<Message, crossbeam_channel::RecvError>) -> Option<Next> {
        if i < self.receivers.len() {
            self.last_seen[i] = Instant::now();
            self.idle[i] = false;
        }
        match message {
            Ok(Message::Data(batch)) => Some(Next::Batch { batch, broadcast: self.receivers[i].1 }),
            Ok(Message::Watermark(w)) => {
                self.watermarks[i] = self.watermarks[i].max(w);
                self.advanced()
            }
            Ok(Message::EndOfInput) => {
                self.receivers.swap_remove(i);
                self.watermarks.swap_remove(i);
                self.last_seen.swap_remove(i);
                self.idle.swap_remove(i);
                if self.receivers.is_empty() { None } else { self.advanced() }
            }
            Err(_) => Some(Next::Disconnected),
        }
    }

    /// Blocks until the next batch, watermark advance or the end. Broadcast
    /// input that is ready goes first, so rules and other broadcast state are
    /// as fresh as they can be when main input is processed.
    pub fn next_batch(&mut self) -> Next {
        self.next_until(None)
    }

    /// As [`Inputs::next_batch`], but returns [`Next::Timeout`] at `deadline`.
    pub fn next_until(&mut self, deadline: Option<std::time::Instant>) -> Next {
        loop {
            if self.receivers.is_empty() {
                return Next::Ended;
            }
            for i in 0..self.receivers.len() {
                if self.receivers[i].1 {
                    match self.receivers[i].0.try_recv() {
                        Ok(m) => match self.take(i, Ok(m)) {
                            Some(next) => return next,
                            None => break,
                        },
                        Err(crossbeam_channel::TryRecvError::Empty) => {}
                        Err(crossbeam_channel::TryRecvError::Disconnected) => return Next::Disconnected,
                    }
                }
            }
            if self.receivers.is_empty() {
                return Next::Ended;
            }
            // Wake up for the caller's deadline, or when a receiver would go idle.
            let idle_at = self.idle_timeout.and_then(|t| {
                (0..self.receivers.len()).filter(|&i| !self.idle[i]).map(|i| self.last_seen[i] + t).min()
            });
            let wake = match (deadline, idle_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let received = {
                let mut sel = Select::new();
                for (r, _) in &self.receivers {
                    sel.recv(r);
                }
                let control = sel.recv(&self.control);
                let op = match wake {
                    None => Some(sel.select()),
                    Some(d) => sel.select_deadline(d).ok(),
                };
                match op {
                    Some(op) if op.index() == control => {
                        let _ = op.recv(&self.control);
                        return Next::Cancelled;
                    }
                    Some(op) => {
                        let i = op.index();
                        Some((i, op.recv(&self.receivers[i].0)))
                    }
                    None => None,
                }
            };
            match received {
                Some((i, message)) => {
                    if let Some(next) = self.take(i, message) {
                        return next;
                    }
                }
                None => {
                    if let Some(t) = self.idle_timeout {
                        let now = Instant::now();
                        for i in 0..self.receivers.len() {
                            if now >= self.last_seen[i] + t {
                                self.idle[i] = true;
                            }
                        }
                        if let Some(next) = self.advanced() {
                            return next;
                        }
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Next::Timeout;
                    }
                }
            }
        }
    }
}

/// Sends progress at most once per interval.
pub struct Reporter {
    id: TaskId,
    events: Sender<TaskEvent>,
    interval: Duration,
    last: Instant,
}

impl Reporter {
    /// A reporter for task `id`.
    pub fn new(id: TaskId, events: Sender<TaskEvent>, interval: Duration) -> Self {
        Reporter { id, events, interval, last: Instant::now() }
    }

    /// Reports `counters` if the interval has passed.
    #[inline]
    pub fn tick(&mut self, counters: Counters) {
        if self.last.elapsed() >= self.interval {
            self.last = Instant::now();
            let _ = self.events.send(TaskEvent::Progress(self.id.clone(), counters));
        }
    }

    /// The task's id.
    pub fn id(&self) -> &TaskId {
        &self.id
    }
}

/// Maps a routing failure of `from` to a task error.
pub fn route_error(from: &Arc<str>, e: RouteError) -> TaskError {
    match e {
        RouteError::MissingKey { to } => TaskError::MissingKey { from: from.clone(), to },
        RouteError::Disconnected => TaskError::Disconnected(from.clone()),
    }
}

/// Everything an operator subtask needs.
pub struct OperatorTask {
    /// Which subtask.
    pub id: TaskId,
    /// Operator parallelism.
    pub parallelism: u32,
    /// Key groups of the job.
    pub max_parallelism: u32,
    /// The compiled module.
    pub module: OperatorModule,
    /// Params for `open`.
    pub params: Vec<(String, String)>,
    /// Guest limits.
    pub limits: Limits,
    /// Input channels.
    pub inputs: Inputs,
    /// Output side.
    pub router: Router,
    /// Progress reporting.
    pub reporter: Reporter,
}

impl OperatorTask {
    /// Runs the subtask to the end of its input.
    pub fn run(mut self) -> Result<Counters, TaskError> {
        let uid = self.id.node.clone();
        let subtask = self.id.subtask;
        let range = KeyGroupRange::for_subtask(subtask, self.parallelism, self.max_parallelism);
        // State TTL is a layer over the backend, on processing time.
        let clock: crate::state::ttl::Clock = Arc::new(now_ms);
        let backend = Box::new(TtlBackend::new(HashMapBackend::new(range), clock, self.max_parallelism));
        let mut instance =
            OperatorInstance::new(&self.module, &uid, subtask, backend, self.max_parallelism, self.limits)?;
        let info = OperatorInfo {
            uid: uid.to_string(),
            subtask_index: subtask,
            parallelism: self.parallelism,
            max_parallelism: self.max_parallelism,
            params: self.params.clone(),
        };
        let parallelism = self.parallelism;
        let guest_error =
            |what: String, failure| TaskError::Guest { uid: uid.clone(), subtask, parallelism, what, failure };
        instance.open(&info).map_err(|f| guest_error("failed in open".into(), f))?;
        self.forward(&mut instance).map_err(|e| route_error(&uid, e))?;
        tracing::debug!(operator = %uid, subtask, "opened");

        let mut counters = Counters::default();
        loop {
            // Wake up for the next processing-time timer, if any.
            let deadline = instance.next_timer(TimeDomain::ProcessingTime).map(|t| {
                let wait_ms = t.saturating_sub(now_ms()).max(0) as u64;
                Instant::now() + Duration::from_millis(wait_ms)
            });
            let next = self.inputs.next_until(deadline);
            self.fire_timers(&mut instance, TimeDomain::ProcessingTime, now_ms(), &guest_error)?;
            match next {
                Next::Watermark(w) => {
                    instance.set_watermark(w);
                    self.fire_timers(&mut instance, TimeDomain::EventTime, w, &guest_error)?;
                    self.router.watermark(w).map_err(|e| route_error(&uid, e))?;
                }
                Next::Timeout => {}
                Next::Batch { batch, broadcast: true } => {
                    counters.records_in += batch.len() as u64;
                    for i in 0..batch.len() {
                        let element = batch.get(i).to_element();
                        instance
                            .process_broadcast(&element)
                            .map_err(|f| guest_error(describe_broadcast(&element), f))?;
                        self.forward(&mut instance).map_err(|e| route_error(&uid, e))?;
                    }
                    self.router.flush().map_err(|e| route_error(&uid, e))?;
                    counters.records_out = self.router.records_out();
                    self.reporter.tick(counters);
                }
                Next::Batch { batch, broadcast: false } => {
                    let before = counters.records_in;
                    counters.records_in += batch.len() as u64;
                    let batch = Arc::new(batch);
                    if let Err(f) = instance.process(batch.clone()) {
                        let what = describe_position(before, &batch, f.element);
                        return Err(guest_error(what, f));
                    }
                    self.forward(&mut instance).map_err(|e| route_error(&uid, e))?;
                    self.router.flush().map_err(|e| route_error(&uid, e))?;
                    counters.records_out = self.router.records_out();
                    self.reporter.tick(counters);
                }
                Next::Ended => break,
                Next::Disconnected => return Err(TaskError::Disconnected(uid.clone())),
                Next::Cancelled => return Err(TaskError::Cancelled),
            }
        }
        instance.end_of_input().map_err(|f| guest_error("failed in end-of-input".into(), f))?;
        self.forward(&mut instance).map_err(|e| route_error(&uid, e))?;
        self.router.end().map_err(|e| route_error(&uid, e))?;
        counters.records_out = self.router.records_out();
        Ok(counters)
    }

    /// Fires every timer of `domain` due at `up_to`, in time order, including
    /// timers that firing registers for times already due.
    fn fire_timers(
        &mut self,
        instance: &mut OperatorInstance,
        domain: TimeDomain,
        up_to: i64,
        guest_error: &dyn Fn(String, GuestFailure) -> TaskError,
    ) -> Result<(), TaskError> {
        let uid = self.id.node.clone();
        loop {
            match instance.fire_due_timer(domain, up_to) {
                Ok(Some(_)) => self.forward(instance).map_err(|e| route_error(&uid, e))?,
                Ok(None) => break,
                Err(f) => {
                    let what = format!("failed in on-timer ({})", describe_domain(domain));
                    return Err(guest_error(what, f));
                }
            }
        }
        self.router.flush().map_err(|e| route_error(&uid, e))
    }

    fn forward(&mut self, instance: &mut OperatorInstance) -> Result<(), RouteError> {
        let router = &mut self.router;
        instance.drain_outputs(|out| if out.elements.is_empty() { Ok(()) } else { router.push_all(out) })
    }
}

/// The wall clock in milliseconds since the epoch: processing time.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn describe_domain(d: TimeDomain) -> &'static str {
    match d {
        TimeDomain::EventTime => "event time",
        TimeDomain::ProcessingTime => "processing time",
    }
}

/// "on broadcast record (payload ...)": broadcast records are not numbered,
/// as they interleave with the main input.
fn describe_broadcast(element: &crate::wasm::Element) -> String {
    let p: String = String::from_utf8_lossy(&element.payload).chars().take(60).collect();
    format!("failed on a broadcast record (payload {p:?})")
}

/// "on input record 1234 (key "foo")": the 1-based position of the failing
/// record in this subtask's input.
fn describe_position(before: u64, batch: &Batch, element: Option<usize>) -> String {
    let Some(i) = element else {
        return if batch.len() == 1 {
            format!("failed on input record {}", before + 1)
        } else {
            format!("failed in the batch of input records {} to {}", before + 1, before + batch.len() as u64)
        };
    };
    let position = before + i as u64 + 1;
    let record = batch.get(i);
    let mut s = format!("failed on input record {position}");
    if let Some(k) = record.key {
        s.push_str(&format!(" (key {:?})", String::from_utf8_lossy(k)));
    } else {
        let p = String::from_utf8_lossy(record.payload);
        let p: String = p.chars().take(60).collect();
        s.push_str(&format!(" (payload {p:?})"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{bounded, unbounded};

    #[test]
    fn the_watermark_is_the_minimum_over_inputs() {
        let (a_tx, a_rx) = unbounded();
        let (b_tx, b_rx) = unbounded();
        let (_ctl_tx, ctl_rx) = bounded(1);
        let mut inputs = Inputs::new(vec![(a_rx, false), (b_rx, false)], ctl_rx, None);
        a_tx.send(Message::Watermark(100)).unwrap();
        b_tx.send(Message::Watermark(40)).unwrap();
        // Whichever arrives first, the minimum is reported only once both spoke.
        assert!(matches!(inputs.next_batch(), Next::Watermark(40)));
        b_tx.send(Message::Watermark(150)).unwrap();
        assert!(matches!(inputs.next_batch(), Next::Watermark(100)), "b passed a: a is the minimum");
        a_tx.send(Message::EndOfInput).unwrap();
        assert!(matches!(inputs.next_batch(), Next::Watermark(150)), "an ended input stops counting");
    }

    #[test]
    fn an_idle_input_stops_holding_the_watermark_back() {
        let (a_tx, a_rx) = unbounded();
        let (_b_tx, b_rx) = unbounded::<Message>();
        let (_ctl_tx, ctl_rx) = bounded(1);
        let started = Instant::now();
        let mut inputs = Inputs::new(vec![(a_rx, false), (b_rx, false)], ctl_rx, Some(Duration::from_millis(50)));
        a_tx.send(Message::Watermark(100)).unwrap();
        match inputs.next_until(Some(Instant::now() + Duration::from_secs(5))) {
            Next::Watermark(w) => assert_eq!(w, 100),
            _ => panic!("expected the watermark once the silent input went idle"),
        }
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn without_an_idle_timeout_a_silent_input_holds_the_watermark() {
        let (a_tx, a_rx) = unbounded();
        let (_b_tx, b_rx) = unbounded::<Message>();
        let (_ctl_tx, ctl_rx) = bounded(1);
        let mut inputs = Inputs::new(vec![(a_rx, false), (b_rx, false)], ctl_rx, None);
        a_tx.send(Message::Watermark(100)).unwrap();
        assert!(matches!(inputs.next_until(Some(Instant::now() + Duration::from_millis(100))), Next::Timeout));
    }
}
