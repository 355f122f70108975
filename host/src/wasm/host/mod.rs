//! The host side of the operator contract: what a guest's imports do. One
//! [`OperatorHost`] is the store data of one subtask's instance; it owns that
//! subtask's state backend, the current key, and the output buffer.
//!
//! Resource handles carry the [`StateId`] as their representation, so a state
//! call costs no table lookup; guests cannot forge handles (the component
//! model maps them), so an id always names a state this subtask registered.

pub mod budgets;
pub mod clocks;
pub mod limits;
mod state;

use super::bindings::weir::operator::{
    collector, context,
    types::{
        self, Element, ElementBatch, ErrorCode, StateDescriptor as WitDescriptor, TtlUpdate, TtlVisibility, ValueBatch,
    },
};
use super::flat::{self, IndexError};
use crate::record::{Record, RecordRef, Records};
use crate::state::key_group::{key_group_of_hash, key_hash};
use crate::state::{KeyRef, Redistribution, StateBackend, StateDescriptor, StateError, StateId, StateKind, TtlConfig};
use crate::wasm::Limits;
use budgets::StateBudget;
use clocks::CallTime;
use limits::{OutputBudget, StoreLimiter};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Result as WtResult;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Which export is running, which decides what the guest may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Between calls.
    Idle,
    /// `open`: states may be registered.
    Open,
    /// `process` / `process-batch`.
    Process,
    /// `process-broadcast`.
    Broadcast,
    /// `on-timer`.
    Timer,
    /// `end-of-input`.
    EndOfInput,
    /// `migrate-value`: no state access.
    Migrate,
}

impl Phase {
    /// Every phase that is a call, in index order.
    pub const CALLS: [Phase; 6] =
        [Phase::Open, Phase::Process, Phase::Broadcast, Phase::Timer, Phase::EndOfInput, Phase::Migrate];

    /// The WIT export a call of this phase runs (`process` and
    /// `process-batch` alike count as `process-batch`).
    pub fn export(self) -> &'static str {
        match self {
            Phase::Idle => "",
            Phase::Open => "open",
            Phase::Process => "process-batch",
            Phase::Broadcast => "process-broadcast",
            Phase::Timer => "on-timer",
            Phase::EndOfInput => "end-of-input",
            Phase::Migrate => "migrate-value",
        }
    }
}

/// A restored state whose stored values have another version than the one
/// the module declared: its values go through `migrate-value` after `open`.
#[derive(Debug, Clone)]
pub struct Migration {
    /// The state.
    pub state: crate::state::StateId,
    /// Its name.
    pub name: String,
    /// The version of the stored values.
    pub from: u32,
    /// The version the module declared.
    pub to: u32,
}

/// Where the current key comes from.
enum Current {
    None,
    /// Element `i` of the batch being processed.
    Batch(usize),
    /// The key of a timer being fired.
    Timer {
        key: Vec<u8>,
        hash: u64,
    },
}

/// What `get-batch` returns: one buffer and one span per key slot.
type BatchValues = ValueBatch;

/// The batch a `process` or `process-batch` call is working on, in the form
/// the guest received it.
pub struct Input {
    /// The records, as lowered into the guest.
    pub records: ElementBatch,
    /// Where each record is in `records.data`, as `records.index` says.
    pub refs: Vec<RecordRef>,
    /// Key hashes from the sender's partitioner (keyed edges only).
    pub hashes: Vec<u64>,
    /// Whether the batch came over a keyed edge.
    pub keyed: bool,
}

impl Input {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Record `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Record<'_> {
        flat::record_at(&self.records, &self.refs, i)
    }
}

/// The distinct keys of a keyed batch: `slot_of[i]` is element `i`'s slot,
/// `first[s]` the first element with slot `s`'s key.
#[derive(Default)]
struct BatchSlots {
    slot_of: Vec<u32>,
    first: Vec<u32>,
}

impl BatchSlots {
    fn of(batch: &Input) -> Self {
        let n = batch.len();
        let mut seen: hashbrown::HashTable<u32> = hashbrown::HashTable::with_capacity(n);
        let mut slots = BatchSlots { slot_of: Vec::with_capacity(n), first: Vec::new() };
        let key_at = |i: usize| batch.get(i).key.unwrap_or_default();
        for i in 0..n {
            let key = key_at(i);
            let hash = batch.hashes.get(i).copied().unwrap_or_else(|| key_hash(key));
            let first = &mut slots.first;
            let slot = *seen
                .entry(
                    hash,
                    |&s| key_at(first[s as usize] as usize) == key,
                    |&s| key_hash(key_at(first[s as usize] as usize)),
                )
                .or_insert_with(|| {
                    first.push(i as u32);
                    (first.len() - 1) as u32
                })
                .get();
            slots.slot_of.push(slot);
        }
        slots
    }
}

/// Store data of one operator subtask's instance.
pub struct OperatorHost {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The store's limits.
    pub limiter: StoreLimiter,
    /// What the guest may still emit in this call.
    budget: OutputBudget,
    /// State and timers the guest may still hold or write.
    state_budget: StateBudget,
    /// When the current call began, as the guest's clocks read it.
    time: Arc<CallTime>,
    /// When the instance was created (the monotonic clock's zero).
    created: Instant,
    /// When the current call must end.
    deadline: Option<Instant>,
    /// Whether the guest asked, in this call, to sleep past the deadline.
    pub overslept: bool,
    backend: Box<dyn StateBackend>,
    max_parallelism: u32,
    /// The export in progress.
    pub phase: Phase,
    batch: Option<Arc<Input>>,
    current: Current,
    /// Computed on the first fast-path call of a batch.
    slots: Option<BatchSlots>,
    /// Whether the guest said which element it is on (`set-current-element`),
    /// so a failure can name the record; the batch fast path does not.
    position_known: bool,
    /// Whether the batch's keys were prefetched (on the first per-element
    /// keyed call; the fast path needs no prefetch).
    prefetched: bool,
    /// Elements the guest emitted during the current call.
    pub outputs: Records,
    /// Watermark the guest sees.
    pub watermark: i64,
    /// States registered in `open` whose values need migrating.
    pub migrations: Vec<Migration>,
}

impl OperatorHost {
    /// Store data over `backend`, with WASI context `wasi` whose clocks read
    /// `time`, within `limits`.
    pub fn new(
        wasi: WasiCtx,
        time: Arc<CallTime>,
        backend: Box<dyn StateBackend>,
        max_parallelism: u32,
        limits: &Limits,
    ) -> Self {
        OperatorHost {
            wasi,
            table: ResourceTable::new(),
            limiter: StoreLimiter::new(limits.memory_limit),
            budget: OutputBudget::new(limits.max_output_bytes, limits.max_output_records),
            state_budget: StateBudget::new(limits.budgets),
            time,
            created: Instant::now(),
            deadline: None,
            overslept: false,
            backend,
            max_parallelism,
            phase: Phase::Idle,
            batch: None,
            current: Current::None,
            slots: None,
            position_known: false,
            prefetched: false,
            outputs: Records::default(),
            watermark: i64::MIN,
            migrations: Vec::new(),
        }
    }

    /// A call into the guest begins, to end by `timeout`: its clocks read
    /// now, and its output budget is whole again.
    pub fn begin_call(&mut self, timeout: Duration) {
        let now = Instant::now();
        self.time.start_call(self.created);
        self.deadline = now.checked_add(timeout);
        self.overslept = false;
        self.budget.reset();
        self.state_budget.reset();
    }

    /// The state backend, without the rest.
    pub fn into_backend(self) -> Box<dyn StateBackend> {
        self.backend
    }

    /// Makes `batch` the input of the next `process-batch`, element 0 current.
    pub fn begin_batch(&mut self, batch: Arc<Input>) {
        self.position_known = batch.len() == 1;
        self.batch = Some(batch);
        self.current = Current::Batch(0);
    }

    /// Forgets the batch after the call.
    pub fn end_batch(&mut self) {
        self.batch = None;
        self.slots = None;
        self.prefetched = false;
        self.current = Current::None;
    }

    /// Index of the current element of the batch, if the guest reported it
    /// (for error reports).
    pub fn current_index(&self) -> Option<usize> {
        match self.current {
            Current::Batch(i) if self.position_known => Some(i),
            _ => None,
        }
    }

    /// Makes `key` current for an `on-timer` call.
    pub fn begin_timer(&mut self, key: Vec<u8>) {
        let hash = key_hash(&key);
        self.current = Current::Timer { key, hash };
    }

    /// Ends an `on-timer` call.
    pub fn end_timer(&mut self) {
        self.current = Current::None;
    }

    /// The state backend, for the task's timer service.
    pub fn backend_mut(&mut self) -> &mut dyn StateBackend {
        self.backend.as_mut()
    }

    /// The state backend (for tests and summaries).
    pub fn backend(&self) -> &dyn StateBackend {
        self.backend.as_ref()
    }

    fn state_name(&self, id: StateId) -> &str {
        self.backend.descriptors().get(id as usize).map(|d| d.name.as_str()).unwrap_or("?")
    }

    /// Runs `f` with the backend and the current key, or reports that there
    /// is none.
    #[inline]
    fn keyed<R>(
        &mut self,
        f: impl FnOnce(&mut dyn StateBackend, KeyRef<'_>) -> Result<R, StateError>,
    ) -> WtResult<Result<R, ErrorCode>> {
        // A per-element call acts on the current element, so the guest is on
        // it: a failure from here on can name its record.
        self.position_known = true;
        let OperatorHost { backend, batch, current, max_parallelism, prefetched, .. } = self;
        if !*prefetched {
            *prefetched = true;
            if let Some(b) = batch.as_deref().filter(|b| b.keyed && b.len() > 1) {
                let keys: Vec<KeyRef<'_>> = (0..b.len()).map(|i| key_of(b, i, *max_parallelism)).collect();
                backend.prefetch(&keys);
            }
        }
        let key = match (current, batch.as_deref()) {
            (Current::Batch(i), Some(b)) if b.keyed => match b.get(*i).key {
                Some(k) => {
                    let hash = b.hashes.get(*i).copied().unwrap_or_else(|| key_hash(k));
                    KeyRef { key: k, hash, key_group: key_group_of_hash(hash, *max_parallelism) }
                }
                None => return Ok(Err(ErrorCode::NoCurrentKey)),
            },
            (Current::Timer { key, hash }, _) => {
                KeyRef { key, hash: *hash, key_group: key_group_of_hash(*hash, *max_parallelism) }
            }
            _ => return Ok(Err(ErrorCode::NoCurrentKey)),
        };
        finish(f(backend.as_mut(), key))
    }

    /// The batch's key slots, computed once per batch.
    fn compute_slots(&mut self) -> Result<(), ErrorCode> {
        if self.slots.is_some() {
            return Ok(());
        }
        match (&self.batch, self.phase) {
            (Some(b), Phase::Process) if b.keyed => {
                self.slots = Some(BatchSlots::of(b));
                Ok(())
            }
            _ => Err(ErrorCode::NoCurrentKey),
        }
    }

    /// `get-batch`: every slot's value, in one buffer.
    fn read_slots(&mut self, s: StateId) -> WtResult<Result<BatchValues, ErrorCode>> {
        if let Err(e) = self.compute_slots() {
            return Ok(Err(e));
        }
        let OperatorHost { backend, batch, slots, max_parallelism, .. } = self;
        let (Some(b), Some(slots)) = (batch.as_deref(), slots.as_ref()) else {
            return Ok(Err(ErrorCode::NoCurrentKey));
        };
        let keys: Vec<KeyRef<'_>> = slots.first.iter().map(|&e| key_of(b, e as usize, *max_parallelism)).collect();
        let mut data = Vec::with_capacity(keys.len() * 8);
        let mut raw = Vec::with_capacity(keys.len());
        if let Err(e) = backend.value_get_many(s, &keys, &mut data, &mut raw) {
            return finish(Err(e));
        }
        Ok(Ok(flat::pack_values(data, &raw)))
    }

    /// `set-batch`: writes (or clears) the slots the entries name. A bad
    /// entry is `out-of-range` with its number, and nothing is written.
    fn write_slots(&mut self, s: StateId, values: &ValueBatch) -> WtResult<Result<(), ErrorCode>> {
        if let Err(e) = self.compute_slots() {
            return Ok(Err(e));
        }
        let writes = match flat::unpack_values(values) {
            Ok(w) => w,
            Err(IndexError::Length { len, entry }) => return Ok(Err(ErrorCode::OutOfRange((len / entry) as u32))),
            Err(IndexError::Flags { entry, .. } | IndexError::OutOfBounds { entry, .. }) => {
                return Ok(Err(ErrorCode::OutOfRange(entry as u32)));
            }
        };
        self.state_budget.write(values.data.len() as u64)?;
        let OperatorHost { backend, batch, slots, max_parallelism, state_budget, .. } = self;
        let (Some(b), Some(slots)) = (batch.as_deref(), slots.as_ref()) else {
            return Ok(Err(ErrorCode::NoCurrentKey));
        };
        let mut keys = Vec::with_capacity(writes.len());
        let mut values = Vec::with_capacity(writes.len());
        for (i, w) in writes.iter().enumerate() {
            let Some(&e) = slots.first.get(w.slot as usize) else {
                return Ok(Err(ErrorCode::OutOfRange(i as u32)));
            };
            keys.push(key_of(b, e as usize, *max_parallelism));
            values.push(w.value);
        }
        if let Err(e) = backend.value_set_many(s, &keys, &values) {
            return finish(Err(e));
        }
        state_budget.held(backend.memory_bytes())?;
        Ok(Ok(()))
    }

    fn register(
        &mut self,
        d: &WitDescriptor,
        kind: StateKind,
        mode: Option<Redistribution>,
    ) -> WtResult<Result<u32, ErrorCode>> {
        if self.phase != Phase::Open {
            return Ok(Err(ErrorCode::NotInOpen(format!("state '{}' was registered outside open", d.name))));
        }
        let descriptor = StateDescriptor {
            name: d.name.clone(),
            kind,
            version: d.version,
            encoding: d.encoding.clone(),
            ttl: d.ttl.map(|t| TtlConfig {
                ttl_ms: t.ttl_ms,
                renew_on_read: t.update == TtlUpdate::OnReadAndWrite,
                return_expired: t.visibility == TtlVisibility::ReturnExpiredIfNotCleanedUp,
            }),
            redistribution: mode,
        };
        let stored = self.backend.descriptors().iter().find(|e| e.name == d.name && e.kind == kind).map(|e| e.version);
        let id = match self.backend.register(descriptor) {
            Ok(id) => id,
            Err(e) => return finish(Err(e)),
        };
        if let Some(from) = stored.filter(|&v| v != d.version) {
            self.migrations.push(Migration { state: id, name: d.name.clone(), from, to: d.version });
        }
        Ok(Ok(id))
    }
}

/// The key of element `i` of a keyed batch (every element of a keyed batch
/// has a key: the router refuses records without one).
#[inline]
fn key_of(b: &Input, i: usize, max_parallelism: u32) -> KeyRef<'_> {
    let key = b.get(i).key.unwrap_or_default();
    let hash = b.hashes.get(i).copied().unwrap_or_else(|| key_hash(key));
    KeyRef { key, hash, key_group: key_group_of_hash(hash, max_parallelism) }
}

/// Maps a backend result to what the guest sees: guest-fixable errors as WIT
/// errors, internal ones as traps.
fn finish<R>(r: Result<R, StateError>) -> WtResult<Result<R, ErrorCode>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e @ StateError::KindMismatch { .. }) => Ok(Err(ErrorCode::KindMismatch(e.to_string()))),
        Err(e @ StateError::InvalidName(_)) => Ok(Err(ErrorCode::InvalidName(e.to_string()))),
        Err(e @ StateError::Unsupported { .. }) => Ok(Err(ErrorCode::Backend(e.to_string()))),
        Err(e) => Err(wasmtime::format_err!("state backend: {e}")),
    }
}

impl WasiView for OperatorHost {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl types::Host for OperatorHost {}

impl context::Host for OperatorHost {
    #[inline]
    fn set_current_element(&mut self, index: u32) -> WtResult<Result<(), ErrorCode>> {
        match &self.batch {
            Some(b) if (index as usize) < b.len() => {
                self.current = Current::Batch(index as usize);
                self.position_known = true;
                Ok(Ok(()))
            }
            _ => Ok(Err(ErrorCode::OutOfRange(index))),
        }
    }

    fn batch_slots(&mut self) -> WtResult<Result<Vec<u32>, ErrorCode>> {
        Ok(self.compute_slots().map(|()| self.slots.as_ref().map(|s| s.slot_of.clone()).unwrap_or_default()))
    }

    fn current_key(&mut self) -> WtResult<Option<Vec<u8>>> {
        Ok(match (&self.current, &self.batch) {
            (Current::Batch(i), Some(b)) if b.keyed => b.get(*i).key.map(<[u8]>::to_vec),
            (Current::Timer { key, .. }, _) => Some(key.clone()),
            _ => None,
        })
    }

    fn current_watermark(&mut self) -> WtResult<i64> {
        Ok(self.watermark)
    }

    fn current_processing_time(&mut self) -> WtResult<i64> {
        Ok(self.time.wall_ms())
    }
}

impl collector::Host for OperatorHost {
    fn emit(&mut self, output: Element) -> WtResult<()> {
        let bytes = output.payload.len() as u64 + output.key.as_ref().map_or(0, |k| k.len() as u64);
        self.budget.charge(bytes, 1)?;
        self.outputs.push(Record { payload: &output.payload, key: output.key.as_deref(), timestamp: output.timestamp });
        Ok(())
    }

    fn emit_batch(&mut self, outputs: ElementBatch) -> WtResult<()> {
        self.emit_records("emit-batch", outputs)
    }

    fn emit_text_batch(&mut self, text: String, index: Vec<u8>) -> WtResult<()> {
        self.emit_records("emit-text-batch", ElementBatch { data: text.into_bytes(), index })
    }
}

impl OperatorHost {
    /// `emit-batch` and `emit-text-batch`, named by `call` in errors.
    fn emit_records(&mut self, call: &str, outputs: ElementBatch) -> WtResult<()> {
        // A guest's offsets are not trusted: a bad one traps the guest here
        // rather than panicking the task later.
        let outputs = flat::from_wit(outputs).map_err(|e| wasmtime::format_err!("{call}: {e}"))?;
        // What the records reference, counted before anything is copied:
        // records may share bytes, and each is copied on its way out.
        self.budget.charge(outputs.referenced_bytes(), outputs.len() as u64)?;
        if self.outputs.is_empty() && outputs.data.len() as u64 <= outputs.referenced_bytes() {
            self.outputs = outputs;
        } else {
            self.outputs.extend(&outputs);
        }
        Ok(())
    }
}
