//! The write-back cache in front of value-shaped states.

use crate::state::StateId;
use crate::state::key_group::KeyGroupRange;
use hashbrown::HashMap;
use smallvec::SmallVec;
use std::sync::Arc;

/// An encoded key as the cache keeps it: inline when short (most keys), so
/// that copying a table after a freeze copies bytes instead of allocating
/// per entry.
type Key = SmallVec<[u8; 24]>;

/// A value as the cache keeps it: inline up to 16 bytes (counters, sums).
type Value = SmallVec<[u8; 16]>;

/// A cached value: the latest one (`None`: absent), and the generation it
/// was written in (0: read from the database, which has it).
#[derive(Clone)]
pub(super) struct Cached {
    value: Option<Value>,
    pub(super) written: u64,
}

impl Cached {
    /// The value; `None` if the key is known to be absent.
    pub(super) fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

/// One key group's cached values of one state (or a part of them), by
/// encoded key.
pub(super) type Table = HashMap<Key, Cached>;

/// Tables per state, in [`Layout`] order.
pub(super) type Tables = Vec<Vec<Arc<Table>>>;

/// About how many tables a state's values are spread over: small tables,
/// so that the copy a first write after a freeze makes is short (tens of
/// microseconds at a million cached values) and the copies of one
/// checkpoint interval spread over many records instead of stalling a few.
const TABLES_PER_STATE: usize = 2048;

/// Which table a key's value lives in: each key group of the range has
/// `parts` tables side by side, and a key goes to one of its group's by
/// bits of its hash that the key group does not use.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    range: KeyGroupRange,
    /// Tables per key group, a power of two.
    pub(super) parts: usize,
}

impl Layout {
    pub(super) fn new(range: KeyGroupRange) -> Self {
        let groups = usize::from(range.end - range.start).max(1);
        let parts = (TABLES_PER_STATE / groups).max(1);
        // The largest power of two not above it.
        Layout { range, parts: 1 << parts.ilog2() }
    }

    /// The key groups it has tables for.
    pub(super) fn range(&self) -> KeyGroupRange {
        self.range
    }

    /// Tables per state.
    fn tables(&self) -> usize {
        usize::from(self.range.end - self.range.start) * self.parts
    }

    /// The indexes of key group `kg`'s tables; `None` outside the range.
    pub(super) fn group(&self, kg: u16) -> Option<std::ops::Range<usize>> {
        let group = usize::from(kg.checked_sub(self.range.start)?);
        (kg < self.range.end).then(|| group * self.parts..(group + 1) * self.parts)
    }

    /// The index of the table of `key` (encoded, `kg(2) key`) with hash
    /// `hash`; `None` outside the range.
    pub(super) fn index(&self, key: &[u8], hash: u64) -> Option<usize> {
        let group = usize::from(group_of(key).checked_sub(self.range.start)?);
        // The key group is the hash modulo max_parallelism: its low bits.
        Some(group * self.parts + ((hash >> 40) as usize & (self.parts - 1)))
    }
}

/// The write-back cache in front of value-shaped states: reads after the
/// first and every write stay in memory. A read-modify-write per record (a
/// counter) then costs a hash lookup, not a memtable search and insert.
///
/// Values live in one table per key group behind an `Arc`, and each
/// written value carries its generation. [`ValueCache::freeze`] hands out
/// the tables as they are (pointer copies) and starts a new generation: the
/// values written in the old one are what the database must take in, and
/// the first write to a table after that copies it (copy on write, as the
/// hashmap backend does), so the cache keeps every value for reads.
pub(super) struct ValueCache {
    states: Tables,
    layout: Layout,
    generation: u64,
    /// Approximate bytes held.
    bytes: usize,
}

/// What an entry costs beyond its key and value: the map's slot and the
/// vectors' headers.
const ENTRY_OVERHEAD: usize = 56;

fn entry_size(key_len: usize, value: Option<&[u8]>) -> usize {
    key_len + value.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD
}

/// The key group an encoded key (`kg(2) key`) belongs to.
fn group_of(key: &[u8]) -> u16 {
    u16::from_be_bytes([key[0], key[1]])
}

/// The value state `s`'s `tables` hold for `key` (hash `hash`), if any.
pub(super) fn lookup<'a>(tables: &'a Tables, layout: &Layout, s: StateId, key: &[u8], hash: u64) -> Option<&'a Cached> {
    tables.get(s as usize)?.get(layout.index(key, hash)?)?.get(key)
}

impl ValueCache {
    pub(super) fn new(range: KeyGroupRange) -> Self {
        ValueCache { states: Vec::new(), layout: Layout::new(range), generation: 1, bytes: 0 }
    }

    /// Where values live.
    pub(super) fn layout(&self) -> Layout {
        self.layout
    }

    /// The cached value of `key` (hash `hash`): `Some(None)` if it is known
    /// to be absent.
    pub(super) fn get(&self, s: StateId, key: &[u8], hash: u64) -> Option<Option<&[u8]>> {
        lookup(&self.states, &self.layout, s, key, hash).map(Cached::value)
    }

    /// Approximate bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Caches `value` for `key` (hash `hash`, in the range): read from the
    /// database (`written` false), or written.
    pub(super) fn put(&mut self, s: StateId, key: &[u8], hash: u64, value: Option<&[u8]>, written: bool) {
        if self.states.len() <= s as usize {
            self.states.resize_with(s as usize + 1, Vec::new);
        }
        let tables = &mut self.states[s as usize];
        if tables.is_empty() {
            tables.resize_with(self.layout.tables(), Default::default);
        }
        let i = self.layout.index(key, hash).expect("a key of the range");
        let added = entry_size(key.len(), value);
        let entry = Cached { value: value.map(Value::from_slice), written: if written { self.generation } else { 0 } };
        let replaced = Arc::make_mut(&mut tables[i])
            .insert(Key::from_slice(key), entry)
            .map_or(0, |old| entry_size(key.len(), old.value()));
        self.bytes = self.bytes + added - replaced;
    }

    /// The tables as they are, and the generation whose written values
    /// they hold; a new generation starts.
    pub(super) fn freeze(&mut self) -> (Tables, u64) {
        let generation = self.generation;
        self.generation += 1;
        (self.states.clone(), generation)
    }

    /// Forgets every value (the cache is full; freeze first).
    pub(super) fn clear(&mut self) {
        self.states.clear();
        self.bytes = 0;
    }

    /// The keys of state `s` the cache holds, with their values.
    pub(super) fn entries(&self, s: StateId) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.states.get(s as usize).into_iter().flatten().flat_map(|t| t.iter().map(|(k, c)| (&k[..], c.value())))
    }
}
