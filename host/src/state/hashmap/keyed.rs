//! Keyed state of the hashmap backend: one `hashbrown::HashTable` per key
//! group, each behind an `Arc` so a snapshot can share it copy-on-write.
//! Entries keep small keys and values inline and store no hash.

use super::size::{self, Held};
use crate::state::key_group::KeyGroupRange;
use crate::state::{KeyRef, StateError};
use hashbrown::HashTable;
use smallvec::SmallVec;
use std::sync::Arc;

/// The hash a table probes with. The key group is `hash % max_parallelism`,
/// so within one group's table the low bits of `hash` are nearly constant;
/// hashbrown picks buckets by low bits, so it gets the halves swapped.
#[inline]
pub(super) fn table_hash(k: &KeyRef<'_>) -> u64 {
    k.hash.rotate_left(32)
}

/// Keys and values up to these sizes live inside the table entry itself, so
/// a lookup touches one cache line instead of chasing two more pointers
/// (with a million keys every pointer chase is a cache miss).
pub(super) type InlineKey = SmallVec<[u8; 16]>;
pub(super) type InlineValue = SmallVec<[u8; 8]>;

/// No stored hash: entries stay small (40 bytes for a value), and the hash
/// is recomputed from the key only when a table grows.
#[derive(Clone)]
pub(super) struct Entry<V> {
    pub key: InlineKey,
    pub value: V,
}

/// `table_hash` of a stored key, for rehashing.
pub(super) fn rehash<V>(e: &Entry<V>) -> u64 {
    crate::state::key_group::key_hash(&e.key).rotate_left(32)
}

/// Entries of one keyed state, split by key group.
pub(super) struct Keyed<V> {
    /// `groups[kg - range.start]`; shared with a frozen snapshot until it
    /// has written the group.
    pub groups: Vec<Arc<HashTable<Entry<V>>>>,
}

impl<V: Clone> Keyed<V> {
    pub(super) fn new(range: KeyGroupRange) -> Self {
        Keyed { groups: (0..range.len()).map(|_| Arc::new(HashTable::new())).collect() }
    }

    #[inline]
    pub(super) fn index(range: KeyGroupRange, k: &KeyRef<'_>) -> Result<usize, StateError> {
        if !range.contains(k.key_group) {
            return Err(StateError::KeyGroupOutOfRange { key_group: k.key_group, start: range.start, end: range.end });
        }
        Ok(usize::from(k.key_group - range.start))
    }

    /// The group's table for writing: copied first if a snapshot holds it.
    #[inline]
    pub(super) fn group_mut(
        &mut self,
        range: KeyGroupRange,
        k: &KeyRef<'_>,
    ) -> Result<&mut HashTable<Entry<V>>, StateError> {
        Ok(Arc::make_mut(&mut self.groups[Self::index(range, k)?]))
    }

    #[inline]
    pub(super) fn get(&self, range: KeyGroupRange, k: &KeyRef<'_>) -> Result<Option<&V>, StateError> {
        let key = k.key;
        Ok(self.groups[Self::index(range, k)?].find(table_hash(k), |e| *e.key == *key).map(|e| &e.value))
    }

    #[inline]
    pub(super) fn get_mut(&mut self, range: KeyGroupRange, k: &KeyRef<'_>) -> Result<Option<&mut V>, StateError> {
        let key = k.key;
        Ok(self.group_mut(range, k)?.find_mut(table_hash(k), |e| *e.key == *key).map(|e| &mut e.value))
    }

    /// The key's value, inserted by `init` if missing; and the bytes a new
    /// entry adds ([`size::entry`]), 0 for one that was there.
    #[inline]
    pub(super) fn get_or_insert(
        &mut self,
        range: KeyGroupRange,
        k: &KeyRef<'_>,
        init: impl FnOnce() -> V,
    ) -> Result<(&mut V, u64), StateError> {
        let key = k.key;
        let hash = table_hash(k);
        let table = self.group_mut(range, k)?;
        let mut added = 0;
        let entry = table.entry(hash, |e| *e.key == *key, rehash).or_insert_with(|| {
            added = size::entry(key);
            Entry { key: InlineKey::from_slice(key), value: init() }
        });
        Ok((&mut entry.into_mut().value, added))
    }

    /// Removes the key; returns the bytes that frees ([`size::removed`]).
    pub(super) fn remove(&mut self, range: KeyGroupRange, k: &KeyRef<'_>) -> Result<u64, StateError>
    where
        V: Held,
    {
        let key = k.key;
        let hash = table_hash(k);
        let i = Self::index(range, k)?;
        // Look before writing, so a miss does not copy a shared group.
        if self.groups[i].find(hash, |e| *e.key == *key).is_none() {
            return Ok(0);
        }
        Ok(match Arc::make_mut(&mut self.groups[i]).find_entry(hash, |e| *e.key == *key) {
            Ok(e) => size::removed(&e.remove().0),
            Err(_) => 0,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.groups.iter().map(|g| g.len()).sum()
    }

    /// Room for `keys` more keys in `key_group` (if it is in `range`).
    pub(super) fn reserve(&mut self, range: KeyGroupRange, key_group: u16, keys: usize) {
        if range.contains(key_group) {
            Arc::make_mut(&mut self.groups[usize::from(key_group - range.start)]).reserve(keys, rehash);
        }
    }

    /// Keys from position `cursor` = (group << 32 | bucket), by bucket.
    pub(super) fn scan(&self, range: KeyGroupRange, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        let (mut g, mut b) = ((cursor >> 32) as usize, (cursor & 0xffff_ffff) as usize);
        let mut out = Vec::new();
        while g < self.groups.len() {
            let table = &self.groups[g];
            while b < table.num_buckets() {
                if out.len() == max as usize {
                    return (out, Some(((g as u64) << 32) | b as u64));
                }
                if let Some(e) = table.get_bucket(b) {
                    out.push((range.start + g as u16, e.key.to_vec()));
                }
                b += 1;
            }
            g += 1;
            b = 0;
        }
        (out, None)
    }

    /// Shares every group with a snapshot.
    pub(super) fn freeze(&self) -> Vec<Option<Arc<HashTable<Entry<V>>>>> {
        self.groups.iter().map(|g| Some(g.clone())).collect()
    }
}
