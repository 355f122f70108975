//! What the hashmap backend's state costs in memory, as the backend counts
//! it: the bytes of every key, value, list item, map entry and timer, plus
//! a fixed estimate of each one's overhead (table entry, vector header,
//! B-tree slot, allocator rounding). The backend keeps the total in a
//! counter it adjusts on every write, so reading it costs nothing; the host
//! compares it with `wasm.max_state_bytes`. Only arithmetic here: nothing
//! allocates or walks a table except [`recount`], which a live rescale runs
//! once after adopting tables by pointer.
//!
//! The estimates are on the safe side for small entries (a table entry is
//! 40 bytes, a `Vec<u8>` 24 plus its allocation's header) and exact enough
//! for large ones, whose bytes dominate. A snapshot's copy-on-write can
//! hold a second copy of a key group while it is written; that copy is not
//! counted (`docs/security.md` states the margin).

use super::keyed::Entry;
use super::{ListValue, MapValue, Table, Timers};
use hashbrown::HashTable;
use std::sync::Arc;

/// One key's entry in a keyed table: the entry (40 bytes), its control
/// byte and the table's spare capacity.
pub(super) const ENTRY: u64 = 64;
/// One item of a list (keyed or operator list): a `Vec<u8>` (24 bytes) and
/// its allocation's header and rounding.
pub(super) const ITEM: u64 = 48;
/// One entry of a map (keyed or broadcast): two `Vec<u8>`s in a B-tree
/// node's slot, and their allocations.
pub(super) const MAP_ITEM: u64 = 112;
/// One pending timer: `(i64, u16, Vec<u8>)` in a B-tree node's slot, and
/// the key's allocation.
pub(super) const TIMER: u64 = 80;

/// A keyed entry of `key` holding nothing yet.
#[inline]
pub(super) fn entry(key: &[u8]) -> u64 {
    ENTRY + key.len() as u64
}

/// A list item of `len` bytes.
#[inline]
pub(super) fn item(len: usize) -> u64 {
    ITEM + len as u64
}

/// A map entry.
#[inline]
pub(super) fn map_item(user_key: &[u8], value: &[u8]) -> u64 {
    MAP_ITEM + (user_key.len() + value.len()) as u64
}

/// A timer for `key`.
#[inline]
pub(super) fn timer(key: &[u8]) -> u64 {
    TIMER + key.len() as u64
}

/// The items of a list.
pub(super) fn list<V: AsRef<[u8]>>(items: &[V]) -> u64 {
    items.iter().map(|v| item(v.as_ref().len())).sum()
}

/// The entries of a map.
pub(super) fn map(m: &MapValue) -> u64 {
    m.iter().map(|(k, v)| map_item(k, v)).sum()
}

/// What a value, list or map held under one key costs, its entry included.
pub(super) trait Held {
    /// The bytes the value holds beyond its table entry.
    fn held(&self) -> u64;
}

impl Held for super::InlineValue {
    fn held(&self) -> u64 {
        self.len() as u64
    }
}

impl Held for ListValue {
    fn held(&self) -> u64 {
        list(self)
    }
}

impl Held for MapValue {
    fn held(&self) -> u64 {
        map(self)
    }
}

/// A removed (or replaced) keyed entry.
pub(super) fn removed<V: Held>(e: &Entry<V>) -> u64 {
    entry(&e.key) + e.value.held()
}

fn groups<V: Held>(groups: &[Arc<HashTable<Entry<V>>>]) -> u64 {
    groups.iter().flat_map(|g| g.iter()).map(removed).sum()
}

/// Every table and timer, walked: after a rescale's adoption, whose tables
/// arrive by pointer without passing through the counted writes.
pub(super) fn recount(tables: &[Table], timers: &[Arc<Timers>; 2]) -> u64 {
    let tables: u64 = tables
        .iter()
        .map(|t| match t {
            Table::Value(t) => groups(&t.groups),
            Table::List(t) => groups(&t.groups),
            Table::Map(t) => groups(&t.groups),
            Table::OperatorList(items) => list(items),
            Table::Broadcast(m) => map(m),
        })
        .sum();
    tables + timers.iter().flat_map(|t| t.iter()).map(|(_, _, key)| timer(key)).sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::super::HashMapBackend;
    use crate::state::key_group::{KeyGroupRange, key_hash};
    use crate::state::{
        Accounting, KeyRef, ListState, MapState, OperatorState, Registry, StateKind, TimeDomain, TimerService,
        ValueState,
    };

    fn key(k: &[u8]) -> KeyRef<'_> {
        KeyRef { key: k, hash: key_hash(k), key_group: (key_hash(k) % 8) as u16 }
    }

    fn counted(b: &HashMapBackend) -> u64 {
        b.memory_bytes().unwrap()
    }

    /// Every write moves the counter by what it adds or frees, and the
    /// counter always equals a walk over everything held.
    #[test]
    fn the_counter_follows_every_write_and_matches_a_recount() {
        let mut b = HashMapBackend::new(KeyGroupRange { start: 0, end: 8 });
        let v = b.register(StateKind::Value.descriptor("v")).unwrap();
        let l = b.register(StateKind::List.descriptor("l")).unwrap();
        let m = b.register(StateKind::Map.descriptor("m")).unwrap();
        let o = b.register(StateKind::OperatorList.descriptor("o")).unwrap();
        let c = b.register(StateKind::BroadcastMap.descriptor("c")).unwrap();
        let check = |b: &HashMapBackend| assert_eq!(counted(b), super::recount(&b.tables, &b.timers));
        assert_eq!(counted(&b), 0);
        b.value_set(v, key(b"a"), &[1; 100]).unwrap();
        assert_eq!(counted(&b), super::ENTRY + 1 + 100);
        b.value_set(v, key(b"a"), &[1; 10]).unwrap();
        assert_eq!(counted(&b), super::ENTRY + 1 + 10, "an overwrite frees the old value");
        b.value_set_many(v, &[key(b"b"), key(b"a")], &[Some(&[2; 5]), None]).unwrap();
        check(&b);
        b.list_add(l, key(b"k"), &[&[0; 1000], &[0; 10]]).unwrap();
        b.list_update(l, key(b"k2"), vec![vec![1; 50]]).unwrap();
        b.list_update(l, key(b"k2"), vec![vec![1; 5], vec![2; 5]]).unwrap();
        check(&b);
        b.map_put(m, key(b"k"), b"x", &[0; 300]).unwrap();
        b.map_put(m, key(b"k"), b"x", &[0; 3]).unwrap();
        b.map_put(m, key(b"k"), b"y", &[0; 3]).unwrap();
        b.map_remove(m, key(b"k"), b"x").unwrap();
        check(&b);
        b.operator_list_add(o, &[&[0; 64]]).unwrap();
        b.operator_list_update(o, vec![vec![0; 8]]).unwrap();
        b.broadcast_put(c, b"r", &[0; 20]).unwrap();
        b.broadcast_put(c, b"r", &[0; 2]).unwrap();
        check(&b);
        b.timer_register(TimeDomain::EventTime, key(b"t"), 5).unwrap();
        b.timer_register(TimeDomain::EventTime, key(b"t"), 5).unwrap();
        b.timer_register(TimeDomain::ProcessingTime, key(b"t"), 6).unwrap();
        check(&b);
        b.timer_pop_due(TimeDomain::EventTime, 10).unwrap();
        b.timer_delete(TimeDomain::ProcessingTime, key(b"t"), 6).unwrap();
        check(&b);
        b.value_clear(v, key(b"b")).unwrap();
        b.list_clear(l, key(b"k")).unwrap();
        b.list_update(l, key(b"k2"), Vec::new()).unwrap();
        b.map_clear(m, key(b"k")).unwrap();
        b.operator_list_update(o, Vec::new()).unwrap();
        b.broadcast_clear(c).unwrap();
        assert_eq!(counted(&b), 0, "everything removed, nothing counted");
    }
}
