//! The hashmap backend frozen: [`Snapshots::freeze`] clones the `Arc`s of
//! every table, the timers, operator and broadcast state, whatever their
//! size, and the frozen view hands each key group to the snapshot writer
//! (letting go of it once written) or all of them to a live rescale's
//! hand-off.

use super::keyed::{Entry, InlineValue};
use super::{HashMapBackend, ListValue, MapValue, Table, Timers};
use crate::state::key_group::KeyGroupRange;
use crate::state::{
    FrozenState, HandOff, KeyGroupHandOff, SnapshotEntry, Snapshots, StateDescriptor, StateError, StateId, TimeDomain,
};
use hashbrown::HashTable;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Snapshots for HashMapBackend {
    fn freeze(&mut self) -> Box<dyn FrozenState> {
        let tables = self
            .tables
            .iter()
            .map(|t| match t {
                Table::Value(t) => FrozenTable::Value(t.freeze()),
                Table::List(t) => FrozenTable::List(t.freeze()),
                Table::Map(t) => FrozenTable::Map(t.freeze()),
                Table::OperatorList(v) => FrozenTable::OperatorList(v.clone()),
                Table::Broadcast(m) => FrozenTable::Broadcast(m.clone()),
            })
            .collect();
        Box::new(FrozenHashMap {
            range: self.range,
            descriptors: self.descriptors.clone(),
            tables,
            timers: self.timers.clone(),
            timers_by_group: None,
        })
    }
}

pub(super) enum FrozenTable {
    Value(Vec<Option<Arc<HashTable<Entry<InlineValue>>>>>),
    List(Vec<Option<Arc<HashTable<Entry<ListValue>>>>>),
    Map(Vec<Option<Arc<HashTable<Entry<MapValue>>>>>),
    OperatorList(Arc<Vec<Vec<u8>>>),
    Broadcast(Arc<MapValue>),
}

impl FrozenTable {
    /// Hands the entries of the group at index `g` (if any) to `visit` as
    /// entries of `state`, and lets go of the group: once written, it is
    /// released, and the live backend writes to it without copying.
    pub(super) fn visit_group(&mut self, state: StateId, g: usize, visit: &mut dyn FnMut(SnapshotEntry<'_>)) {
        match self {
            FrozenTable::Value(t) => {
                for e in t.get_mut(g).and_then(Option::take).iter().flat_map(|t| t.iter()) {
                    visit(SnapshotEntry::Value { state, key: &e.key, value: &e.value });
                }
            }
            FrozenTable::List(t) => {
                for e in t.get_mut(g).and_then(Option::take).iter().flat_map(|t| t.iter()) {
                    for v in &e.value {
                        visit(SnapshotEntry::ListItem { state, key: &e.key, value: v });
                    }
                }
            }
            FrozenTable::Map(t) => {
                for e in t.get_mut(g).and_then(Option::take).iter().flat_map(|t| t.iter()) {
                    for (uk, v) in &e.value {
                        visit(SnapshotEntry::MapItem { state, key: &e.key, user_key: uk, value: v });
                    }
                }
            }
            FrozenTable::OperatorList(_) | FrozenTable::Broadcast(_) => {}
        }
    }

    /// The keyed groups, moved out (this table keeps empty slots, so it
    /// stays well-formed); operator and broadcast state stay (an empty
    /// table of their kind is returned in their place).
    pub(super) fn take_keyed(&mut self) -> FrozenTable {
        fn take<T>(t: &mut [Option<T>]) -> Vec<Option<T>> {
            t.iter_mut().map(Option::take).collect()
        }
        match self {
            FrozenTable::Value(t) => FrozenTable::Value(take(t)),
            FrozenTable::List(t) => FrozenTable::List(take(t)),
            FrozenTable::Map(t) => FrozenTable::Map(take(t)),
            FrozenTable::OperatorList(_) => FrozenTable::OperatorList(Arc::default()),
            FrozenTable::Broadcast(_) => FrozenTable::Broadcast(Arc::default()),
        }
    }
}

/// A timer of a frozen state, filed under its key group.
type GroupTimer = (TimeDomain, i64, Vec<u8>);

/// A hashmap backend's state at one instant, shared copy-on-write with the
/// live backend.
struct FrozenHashMap {
    range: KeyGroupRange,
    descriptors: Vec<StateDescriptor>,
    tables: Vec<FrozenTable>,
    timers: [Arc<Timers>; 2],
    /// Timers split by key group on first use (off the task thread): the
    /// sets are ordered by time, not group.
    timers_by_group: Option<BTreeMap<u16, Vec<GroupTimer>>>,
}

impl FrozenState for FrozenHashMap {
    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }

    fn range(&self) -> KeyGroupRange {
        self.range
    }

    fn key_group(&mut self, kg: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        if !self.range.contains(kg) {
            return Err(StateError::KeyGroupOutOfRange { key_group: kg, start: self.range.start, end: self.range.end });
        }
        let g = usize::from(kg - self.range.start);
        for (i, table) in self.tables.iter_mut().enumerate() {
            table.visit_group(i as StateId, g, visit);
        }
        let timers = &self.timers;
        let by_group = self.timers_by_group.get_or_insert_with(|| {
            let mut m: BTreeMap<u16, Vec<GroupTimer>> = BTreeMap::new();
            for (d, domain) in [(0, TimeDomain::EventTime), (1, TimeDomain::ProcessingTime)] {
                for (time, tkg, key) in timers[d].iter() {
                    m.entry(*tkg).or_default().push((domain, *time, key.clone()));
                }
            }
            m
        });
        for (domain, time, key) in by_group.remove(&kg).unwrap_or_default() {
            visit(SnapshotEntry::Timer { domain, time, key: &key });
        }
        Ok(())
    }

    fn hand_off(&mut self) -> Option<HandOff> {
        let tables = self.tables.iter_mut().map(FrozenTable::take_keyed).collect();
        let timers = self.timers.each_mut().map(std::mem::take);
        // Timers split by group earlier are handed off too: none is left
        // for this view to write.
        self.timers_by_group = Some(BTreeMap::new());
        Some(HandOff::Tables(KeyGroupHandOff::new(self.range, self.descriptors.clone(), tables, timers)))
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        for (i, table) in self.tables.iter().enumerate() {
            let state = i as StateId;
            match table {
                FrozenTable::OperatorList(items) => {
                    for v in items.iter() {
                        visit(SnapshotEntry::OperatorItem { state, value: v });
                    }
                }
                FrozenTable::Broadcast(m) => {
                    for (uk, v) in m.iter() {
                        visit(SnapshotEntry::BroadcastItem { state, user_key: uk, value: v });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}
