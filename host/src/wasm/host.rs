//! The host side of the operator contract: what a guest's imports do. One
//! [`OperatorHost`] is the store data of one subtask's instance; it owns that
//! subtask's state backend, the current key, and the output buffer.
//!
//! Resource handles carry the [`StateId`] as their representation, so a state
//! call costs no table lookup; guests cannot forge handles (the component
//! model maps them), so an id always names a state this subtask registered.

use super::bindings::weir::operator::{
    broadcast_state, collector, context, keyed_state, operator_state, timers,
    types::{
        self, Element, ErrorCode, Redistribution as WitRedistribution, StateDescriptor as WitDescriptor, TtlUpdate,
        TtlVisibility,
    },
};
use crate::runtime::batch::Batch;
use crate::state::key_group::{key_group_of_hash, key_hash};
use crate::state::{KeyRef, Redistribution, StateBackend, StateDescriptor, StateError, StateId, StateKind, TtlConfig};
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{ResourceLimiter, Result as WtResult};
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
}

/// Where the current key comes from.
enum Current {
    None,
    /// Element `i` of the batch being processed.
    Batch(usize),
}

/// Enforces `wasm.memory_limit` and remembers whether the guest hit it, so a
/// failure can be reported as what it is.
pub struct MemoryLimiter {
    /// Most bytes of linear memory per instance.
    pub limit: u64,
    /// Set when a grow past the limit was refused.
    pub exceeded: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> WtResult<bool> {
        if desired as u64 > self.limit {
            self.exceeded = true;
            return Err(wasmtime::format_err!(
                "guest memory would grow to {desired} bytes, past wasm.memory_limit ({} bytes)",
                self.limit
            ));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> WtResult<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Store data of one operator subtask's instance.
pub struct OperatorHost {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Memory limit enforcement.
    pub limiter: MemoryLimiter,
    backend: Box<dyn StateBackend>,
    max_parallelism: u32,
    /// The export in progress.
    pub phase: Phase,
    batch: Option<Arc<Batch>>,
    current: Current,
    /// Elements the guest emitted during the current call.
    pub outputs: Vec<Element>,
    /// Watermark the guest sees.
    pub watermark: i64,
}

impl OperatorHost {
    /// Store data over `backend`, with WASI context `wasi`.
    pub fn new(wasi: WasiCtx, backend: Box<dyn StateBackend>, max_parallelism: u32, memory_limit: u64) -> Self {
        OperatorHost {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter { limit: memory_limit, exceeded: false },
            backend,
            max_parallelism,
            phase: Phase::Idle,
            batch: None,
            current: Current::None,
            outputs: Vec::new(),
            watermark: i64::MIN,
        }
    }

    /// Makes `batch` the input of the next `process-batch`, element 0 current.
    pub fn begin_batch(&mut self, batch: Arc<Batch>) {
        if batch.keyed && batch.hashes.len() == batch.records.len() {
            let m = self.max_parallelism;
            let keys: Vec<KeyRef<'_>> = batch
                .records
                .iter()
                .zip(&batch.hashes)
                .filter_map(|(r, &hash)| {
                    r.key.as_deref().map(|key| KeyRef { key, hash, key_group: key_group_of_hash(hash, m) })
                })
                .collect();
            self.backend.prefetch(&keys);
        }
        self.batch = Some(batch);
        self.current = Current::Batch(0);
    }

    /// Forgets the batch after the call.
    pub fn end_batch(&mut self) {
        self.batch = None;
        self.current = Current::None;
    }

    /// Index of the current element of the batch, if any (for error reports).
    pub fn current_index(&self) -> Option<usize> {
        match self.current {
            Current::Batch(i) => Some(i),
            Current::None => None,
        }
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
        let OperatorHost { backend, batch, current, max_parallelism, .. } = self;
        let key = match (current, batch.as_deref()) {
            (Current::Batch(i), Some(b)) if b.keyed => {
                let e = &b.records[*i];
                match &e.key {
                    Some(k) => {
                        let hash = b.hashes.get(*i).copied().unwrap_or_else(|| key_hash(k));
                        KeyRef { key: k, hash, key_group: key_group_of_hash(hash, *max_parallelism) }
                    }
                    None => return Ok(Err(ErrorCode::NoCurrentKey)),
                }
            }
            _ => return Ok(Err(ErrorCode::NoCurrentKey)),
        };
        finish(f(backend.as_mut(), key))
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
        finish(self.backend.register(descriptor))
    }
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
            Some(b) if (index as usize) < b.records.len() => {
                self.current = Current::Batch(index as usize);
                Ok(Ok(()))
            }
            _ => Ok(Err(ErrorCode::OutOfRange(index))),
        }
    }

    fn current_key(&mut self) -> WtResult<Option<Vec<u8>>> {
        Ok(match (&self.current, &self.batch) {
            (Current::Batch(i), Some(b)) if b.keyed => b.records[*i].key.clone(),
            _ => None,
        })
    }

    fn current_watermark(&mut self) -> WtResult<i64> {
        Ok(self.watermark)
    }

    fn current_processing_time(&mut self) -> WtResult<i64> {
        Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0))
    }
}

impl collector::Host for OperatorHost {
    fn emit(&mut self, output: Element) -> WtResult<()> {
        self.outputs.push(output);
        Ok(())
    }

    fn emit_batch(&mut self, outputs: Vec<Element>) -> WtResult<()> {
        if self.outputs.is_empty() {
            self.outputs = outputs;
        } else {
            self.outputs.extend(outputs);
        }
        Ok(())
    }
}

type KS = keyed_state::ValueState;

impl keyed_state::Host for OperatorHost {
    fn register_value(&mut self, d: WitDescriptor) -> WtResult<Result<Resource<KS>, ErrorCode>> {
        Ok(self.register(&d, StateKind::Value, None)?.map(Resource::new_own))
    }

    fn register_list(&mut self, d: WitDescriptor) -> WtResult<Result<Resource<keyed_state::ListState>, ErrorCode>> {
        Ok(self.register(&d, StateKind::List, None)?.map(Resource::new_own))
    }

    fn register_map(&mut self, d: WitDescriptor) -> WtResult<Result<Resource<keyed_state::MapState>, ErrorCode>> {
        Ok(self.register(&d, StateKind::Map, None)?.map(Resource::new_own))
    }

    fn register_reducing(
        &mut self,
        d: WitDescriptor,
    ) -> WtResult<Result<Resource<keyed_state::AccumulatorState>, ErrorCode>> {
        Ok(self.register(&d, StateKind::Reducing, None)?.map(Resource::new_own))
    }

    fn register_aggregating(
        &mut self,
        d: WitDescriptor,
    ) -> WtResult<Result<Resource<keyed_state::AccumulatorState>, ErrorCode>> {
        Ok(self.register(&d, StateKind::Aggregating, None)?.map(Resource::new_own))
    }
}

impl keyed_state::HostValueState for OperatorHost {
    #[inline]
    fn get(&mut self, h: Resource<KS>) -> WtResult<Result<Option<Vec<u8>>, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_get(s, k))
    }

    #[inline]
    fn set(&mut self, h: Resource<KS>, value: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_set(s, k, &value))
    }

    fn clear(&mut self, h: Resource<KS>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_clear(s, k))
    }

    fn drop(&mut self, _h: Resource<KS>) -> WtResult<()> {
        Ok(())
    }
}

impl keyed_state::HostAccumulatorState for OperatorHost {
    fn get(&mut self, h: Resource<keyed_state::AccumulatorState>) -> WtResult<Result<Option<Vec<u8>>, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_get(s, k))
    }

    fn set(&mut self, h: Resource<keyed_state::AccumulatorState>, value: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_set(s, k, &value))
    }

    fn clear(&mut self, h: Resource<keyed_state::AccumulatorState>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_clear(s, k))
    }

    fn drop(&mut self, _h: Resource<keyed_state::AccumulatorState>) -> WtResult<()> {
        Ok(())
    }
}

type LS = keyed_state::ListState;

impl keyed_state::HostListState for OperatorHost {
    fn add(&mut self, h: Resource<LS>, value: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.list_add(s, k, &[&value]))
    }

    fn add_all(&mut self, h: Resource<LS>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        self.keyed(|b, k| b.list_add(s, k, &refs))
    }

    fn update(&mut self, h: Resource<LS>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.list_update(s, k, values))
    }

    fn read(&mut self, h: Resource<LS>, start: u32, max: u32) -> WtResult<Result<Vec<Vec<u8>>, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.list_read(s, k, start, max))
    }

    fn len(&mut self, h: Resource<LS>) -> WtResult<Result<u32, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.list_len(s, k))
    }

    fn clear(&mut self, h: Resource<LS>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.list_clear(s, k))
    }

    fn drop(&mut self, _h: Resource<LS>) -> WtResult<()> {
        Ok(())
    }
}

type MS = keyed_state::MapState;

impl keyed_state::HostMapState for OperatorHost {
    fn get(&mut self, h: Resource<MS>, user_key: Vec<u8>) -> WtResult<Result<Option<Vec<u8>>, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_get(s, k, &user_key))
    }

    fn put(&mut self, h: Resource<MS>, user_key: Vec<u8>, value: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_put(s, k, &user_key, &value))
    }

    fn remove(&mut self, h: Resource<MS>, user_key: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_remove(s, k, &user_key))
    }

    fn contains(&mut self, h: Resource<MS>, user_key: Vec<u8>) -> WtResult<Result<bool, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_contains(s, k, &user_key))
    }

    fn is_empty(&mut self, h: Resource<MS>) -> WtResult<Result<bool, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_is_empty(s, k))
    }

    fn entries(
        &mut self,
        h: Resource<MS>,
        after: Option<Vec<u8>>,
        max: u32,
    ) -> WtResult<Result<Vec<(Vec<u8>, Vec<u8>)>, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_entries(s, k, after.as_deref(), max))
    }

    fn keys(&mut self, h: Resource<MS>, after: Option<Vec<u8>>, max: u32) -> WtResult<Result<Vec<Vec<u8>>, ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| Ok(b.map_entries(s, k, after.as_deref(), max)?.into_iter().map(|(k, _)| k).collect()))
    }

    fn clear(&mut self, h: Resource<MS>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.map_clear(s, k))
    }

    fn drop(&mut self, _h: Resource<MS>) -> WtResult<()> {
        Ok(())
    }
}

type Ols = operator_state::OperatorListState;

impl operator_state::Host for OperatorHost {
    fn register_list(
        &mut self,
        d: WitDescriptor,
        mode: WitRedistribution,
    ) -> WtResult<Result<Resource<Ols>, ErrorCode>> {
        if d.ttl.is_some() {
            return Ok(Err(ErrorCode::InvalidName(format!("state '{}': operator state takes no TTL", d.name))));
        }
        let mode = match mode {
            WitRedistribution::EvenSplit => Redistribution::EvenSplit,
            WitRedistribution::Union => Redistribution::Union,
        };
        Ok(self.register(&d, StateKind::OperatorList, Some(mode))?.map(Resource::new_own))
    }
}

impl operator_state::HostOperatorListState for OperatorHost {
    fn add(&mut self, h: Resource<Ols>, value: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        finish(self.backend.operator_list_add(h.rep(), &[&value]))
    }

    fn add_all(&mut self, h: Resource<Ols>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        finish(self.backend.operator_list_add(h.rep(), &refs))
    }

    fn update(&mut self, h: Resource<Ols>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        finish(self.backend.operator_list_update(h.rep(), values))
    }

    fn read(&mut self, h: Resource<Ols>, start: u32, max: u32) -> WtResult<Result<Vec<Vec<u8>>, ErrorCode>> {
        finish(self.backend.operator_list_read(h.rep(), start, max))
    }

    fn len(&mut self, h: Resource<Ols>) -> WtResult<Result<u32, ErrorCode>> {
        finish(self.backend.operator_list_len(h.rep()))
    }

    fn clear(&mut self, h: Resource<Ols>) -> WtResult<Result<(), ErrorCode>> {
        finish(self.backend.operator_list_update(h.rep(), Vec::new()))
    }

    fn drop(&mut self, _h: Resource<Ols>) -> WtResult<()> {
        Ok(())
    }
}

type Bms = broadcast_state::BroadcastMapState;

/// Broadcast state and timers arrive with the full state model; until then
/// they answer with an error the guest sees, never silently.
fn not_yet<T>(what: &str) -> WtResult<Result<T, ErrorCode>> {
    Ok(Err(ErrorCode::Backend(format!("{what} is not supported by this version of Weir yet"))))
}

impl broadcast_state::Host for OperatorHost {
    fn register_map(&mut self, d: WitDescriptor) -> WtResult<Result<Resource<Bms>, ErrorCode>> {
        if self.phase != Phase::Open {
            return Ok(Err(ErrorCode::NotInOpen(format!("state '{}' was registered outside open", d.name))));
        }
        not_yet(&format!("broadcast state ('{}')", d.name))
    }
}

impl broadcast_state::HostBroadcastMapState for OperatorHost {
    fn get(&mut self, _h: Resource<Bms>, _k: Vec<u8>) -> WtResult<Result<Option<Vec<u8>>, ErrorCode>> {
        not_yet("broadcast state")
    }
    fn put(&mut self, _h: Resource<Bms>, _k: Vec<u8>, _v: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        not_yet("broadcast state")
    }
    fn remove(&mut self, _h: Resource<Bms>, _k: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        not_yet("broadcast state")
    }
    fn contains(&mut self, _h: Resource<Bms>, _k: Vec<u8>) -> WtResult<Result<bool, ErrorCode>> {
        not_yet("broadcast state")
    }
    fn is_empty(&mut self, _h: Resource<Bms>) -> WtResult<Result<bool, ErrorCode>> {
        not_yet("broadcast state")
    }
    fn entries(
        &mut self,
        _h: Resource<Bms>,
        _a: Option<Vec<u8>>,
        _m: u32,
    ) -> WtResult<Result<Vec<(Vec<u8>, Vec<u8>)>, ErrorCode>> {
        not_yet("broadcast state")
    }
    fn keys(&mut self, _h: Resource<Bms>, _a: Option<Vec<u8>>, _m: u32) -> WtResult<Result<Vec<Vec<u8>>, ErrorCode>> {
        not_yet("broadcast state")
    }
    fn clear(&mut self, _h: Resource<Bms>) -> WtResult<Result<(), ErrorCode>> {
        not_yet("broadcast state")
    }
    fn drop(&mut self, _h: Resource<Bms>) -> WtResult<()> {
        Ok(())
    }
}

impl timers::Host for OperatorHost {
    fn register_event_time_timer(&mut self, _t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.keyed(|_, _| Ok(()))?.map_or_else(|e| Ok(Err(e)), |_| not_yet("timers"))
    }
    fn register_processing_time_timer(&mut self, _t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.keyed(|_, _| Ok(()))?.map_or_else(|e| Ok(Err(e)), |_| not_yet("timers"))
    }
    fn delete_event_time_timer(&mut self, _t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.keyed(|_, _| Ok(()))?.map_or_else(|e| Ok(Err(e)), |_| not_yet("timers"))
    }
    fn delete_processing_time_timer(&mut self, _t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.keyed(|_, _| Ok(()))?.map_or_else(|e| Ok(Err(e)), |_| not_yet("timers"))
    }
}

impl OperatorHost {
    /// Name of state `id` (for messages).
    pub fn describe_state(&self, id: StateId) -> String {
        self.state_name(id).to_string()
    }
}
