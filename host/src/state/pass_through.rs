//! Capabilities a backend serves from a part it holds, unchanged: the TTL
//! layer its inner backend's operator state, timers, key scans and sizes
//! (TTL changes only the keyed shapes' values); the RocksDB backend of
//! several databases its home database's operator state.
//!
//! A backend says so by implementing [`PassThrough<dyn C>`](PassThrough)
//! for the capability `C`: the blanket impls here then implement `C` for
//! it, each call going to the part, statically (no dynamic dispatch is
//! added). Only the capabilities below pass through this way; the keyed
//! shapes, registration, snapshots and restores are each layer's own.

use super::backend::{Accounting, KeyScan, OperatorState, TimerService};
use super::{KeyRef, MapEntry, StateError, StateId, TimeDomain};

/// Where a backend sends the calls of capability `C` (named by its trait
/// object type, `dyn C`), which it passes through unchanged.
pub trait PassThrough<C: ?Sized> {
    /// The part that serves `C`.
    type Part;
    /// The part, for `&self` calls.
    fn part(&self) -> &Self::Part;
    /// The part, for `&mut self` calls.
    fn part_mut(&mut self) -> &mut Self::Part;
}

impl<T> OperatorState for T
where
    T: PassThrough<dyn OperatorState>,
    T::Part: OperatorState,
{
    fn operator_list_add(&mut self, s: StateId, values: &[&[u8]]) -> Result<(), StateError> {
        self.part_mut().operator_list_add(s, values)
    }

    fn operator_list_update(&mut self, s: StateId, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        self.part_mut().operator_list_update(s, values)
    }

    fn operator_list_read(&mut self, s: StateId, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        self.part_mut().operator_list_read(s, start, max)
    }

    fn operator_list_len(&mut self, s: StateId) -> Result<u32, StateError> {
        self.part_mut().operator_list_len(s)
    }

    fn broadcast_get(&mut self, s: StateId, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.part_mut().broadcast_get(s, uk)
    }

    fn broadcast_put(&mut self, s: StateId, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.part_mut().broadcast_put(s, uk, value)
    }

    fn broadcast_remove(&mut self, s: StateId, uk: &[u8]) -> Result<(), StateError> {
        self.part_mut().broadcast_remove(s, uk)
    }

    fn broadcast_entries(&mut self, s: StateId, after: Option<&[u8]>, max: u32) -> Result<Vec<MapEntry>, StateError> {
        self.part_mut().broadcast_entries(s, after, max)
    }

    fn broadcast_len(&mut self, s: StateId) -> Result<usize, StateError> {
        self.part_mut().broadcast_len(s)
    }

    fn broadcast_clear(&mut self, s: StateId) -> Result<(), StateError> {
        self.part_mut().broadcast_clear(s)
    }
}

impl<T> TimerService for T
where
    T: PassThrough<dyn TimerService>,
    T::Part: TimerService,
{
    #[inline]
    fn timer_register(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.part_mut().timer_register(d, k, time)
    }

    fn timer_delete(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.part_mut().timer_delete(d, k, time)
    }

    fn timer_pop_due(&mut self, d: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)> {
        self.part_mut().timer_pop_due(d, up_to)
    }

    fn timer_next(&self, d: TimeDomain) -> Option<i64> {
        self.part().timer_next(d)
    }

    fn timer_count(&self, d: TimeDomain) -> usize {
        self.part().timer_count(d)
    }
}

impl<T> KeyScan for T
where
    T: PassThrough<dyn KeyScan>,
    T::Part: KeyScan,
{
    #[inline]
    fn prefetch(&mut self, keys: &[KeyRef<'_>]) {
        self.part_mut().prefetch(keys)
    }

    fn scan_keys(&mut self, s: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        self.part_mut().scan_keys(s, cursor, max)
    }
}

impl<T> Accounting for T
where
    T: PassThrough<dyn Accounting>,
    T::Part: Accounting,
{
    fn key_count(&self, s: StateId) -> usize {
        self.part().key_count(s)
    }

    #[inline]
    fn memory_bytes(&self) -> Option<u64> {
        self.part().memory_bytes()
    }
}
