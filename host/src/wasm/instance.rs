//! One running operator instance: a wasmtime store with its [`OperatorHost`],
//! and the calls into the guest with deadline, memory limit, budgets and
//! failure reporting.

use super::OperatorInfo;
use super::bindings::exports::weir::operator::handler::Timer;
use super::bindings::weir::operator::types::TimeDomain as WitTimeDomain;
use super::bindings::{Operator, OperatorPre};
use super::engine::deadline_ticks;
use super::flat;
use super::host::budgets::BudgetExceeded;
use super::host::clocks::{CallMonotonicClock, CallTime, CallWallClock, Reseed, SegmentRng};
use super::host::{Input, Migration, OperatorHost, Phase};
use super::log_stream::{GuestLog, LogBudget, Stream};
use super::module::WasmError;
use crate::api::CallMetrics;
use crate::config::GuestBudgets;
use crate::record::{Batch, Record, Records};
use crate::state::key_group::key_hash;
use crate::state::{KeyRef, MapEntry, Shape, StateBackend, StateError, TimeDomain};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime_wasi::WasiCtxBuilder;

/// What went wrong in a guest call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The guest returned `err`.
    Returned,
    /// The guest trapped (panic, out-of-bounds access, ...).
    Trap,
    /// The call ran past `wasm.call_timeout`.
    Timeout,
    /// The guest tried to grow memory past `wasm.memory_limit`.
    OutOfMemory,
    /// The guest passed a budget of host memory (`wasm.max_state_bytes`,
    /// `wasm.max_state_write_bytes`, `wasm.max_timers`): the job stops
    /// without a restart, which would replay the same input into it.
    OverBudget,
}

/// A failed guest call.
#[derive(Debug, Clone)]
pub struct GuestFailure {
    /// What happened.
    pub kind: FailureKind,
    /// The guest's message or the trap, with the last lines of stderr.
    pub message: String,
    /// Index of the batch element being processed, if the guest said which
    /// (the batch fast path does not).
    pub element: Option<usize>,
    /// That element, for messages: its key, or the start of its payload.
    pub record: Option<String>,
}

impl std::fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GuestFailure {}

/// What a guest export returns: the WIT's `result<_, string>`, the guest's
/// own error message (the contract's type, not the host's).
type GuestResult<R> = Result<R, String>;

/// Limits applied to every instance, and how its randomness is seeded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deadline per call.
    pub call_timeout: Duration,
    /// Linear memory limit in bytes, all memories together.
    pub memory_limit: u64,
    /// Bytes (payloads and keys) a call may emit.
    pub max_output_bytes: u64,
    /// Records a call may emit.
    pub max_output_records: u64,
    /// What a guest may make the host hold: state, writes, timers, log.
    pub budgets: GuestBudgets,
    /// Seed of the guest's randomness, for reproducible runs; `None`: the
    /// operating system's secure randomness.
    pub random_seed: Option<u64>,
}

/// A guest instance for one operator subtask.
pub struct OperatorInstance {
    store: Store<OperatorHost>,
    world: Operator,
    ticks: u64,
    limits: Limits,
    stderr: GuestLog,
    /// Calls per export, in [`Phase::CALLS`] order.
    calls: [CallMetrics; Phase::CALLS.len()],
    /// The guest's clocks.
    time: Arc<CallTime>,
    /// Restarts the seeded randomness.
    reseed: Reseed,
    /// The log budget both streams share.
    log: Arc<LogBudget>,
    /// Log lines dropped past the budget, over every call.
    log_dropped: u64,
    /// Operator uid and subtask, for the log's summary.
    uid: Arc<str>,
    subtask: u32,
}

impl OperatorInstance {
    /// Instantiates `pre` for subtask `subtask` of `uid` over `backend`.
    pub fn new(
        pre: &OperatorPre<OperatorHost>,
        uid: &Arc<str>,
        subtask: u32,
        backend: Box<dyn StateBackend>,
        max_parallelism: u32,
        limits: Limits,
    ) -> Result<Self, WasmError> {
        let log = Arc::new(LogBudget::new(limits.budgets.max_log_lines, limits.budgets.max_log_bytes));
        let stdout = GuestLog::new(uid.clone(), subtask, Stream::Stdout, log.clone());
        let stderr = GuestLog::new(uid.clone(), subtask, Stream::Stderr, log.clone());
        let time = Arc::new(CallTime::default());
        // No preopened directories, no sockets, no environment, no
        // arguments: the guest reaches nothing but what the WIT grants. Its
        // clocks read the call's processing time.
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout)
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(CallWallClock(time.clone()))
            .monotonic_clock(CallMonotonicClock(time.clone()));
        let reseed = Reseed::default();
        if let Some(seed) = limits.random_seed {
            // One stream per subtask, the same on every run.
            let seed = seed ^ crate::state::key_group::key_hash(format!("{uid}#{subtask}").as_bytes());
            wasi.secure_random(SegmentRng::new(seed, &reseed))
                .insecure_random(SegmentRng::new(seed.rotate_left(32), &reseed))
                .insecure_random_seed(u128::from(seed));
        }
        let host = OperatorHost::new(wasi.build(), time.clone(), backend, max_parallelism, &limits);
        let mut store = Store::new(pre.engine(), host);
        store.limiter(|h| &mut h.limiter);
        let ticks = deadline_ticks(limits.call_timeout);
        store.set_epoch_deadline(ticks);
        let world = pre.instantiate(&mut store).map_err(|e| WasmError::Instantiate {
            uid: uid.to_string(),
            subtask,
            message: format!("{e:#}"),
        })?;
        let mut instance = OperatorInstance {
            store,
            world,
            ticks,
            limits,
            stderr,
            calls: Default::default(),
            time,
            reseed,
            log,
            log_dropped: 0,
            uid: uid.clone(),
            subtask,
        };
        instance.report_dropped_log("instantiation");
        Ok(instance)
    }

    /// Says once, if the guest's log went past its budget since the last
    /// report, how much was dropped; and counts it.
    fn report_dropped_log(&mut self, during: &str) {
        let (lines, bytes) = self.log.reset();
        if lines > 0 {
            self.log_dropped += lines;
            let (max_lines, max_bytes) = self.log.limits();
            tracing::warn!(
                operator = %self.uid,
                subtask = self.subtask,
                dropped_lines = lines,
                dropped_bytes = bytes,
                "guest log dropped: {lines} lines ({bytes} bytes) written in one {during} call past wasm.max_log_lines ({max_lines}) or wasm.max_log_bytes ({max_bytes})"
            );
        }
    }

    /// Lines of guest log dropped past the budget, over every call.
    pub fn log_lines_dropped(&self) -> u64 {
        self.log_dropped
    }

    /// From now on the guest's clocks read `pinned` while it holds a time
    /// (a recorded or replayed subtask).
    pub fn pin_clock(&self, pinned: crate::clock::Pinned) {
        self.time.pin(pinned);
    }

    /// Starts the guest's seeded randomness over for segment `n` of a
    /// recording (no effect without a seed).
    pub fn reseed(&self, n: u64) {
        self.reseed.0.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The store data (state backend, watermark).
    pub fn host(&self) -> &OperatorHost {
        self.store.data()
    }

    /// The synchronous part of a snapshot: the state as of now, frozen.
    pub fn freeze_state(&mut self) -> Box<dyn crate::state::FrozenState> {
        self.store.data_mut().backend_mut().freeze()
    }

    /// Live rescale, an old subtask: moves what of the live state can go
    /// as it is into `hand_off` ([`crate::state::Snapshots::give_up_into`]).
    /// The instance's state is not used after this.
    pub fn give_up_state_into(&mut self, hand_off: &mut crate::state::HandOff) {
        self.store.data_mut().backend_mut().give_up_into(hand_off);
    }

    /// Gives up the instance, keeping its state backend (a module swap moves
    /// it into the new module's instance).
    pub fn into_backend(self) -> Box<dyn StateBackend> {
        self.store.into_data().into_backend()
    }

    /// Bytes of linear memory the instance has.
    pub fn memory_bytes(&self) -> u64 {
        self.store.data().limiter.total()
    }

    /// How many calls of each export ran, and for how long in all.
    pub fn calls(&self) -> impl Iterator<Item = (&'static str, CallMetrics)> + '_ {
        Phase::CALLS.iter().zip(&self.calls).filter(|(_, c)| c.count > 0).map(|(p, c)| (p.export(), *c))
    }

    /// Sets the watermark the guest sees.
    pub fn set_watermark(&mut self, watermark: i64) {
        self.store.data_mut().watermark = watermark;
    }

    /// Hands what the guest emitted since the last call to `f`, then empties
    /// the buffer (keeping its capacity for the next call).
    pub fn drain_outputs<R>(&mut self, f: impl FnOnce(&Records) -> R) -> R {
        let out = &mut self.store.data_mut().outputs;
        let r = f(out);
        out.clear();
        r
    }

    fn call<R>(
        &mut self,
        phase: Phase,
        f: impl FnOnce(&Operator, &mut Store<OperatorHost>) -> wasmtime::Result<GuestResult<R>>,
    ) -> Result<R, GuestFailure> {
        self.store.data_mut().phase = phase;
        self.store.data_mut().begin_call(self.limits.call_timeout);
        self.store.set_epoch_deadline(self.ticks);
        let started = Instant::now();
        let result = f(&self.world, &mut self.store);
        if let Some(i) = Phase::CALLS.iter().position(|&p| p == phase) {
            self.calls[i].count += 1;
            self.calls[i].time_ns += started.elapsed().as_nanos() as u64;
        }
        let element = self.store.data().current_index();
        self.store.data_mut().phase = Phase::Idle;
        self.report_dropped_log(phase.export());
        // A guest woken early from a sleep past the deadline has run past
        // it, whatever it did next (unless it ran out of memory first).
        let out_of_memory = result.is_err() && self.store.data().limiter.exceeded;
        if self.store.data().overslept && !out_of_memory {
            return Err(self.timed_out(element));
        }
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(message)) => Err(GuestFailure { kind: FailureKind::Returned, message, element, record: None }),
            Err(e) => Err(self.classify(e, element)),
        }
    }

    fn classify(&mut self, e: wasmtime::Error, element: Option<usize>) -> GuestFailure {
        if let Some(b) = e.downcast_ref::<BudgetExceeded>() {
            let message = b.to_string();
            self.failure(FailureKind::OverBudget, message, element)
        } else if self.store.data().limiter.exceeded {
            let message = format!("exceeded wasm.memory_limit of {} bytes", self.limits.memory_limit);
            self.failure(FailureKind::OutOfMemory, message, element)
        } else if matches!(e.downcast_ref::<wasmtime::Trap>(), Some(wasmtime::Trap::Interrupt)) {
            self.timed_out(element)
        } else {
            self.failure(FailureKind::Trap, format!("trapped: {e:#}"), element)
        }
    }

    /// The call ran past its deadline: interrupted, or woken from a sleep
    /// that would have outlasted it.
    fn timed_out(&mut self, element: Option<usize>) -> GuestFailure {
        let message = format!("ran past wasm.call_timeout ({:?}) and was interrupted", self.limits.call_timeout);
        self.failure(FailureKind::Timeout, message, element)
    }

    /// A failure of `kind`, with what the guest last said on stderr.
    fn failure(&mut self, kind: FailureKind, mut message: String, element: Option<usize>) -> GuestFailure {
        let said = self.stderr.recent();
        if !said.is_empty() {
            message.push_str("; guest stderr: ");
            message.push_str(&said.join(" | "));
        }
        GuestFailure { kind, message, element, record: None }
    }

    /// Calls `open`, then migrates the values of every restored state whose
    /// stored version differs from the one the module declared.
    pub fn open(&mut self, info: &OperatorInfo) -> Result<(), GuestFailure> {
        self.call(Phase::Open, |w, s| w.weir_operator_handler().call_open(s, info))?;
        for m in std::mem::take(&mut self.store.data_mut().migrations) {
            let n = self.migrate(&m).map_err(|mut f| {
                f.message = format!("state '{}': migrate-value from version {} failed: {}", m.name, m.from, f.message);
                f
            })?;
            tracing::info!(state = %m.name, from = m.from, to = m.to, values = n, "state migrated");
        }
        Ok(())
    }

    /// Runs every stored value of `m.state` through the guest's
    /// `migrate-value` (after `open`: a guest cannot be re-entered from an
    /// import). Keys are listed first, then rewritten, so a backend's scan
    /// never sees its own writes. Returns how many values were converted.
    fn migrate(&mut self, m: &Migration) -> Result<u64, GuestFailure> {
        let storage = |e: crate::state::StateError| GuestFailure {
            kind: FailureKind::Returned,
            message: format!("cannot read or write the state: {e}"),
            element: None,
            record: None,
        };
        let shape = self.store.data().backend().descriptors()[m.state as usize].kind.shape();
        let mut converted = 0;
        match shape {
            Shape::Value | Shape::List | Shape::Map => {
                // A page of keys at a time: rewriting a key's value never
                // adds or removes keys, so the scan goes on undisturbed.
                let mut cursor = 0;
                loop {
                    let (page, next) = self.store.data_mut().backend_mut().scan_keys(m.state, cursor, 1024);
                    for (kg, key) in page {
                        converted += self.migrate_key(m, shape, kg, &key)?;
                    }
                    match next {
                        Some(c) => cursor = c,
                        None => break,
                    }
                }
            }
            Shape::OperatorList => {
                let old =
                    self.store.data_mut().backend_mut().operator_list_read(m.state, 0, u32::MAX).map_err(storage)?;
                let mut new = Vec::with_capacity(old.len());
                for v in old {
                    new.push(self.convert(m, v)?);
                }
                converted += new.len() as u64;
                self.store.data_mut().backend_mut().operator_list_update(m.state, new).map_err(storage)?;
            }
            Shape::BroadcastMap => {
                let b = self.store.data_mut().backend_mut();
                let entries = all_pages(|after| b.broadcast_entries(m.state, after, 1024)).map_err(storage)?;
                for (uk, v) in entries {
                    let new = self.convert(m, v)?;
                    self.store.data_mut().backend_mut().broadcast_put(m.state, &uk, &new).map_err(storage)?;
                    converted += 1;
                }
            }
        }
        Ok(converted)
    }

    /// Migrates key `key`'s values of state `m`; returns how many.
    fn migrate_key(&mut self, m: &Migration, shape: Shape, kg: u16, key: &[u8]) -> Result<u64, GuestFailure> {
        let storage = |e: crate::state::StateError| GuestFailure {
            kind: FailureKind::Returned,
            message: format!("cannot read or write the state: {e}"),
            element: None,
            record: None,
        };
        let k = KeyRef { key, hash: key_hash(key), key_group: kg };
        let backend = self.store.data_mut().backend_mut();
        match shape {
            Shape::Value => {
                let Some(v) = backend.value_get(m.state, k).map_err(storage)? else { return Ok(0) };
                let new = self.convert(m, v)?;
                self.store.data_mut().backend_mut().value_set(m.state, k, &new).map_err(storage)?;
                Ok(1)
            }
            Shape::List => {
                let old = backend.list_read(m.state, k, 0, u32::MAX).map_err(storage)?;
                let mut new = Vec::with_capacity(old.len());
                for v in old {
                    new.push(self.convert(m, v)?);
                }
                let n = new.len() as u64;
                self.store.data_mut().backend_mut().list_update(m.state, k, new).map_err(storage)?;
                Ok(n)
            }
            _ => {
                let entries = all_pages(|after| backend.map_entries(m.state, k, after, 1024)).map_err(storage)?;
                let n = entries.len() as u64;
                for (uk, v) in entries {
                    let new = self.convert(m, v)?;
                    self.store.data_mut().backend_mut().map_put(m.state, k, &uk, &new).map_err(storage)?;
                }
                Ok(n)
            }
        }
    }

    /// One value through `migrate-value`.
    fn convert(&mut self, m: &Migration, value: Vec<u8>) -> Result<Vec<u8>, GuestFailure> {
        self.call(Phase::Migrate, |w, s| w.weir_operator_handler().call_migrate_value(s, &m.name, m.from, &value))
    }

    /// Calls `process-batch` (or `process` for a single element). A failure
    /// names the element the guest was on, when it said.
    pub fn process(&mut self, batch: Batch) -> Result<(), GuestFailure> {
        let Batch { records, hashes, keyed } = batch;
        let (records, refs) = flat::to_wit(records);
        let input = Arc::new(Input { records, refs, hashes, keyed });
        self.store.data_mut().begin_batch(input.clone());
        let result = if input.len() == 1 {
            let element = flat::to_element(input.get(0));
            self.call(Phase::Process, |w, s| w.weir_operator_handler().call_process(s, &element))
        } else {
            self.call(Phase::Process, |w, s| w.weir_operator_handler().call_process_batch(s, &input.records))
        };
        self.store.data_mut().end_batch();
        result.map_err(|mut f| {
            f.record = f.element.filter(|&i| i < input.len()).map(|i| describe(input.get(i)));
            f
        })
    }

    /// Calls `process-broadcast` for one record of a broadcast input.
    pub fn process_broadcast(&mut self, record: Record<'_>) -> Result<(), GuestFailure> {
        let element = flat::to_element(record);
        self.call(Phase::Broadcast, |w, s| w.weir_operator_handler().call_process_broadcast(s, &element)).map_err(
            |mut f| {
                f.record = Some(describe(record));
                f
            },
        )
    }

    /// The earliest pending timer of `domain`.
    pub fn next_timer(&self, domain: TimeDomain) -> Option<i64> {
        self.store.data().backend().timer_next(domain)
    }

    /// Fires the earliest timer of `domain` due at or before `up_to`, if any:
    /// calls `on-timer` with its key current. Returns the timer fired.
    pub fn fire_due_timer(&mut self, domain: TimeDomain, up_to: i64) -> Result<Option<(i64, Vec<u8>)>, GuestFailure> {
        let Some((time, key)) = self.store.data_mut().backend_mut().timer_pop_due(domain, up_to) else {
            return Ok(None);
        };
        let timer = Timer {
            time,
            domain: match domain {
                TimeDomain::EventTime => WitTimeDomain::EventTime,
                TimeDomain::ProcessingTime => WitTimeDomain::ProcessingTime,
            },
            key: key.clone(),
        };
        self.store.data_mut().begin_timer(key.clone());
        let result = self.call(Phase::Timer, |w, s| w.weir_operator_handler().call_on_timer(s, &timer));
        self.store.data_mut().end_timer();
        result.map(|()| Some((time, key)))
    }

    /// Calls `end-of-input`.
    pub fn end_of_input(&mut self) -> Result<(), GuestFailure> {
        self.call(Phase::EndOfInput, |w, s| w.weir_operator_handler().call_end_of_input(s))
    }
}

/// A record for a failure message: its key, else the start of its payload.
fn describe(r: Record<'_>) -> String {
    match r.key {
        Some(k) => format!("key {:?}", String::from_utf8_lossy(k)),
        None => {
            let p: String = String::from_utf8_lossy(r.payload).chars().take(60).collect();
            format!("payload {p:?}")
        }
    }
}

/// Every entry of a map, read `page` by page (pages of 1024; a short page
/// is the last).
fn all_pages(
    mut page: impl FnMut(Option<&[u8]>) -> Result<Vec<MapEntry>, StateError>,
) -> Result<Vec<MapEntry>, StateError> {
    let mut entries: Vec<MapEntry> = Vec::new();
    loop {
        let next = page(entries.last().map(|(uk, _)| uk.as_slice()))?;
        let done = next.len() < 1024;
        entries.extend(next);
        if done {
            return Ok(entries);
        }
    }
}
