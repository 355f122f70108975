//! One operator subtask: opens its state backend (restored as its plan
//! says), instantiates the module, calls `open`, then processes batches,
//! watermarks, timers and barriers until its inputs end.
//!
//! At a barrier it freezes its state (the synchronous part of a snapshot:
//! no copy), forwards the barrier, and hands the frozen state to its
//! uploader with the barrier's target; a swap the barrier orders for this
//! operator happens there too ([`super::swap`]), and so does a rescale's
//! handover ([`super::rescale`]): an old subtask ends at it, a new one
//! starts from it; and the fork of a shadow run ([`super::shadow`]), which
//! the subtask feeds every input it processes from then on.

use super::error::TaskError;
use super::events::{AckTiming, Counters, Reporter, TaskEvent, TaskSnapshot};
use super::inputs::{Inputs, Next};
use super::message::{Barrier, Control, TakeOver};
use super::recording::Recorder;
use super::router::{RouteError, Router};
use super::shadow::ShadowStart;
use super::taps::{Tapped, Taps};
use super::task_id::TaskId;
use crate::api::{CallMetrics, GuestMetrics};
use crate::checkpoint::metadata::{DbFile, StateHandle};
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::recording::SegmentFile;
use crate::checkpoint::restore::RestoreError;
use crate::checkpoint::restore::backend::{BackendSpec, Opened, SubtaskRestore, open_backend};
use crate::checkpoint::storage::CheckpointStorage;
use crate::checkpoint::upload::{CheckpointError, Uploader};
use crate::clock::now_ms;
use crate::config::BackendKind;
use crate::config::units::human_bytes;
use crate::state::key_group::KeyGroupRange;
use crate::state::{FrozenState, StateBackend, TimeDomain};
use crate::wasm::{GuestFailure, Limits, OperatorInfo, OperatorInstance, OperatorModule, WasmError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The guest's calls and memory over every instance a subtask has had: a
/// swap replaces the instance, the counts go on.
#[derive(Debug, Default)]
pub struct GuestTotals {
    carried: BTreeMap<&'static str, CallMetrics>,
    memory_peak: u64,
    log_lines_dropped: u64,
}

impl GuestTotals {
    /// `old` is replaced: its counts carry over.
    pub(super) fn retire(&mut self, old: &OperatorInstance) {
        for (export, c) in old.calls() {
            let total = self.carried.entry(export).or_default();
            total.count += c.count;
            total.time_ns += c.time_ns;
        }
        self.memory_peak = self.memory_peak.max(old.memory_bytes());
        self.log_lines_dropped += old.log_lines_dropped();
    }

    /// The metrics with `now` the instance in use.
    fn metrics(&self, now: &OperatorInstance, backend: &str, key_groups: u32) -> GuestMetrics {
        let mut calls: BTreeMap<String, CallMetrics> = self.carried.iter().map(|(e, c)| (e.to_string(), *c)).collect();
        for (export, c) in now.calls() {
            let total = calls.entry(export.to_string()).or_default();
            total.count += c.count;
            total.time_ns += c.time_ns;
        }
        let memory_bytes = now.memory_bytes();
        GuestMetrics {
            memory_bytes,
            memory_peak_bytes: self.memory_peak.max(memory_bytes),
            calls,
            log_lines_dropped: self.log_lines_dropped + now.log_lines_dropped(),
            backend: backend.to_string(),
            key_groups,
            ..GuestMetrics::default()
        }
    }
}

/// A subtask's part of a checkpoint, frozen at the barrier, before it goes
/// to the uploader.
pub(super) struct BarrierUpload {
    pub(super) id: CheckpointId,
    /// A savepoint's storage, if the barrier takes one.
    pub(super) savepoint: Option<Arc<CheckpointStorage>>,
    pub(super) frozen: Box<dyn FrozenState>,
    /// The input recorded up to the barrier.
    pub(super) recording: Option<SegmentFile>,
    /// Reports the stored part (or why not) to the coordinator.
    pub(super) done: Box<dyn FnOnce(Result<StateHandle, CheckpointError>) + Send>,
}

impl BarrierUpload {
    /// Writes and stores the frozen state in the background.
    pub(super) fn start(self, uploader: &Uploader) {
        uploader.upload(self.id, self.savepoint, self.frozen, self.recording, self.done);
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
    /// The key groups this subtask owns.
    pub range: KeyGroupRange,
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
    /// Progress and events.
    pub reporter: Reporter,
    /// Restarts of the job so far (0 on the first run).
    pub attempt: u32,
    /// Stores snapshots: checkpoints' into checkpoint storage, a
    /// savepoint's into its own.
    pub uploader: Uploader,
    /// How the state backend is built.
    pub backend: BackendSpec,
    /// State to start from.
    pub restore: Option<SubtaskRestore>,
    /// A new subtask of a rescale: the state comes from the old subtasks.
    pub take_over: Option<TakeOver>,
    /// Calls and memory of the instances it had.
    pub guest: GuestTotals,
    /// What watches its input besides its module: the recorder
    /// (`replay = { record = true }`) and a shadow run.
    pub taps: Taps,
    /// The processing time the recorder holds, which its instances read.
    pub pinned: Option<crate::clock::Pinned>,
}

impl OperatorTask {
    /// Runs the subtask to the end of its input.
    pub fn run(mut self) -> Result<Counters, TaskError> {
        let restore = self.restore.take();
        let started = Instant::now();
        // A new subtask of a rescale holds `taken` until it is ready.
        let (opened, took_over, taken) = match self.take_over.take() {
            Some(t) => match self.wait_for_state(&t)? {
                Waited::Restored(opened, barrier_at, barrier) => (opened, Some((barrier_at, barrier)), Some(t.taken)),
                Waited::Abandoned => return Ok(Counters::default()),
            },
            None => (self.open_state(restore.as_ref()).map_err(|e| self.state_error(e))?, None, None),
        };
        let restored = (restore.is_some() || took_over.is_some()).then_some(opened.restored);
        // A replay starts from a checkpoint's state: recording starts at
        // the one restored, else at the first barrier.
        // A new subtask of a rescale starts from the rescale's barrier.
        let record_from = restore
            .as_ref()
            .filter(|r| !r.from.metadata.savepoint)
            .map(|r| r.from.metadata.id)
            .or(took_over.map(|(_, barrier)| barrier));
        drop(restore);
        self.reset_uploads(&opened.adopted);
        let mut instance = self.instantiate(&self.module.clone(), opened.backend)?;
        instance.open(&self.info()).map_err(|f| self.guest_error("failed in open".into(), f))?;
        self.forward(&mut instance)?;
        if let Some((barrier_at, _)) = took_over {
            self.reporter.send(TaskEvent::TookOver { task: self.id.clone(), barrier_at });
        }
        drop(taken);
        match restored {
            // How long recovery took is what an operator of the job asks
            // first after a crash.
            Some(r) => {
                let took = started.elapsed();
                tracing::info!(
                    task = %self.id,
                    entries = r.entries,
                    size = %human_bytes(r.bytes),
                    took_ms = took.as_millis() as u64,
                    rate = %format!("{}/s", human_bytes((r.bytes as f64 / took.as_secs_f64().max(1e-6)) as u64)),
                    "state restored; ready for the first record"
                );
            }
            None => tracing::debug!(task = %self.id, "opened"),
        }
        if let (Some(r), Some(id)) = (self.taps.recorder.as_mut(), record_from) {
            r.tick();
            r.start(id, true, instance.host().watermark);
            instance.reseed(id);
        }

        let mut counters = Counters::default();
        loop {
            // Wake up for the next processing-time timer, if any, and to
            // report progress while no input comes.
            let timer = instance.next_timer(TimeDomain::ProcessingTime).map(|t| {
                let wait_ms = t.saturating_sub(now_ms()).max(0) as u64;
                Instant::now() + Duration::from_millis(wait_ms)
            });
            let deadline = Some(timer.map_or(self.reporter.next_report(), |t| t.min(self.reporter.next_report())));
            let waiting_since = Instant::now();
            let next = self.inputs.next_until(deadline);
            counters.idle_ns += waiting_since.elapsed().as_nanos() as u64;
            let now = self.taps.recorder.as_mut().map_or_else(now_ms, Recorder::tick);
            let fired = self.fire_timers(&mut instance, TimeDomain::ProcessingTime, now)?;
            if fired
                && !matches!(next, Next::Batch { .. } | Next::Watermark(_) | Next::Ended)
                && let Some(r) = &mut self.taps.recorder
            {
                r.timers();
            }
            match next {
                Next::Watermark(w) => {
                    let copy = self.taps.before(Tapped::Watermark(w));
                    instance.set_watermark(w);
                    self.fire_timers(&mut instance, TimeDomain::EventTime, w)?;
                    self.router.watermark(w).map_err(|e| self.route_error(e))?;
                    self.taps.after(copy);
                }
                Next::Timeout => self.end_batch(&mut counters, &instance)?,
                Next::Control(Control::ShadowStop(id)) => self.taps.shadow.stop(id),
                Next::BarrierAborted(_) | Next::Control(_) => {}
                Next::Barrier(barrier) => {
                    let (rescale, at) = (barrier.rescale_of(&self.id.node).cloned(), Instant::now());
                    let id = barrier.id;
                    let (next, upload) = self.on_barrier(instance, barrier)?;
                    instance = next;
                    if self.taps.recorder.is_some() {
                        instance.reseed(id);
                    }
                    if let Some(order) = rescale {
                        self.fill(&mut counters);
                        self.hand_over(&mut instance, &order, (at, id), upload, counters)?;
                        return Ok(counters);
                    }
                }
                Next::Batch { batch, broadcast: true } => {
                    counters.records_in += batch.len() as u64;
                    let copy = self.taps.before(Tapped::Broadcast(&batch));
                    for record in batch.iter() {
                        instance.process_broadcast(record).map_err(|f| {
                            let what = match &f.record {
                                Some(r) => format!("failed on a broadcast record ({r})"),
                                None => "failed on a broadcast record".into(),
                            };
                            self.guest_error(what, f)
                        })?;
                        self.forward(&mut instance)?;
                    }
                    self.taps.after(copy);
                    self.end_batch(&mut counters, &instance)?;
                }
                Next::Batch { batch, broadcast: false } => {
                    let before = counters.records_in;
                    let len = batch.len();
                    counters.records_in += len as u64;
                    let copy = self.taps.before(Tapped::Batch(&batch));
                    if let Err(f) = instance.process(batch) {
                        return Err(self.guest_error(describe_position(before, len, &f), f));
                    }
                    self.forward(&mut instance)?;
                    self.taps.after(copy);
                    self.end_batch(&mut counters, &instance)?;
                }
                Next::Ended => {
                    // A timer registered for a time the watermark had
                    // already passed (a late record after an idle input's
                    // end) waits for a watermark that will never come:
                    // every pending timer fires before the end of input.
                    self.taps.input_ended(self.inputs.watermark());
                    self.fire_timers(&mut instance, TimeDomain::EventTime, self.inputs.watermark())?;
                    break;
                }
                Next::Disconnected => return Err(TaskError::Disconnected(self.id.node.clone())),
                Next::Cancelled => return Err(TaskError::Cancelled),
            }
        }
        instance.end_of_input().map_err(|f| self.guest_error("failed in end-of-input".into(), f))?;
        self.forward(&mut instance)?;
        self.taps.shadow.end();
        self.store_last_recording();
        self.router.end().map_err(|e| self.route_error(e))?;
        // Its part of the checkpoint in flight is reported before its end.
        self.uploader.wait_for_uploads();
        self.fill(&mut counters);
        Ok(counters)
    }

    /// Brings the counters the router and inputs keep up to date.
    fn fill(&self, counters: &mut Counters) {
        counters.records_out = self.router.records_out();
        counters.backpressured_ns = self.router.backpressured_ns();
        counters.input_watermark = self.inputs.watermark();
        counters.output_watermark = self.router.output_watermark();
    }

    /// The synchronous part of a checkpoint: freeze the state (no copy),
    /// pass the barrier on; the upload runs in the background. (The pause
    /// reported is the freeze: forwarding may also wait, but on
    /// back-pressure, not on the state's size.) Then a swap the barrier
    /// orders for this operator. At a barrier that rescales this operator
    /// the upload is returned, not started: the hand-over starts it
    /// ([`Self::hand_over`]).
    fn on_barrier(
        &mut self,
        mut instance: OperatorInstance,
        barrier: Arc<Barrier>,
    ) -> Result<(OperatorInstance, Option<BarrierUpload>), TaskError> {
        let started = Instant::now();
        let frozen = instance.freeze_state();
        let timing = AckTiming::since(started, self.inputs.last_alignment());
        self.router.barrier(&barrier).map_err(|e| self.route_error(e))?;
        let (task, id, events) = (self.id.clone(), barrier.id, self.reporter.sender());
        let watermark = instance.host().watermark;
        let recording = self.taps.recorder.as_mut().and_then(|r| r.cut(id, watermark));
        let upload = BarrierUpload {
            id,
            savepoint: barrier.savepoint_target().cloned(),
            frozen,
            recording,
            done: Box::new(move |result| {
                let _ = events.send(match result {
                    Ok(handle) => {
                        TaskEvent::Acknowledged { task, id, snapshot: TaskSnapshot::Operator(handle), timing }
                    }
                    Err(reason) => TaskEvent::Declined { task, id, reason },
                });
            }),
        };
        let upload = match barrier.rescale_of(&self.id.node) {
            Some(_) => Some(upload),
            None => {
                upload.start(&self.uploader);
                None
            }
        };
        if let Some(order) = barrier.shadow_of(&self.id.node) {
            self.taps.shadow.start(ShadowStart {
                task: self.id.clone(),
                order: (**order).clone(),
                checkpoint: barrier.id,
                frozen: instance.freeze_state(),
                backend: self.backend.clone(),
                range: self.range,
                max_parallelism: self.max_parallelism,
                limits: self.limits,
                info: self.info(),
                events: self.reporter.sender(),
                interval: self.reporter.interval(),
            });
        }
        match barrier.swap_for(&self.id.node) {
            Some(order) => {
                if let Some(r) = &mut self.taps.recorder {
                    r.swapped();
                }
                match self.swap(instance, barrier.id, order.clone()) {
                    Ok(instance) => Ok((instance, upload)),
                    Err(e) => {
                        if let Some(upload) = upload {
                            upload.start(&self.uploader);
                        }
                        Err(e)
                    }
                }
            }
            None => Ok((instance, upload)),
        }
    }

    /// Opens the state backend, restored from `restore` if given.
    pub(super) fn open_state(&self, restore: Option<&SubtaskRestore>) -> Result<Opened, RestoreError> {
        let name = format!("{}-{}", self.id.node, self.id.subtask);
        open_backend(&self.backend, &name, self.range, restore)
    }

    /// An incremental uploader forgets the files it stored and takes
    /// `known` (files the backend took over) as stored.
    pub(super) fn reset_uploads(&mut self, known: &[DbFile]) {
        if self.backend.kind == BackendKind::RocksDb && self.backend.rocksdb.incremental {
            self.uploader.incremental(known);
        }
    }

    /// An instance of `module` over `backend`.
    pub(super) fn instantiate(
        &self,
        module: &OperatorModule,
        backend: Box<dyn StateBackend>,
    ) -> Result<OperatorInstance, WasmError> {
        let instance =
            OperatorInstance::new(module, &self.id.node, self.id.subtask, backend, self.max_parallelism, self.limits)?;
        if let Some(p) = &self.pinned {
            instance.pin_clock(p.clone());
        }
        Ok(instance)
    }

    /// The recorder, if any, writes this turn's input.
    /// At the end of input: the last recorded segment is stored now (no
    /// barrier follows to carry it).
    fn store_last_recording(&mut self) {
        self.taps.recorded();
        let Some(segment) = self.taps.recorder.as_mut().and_then(Recorder::end) else { return };
        if let Err(e) = self.uploader.store_now(&segment) {
            tracing::warn!(task = %self.id, error = %e, "cannot store the input recorded since the last checkpoint");
        }
    }

    /// What the guest's `open` is told.
    pub(super) fn info(&self) -> OperatorInfo {
        OperatorInfo {
            uid: self.id.node.to_string(),
            subtask_index: self.id.subtask,
            parallelism: self.parallelism,
            max_parallelism: self.max_parallelism,
            attempt_number: self.attempt,
            params: self.params.clone(),
        }
    }

    /// A guest failure of this subtask, `what` saying where.
    pub(super) fn guest_error(&self, what: String, failure: GuestFailure) -> TaskError {
        TaskError::Guest {
            uid: self.id.node.clone(),
            subtask: self.id.subtask,
            parallelism: self.parallelism,
            what,
            failure: Box::new(failure),
        }
    }

    fn route_error(&self, e: RouteError) -> TaskError {
        e.into_task_error(&self.id.node)
    }

    /// After an input batch: send partial batches on, report progress
    /// (with the guest's metrics).
    fn end_batch(&mut self, counters: &mut Counters, instance: &OperatorInstance) -> Result<(), TaskError> {
        self.router.flush().map_err(|e| self.route_error(e))?;
        self.fill(counters);
        if self.reporter.tick(*counters) {
            let metrics = self.guest.metrics(instance, self.backend.kind.name(), self.range.len() as u32);
            self.reporter.send(TaskEvent::Guest(self.id.clone(), Box::new(metrics)));
        }
        Ok(())
    }

    /// Fires every timer of `domain` due at `up_to`, in time order, including
    /// timers that firing registers for times already due; says whether
    /// any fired.
    fn fire_timers(
        &mut self,
        instance: &mut OperatorInstance,
        domain: TimeDomain,
        up_to: i64,
    ) -> Result<bool, TaskError> {
        let mut fired = false;
        loop {
            match instance.fire_due_timer(domain, up_to) {
                Ok(Some(_)) => {
                    fired = true;
                    self.forward(instance)?;
                }
                Ok(None) => break,
                Err(f) => {
                    let what = match domain {
                        TimeDomain::EventTime => "failed in on-timer (event time)",
                        TimeDomain::ProcessingTime => "failed in on-timer (processing time)",
                    };
                    return Err(self.guest_error(what.into(), f));
                }
            }
        }
        // Called after every batch: flush only when a timer produced output.
        if fired {
            self.router.flush().map_err(|e| self.route_error(e))?;
        }
        Ok(fired)
    }

    /// Routes what the guest emitted.
    pub(super) fn forward(&mut self, instance: &mut OperatorInstance) -> Result<(), TaskError> {
        let (router, taps) = (&mut self.router, &mut self.taps);
        instance
            .drain_outputs(|out| {
                if out.is_empty() {
                    return Ok(());
                }
                taps.capture(out);
                router.push_all(out)
            })
            .map_err(|e| e.into_task_error(&self.id.node))
    }
}

/// "failed on input record 1234 (key "foo")": the 1-based position of the
/// failing record in this subtask's input, or the batch's range when the
/// guest did not say which record it was on.
fn describe_position(before: u64, len: usize, failure: &GuestFailure) -> String {
    match failure.element {
        Some(i) => {
            let mut s = format!("failed on input record {}", before + i as u64 + 1);
            if let Some(r) = &failure.record {
                s.push_str(&format!(" ({r})"));
            }
            s
        }
        None if len == 1 => format!("failed on input record {}", before + 1),
        None => format!("failed in the batch of input records {} to {}", before + 1, before + len as u64),
    }
}

/// How a new subtask's wait for its state ended.
pub(super) enum Waited {
    /// Every old subtask's state is in the backend; the first old
    /// subtask's barrier came at this instant; the barrier's checkpoint.
    Restored(Opened, Instant, u64),
    /// The rescale was abandoned before its barrier: end without starting.
    Abandoned,
}
