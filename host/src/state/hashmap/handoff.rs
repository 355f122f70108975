//! Live rescale's hand-off of keyed state by pointer, between hashmap
//! backends of one process.
//!
//! A live rescale used to move an old subtask's state to the new subtasks
//! as a canonical snapshot: every entry encoded, then decoded and inserted
//! again, while the operator stood still. The hashmap backend keeps each
//! (state, key group) table behind an `Arc` already (for copy-on-write
//! snapshots), so between two hashmap backends in one process the tables
//! can move as they are: the old subtask hands over its frozen per-group
//! `Arc`s and its timers ([`FrozenState::hand_off`]); each new subtask
//! takes the groups of its own range out of the shared hand-off and puts
//! them in its own tables
//! ([`Restore::adopt_key_groups`](crate::state::Restore::adopt_key_groups)),
//! no entry encoded, copied or rehashed. Copy-on-write keeps this safe: a group
//! still shared when its new owner writes to it (an old subtask's
//! checkpoint still writing it out) is copied first, and the old subtask
//! ends right after the handover anyway.
//!
//! What is not per key group still goes as a snapshot beside it, and a
//! backend that cannot adopt tables restores them through one
//! ([`crate::state::handoff`]).
//!
//! A live rescale keeps the job's number of key groups, so a key group's
//! number means the same on both sides and no key needs rehashing.

use super::frozen::FrozenTable;
use super::keyed::{Entry, Keyed, rehash};
use super::{HashMapBackend, Table, Timers, domain_index};
use crate::state::key_group::KeyGroupRange;
use crate::state::{FrozenState, SnapshotEntry, StateDescriptor, StateError, StateId, TimeDomain};
use hashbrown::HashTable;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One old subtask's keyed state and timers, handed to the new subtasks of
/// a live rescale by pointer. Shared by every new subtask (behind an
/// `Arc`); each takes out the key groups of its own range, so a group has
/// one owner again as soon as it is adopted.
pub struct KeyGroupHandOff {
    /// The old subtask's key groups.
    range: KeyGroupRange,
    /// Its states, as registered (with TTL, once the TTL layer has set
    /// them): matched by name on adoption, and a fallback snapshot's
    /// header.
    descriptors: Vec<StateDescriptor>,
    /// The tables and timers not taken yet. A lock rather than per-group
    /// atomics: adoption holds it for a few thousand pointer moves.
    handed: Mutex<Handed>,
}

/// What is left to take.
struct Handed {
    /// By state id of the old subtask; only the keyed variants hold
    /// groups (operator state went in the snapshot).
    tables: Vec<FrozenTable>,
    /// Every timer, per domain, until a new subtask whose range holds the
    /// whole old range takes the set as it is.
    timers: [Option<Arc<Timers>>; 2],
}

impl std::fmt::Debug for KeyGroupHandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyGroupHandOff")
            .field("range", &self.range)
            .field("states", &self.descriptors.len())
            .finish_non_exhaustive()
    }
}

impl KeyGroupHandOff {
    pub(super) fn new(
        range: KeyGroupRange,
        descriptors: Vec<StateDescriptor>,
        tables: Vec<FrozenTable>,
        timers: [Arc<Timers>; 2],
    ) -> Self {
        let [event, processing] = timers;
        KeyGroupHandOff {
            range,
            descriptors,
            handed: Mutex::new(Handed { tables, timers: [Some(event), Some(processing)] }),
        }
    }

    /// The old subtask's key groups.
    pub fn range(&self) -> KeyGroupRange {
        self.range
    }

    /// Its states, in its id order.
    pub fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }

    /// The same hand-off under `descriptors`: the TTL layer's, which carry
    /// the TTL its inner backend never sees. Ignored unless they name the
    /// same states of the same kinds, in the same order.
    pub fn with_descriptors(mut self, descriptors: Vec<StateDescriptor>) -> Self {
        let same = descriptors.len() == self.descriptors.len()
            && descriptors.iter().zip(&self.descriptors).all(|(a, b)| a.name == b.name && a.kind == b.kind);
        if same {
            self.descriptors = descriptors;
        }
        self
    }

    /// The lock; a panic elsewhere while holding it left the data whole
    /// (only `Option::take`s happen under it), so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, Handed> {
        self.handed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the key groups of `b`'s range, and their timers, into `b`.
    /// Checks every state first: on an error nothing has moved.
    pub(super) fn adopt_into(&self, b: &mut HashMapBackend) -> Result<u64, StateError> {
        let mut handed = self.lock();
        // The new backend's id of each handed keyed state.
        let mut ids: Vec<Option<usize>> = Vec::with_capacity(handed.tables.len());
        for (i, table) in handed.tables.iter().enumerate() {
            if !matches!(table, FrozenTable::Value(_) | FrozenTable::List(_) | FrozenTable::Map(_)) {
                ids.push(None);
                continue;
            }
            let Some(d) = self.descriptors.get(i) else {
                return Err(StateError::HandOff(format!("state {i} has no descriptor")));
            };
            let Some(j) = b.descriptors.iter().position(|m| m.name == d.name) else {
                return Err(StateError::HandOff(format!("state '{}' is not registered", d.name)));
            };
            let fits = matches!(
                (table, b.tables.get(j)),
                (FrozenTable::Value(_), Some(Table::Value(_)))
                    | (FrozenTable::List(_), Some(Table::List(_)))
                    | (FrozenTable::Map(_), Some(Table::Map(_)))
            );
            if !fits || b.descriptors[j].kind != d.kind {
                return Err(StateError::KindMismatch {
                    name: d.name.clone(),
                    existing: b.descriptors[j].kind.name(),
                    requested: d.kind.name(),
                });
            }
            ids.push(Some(j));
        }
        let range = b.range;
        let mine = self.range.intersect(range);
        let mut taken = 0u64;
        for (table, id) in handed.tables.iter_mut().zip(ids) {
            let Some(j) = id else { continue };
            taken += match (table, &mut b.tables[j]) {
                (FrozenTable::Value(from), Table::Value(to)) => install(to, range, from, self.range, mine)?,
                (FrozenTable::List(from), Table::List(to)) => install(to, range, from, self.range, mine)?,
                (FrozenTable::Map(from), Table::Map(to)) => install(to, range, from, self.range, mine)?,
                _ => 0,
            };
        }
        if mine.is_empty() {
            return Ok(taken);
        }
        // Timers are one set per domain, ordered by time: a new subtask
        // holding the whole old range takes the set as it is (no other
        // holds any of its groups); one holding part copies its timers out.
        let whole = range.start <= self.range.start && self.range.end <= range.end;
        for domain in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
            let slot = &mut handed.timers[domain_index(domain)];
            let incoming = if whole {
                slot.take()
            } else {
                slot.as_ref()
                    .map(|set| Arc::new(set.iter().filter(|(_, kg, _)| range.contains(*kg)).cloned().collect()))
            };
            let Some(incoming) = incoming else { continue };
            taken += incoming.len() as u64;
            let own = &mut b.timers[domain_index(domain)];
            if own.is_empty() {
                *own = incoming;
            } else {
                Arc::make_mut(own).append(&mut Arc::unwrap_or_clone(incoming));
            }
        }
        Ok(taken)
    }

    /// A frozen view of the key groups of `range` not adopted yet, for a
    /// backend that cannot adopt tables: written as a snapshot, it restores
    /// the ordinary way. Each group it writes is taken out.
    pub(crate) fn view(&self, range: KeyGroupRange) -> HandOffView<'_> {
        HandOffView { hand_off: self, range: self.range.intersect(range), timers: None }
    }
}

/// Moves the groups `groups` of a handed state (whose slots start at key
/// group `from_range.start`) into `to` (owning `range`); returns their keys.
fn install<V: Clone>(
    to: &mut Keyed<V>,
    range: KeyGroupRange,
    from: &mut [Option<Arc<HashTable<Entry<V>>>>],
    from_range: KeyGroupRange,
    groups: KeyGroupRange,
) -> Result<u64, StateError> {
    let mut keys = 0u64;
    for kg in groups.start..groups.end {
        // The target first, so a group is never taken out to be lost.
        let own = if range.contains(kg) { to.groups.get_mut(usize::from(kg - range.start)) } else { None };
        let Some(own) = own else {
            return Err(StateError::KeyGroupOutOfRange { key_group: kg, start: range.start, end: range.end });
        };
        let slot = from.get_mut(usize::from(kg.wrapping_sub(from_range.start))).and_then(Option::take);
        let Some(table) = slot else { continue };
        keys += table.len() as u64;
        if own.is_empty() {
            *own = table;
            continue;
        }
        // Never in a rescale (each group has one old owner); merged rather
        // than lost if it ever is, handed entries winning.
        let own = Arc::make_mut(own);
        for e in table.iter() {
            let hash = rehash(e);
            match own.find_mut(hash, |x| x.key == e.key) {
                Some(x) => x.value = e.value.clone(),
                None => {
                    own.insert_unique(hash, e.clone(), rehash);
                }
            }
        }
    }
    Ok(keys)
}

/// A timer of a handed group, by key group.
type GroupTimers = BTreeMap<u16, Vec<(TimeDomain, i64, Vec<u8>)>>;

/// The groups of one new subtask's range in a hand-off, as a frozen state.
pub(crate) struct HandOffView<'a> {
    hand_off: &'a KeyGroupHandOff,
    range: KeyGroupRange,
    /// The range's timers, split by group on first use.
    timers: Option<GroupTimers>,
}

impl FrozenState for HandOffView<'_> {
    fn descriptors(&self) -> &[StateDescriptor] {
        &self.hand_off.descriptors
    }

    fn range(&self) -> KeyGroupRange {
        self.range
    }

    fn key_group(&mut self, kg: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        if !self.range.contains(kg) {
            return Err(StateError::KeyGroupOutOfRange { key_group: kg, start: self.range.start, end: self.range.end });
        }
        let g = usize::from(kg - self.hand_off.range.start);
        let mut handed = self.hand_off.lock();
        for (i, table) in handed.tables.iter_mut().enumerate() {
            table.visit_group(i as StateId, g, visit);
        }
        let range = self.range;
        let timers = self.timers.get_or_insert_with(|| {
            let mut m = GroupTimers::new();
            for domain in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
                for (time, tkg, key) in handed.timers[domain_index(domain)].iter().flat_map(|s| s.iter()) {
                    if range.contains(*tkg) {
                        m.entry(*tkg).or_default().push((domain, *time, key.clone()));
                    }
                }
            }
            m
        });
        for (domain, time, key) in timers.remove(&kg).unwrap_or_default() {
            visit(SnapshotEntry::Timer { domain, time, key: &key });
        }
        Ok(())
    }

    fn operator_state(&mut self, _visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        // Operator and broadcast state went in the hand-off's snapshot.
        Ok(())
    }
}

#[cfg(test)]
mod tests;
