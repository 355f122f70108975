//! The write-back cache in front of value-shaped states.

use crate::state::StateId;
use crate::state::key_group::KeyGroupRange;
use hashbrown::HashMap;
use std::sync::Arc;

/// A cached value: the latest one (`None`: absent), and the generation it
/// was written in (0: read from the database, which has it).
#[derive(Clone)]
pub(super) struct Cached {
    pub(super) value: Option<Vec<u8>>,
    pub(super) written: u64,
}

/// One key group's cached values of one state, by encoded key.
pub(super) type Table = HashMap<Vec<u8>, Cached>;

/// Tables per state, per key group of the backend's range.
pub(super) type Tables = Vec<Vec<Arc<Table>>>;

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
    range: KeyGroupRange,
    generation: u64,
    /// Approximate bytes held.
    bytes: usize,
}

/// What an entry costs beyond its key and value: the map's slot and the
/// vectors' headers.
const ENTRY_OVERHEAD: usize = 56;

fn entry_size(key_len: usize, value: &Option<Vec<u8>>) -> usize {
    key_len + value.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD
}

/// The key group an encoded key (`kg(2) key`) belongs to.
pub(super) fn group_of(key: &[u8]) -> u16 {
    u16::from_be_bytes([key[0], key[1]])
}

/// The table `key` goes in, among a state's tables for `range`.
pub(super) fn table_of<'a>(tables: &'a [Arc<Table>], range: KeyGroupRange, key: &[u8]) -> Option<&'a Arc<Table>> {
    tables.get(usize::from(group_of(key).checked_sub(range.start)?))
}

impl ValueCache {
    pub(super) fn new(range: KeyGroupRange) -> Self {
        ValueCache { states: Vec::new(), range, generation: 1, bytes: 0 }
    }

    /// The cached value of `key`: `Some(None)` if it is known to be absent.
    pub(super) fn get(&self, s: StateId, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        let tables = self.states.get(s as usize)?;
        table_of(tables, self.range, key)?.get(key).map(|c| &c.value)
    }

    /// Approximate bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Caches `value` for `key`: read from the database (`written`
    /// false), or written.
    pub(super) fn put(&mut self, s: StateId, key: Vec<u8>, value: Option<Vec<u8>>, written: bool) {
        let groups = usize::from(self.range.end - self.range.start);
        if self.states.len() <= s as usize {
            self.states.resize_with(s as usize + 1, Vec::new);
        }
        let tables = &mut self.states[s as usize];
        if tables.is_empty() {
            tables.resize_with(groups, Default::default);
        }
        let i = usize::from(group_of(&key) - self.range.start);
        let key_len = key.len();
        let added = entry_size(key_len, &value);
        let entry = Cached { value, written: if written { self.generation } else { 0 } };
        let replaced =
            Arc::make_mut(&mut tables[i]).insert(key, entry).map_or(0, |old| entry_size(key_len, &old.value));
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
    pub(super) fn entries(&self, s: StateId) -> impl Iterator<Item = (&Vec<u8>, &Option<Vec<u8>>)> {
        self.states.get(s as usize).into_iter().flatten().flat_map(|t| t.iter().map(|(k, c)| (k, &c.value)))
    }
}
