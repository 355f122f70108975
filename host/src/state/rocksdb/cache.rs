//! The write-back cache in front of value-shaped states.

use crate::state::StateId;

/// A cached value: the latest one (`None`: absent), and whether RocksDB
/// has it yet.
pub(super) struct Cached {
    pub(super) value: Option<Vec<u8>>,
    pub(super) dirty: bool,
}

/// The write-back cache in front of value-shaped states: reads after the
/// first and every write stay in memory until the cache is full or a
/// checkpoint comes, when the dirty entries go to RocksDB in one sorted
/// write batch. A read-modify-write per record (a counter) then costs a
/// hash lookup, not a memtable search and insert.
#[derive(Default)]
pub(super) struct ValueCache {
    /// Per state id: encoded key to entry.
    pub(super) states: Vec<hashbrown::HashMap<Vec<u8>, Cached>>,
    /// Approximate bytes held.
    pub(super) bytes: usize,
}

impl ValueCache {
    pub(super) fn get(&self, s: StateId, key: &[u8]) -> Option<&Cached> {
        self.states.get(s as usize)?.get(key)
    }
}
