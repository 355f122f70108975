//! Typed broadcast map state.

use crate::bindings::weir::operator::broadcast_state as wit;
use crate::codec::{decode, encode, with_encoded};
use crate::error::{Error, Result};
use crate::keyed::{PAGE, paged};
use serde::{Serialize, de::DeserializeOwned};
use std::marker::PhantomData;

/// A map replicated on every subtask; writable only in
/// [`crate::Operator::process_broadcast`].
pub struct BroadcastMapState<K, V> {
    pub(crate) name: String,
    pub(crate) handle: wit::BroadcastMapState,
    pub(crate) _type: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> BroadcastMapState<K, V> {
    /// The value under `key`.
    pub fn get(&self, key: &K) -> Result<Option<V>> {
        let got = with_encoded(&self.name, key, |k| self.handle.get(k))?.map_err(|c| Error::state(&self.name, c))?;
        got.map(|b| decode(&self.name, &b)).transpose()
    }

    /// Sets the value under `key`.
    pub fn put(&self, key: &K, value: &V) -> Result<()> {
        let k = encode(&self.name, key)?;
        with_encoded(&self.name, value, |v| self.handle.put(&k, v))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Removes `key`.
    pub fn remove(&self, key: &K) -> Result<()> {
        with_encoded(&self.name, key, |k| self.handle.remove(k))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Whether the map holds `key`.
    pub fn contains(&self, key: &K) -> Result<bool> {
        with_encoded(&self.name, key, |k| self.handle.contains(k))?.map_err(|c| Error::state(&self.name, c))
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> Result<bool> {
        self.handle.is_empty().map_err(|c| Error::state(&self.name, c))
    }

    /// Iterates the entries, a page at a time.
    pub fn entries(&self) -> impl Iterator<Item = Result<(K, V)>> + '_ {
        paged(&self.name, move |after| self.handle.entries(after, PAGE), |(k, _)| k.clone(), false)
            .map(|r| r.and_then(|(k, v)| Ok((decode(&self.name, &k)?, decode(&self.name, &v)?))))
    }

    /// Removes every entry.
    pub fn clear(&self) -> Result<()> {
        self.handle.clear().map_err(|c| Error::state(&self.name, c))
    }
}
