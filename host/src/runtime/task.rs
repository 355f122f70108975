//! Task bodies: the input side shared by operators and sinks, and the loop of
//! one operator subtask (open, process batches, end of input).

use super::batch::Batch;
use super::events::{Counters, TaskError, TaskEvent, TaskId};
pub use super::inputs::{Inputs, Next};
use super::router::{RouteError, Router};
use crate::checkpoint::metadata::DbFile;
use crate::checkpoint::restore::{RestoreSource, download_rocksdb};
use crate::checkpoint::storage::CheckpointStorage;
use crate::checkpoint::uploader::Uploader;
use crate::config::{BackendKind, RocksDbSettings};
use crate::runtime::events::Control;
use crate::runtime::swap::{SwapTarget, SwapTargets};
use crate::state::hashmap::HashMapBackend;
use crate::state::key_group::KeyGroupRange;
use crate::state::rocksdb::checkpoint_to_snapshot;
use crate::state::rocksdb::{RocksDbBackend, RocksDbMemory};
use crate::state::snapshot::write_snapshot;
use crate::state::snapshot::{OperatorShare, restore_snapshot, restore_snapshot_stream};
use crate::state::ttl::TtlBackend;
use crate::state::{StateBackend, TimeDomain};
use crate::state::{StateDescriptor, StateError};
use crate::wasm::{GuestFailure, Limits, OperatorInfo, OperatorInstance, OperatorModule};
use crossbeam_channel::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

    /// Sends `event` to the coordinator now.
    pub fn send(&self, event: TaskEvent) {
        let _ = self.events.send(event);
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
    /// Restarts of the job so far (0 on the first run).
    pub attempt: u32,
    /// Stores snapshots when checkpointing is on.
    pub uploader: Option<Uploader>,
    /// Module swaps in flight (with checkpointing).
    pub swaps: Option<Arc<SwapTargets>>,
    /// State to start from.
    pub restore: Option<OperatorRestore>,
    /// Which backend keeps the state.
    pub backend: BackendKind,
    /// RocksDB options, for that backend.
    pub rocksdb: RocksDbSettings,
}

/// What an operator subtask restores before `open`.
pub struct OperatorRestore {
    /// The state of every subtask of the operator in the checkpoint: each
    /// subtask takes the key groups it owns from all of them.
    pub sources: Arc<Vec<RestoreSource>>,
    /// The source that is this subtask's own (the same index), when
    /// neither parallelism nor max parallelism changed: its key groups are
    /// exactly this subtask's, so no other source is read.
    pub operator_state_from: Option<usize>,
    /// The parallelism changed: operator and broadcast state are dealt out
    /// anew ([`OperatorShare::Rescaled`]).
    pub rescaled: bool,
    /// Where incremental state is downloaded from.
    pub storage: Arc<CheckpointStorage>,
    /// The source taken over whole as the RocksDB database, if any.
    pub adopted: Option<usize>,
}

/// Why a backend could not be made: (while restoring?, what failed).
type BackendFailure = (bool, String);

/// Where restored RocksDB files of `source` are downloaded.
fn download_dir(localdir: &std::path::Path, uid: &str, subtask: u32, source: usize) -> std::path::PathBuf {
    localdir.join(format!("restore-{uid}-{subtask}-from-{source}-{}", std::process::id()))
}

impl OperatorTask {
    /// Creates the state backend, adopting the restored RocksDB files when
    /// they are this subtask's own; also returns the files adopted (an
    /// incremental uploader need not store them again). Errors say whether
    /// restoring failed (true) or the backend itself.
    fn backend(
        &mut self,
        range: KeyGroupRange,
        clock: crate::state::ttl::Clock,
    ) -> Result<(Box<dyn StateBackend>, Vec<DbFile>), BackendFailure> {
        if self.backend == BackendKind::HashMap {
            return Ok((
                Box::new(TtlBackend::new(HashMapBackend::new(range), clock, self.max_parallelism)),
                Vec::new(),
            ));
        }
        let memory = RocksDbMemory {
            block_cache: self.rocksdb.block_cache as usize,
            write_buffers: self.rocksdb.write_buffers as usize,
            write_cache: self.rocksdb.write_cache as usize,
        };
        let localdir = self.rocksdb.localdir.clone();
        let name = format!("{}-{}", self.id.node, self.id.subtask);
        let opened = |e: StateError| (false, format!("cannot open RocksDB under {}: {e}", localdir.display()));
        // The subtask's own incremental state, at unchanged parallelism.
        let own = self.restore.as_mut().and_then(|r| {
            let i = r.operator_state_from?;
            match r.sources.get(i)? {
                RestoreSource::Rocksdb(files) => {
                    r.adopted = Some(i);
                    Some((r.storage.clone(), files.clone()))
                }
                RestoreSource::Snapshot(_) | RestoreSource::File { .. } => None,
            }
        });
        let Some((storage, files)) = own else {
            let db = RocksDbBackend::open(&localdir, &name, range, memory).map_err(opened)?;
            return Ok((Box::new(TtlBackend::new(db, clock, self.max_parallelism)), Vec::new()));
        };
        let dir = download_dir(&localdir, &self.id.node, self.id.subtask, self.id.subtask as usize);
        let descriptors = download_rocksdb(&storage, &files, &dir).map_err(|e| (true, e))?;
        let inner: Vec<_> = descriptors.iter().map(|d| StateDescriptor { ttl: None, ..d.clone() }).collect();
        let db = RocksDbBackend::adopt(&localdir, &name, range, memory, &dir, inner).map_err(opened)?;
        let mut backend = TtlBackend::new(db, clock, self.max_parallelism);
        // Registered through the TTL layer in stored order, so its ids line
        // up with the database's.
        for d in descriptors {
            backend.register(d).map_err(|e| (true, e.to_string()))?;
        }
        Ok((Box::new(backend), files))
    }

    /// Runs the subtask to the end of its input.
    pub fn run(mut self) -> Result<Counters, TaskError> {
        let uid = self.id.node.clone();
        let subtask = self.id.subtask;
        let range = KeyGroupRange::for_subtask(subtask, self.parallelism, self.max_parallelism);
        // State TTL is a layer over the backend, on processing time.
        let clock: crate::state::ttl::Clock = Arc::new(now_ms);
        let restore_error = |message: String| TaskError::Restore { uid: uid.clone(), subtask, message };
        let (mut backend, known_files) = self.backend(range, clock.clone()).map_err(|(restore, message)| {
            if restore { restore_error(message) } else { TaskError::Backend { uid: uid.clone(), subtask, message } }
        })?;
        if self.backend == BackendKind::RocksDb
            && self.rocksdb.incremental
            && let Some(uploader) = self.uploader.take()
        {
            self.uploader = Some(uploader.incremental(&known_files));
        }
        if let Some(restore) = &self.restore {
            for (i, source) in restore.sources.iter().enumerate() {
                if restore.adopted == Some(i) {
                    continue;
                }
                // Same parallelism: only the same subtask's state overlaps.
                if restore.operator_state_from.is_some_and(|own| own != i) {
                    continue;
                }
                let share = if restore.rescaled {
                    OperatorShare::Rescaled { from: i as u32, to: subtask, parallelism: self.parallelism }
                } else if i == subtask as usize {
                    OperatorShare::All
                } else {
                    OperatorShare::Nothing
                };
                let bytes = match source {
                    RestoreSource::File { path, size, crc32 } => {
                        let mut reader = restore
                            .storage
                            .open_reader(path, *size, *crc32)
                            .map_err(|e| restore_error(format!("state of subtask {i}: {e}")))?;
                        restore_snapshot_stream(&mut reader, backend.as_mut(), range, self.max_parallelism, share)
                            .map_err(|e| restore_error(format!("snapshot of subtask {i} ({path}): {e}")))?;
                        continue;
                    }
                    RestoreSource::Snapshot(bytes) => bytes.clone(),
                    RestoreSource::Rocksdb(files) => {
                        let dir = download_dir(&self.rocksdb.localdir, &uid, subtask, i);
                        let descriptors = download_rocksdb(&restore.storage, files, &dir)
                            .map_err(|e| restore_error(format!("state of subtask {i}: {e}")))?;
                        checkpoint_to_snapshot(&dir, descriptors, self.max_parallelism)
                            .map_err(|e| restore_error(format!("state of subtask {i}: {e}")))?
                            .into()
                    }
                };
                restore_snapshot(&bytes, backend.as_mut(), range, self.max_parallelism, share)
                    .map_err(|e| restore_error(format!("snapshot of subtask {i}: {e}")))?;
            }
        }
        // Restored: a backend made later (a swap's rollback) starts empty.
        self.restore = None;
        let mut instance =
            OperatorInstance::new(&self.module, &uid, subtask, backend, self.max_parallelism, self.limits)?;
        let info = OperatorInfo {
            uid: uid.to_string(),
            subtask_index: subtask,
            parallelism: self.parallelism,
            max_parallelism: self.max_parallelism,
            attempt_number: self.attempt,
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
                Next::Barrier(id) => {
                    // The synchronous part: freeze the state (no copy), pass
                    // the barrier on; the upload runs in the background.
                    // (The pause reported is the freeze: forwarding may also
                    // wait, but on back-pressure, not on the state's size.)
                    let started = Instant::now();
                    let frozen = self.uploader.as_ref().map(|_| instance.freeze_state());
                    let sync = started.elapsed();
                    self.router.barrier(id).map_err(|e| route_error(&uid, e))?;
                    if let (Some(uploader), Some(frozen)) = (&self.uploader, frozen) {
                        uploader.upload(id, frozen, sync);
                    }
                    if let Some(target) = self.swaps.as_ref().and_then(|s| s.get(id, &uid)) {
                        instance = self.swap(instance, id, target, &info, range, &clock, &guest_error)?;
                    }
                }
                Next::BarrierAborted(_) | Next::Control(_) => {}
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

    /// Module swap `id` at its barrier: opens `target`'s module over this
    /// subtask's state, reports, and waits for the coordinator's verdict.
    /// Returns the instance to go on with: the new one on `SwapCommit`, the
    /// old module rebuilt over the state as it was at the barrier on
    /// `SwapAbort` (the new module's `open` may have migrated values).
    #[allow(clippy::too_many_arguments)]
    fn swap(
        &mut self,
        mut instance: OperatorInstance,
        id: u64,
        target: SwapTarget,
        info: &OperatorInfo,
        range: KeyGroupRange,
        clock: &crate::state::ttl::Clock,
        guest_error: &dyn Fn(String, GuestFailure) -> TaskError,
    ) -> Result<OperatorInstance, TaskError> {
        let uid = self.id.node.clone();
        let subtask = self.id.subtask;
        let barrier_at = Instant::now();
        let mut rollback = instance.freeze_state();
        let backend = instance.into_backend();
        let prepared = OperatorInstance::new(&target.module, &uid, subtask, backend, self.max_parallelism, self.limits)
            .map_err(|e| e.to_string())
            .and_then(|mut new| match new.open(info) {
                Ok(()) => Ok(new),
                Err(f) => Err(format!("the new module failed in open: {}", f.message)),
            });
        let result = prepared.as_ref().map(|_| barrier_at).map_err(Clone::clone);
        self.reporter.send(TaskEvent::SwapPrepared { task: self.id.clone(), id, result });
        loop {
            match self.inputs.next_control() {
                Control::SwapCommit(c) if c == id => {
                    let mut new = prepared.map_err(|e| TaskError::Backend {
                        uid: uid.clone(),
                        subtask,
                        message: format!("told to commit a module swap that failed here: {e}"),
                    })?;
                    self.module = target.module;
                    self.forward(&mut new).map_err(|e| route_error(&uid, e))?;
                    tracing::debug!(operator = %uid, subtask, "module swapped");
                    return Ok(new);
                }
                Control::SwapAbort(c) if c == id => {
                    drop(prepared);
                    let backend_error = |message: String| TaskError::Backend { uid: uid.clone(), subtask, message };
                    let (mut backend, _) = self.backend(range, clock.clone()).map_err(|(_, m)| backend_error(m))?;
                    let bytes = write_snapshot(rollback.as_mut(), self.max_parallelism)
                        .map_err(|e| backend_error(format!("cannot roll back a module swap: {e}")))?;
                    drop(rollback);
                    restore_snapshot(&bytes, backend.as_mut(), range, self.max_parallelism, OperatorShare::All)
                        .map_err(|e| backend_error(format!("cannot roll back a module swap: {e}")))?;
                    // A new RocksDB numbers its files from the start again:
                    // nothing it writes may pass for a file already stored.
                    if self.backend == BackendKind::RocksDb
                        && self.rocksdb.incremental
                        && let Some(uploader) = self.uploader.take()
                    {
                        self.uploader = Some(uploader.incremental(&[]));
                    }
                    let mut old =
                        OperatorInstance::new(&self.module, &uid, subtask, backend, self.max_parallelism, self.limits)?;
                    old.open(info)
                        .map_err(|f| guest_error("failed in open after a module swap was rolled back".into(), f))?;
                    self.forward(&mut old).map_err(|e| route_error(&uid, e))?;
                    tracing::debug!(operator = %uid, subtask, "module swap rolled back");
                    return Ok(old);
                }
                Control::Cancel => return Err(TaskError::Cancelled),
                _ => {}
            }
        }
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
        let mut fired = false;
        loop {
            match instance.fire_due_timer(domain, up_to) {
                Ok(Some(_)) => {
                    fired = true;
                    self.forward(instance).map_err(|e| route_error(&uid, e))?;
                }
                Ok(None) => break,
                Err(f) => {
                    let what = format!("failed in on-timer ({})", describe_domain(domain));
                    return Err(guest_error(what, f));
                }
            }
        }
        // Called after every batch: flush only when a timer produced output.
        if fired { self.router.flush().map_err(|e| route_error(&uid, e)) } else { Ok(()) }
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
