//! Value-shaped states on RocksDB: reads through the write-back cache and
//! the layers not yet ingested, writes into the cache, and the cache's
//! hand-over to the database as layers.

use super::Database;
use super::keys::keyed_key;
use super::layers::{self, Layer};
use super::storage_error;
use crate::state::{KeyRef, StateError, StateId, push_value};

/// Layers written or being written that the backend has not ingested yet,
/// at most: one more waits for the oldest to be written, so a writer
/// slower than the cache fills holds records back instead of memory
/// growing.
const MAX_LAYERS: usize = 3;

/// How long [`Database::ingest_layers`] may wait.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// Ingest the layers at the front that are written; never wait.
    Ready,
    /// Ingest the oldest layer, waiting for it if need be.
    Oldest,
    /// Ingest every layer, waiting for each.
    All,
}

impl Database {
    /// The latest value of `key` the cache or a layer holds (newest
    /// first): `Some(None)` if it is known to be absent, `None` if only
    /// the database knows.
    fn cached(&self, s: StateId, key: &[u8], hash: u64) -> Option<Option<&[u8]>> {
        if let Some(v) = self.cache.get(s, key, hash) {
            return Some(v);
        }
        self.layers.iter().rev().find_map(|l| l.get(s, key, hash))
    }

    /// Makes room in a full cache: it freezes into a layer and starts
    /// empty. Also takes in the layers written meanwhile.
    fn make_room(&mut self) -> Result<(), StateError> {
        if self.cache.bytes() >= self.cache_limit {
            self.push_layer()?;
            self.cache.clear();
        }
        self.ingest_layers(Wait::Ready)
    }

    /// The cache freezes into a layer, whose written values are written
    /// in the background.
    pub(super) fn push_layer(&mut self) -> Result<(), StateError> {
        while self.layers.len() >= MAX_LAYERS {
            self.ingest_layers(Wait::Oldest)?;
        }
        if self.cache.bytes() > 0 {
            self.layers.push_back(Layer::start(&self.path, self.cache.freeze(), self.cache.layout(), &self.options));
        }
        Ok(())
    }

    /// Ingests layers into the database, oldest first, as `wait` says.
    pub(super) fn ingest_layers(&mut self, wait: Wait) -> Result<(), StateError> {
        while let Some(oldest) = self.layers.front() {
            if wait == Wait::Ready && !oldest.written.is_done() {
                break;
            }
            let files = oldest.written.wait()?;
            // A layer handed over at a live rescale holds the old
            // subtask's key groups: the others' go again.
            let foreign = !self.range.covers(oldest.range());
            layers::ingest_layer(self.db(), &files)?;
            if foreign {
                self.clip_keyed()?;
            }
            self.layers.pop_front();
            if wait == Wait::Oldest {
                break;
            }
        }
        Ok(())
    }

    /// Everything written so far into the database itself: for the rare
    /// operations that read the database whole.
    pub(super) fn settle(&mut self) -> Result<(), StateError> {
        self.push_layer()?;
        self.ingest_layers(Wait::All)
    }

    pub(super) fn read_value(&mut self, s: StateId, k: &KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        self.check(k)?;
        self.make_room()?;
        let key = keyed_key(k.key_group, k.key);
        if let Some(v) = self.cached(s, &key, k.hash) {
            return Ok(v.map(<[u8]>::to_vec));
        }
        let v = self.get(s, &key)?;
        self.cache.put(s, &key, k.hash, v.as_deref(), false);
        Ok(v)
    }

    pub(super) fn read_values(
        &mut self,
        s: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        for k in keys {
            self.check(k)?;
        }
        self.make_room()?;
        let encoded: Vec<Vec<u8>> = keys.iter().map(|k| keyed_key(k.key_group, k.key)).collect();
        // Hits answer from the cache and layers; misses go to RocksDB in one
        // multi-get, and enter the cache once the answers are written.
        let hits: Vec<Option<Option<&[u8]>>> =
            encoded.iter().zip(keys).map(|(e, k)| self.cached(s, e, k.hash)).collect();
        let missing: Vec<usize> = (0..encoded.len()).filter(|&i| hits[i].is_none()).collect();
        let mut fetched: Vec<Option<Vec<u8>>> = Vec::with_capacity(missing.len());
        if !missing.is_empty() {
            for v in self.db().batched_multi_get_cf(self.cf(s), missing.iter().map(|&i| &encoded[i]), false) {
                fetched.push(v.map_err(storage_error)?.map(|v| v.to_vec()));
            }
        }
        let mut next = fetched.iter();
        for hit in &hits {
            let value = match hit {
                Some(v) => *v,
                None => next.next().and_then(Option::as_deref),
            };
            push_value(out, spans, value);
        }
        drop(hits);
        let mut misses = missing.into_iter().zip(fetched).peekable();
        for (i, key) in encoded.into_iter().enumerate() {
            if let Some((_, v)) = misses.next_if(|(m, _)| *m == i) {
                self.cache.put(s, &key, keys[i].hash, v.as_deref(), false);
            }
        }
        Ok(())
    }

    /// Writes `value` (`None`: clears) into the cache.
    pub(super) fn write_value(&mut self, s: StateId, k: &KeyRef<'_>, value: Option<&[u8]>) -> Result<(), StateError> {
        self.check(k)?;
        self.make_room()?;
        self.cache.put(s, &keyed_key(k.key_group, k.key), k.hash, value, true);
        Ok(())
    }

    /// The keys of value state `s` that hold a value: the database's, as
    /// the layers (oldest first) and then the cache change them.
    pub(super) fn value_keys(&self, s: StateId, stored: Vec<Vec<u8>>) -> usize {
        let mut keys: std::collections::BTreeSet<Vec<u8>> = stored.into_iter().collect();
        let range = self.range;
        let mut apply = |k: &[u8], v: Option<&[u8]>| {
            // A layer handed over at a live rescale holds other groups too.
            if k.len() < 2 || !range.contains(u16::from_be_bytes([k[0], k[1]])) {
                return;
            }
            if v.is_some() {
                keys.insert(k.to_vec());
            } else {
                keys.remove(k);
            }
        };
        for layer in &self.layers {
            layer.written_values(s).for_each(|(k, v)| apply(k, v));
        }
        self.cache.entries(s).for_each(|(k, v)| apply(k, v));
        keys.len()
    }
}
