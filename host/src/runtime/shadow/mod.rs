//! Shadow runs (`host shadow`), the operator subtasks' side. At the barrier
//! that carries a [`ShadowOrder`] for its operator, a live subtask freezes
//! its state once more (on the hashmap backend a copy-on-write view, no
//! copy) and starts a shadow on a thread of its own: an instance of the
//! order's module over a copy of that state. From then on the live subtask
//! hands the shadow each input it processed, with what its own module
//! emitted for it ([`ShadowFeed`]); the shadow processes the same input and
//! compares its output with the live one ([`compare`]). The shadow's output
//! goes nowhere else, and it never writes to the live state.
//!
//! The live subtask never waits for its shadow while the job runs: the feed
//! is a queue of at most `max_lag` steps, and a shadow that falls that far
//! behind is dropped, as is one that fails (a trap, its memory or time
//! limit, a state error). What the live subtask pays is a copy of each
//! input batch and of its output, and at its end (or a stop) the wait for
//! the shadow to finish the step it is on.

pub mod compare;

use super::events::TaskEvent;
use super::message::ShadowOrder;
use super::task_id::TaskId;
use crate::api::ShadowReport;
use crate::checkpoint::restore::backend::{BackendSpec, open_backend};
use crate::clock::now_ms;
use crate::record::{Batch, Records};
use crate::state::key_group::KeyGroupRange;
use crate::state::snapshot::{OperatorShare, restore_snapshot_stream, write_snapshot};
use crate::state::{FrozenState, TimeDomain};
use crate::wasm::{Limits, OperatorInfo, OperatorInstance};
use compare::Tally;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One input the live subtask processed.
pub enum Input {
    /// A batch of records.
    Batch(Batch),
    /// Records of a broadcast input.
    Broadcast(Batch),
    /// A watermark (the event-time timers it fires go with it).
    Watermark(i64),
    /// The end of input.
    End,
}

/// One step: an input and what the live module emitted for it.
struct Step {
    input: Input,
    live: Records,
}

/// Why a shadow ended.
enum Stop {
    /// `host shadow --stop`, `--promote`, or its duration passed.
    Asked,
    /// It fell this many steps behind.
    FellBehind(u32),
    /// The live subtask ended other than at the end of its input.
    LiveEnded,
}

/// A live subtask's shadow, if it has one, and the shadows it was told to
/// stop before their barrier reached it.
#[derive(Default)]
pub struct Shadowing {
    feed: Option<ShadowFeed>,
    /// The highest shadow id stopped; a barrier forking one up to it
    /// (the stop came first, by the control channel) forks nothing.
    stopped: u64,
}

impl Shadowing {
    /// Whether a shadow wants the subtask's input.
    #[inline]
    pub fn active(&self) -> bool {
        self.feed.as_ref().is_some_and(|f| f.steps.is_some())
    }

    /// The live module emitted `out`.
    #[inline]
    pub fn capture(&mut self, out: &Records) {
        if let Some(f) = &mut self.feed {
            f.capture(out);
        }
    }

    /// The live subtask processed `input`.
    pub fn step(&mut self, input: Input) {
        if let Some(f) = &mut self.feed {
            f.step(input);
        }
    }

    /// Forks the shadow `start` orders (ending one that is still there).
    pub fn start(&mut self, start: ShadowStart) {
        if let Some(old) = self.feed.take() {
            old.stop();
        }
        let (id, checkpoint, task, events) =
            (start.order.id, start.checkpoint, start.task.clone(), start.events.clone());
        let said = |status: &str, reason: String| {
            let report = ShadowReport {
                id,
                operator: task.node.to_string(),
                checkpoint,
                status: status.into(),
                reason: Some(reason),
                ..ShadowReport::default()
            };
            let _ = events.send(TaskEvent::Shadow(task.clone(), Box::new(report)));
        };
        if id <= self.stopped {
            return said("ended", "stopped before it started".into());
        }
        match ShadowFeed::start(start) {
            Ok(f) => self.feed = Some(f),
            Err(e) => said("dropped", format!("cannot start its thread: {e}")),
        }
    }

    /// `Control::ShadowStop(id)`.
    pub fn stop(&mut self, id: u64) {
        self.stopped = self.stopped.max(id);
        if self.feed.as_ref().is_some_and(|f| f.id == id) {
            self.feed.take().expect("checked").stop();
        }
    }

    /// The live input ended.
    pub fn end(&mut self) {
        if let Some(f) = self.feed.take() {
            f.end();
        }
    }
}

/// The live subtask's end of a shadow.
pub struct ShadowFeed {
    id: u64,
    steps: Option<Sender<Step>>,
    stop: Sender<Stop>,
    thread: Option<JoinHandle<()>>,
    max_lag: u32,
    /// What the live module emitted since the last step.
    live: Records,
}

/// What a shadow starts from.
pub struct ShadowStart {
    /// The live subtask.
    pub task: TaskId,
    /// The order.
    pub order: ShadowOrder,
    /// The barrier's checkpoint.
    pub checkpoint: u64,
    /// The live state at the barrier.
    pub frozen: Box<dyn FrozenState>,
    /// How the live subtask's backend is built (the shadow builds its own
    /// the same way).
    pub backend: BackendSpec,
    /// The live subtask's key groups.
    pub range: KeyGroupRange,
    /// Key groups of the job.
    pub max_parallelism: u32,
    /// The guest's limits: the shadow's instance has its own, of the same
    /// size.
    pub limits: Limits,
    /// What the live module's `open` was told.
    pub info: OperatorInfo,
    /// Where the shadow's reports go.
    pub events: Sender<TaskEvent>,
    /// How often it reports.
    pub interval: Duration,
}

impl ShadowFeed {
    /// Starts the shadow of `start`; its thread reports to the coordinator.
    fn start(start: ShadowStart) -> std::io::Result<ShadowFeed> {
        let (steps_tx, steps_rx) = crossbeam_channel::bounded(start.order.max_lag.max(1) as usize);
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        let (id, max_lag) = (start.order.id, start.order.max_lag);
        let thread = std::thread::Builder::new()
            .name(format!("weir-shadow-{}", start.task))
            .spawn(move || Shadow::new(start, steps_rx, stop_rx).run())?;
        Ok(ShadowFeed {
            id,
            steps: Some(steps_tx),
            stop: stop_tx,
            thread: Some(thread),
            max_lag,
            live: Records::default(),
        })
    }

    /// The live module emitted `out`.
    fn capture(&mut self, out: &Records) {
        if self.steps.is_some() {
            self.live.extend(out);
        }
    }

    /// The live subtask processed `input`: the shadow gets it, with what
    /// the live module emitted since the last step. Never waits: a shadow
    /// `max_lag` steps behind is dropped.
    fn step(&mut self, input: Input) {
        let Some(tx) = &self.steps else { return };
        let step = Step { input, live: std::mem::take(&mut self.live) };
        match tx.try_send(step) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let _ = self.stop.try_send(Stop::FellBehind(self.max_lag));
                self.steps = None;
            }
            // It ended on its own (it failed and said why).
            Err(TrySendError::Disconnected(_)) => self.steps = None,
        }
    }

    /// The live input ended: the shadow processes the end too, reports,
    /// and ends; waits for it.
    fn end(mut self) {
        if let Some(tx) = self.steps.take() {
            // The queue is bounded and the shadow drains it: this waits for
            // at most `max_lag` steps of the shadow's work.
            let _ = tx.send(Step { input: Input::End, live: std::mem::take(&mut self.live) });
        }
        self.join();
    }

    /// Ends the shadow (`--stop`, `--promote`, its duration): it reports
    /// and ends after the step it is on; waits for it.
    fn stop(mut self) {
        let _ = self.stop.try_send(Stop::Asked);
        self.steps = None;
        self.join();
    }

    fn join(&mut self) {
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!(shadow = self.id, "a shadow's thread panicked");
        }
    }
}

impl Drop for ShadowFeed {
    /// The live subtask ends otherwise (it failed, was cancelled, handed
    /// its state over at a rescale): the shadow ends with it.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop.try_send(Stop::LiveEnded);
            self.steps = None;
            self.join();
        }
    }
}

/// The shadow's side, on its own thread.
struct Shadow {
    start: ShadowStart,
    steps: Receiver<Step>,
    stop: Receiver<Stop>,
    tally: Tally,
    records_in: u64,
    started: Instant,
    last_report: Instant,
    watermark: i64,
}

/// How a shadow ended: "ended" or "dropped", and why.
type Ending = (&'static str, String);

/// Why a shadow is dropped.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("cannot copy the live state: {0}")]
    Copy(crate::state::snapshot::SnapshotError),
    #[error("cannot open a state backend for the shadow: {0}")]
    Backend(crate::checkpoint::restore::RestoreError),
    #[error("cannot instantiate the module: {0}")]
    Instantiate(crate::wasm::WasmError),
    #[error("failed in {0}: {1}")]
    Guest(&'static str, crate::wasm::GuestFailure),
}

impl Shadow {
    fn new(start: ShadowStart, steps: Receiver<Step>, stop: Receiver<Stop>) -> Self {
        Shadow {
            start,
            steps,
            stop,
            tally: Tally::default(),
            records_in: 0,
            started: Instant::now(),
            last_report: Instant::now(),
            watermark: i64::MIN,
        }
    }

    fn run(mut self) {
        let (status, reason) = match self.body() {
            Ok(ending) | Err(ending) => ending,
        };
        if status == "dropped" {
            tracing::warn!(task = %self.start.task, shadow = self.start.order.id, "shadow dropped: {reason}");
        } else {
            tracing::info!(task = %self.start.task, shadow = self.start.order.id, "shadow ended: {reason}");
        }
        self.report(status, Some(reason));
    }

    /// Runs until the shadow ends (`Ok`) or is dropped (`Err`).
    fn body(&mut self) -> Result<Ending, Ending> {
        let dropped = |why: Failure| ("dropped", why.to_string());
        let mut instance = self.fork().map_err(dropped)?;
        let info = self.start.info.clone();
        instance.open(&info).map_err(|f| dropped(Failure::Guest("open", f)))?;
        // What `open` emits has no live counterpart: the live module's
        // `open` ran long before.
        instance.drain_outputs(|_| ());
        self.report("running", None);
        loop {
            if let Ok(stop) = self.stop.try_recv() {
                return self.stopped(stop);
            }
            let timer = instance
                .next_timer(TimeDomain::ProcessingTime)
                .map(|t| Instant::now() + Duration::from_millis(t.saturating_sub(now_ms()).max(0) as u64));
            let next_report = self.last_report + self.start.interval;
            let deadline = timer.map_or(next_report, |t| t.min(next_report));
            let step = crossbeam_channel::select! {
                recv(self.stop) -> s => return self.stopped(s.unwrap_or(Stop::LiveEnded)),
                recv(self.steps) -> s => match s {
                    Ok(step) => Some(step),
                    // The live side let go: it said why on the stop
                    // channel first.
                    Err(_) => return self.stopped(self.stop.try_recv().unwrap_or(Stop::LiveEnded)),
                },
                default(deadline.saturating_duration_since(Instant::now())) => None,
            };
            fire(&mut instance, TimeDomain::ProcessingTime, now_ms())
                .map_err(|f| dropped(Failure::Guest("on-timer (processing time)", f)))?;
            let Some(Step { input, live }) = step else {
                if self.steps.is_empty() && self.last_report.elapsed() >= self.start.interval {
                    self.report("running", None);
                }
                continue;
            };
            let end = matches!(input, Input::End);
            self.process(&mut instance, input).map_err(dropped)?;
            if end {
                instance.end_of_input().map_err(|f| dropped(Failure::Guest("end-of-input", f)))?;
            }
            let tally = &mut self.tally;
            instance.drain_outputs(|out| tally.compare(&live, out));
            if end {
                return Ok(("ended", "the input ended".into()));
            }
            if self.last_report.elapsed() >= self.start.interval {
                self.report("running", None);
            }
        }
    }

    /// The shadow's instance over a copy of the live state at the barrier.
    fn fork(&mut self) -> Result<OperatorInstance, Failure> {
        let s = &mut self.start;
        let snapshot = write_snapshot(s.frozen.as_mut(), s.max_parallelism).map_err(Failure::Copy)?;
        let name = format!("{}-{}-shadow", s.task.node, s.task.subtask);
        let mut opened = open_backend(&s.backend, &name, s.range, None).map_err(Failure::Backend)?;
        // The bytes were written a moment ago by this process: the checks a
        // file from elsewhere needs are not repeated.
        restore_snapshot_stream(
            &mut &snapshot[..],
            opened.backend.as_mut(),
            s.range,
            s.max_parallelism,
            OperatorShare::All,
        )
        .map_err(Failure::Copy)?;
        OperatorInstance::new(
            &s.order.module,
            &s.task.node,
            s.task.subtask,
            opened.backend,
            s.max_parallelism,
            s.limits,
        )
        .map_err(Failure::Instantiate)
    }

    fn process(&mut self, instance: &mut OperatorInstance, input: Input) -> Result<(), Failure> {
        match input {
            Input::Batch(batch) => {
                self.records_in += batch.len() as u64;
                instance.process(batch).map_err(|f| Failure::Guest("process", f))
            }
            Input::Broadcast(batch) => {
                self.records_in += batch.len() as u64;
                for record in batch.iter() {
                    instance.process_broadcast(record).map_err(|f| Failure::Guest("process-broadcast", f))?;
                }
                Ok(())
            }
            Input::Watermark(w) => {
                self.watermark = w;
                instance.set_watermark(w);
                fire(instance, TimeDomain::EventTime, w).map_err(|f| Failure::Guest("on-timer (event time)", f))
            }
            // As the live subtask: every pending event-time timer fires
            // before the end of input.
            Input::End => fire(instance, TimeDomain::EventTime, self.watermark)
                .map_err(|f| Failure::Guest("on-timer (event time)", f)),
        }
    }

    fn stopped(&self, stop: Stop) -> Result<Ending, Ending> {
        match stop {
            Stop::Asked => Ok(("ended", "stopped on request".into())),
            Stop::LiveEnded => Ok(("ended", "the live subtask stopped".into())),
            Stop::FellBehind(n) => Err((
                "dropped",
                format!("it fell {n} input batches behind the live operator (raise --max-lag to allow more)"),
            )),
        }
    }

    /// Sends this subtask's report so far.
    fn report(&mut self, status: &str, reason: Option<String>) {
        self.last_report = Instant::now();
        let (keys, unlisted, samples) = self.tally.listed();
        let report = ShadowReport {
            id: self.start.order.id,
            operator: self.start.order.uid.to_string(),
            checkpoint: self.start.checkpoint,
            status: status.to_string(),
            reason,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            records_in: self.records_in,
            lag: self.steps.len() as u64,
            counts: self.tally.counts,
            keys,
            unlisted,
            samples,
            ..ShadowReport::default()
        };
        let _ = self.start.events.send(TaskEvent::Shadow(self.start.task.clone(), Box::new(report)));
    }
}

/// Fires every timer of `domain` due at `up_to`, including those firing
/// registers for times already due.
pub fn fire(instance: &mut OperatorInstance, domain: TimeDomain, up_to: i64) -> Result<(), crate::wasm::GuestFailure> {
    while instance.fire_due_timer(domain, up_to)?.is_some() {}
    Ok(())
}
