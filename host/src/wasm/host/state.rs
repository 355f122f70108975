//! The state and timer imports of the operator contract: keyed value, list,
//! map and accumulator state, operator list state, broadcast state and
//! timers, each a thin translation of a guest call into a
//! [`StateBackend`](crate::state::StateBackend) call on the subtask's
//! backend, with the current key the batch or timer gives. Every write is
//! charged to the guest's budgets ([`super::budgets`]) on its way.

use super::{BatchValues, OperatorHost, Phase, finish};
use crate::state::{Redistribution, StateId, StateKind, TimeDomain};
use crate::wasm::bindings::weir::operator::{
    broadcast_state, keyed_state, operator_state, timers,
    types::{ErrorCode, Redistribution as WitRedistribution, StateDescriptor as WitDescriptor, ValueBatch},
};
use wasmtime::Result as WtResult;
use wasmtime::component::Resource;

type KS = keyed_state::ValueState;

/// Bytes of `values` together.
fn total(values: &[Vec<u8>]) -> usize {
    values.iter().map(Vec::len).sum()
}

impl OperatorHost {
    /// A write of `bytes` (values and user keys) to state: taken from the
    /// call's write budget before `f` writes anything, and the state the
    /// backend then holds checked against its budget.
    #[inline]
    fn write<R>(
        &mut self,
        bytes: usize,
        f: impl FnOnce(&mut Self) -> WtResult<Result<R, ErrorCode>>,
    ) -> WtResult<Result<R, ErrorCode>> {
        self.state_budget.write(bytes as u64)?;
        let r = f(self)?;
        self.state_budget.held(self.backend.memory_bytes())?;
        Ok(r)
    }

    /// A timer registration (its time counts as 8 bytes written), then the
    /// subtask's pending timers checked against their budget.
    fn register_timer(&mut self, domain: TimeDomain, t: i64) -> WtResult<Result<(), ErrorCode>> {
        let r = self.write(8, |h| h.keyed(|b, k| b.timer_register(domain, k, t)))?;
        let pending =
            self.backend.timer_count(TimeDomain::EventTime) + self.backend.timer_count(TimeDomain::ProcessingTime);
        self.state_budget.timers(pending)?;
        Ok(r)
    }
}

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
        self.write(value.len(), |h| h.keyed(|b, k| b.value_set(s, k, &value)))
    }

    fn clear(&mut self, h: Resource<KS>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_clear(s, k))
    }

    fn get_batch(&mut self, h: Resource<KS>) -> WtResult<Result<BatchValues, ErrorCode>> {
        self.read_slots(h.rep())
    }

    fn set_batch(&mut self, h: Resource<KS>, values: ValueBatch) -> WtResult<Result<(), ErrorCode>> {
        self.write_slots(h.rep(), &values)
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
        self.write(value.len(), |h| h.keyed(|b, k| b.value_set(s, k, &value)))
    }

    fn clear(&mut self, h: Resource<keyed_state::AccumulatorState>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.keyed(|b, k| b.value_clear(s, k))
    }

    fn get_batch(&mut self, h: Resource<keyed_state::AccumulatorState>) -> WtResult<Result<BatchValues, ErrorCode>> {
        self.read_slots(h.rep())
    }

    fn set_batch(
        &mut self,
        h: Resource<keyed_state::AccumulatorState>,
        values: ValueBatch,
    ) -> WtResult<Result<(), ErrorCode>> {
        self.write_slots(h.rep(), &values)
    }

    fn drop(&mut self, _h: Resource<keyed_state::AccumulatorState>) -> WtResult<()> {
        Ok(())
    }
}

type LS = keyed_state::ListState;

impl keyed_state::HostListState for OperatorHost {
    fn add(&mut self, h: Resource<LS>, value: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.write(value.len(), |h| h.keyed(|b, k| b.list_add(s, k, &[&value])))
    }

    fn add_all(&mut self, h: Resource<LS>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        self.write(total(&values), |h| h.keyed(|b, k| b.list_add(s, k, &refs)))
    }

    fn update(&mut self, h: Resource<LS>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        let s = h.rep();
        self.write(total(&values), |h| h.keyed(|b, k| b.list_update(s, k, values)))
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
        self.write(user_key.len() + value.len(), |h| h.keyed(|b, k| b.map_put(s, k, &user_key, &value)))
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
        self.write(value.len(), |o| finish(o.backend.operator_list_add(h.rep(), &[&value])))
    }

    fn add_all(&mut self, h: Resource<Ols>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        self.write(total(&values), |o| finish(o.backend.operator_list_add(h.rep(), &refs)))
    }

    fn update(&mut self, h: Resource<Ols>, values: Vec<Vec<u8>>) -> WtResult<Result<(), ErrorCode>> {
        self.write(total(&values), |o| finish(o.backend.operator_list_update(h.rep(), values)))
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

impl broadcast_state::Host for OperatorHost {
    fn register_map(&mut self, d: WitDescriptor) -> WtResult<Result<Resource<Bms>, ErrorCode>> {
        if d.ttl.is_some() {
            return Ok(Err(ErrorCode::InvalidName(format!("state '{}': broadcast state takes no TTL", d.name))));
        }
        Ok(self.register(&d, StateKind::BroadcastMap, None)?.map(Resource::new_own))
    }
}

impl OperatorHost {
    /// Broadcast state is written only while a broadcast record is processed,
    /// which keeps every subtask's replica equal.
    fn broadcast_writable(&self, id: StateId) -> Result<(), ErrorCode> {
        if self.phase == Phase::Broadcast {
            Ok(())
        } else {
            Err(ErrorCode::ReadOnly(format!(
                "broadcast state '{}' is written only in process-broadcast",
                self.state_name(id)
            )))
        }
    }
}

impl broadcast_state::HostBroadcastMapState for OperatorHost {
    fn get(&mut self, h: Resource<Bms>, k: Vec<u8>) -> WtResult<Result<Option<Vec<u8>>, ErrorCode>> {
        finish(self.backend.broadcast_get(h.rep(), &k))
    }

    fn put(&mut self, h: Resource<Bms>, k: Vec<u8>, v: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        if let Err(e) = self.broadcast_writable(h.rep()) {
            return Ok(Err(e));
        }
        self.write(k.len() + v.len(), |o| finish(o.backend.broadcast_put(h.rep(), &k, &v)))
    }

    fn remove(&mut self, h: Resource<Bms>, k: Vec<u8>) -> WtResult<Result<(), ErrorCode>> {
        if let Err(e) = self.broadcast_writable(h.rep()) {
            return Ok(Err(e));
        }
        finish(self.backend.broadcast_remove(h.rep(), &k))
    }

    fn contains(&mut self, h: Resource<Bms>, k: Vec<u8>) -> WtResult<Result<bool, ErrorCode>> {
        finish(self.backend.broadcast_get(h.rep(), &k).map(|v| v.is_some()))
    }

    fn is_empty(&mut self, h: Resource<Bms>) -> WtResult<Result<bool, ErrorCode>> {
        finish(self.backend.broadcast_len(h.rep()).map(|n| n == 0))
    }

    fn entries(
        &mut self,
        h: Resource<Bms>,
        after: Option<Vec<u8>>,
        max: u32,
    ) -> WtResult<Result<Vec<(Vec<u8>, Vec<u8>)>, ErrorCode>> {
        finish(self.backend.broadcast_entries(h.rep(), after.as_deref(), max))
    }

    fn keys(
        &mut self,
        h: Resource<Bms>,
        after: Option<Vec<u8>>,
        max: u32,
    ) -> WtResult<Result<Vec<Vec<u8>>, ErrorCode>> {
        finish(
            self.backend
                .broadcast_entries(h.rep(), after.as_deref(), max)
                .map(|e| e.into_iter().map(|(k, _)| k).collect()),
        )
    }

    fn clear(&mut self, h: Resource<Bms>) -> WtResult<Result<(), ErrorCode>> {
        if let Err(e) = self.broadcast_writable(h.rep()) {
            return Ok(Err(e));
        }
        finish(self.backend.broadcast_clear(h.rep()))
    }

    fn drop(&mut self, _h: Resource<Bms>) -> WtResult<()> {
        Ok(())
    }
}

impl timers::Host for OperatorHost {
    fn register_event_time_timer(&mut self, t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.register_timer(TimeDomain::EventTime, t)
    }

    fn register_processing_time_timer(&mut self, t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.register_timer(TimeDomain::ProcessingTime, t)
    }

    fn delete_event_time_timer(&mut self, t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.keyed(|b, k| b.timer_delete(TimeDomain::EventTime, k, t))
    }

    fn delete_processing_time_timer(&mut self, t: i64) -> WtResult<Result<(), ErrorCode>> {
        self.keyed(|b, k| b.timer_delete(TimeDomain::ProcessingTime, k, t))
    }
}
