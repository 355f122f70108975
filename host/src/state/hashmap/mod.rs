//! The hashmap state backend: keyed state in in-memory hash tables, one table
//! per (state, key group), so a key group can later be snapshotted or handed
//! to another subtask on its own.
//!
//! Tables are `hashbrown::HashTable`s probed with the key's stable hash,
//! which the caller computed once per element for partitioning; a key is
//! hashed again only when its table grows. Small keys and values live inside
//! the entry, and values are updated in place, reusing their allocation.
//!
//! Snapshots are copy-on-write per key group: every table (and the timers,
//! operator and broadcast state) sits behind an `Arc`, so
//! [`Snapshots::freeze`](super::Snapshots::freeze) only clones pointers,
//! whatever the state's size. A write to a group the frozen view still
//! holds copies that one group first; the writer of the snapshot lets go of
//! each group as soon as it has written it, so most groups are never copied
//! (`frozen.rs`).
//!
//! The same `Arc`s let a live rescale move key groups to the new subtasks
//! by pointer instead of through a snapshot ([`handoff`]).

mod frozen;
mod handoff;
mod keyed;
mod size;

pub use handoff::KeyGroupHandOff;

use super::handoff::HandOff;
use super::key_group::KeyGroupRange;
use super::{
    Accounting, KeyRef, KeyScan, ListState, MapEntry, MapState, OperatorState, Registry, Restore, Shape, SnapshotEntry,
    StateDescriptor, StateError, StateId, TimeDomain, TimerService, ValueState, check_registration, push_value,
    restore_by_calls,
};
use keyed::{InlineValue, Keyed};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

type ListValue = Vec<Vec<u8>>;
type MapValue = BTreeMap<Vec<u8>, Vec<u8>>;
/// Pending timers of one domain, ordered by (time, key group, key).
type Timers = BTreeSet<(i64, u16, Vec<u8>)>;

enum Table {
    Value(Keyed<InlineValue>),
    List(Keyed<ListValue>),
    Map(Keyed<MapValue>),
    OperatorList(Arc<Vec<Vec<u8>>>),
    Broadcast(Arc<MapValue>),
}

/// In-memory state of one operator subtask.
pub struct HashMapBackend {
    range: KeyGroupRange,
    descriptors: Vec<StateDescriptor>,
    tables: Vec<Table>,
    /// Pending timers per domain (event time, processing time), ordered by
    /// (time, key group, key): the firing order, and per key group for
    /// snapshots.
    timers: [Arc<Timers>; 2],
    /// Bytes of everything above as [`size`] estimates them, kept by every
    /// write (a counter add, nothing more), read by the host against
    /// `wasm.max_state_bytes`.
    bytes: u64,
}

fn domain_index(d: TimeDomain) -> usize {
    match d {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

impl HashMapBackend {
    /// An empty backend owning key groups `range`.
    pub fn new(range: KeyGroupRange) -> Self {
        HashMapBackend {
            range,
            descriptors: Vec::new(),
            tables: Vec::new(),
            timers: [Arc::new(Timers::new()), Arc::new(Timers::new())],
            bytes: 0,
        }
    }

    /// Accounts a write that added `added` bytes and freed `freed`.
    #[inline]
    fn count(&mut self, added: u64, freed: u64) {
        debug_assert!(self.bytes + added >= freed, "state bytes went below zero");
        self.bytes = (self.bytes + added).saturating_sub(freed);
    }

    fn values(&mut self, s: StateId) -> &mut Keyed<InlineValue> {
        match &mut self.tables[s as usize] {
            Table::Value(t) => t,
            _ => unreachable!("state {s} is not value-shaped"),
        }
    }

    fn lists(&mut self, s: StateId) -> &mut Keyed<ListValue> {
        match &mut self.tables[s as usize] {
            Table::List(t) => t,
            _ => unreachable!("state {s} is not list-shaped"),
        }
    }

    fn maps(&mut self, s: StateId) -> &mut Keyed<MapValue> {
        match &mut self.tables[s as usize] {
            Table::Map(t) => t,
            _ => unreachable!("state {s} is not map-shaped"),
        }
    }

    fn check_range(&self, k: &KeyRef<'_>) -> Result<(), StateError> {
        if self.range.contains(k.key_group) {
            Ok(())
        } else {
            Err(StateError::KeyGroupOutOfRange { key_group: k.key_group, start: self.range.start, end: self.range.end })
        }
    }

    fn broadcast(&mut self, s: StateId) -> &mut MapValue {
        match &mut self.tables[s as usize] {
            Table::Broadcast(t) => Arc::make_mut(t),
            _ => unreachable!("state {s} is not a broadcast map"),
        }
    }

    fn operator_list(&mut self, s: StateId) -> &mut Vec<Vec<u8>> {
        match &mut self.tables[s as usize] {
            Table::OperatorList(t) => Arc::make_mut(t),
            _ => unreachable!("state {s} is not an operator list"),
        }
    }
}

fn page<T: Clone>(items: &[T], start: u32, max: u32) -> Vec<T> {
    let start = (start as usize).min(items.len());
    let end = start.saturating_add(max as usize).min(items.len());
    items[start..end].to_vec()
}

impl Registry for HashMapBackend {
    fn register(&mut self, d: StateDescriptor) -> Result<StateId, StateError> {
        if let Some(id) = check_registration(&self.descriptors, &d)? {
            // A new module version re-declares the state; later snapshots
            // record the version its values now have.
            self.descriptors[id as usize].version = d.version;
            return Ok(id);
        }
        let table = match d.kind.shape() {
            Shape::Value => Table::Value(Keyed::new(self.range)),
            Shape::List => Table::List(Keyed::new(self.range)),
            Shape::Map => Table::Map(Keyed::new(self.range)),
            Shape::OperatorList => Table::OperatorList(Arc::new(Vec::new())),
            Shape::BroadcastMap => Table::Broadcast(Arc::new(BTreeMap::new())),
        };
        self.descriptors.push(d);
        self.tables.push(table);
        Ok((self.tables.len() - 1) as StateId)
    }

    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }
}

impl ValueState for HashMapBackend {
    #[inline]
    fn value_get(&mut self, s: StateId, k: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        let range = self.range;
        Ok(self.values(s).get(range, &k)?.map(|v| v.to_vec()))
    }

    #[inline]
    fn value_get_into(&mut self, s: StateId, k: KeyRef<'_>, out: &mut Vec<u8>) -> Result<bool, StateError> {
        let range = self.range;
        Ok(match self.values(s).get(range, &k)? {
            Some(v) => {
                out.extend_from_slice(v);
                true
            }
            None => false,
        })
    }

    fn value_get_many(
        &mut self,
        s: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        let range = self.range;
        let table = self.values(s);
        for k in keys {
            push_value(out, spans, table.get(range, k)?.map(|v| &v[..]));
        }
        Ok(())
    }

    fn value_set_many(&mut self, s: StateId, keys: &[KeyRef<'_>], values: &[Option<&[u8]>]) -> Result<(), StateError> {
        let range = self.range;
        let table = self.values(s);
        let (mut added, mut freed) = (0, 0);
        let mut write = || {
            for (k, v) in keys.iter().zip(values) {
                match v {
                    Some(v) => {
                        let (slot, new) = table.get_or_insert(range, k, InlineValue::new)?;
                        freed += slot.len() as u64;
                        added += new + v.len() as u64;
                        slot.clear();
                        slot.extend_from_slice(v);
                    }
                    None => freed += table.remove(range, k)?,
                }
            }
            Ok::<(), StateError>(())
        };
        let r = write();
        self.count(added, freed);
        r
    }

    #[inline]
    fn value_set(&mut self, s: StateId, k: KeyRef<'_>, value: &[u8]) -> Result<(), StateError> {
        let range = self.range;
        let (slot, new) = self.values(s).get_or_insert(range, &k, InlineValue::new)?;
        let old = slot.len() as u64;
        slot.clear();
        slot.extend_from_slice(value);
        self.count(new + value.len() as u64, old);
        Ok(())
    }

    fn value_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        let range = self.range;
        let freed = self.values(s).remove(range, &k)?;
        self.count(0, freed);
        Ok(())
    }
}

impl ListState for HashMapBackend {
    fn list_add(&mut self, s: StateId, k: KeyRef<'_>, values: &[&[u8]]) -> Result<(), StateError> {
        if values.is_empty() {
            return Ok(());
        }
        let range = self.range;
        let (list, new) = self.lists(s).get_or_insert(range, &k, Vec::new)?;
        list.extend(values.iter().map(|v| v.to_vec()));
        self.count(new + size::list(values), 0);
        Ok(())
    }

    fn list_update(&mut self, s: StateId, k: KeyRef<'_>, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        let range = self.range;
        if values.is_empty() {
            let freed = self.lists(s).remove(range, &k)?;
            self.count(0, freed);
            return Ok(());
        }
        let added = size::list(&values);
        let (list, new) = self.lists(s).get_or_insert(range, &k, Vec::new)?;
        let freed = size::list(list);
        *list = values;
        self.count(new + added, freed);
        Ok(())
    }

    fn list_read(&mut self, s: StateId, k: KeyRef<'_>, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        let range = self.range;
        Ok(self.lists(s).get(range, &k)?.map(|l| page(l, start, max)).unwrap_or_default())
    }

    fn list_len(&mut self, s: StateId, k: KeyRef<'_>) -> Result<u32, StateError> {
        let range = self.range;
        Ok(self.lists(s).get(range, &k)?.map(|l| l.len() as u32).unwrap_or(0))
    }

    fn list_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        let range = self.range;
        let freed = self.lists(s).remove(range, &k)?;
        self.count(0, freed);
        Ok(())
    }
}

impl MapState for HashMapBackend {
    fn map_get(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let range = self.range;
        Ok(self.maps(s).get(range, &k)?.and_then(|m| m.get(uk).cloned()))
    }

    fn map_put(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        let range = self.range;
        let (map, new) = self.maps(s).get_or_insert(range, &k, BTreeMap::new)?;
        let (added, freed) = match map.get_mut(uk) {
            Some(v) => {
                let old = v.len() as u64;
                v.clear();
                v.extend_from_slice(value);
                (value.len() as u64, old)
            }
            None => {
                map.insert(uk.to_vec(), value.to_vec());
                (size::map_item(uk, value), 0)
            }
        };
        self.count(new + added, freed);
        Ok(())
    }

    fn map_remove(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<(), StateError> {
        let range = self.range;
        let maps = self.maps(s);
        let (mut freed, now_empty) = match maps.get_mut(range, &k)? {
            Some(m) => (m.remove(uk).map_or(0, |v| size::map_item(uk, &v)), m.is_empty()),
            None => (0, false),
        };
        if now_empty {
            freed += maps.remove(range, &k)?;
        }
        self.count(0, freed);
        Ok(())
    }

    fn map_contains(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<bool, StateError> {
        let range = self.range;
        Ok(self.maps(s).get(range, &k)?.is_some_and(|m| m.contains_key(uk)))
    }

    fn map_is_empty(&mut self, s: StateId, k: KeyRef<'_>) -> Result<bool, StateError> {
        let range = self.range;
        Ok(self.maps(s).get(range, &k)?.is_none_or(|m| m.is_empty()))
    }

    fn map_entries(
        &mut self,
        s: StateId,
        k: KeyRef<'_>,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError> {
        let range = self.range;
        let Some(map) = self.maps(s).get(range, &k)? else {
            return Ok(Vec::new());
        };
        let lower = match after {
            Some(a) => Bound::Excluded(a),
            None => Bound::Unbounded,
        };
        Ok(map
            .range::<[u8], _>((lower, Bound::Unbounded))
            .take(max as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn map_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        let range = self.range;
        let freed = self.maps(s).remove(range, &k)?;
        self.count(0, freed);
        Ok(())
    }
}

impl KeyScan for HashMapBackend {
    fn prefetch(&mut self, keys: &[KeyRef<'_>]) {
        let range = self.range;
        for table in &mut self.tables {
            if let Table::Value(t) = table {
                for k in keys {
                    if let Ok(v) = t.get(range, k) {
                        std::hint::black_box(v.map(|v| v.len()));
                    }
                }
            }
        }
    }

    fn scan_keys(&mut self, s: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        let range = self.range;
        match &self.tables[s as usize] {
            Table::Value(t) => t.scan(range, cursor, max),
            Table::List(t) => t.scan(range, cursor, max),
            Table::Map(t) => t.scan(range, cursor, max),
            Table::OperatorList(_) | Table::Broadcast(_) => (Vec::new(), None),
        }
    }
}

impl OperatorState for HashMapBackend {
    fn operator_list_add(&mut self, s: StateId, values: &[&[u8]]) -> Result<(), StateError> {
        self.operator_list(s).extend(values.iter().map(|v| v.to_vec()));
        self.count(size::list(values), 0);
        Ok(())
    }

    fn operator_list_update(&mut self, s: StateId, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        let added = size::list(&values);
        let list = self.operator_list(s);
        let freed = size::list(list);
        *list = values;
        self.count(added, freed);
        Ok(())
    }

    fn operator_list_read(&mut self, s: StateId, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        Ok(page(self.operator_list(s), start, max))
    }

    fn operator_list_len(&mut self, s: StateId) -> Result<u32, StateError> {
        Ok(self.operator_list(s).len() as u32)
    }

    fn broadcast_get(&mut self, s: StateId, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.broadcast(s).get(uk).cloned())
    }

    fn broadcast_put(&mut self, s: StateId, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        let old = self.broadcast(s).insert(uk.to_vec(), value.to_vec());
        self.count(size::map_item(uk, value), old.map_or(0, |v| size::map_item(uk, &v)));
        Ok(())
    }

    fn broadcast_remove(&mut self, s: StateId, uk: &[u8]) -> Result<(), StateError> {
        let old = self.broadcast(s).remove(uk);
        self.count(0, old.map_or(0, |v| size::map_item(uk, &v)));
        Ok(())
    }

    fn broadcast_entries(&mut self, s: StateId, after: Option<&[u8]>, max: u32) -> Result<Vec<MapEntry>, StateError> {
        let lower = match after {
            Some(a) => Bound::Excluded(a),
            None => Bound::Unbounded,
        };
        Ok(self
            .broadcast(s)
            .range::<[u8], _>((lower, Bound::Unbounded))
            .take(max as usize)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn broadcast_len(&mut self, s: StateId) -> Result<usize, StateError> {
        Ok(self.broadcast(s).len())
    }

    fn broadcast_clear(&mut self, s: StateId) -> Result<(), StateError> {
        let freed = size::map(self.broadcast(s));
        self.broadcast(s).clear();
        self.count(0, freed);
        Ok(())
    }
}

impl TimerService for HashMapBackend {
    fn timer_register(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.check_range(&k)?;
        if Arc::make_mut(&mut self.timers[domain_index(d)]).insert((time, k.key_group, k.key.to_vec())) {
            self.count(size::timer(k.key), 0);
        }
        Ok(())
    }

    fn timer_delete(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.check_range(&k)?;
        let entry = (time, k.key_group, k.key.to_vec());
        if self.timers[domain_index(d)].contains(&entry) {
            Arc::make_mut(&mut self.timers[domain_index(d)]).remove(&entry);
            self.count(0, size::timer(k.key));
        }
        Ok(())
    }

    fn timer_pop_due(&mut self, d: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)> {
        if self.timers[domain_index(d)].first()?.0 > up_to {
            return None;
        }
        let (t, _, k) = Arc::make_mut(&mut self.timers[domain_index(d)]).pop_first()?;
        self.count(0, size::timer(&k));
        Some((t, k))
    }

    fn timer_next(&self, d: TimeDomain) -> Option<i64> {
        self.timers[domain_index(d)].first().map(|t| t.0)
    }

    fn timer_count(&self, d: TimeDomain) -> usize {
        self.timers[domain_index(d)].len()
    }
}

impl Restore for HashMapBackend {
    fn restore_entry(&mut self, kg: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError> {
        restore_by_calls(self, kg, entry)
    }

    fn reserve_keys(&mut self, key_group: u16, s: StateId, keys: usize) {
        let range = self.range;
        match self.tables.get_mut(s as usize) {
            Some(Table::Value(t)) => t.reserve(range, key_group, keys),
            Some(Table::List(t)) => t.reserve(range, key_group, keys),
            Some(Table::Map(t)) => t.reserve(range, key_group, keys),
            _ => {}
        }
    }

    fn adopt_key_groups(&mut self, hand_offs: &[&HandOff]) -> Option<Result<u64, StateError>> {
        let tables: Vec<_> = hand_offs
            .iter()
            .filter_map(|h| match h {
                HandOff::Tables(t) => Some(t),
                #[cfg(feature = "rocksdb")]
                HandOff::Databases(_) => None,
            })
            .collect();
        if tables.len() != hand_offs.len() {
            return None;
        }
        let taken = tables.into_iter().map(|t| t.adopt_into(self)).sum();
        // Tables came by pointer, past the counted writes.
        self.bytes = size::recount(&self.tables, &self.timers);
        Some(taken)
    }
}

impl Accounting for HashMapBackend {
    fn memory_bytes(&self) -> Option<u64> {
        Some(self.bytes)
    }

    fn key_count(&self, s: StateId) -> usize {
        match &self.tables[s as usize] {
            Table::Value(t) => t.len(),
            Table::List(t) => t.len(),
            Table::Map(t) => t.len(),
            Table::OperatorList(_) | Table::Broadcast(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_conformance_suite() {
        crate::state::conformance::run_all(&|range| Box::new(HashMapBackend::new(range)));
    }
}
