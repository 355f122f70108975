//! The RocksDB state backend (Flink's EmbeddedRocksDBStateBackend): one
//! embedded RocksDB per operator subtask (more after a live rescale, see
//! `parts/`), in a working directory of its own under
//! `state.backend.rocksdb.localdir`, removed when the subtask ends. State
//! lives on local disk, so it can grow past memory. This file holds one
//! database (`Database`).
//!
//! Layout: one column family per registered state (`state-<id>`) plus
//! `timers`. Keys start with the key group, big-endian, so one key group is
//! one contiguous range (a scan per key group for snapshots; a range delete
//! to drop one):
//! - value-like and list states: `kg(2) key`;
//! - map states: `kg(2) len(key) as u32 BE, key, user key`, so one key's
//!   map is contiguous and ordered by user key;
//! - timers: `domain(1) time(8, sign-flipped BE) kg(2) key`, ordered as they
//!   fire; the first of each domain are cached in memory too (`timers.rs`);
//! - operator lists: one value under the empty key; broadcast maps: user
//!   key to value.
//!
//! Lists are `len(u32 LE) bytes` repeated; appends are RocksDB merges, so
//! adding to a list never reads it. Writes skip the write-ahead log:
//! durability comes from checkpoints.
//!
//! Value-shaped states go through a bounded write-back cache ([`ValueCache`]):
//! a read-modify-write per record then costs a hash lookup instead of a
//! memtable search and insert. The cache hands its written values to the
//! database as layers, SST files written and ingested off the record path
//! (`layers.rs`).
//!
//! A process killed with `kill -9` cannot remove its directories; the next
//! subtask of the same name removes those whose process is gone.
//!
//! TTL: the states of the TTL layer carry an expiry prefix in every stored
//! value; a compaction filter on each state's column family drops expired
//! values (and lists whose every element expired) as RocksDB compacts, so
//! clean-up costs neither a scan nor work on the record path. A list with
//! some elements expired is trimmed when it is next read.
//!
//! Snapshots: `freeze` turns the cache's written values into a layer and
//! takes a RocksDB checkpoint (memtables flushed, SST files hard-linked into
//! a directory `<working dir>.f<k>` beside the subtask's own, which the
//! snapshot owns and removes). The memtables hold only list, map and timer
//! writes, so the pause does not grow with the values written. The frozen
//! state is the checkpoint plus the layers not ingested yet; the background
//! writer stores those files (incremental checkpoints) or writes the
//! canonical snapshot format from the checkpoint, key group by key group,
//! with the layers' values taken from memory over it (so neither that
//! writer nor a rescale's hand-off waits for the layers' files).

mod cache;
mod frozen;
mod handoff;
mod keys;
mod layers;
mod options;
mod parts;
mod timers;
mod values;

pub use frozen::open_checkpoint;
pub use handoff::DatabaseHandOff;
pub use layers::wait_for_writers;
pub use options::RocksDbMemory;
pub use parts::RocksDbBackend;

use cache::ValueCache;
use frozen::FrozenRocksDb;
use keys::{TIMERS, cf_name, decode_list, encode_list, keyed_key, map_prefix, prefix_end, split_map_key, timer_key};
use layers::Layer;
use options::{ExpiryClock, cf_options, remove_orphans, state_cf_options};
use timers::Timers;
use values::Wait;

use super::key_group::KeyGroupRange;
use super::{
    Accounting, FrozenState, KeyRef, KeyScan, ListState, MapEntry, MapState, OperatorState, Registry, Restore,
    SnapshotEntry, Snapshots, StateDescriptor, StateError, StateId, StateKind, TimeDomain, TimerService, ValueState,
    check_registration, restore_by_calls,
};
use crate::clock::Clock;
use ::rocksdb::{
    Cache, ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

fn storage_error(e: ::rocksdb::Error) -> StateError {
    StateError::Storage(e.to_string())
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A key and its value, copied out of the database.
type Row = (Vec<u8>, Vec<u8>);

/// One embedded RocksDB with its write-back cache, layers and timers,
/// holding the key groups of `range`: a subtask's whole state, or one of
/// its parts after a live rescale (see `parts/`). Public only as the part
/// a [`RocksDbBackend`] serves operator state from ([`super::PassThrough`]);
/// nothing outside this module makes or opens one.
pub struct Database {
    db: Option<DB>,
    path: PathBuf,
    range: KeyGroupRange,
    descriptors: Vec<StateDescriptor>,
    options: Options,
    write: WriteOptions,
    timers: Timers,
    /// Where `scan_keys` continues, per state (keys are the cursor).
    scan_after: BTreeMap<StateId, Vec<u8>>,
    /// Freezes taken, for unique checkpoint directory names.
    freezes: u64,
    /// Value-state write-back cache, and its byte budget.
    cache: ValueCache,
    cache_limit: usize,
    /// The cache's layers not ingested yet, oldest first.
    layers: std::collections::VecDeque<Layer>,
    /// Per state: the clock of its TTL compaction filter.
    expiry: Vec<ExpiryClock>,
}

impl Database {
    /// Opens a fresh database for a subtask owning `range`, in a new
    /// directory under `localdir` named after `name`.
    fn open(localdir: &Path, name: &str, range: KeyGroupRange, memory: RocksDbMemory) -> Result<Self, StateError> {
        remove_orphans(localdir, name);
        let path = working_dir(localdir, name)?;
        let cache = Cache::new_lru_cache(memory.block_cache);
        let options = cf_options(&memory, &cache);
        let db =
            DB::open_cf_descriptors(&options, path.join("db"), [ColumnFamilyDescriptor::new(TIMERS, options.clone())])
                .map_err(storage_error)?;
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        Ok(Database {
            db: Some(db),
            path,
            range,
            descriptors: Vec::new(),
            options,
            write,
            timers: Timers::empty(),
            scan_after: BTreeMap::new(),
            freezes: 0,
            cache: ValueCache::new(range),
            cache_limit: memory.write_cache,
            layers: std::collections::VecDeque::new(),
            expiry: Vec::new(),
        })
    }

    /// Opens a database restored from an incremental checkpoint: the files
    /// in `files` (a RocksDB checkpoint directory) become this subtask's
    /// database, with the states `descriptors` describes.
    fn adopt(
        localdir: &Path,
        name: &str,
        range: KeyGroupRange,
        memory: RocksDbMemory,
        files: &Path,
        descriptors: Vec<StateDescriptor>,
    ) -> Result<Self, StateError> {
        let mut b = Self::open(localdir, name, range, memory)?;
        drop(b.db.take());
        let db_dir = b.path.join("db");
        std::fs::remove_dir_all(&db_dir).map_err(|e| StateError::Storage(format!("{}: {e}", db_dir.display())))?;
        std::fs::rename(files, &db_dir).map_err(|e| StateError::Storage(format!("{}: {e}", files.display())))?;
        let mut cfs = vec![ColumnFamilyDescriptor::new(TIMERS, b.options.clone())];
        for (i, d) in descriptors.iter().enumerate() {
            let clock = ExpiryClock::default();
            cfs.push(ColumnFamilyDescriptor::new(
                cf_name(i as StateId),
                state_cf_options(&b.options, d.kind.shape(), &clock),
            ));
            b.expiry.push(clock);
        }
        b.db = Some(DB::open_cf_descriptors(&b.options, &db_dir, cfs).map_err(storage_error)?);
        b.descriptors = descriptors;
        // The layers the checkpoint listed beside the database's files.
        layers::ingest_dir(b.db(), &db_dir)?;
        let (db, cf) = with_timers(&b.db);
        b.timers = Timers::restored(db, cf)?;
        Ok(b)
    }

    /// Whether a file of a checkpoint that [`adopt`](Self::adopt) took
    /// over stays in the database under its stored name. Layer files do
    /// not: they are ingested under new file numbers, and their names are
    /// unique only within a process, so a layer this database writes later
    /// may carry a stored layer's name (and size) with other contents.
    fn keeps_name(file: &str) -> bool {
        !file.starts_with(layers::LAYER_PREFIX)
    }

    /// This database, given up to a live rescale's hand-off, leaving in its
    /// place one that is closed and owns no directory: the backend that
    /// held it is not used again.
    fn give_up(&mut self) -> Database {
        let closed = Database {
            db: None,
            path: PathBuf::new(),
            range: self.range,
            descriptors: Vec::new(),
            options: Options::default(),
            write: WriteOptions::default(),
            timers: Timers::empty(),
            scan_after: BTreeMap::new(),
            freezes: 0,
            cache: ValueCache::new(self.range),
            cache_limit: 0,
            layers: std::collections::VecDeque::new(),
            expiry: Vec::new(),
        };
        std::mem::replace(self, closed)
    }

    /// The working directory.
    fn path(&self) -> &Path {
        &self.path
    }

    fn db(&self) -> &DB {
        self.db.as_ref().expect("open until dropped")
    }

    fn cf(&self, s: StateId) -> &::rocksdb::ColumnFamily {
        self.db().cf_handle(&cf_name(s)).expect("registered state has a column family")
    }

    fn check(&self, k: &KeyRef<'_>) -> Result<(), StateError> {
        if self.range.contains(k.key_group) {
            Ok(())
        } else {
            Err(StateError::KeyGroupOutOfRange { key_group: k.key_group, start: self.range.start, end: self.range.end })
        }
    }

    fn get(&self, s: StateId, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.db().get_pinned_cf(self.cf(s), key).map_err(storage_error)?.map(|v| v.to_vec()))
    }

    fn put(&self, s: StateId, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.db().put_cf_opt(self.cf(s), key, value, &self.write).map_err(storage_error)
    }

    fn delete(&self, s: StateId, key: &[u8]) -> Result<(), StateError> {
        self.db().delete_cf_opt(self.cf(s), key, &self.write).map_err(storage_error)
    }

    /// Entries of `cf` whose keys start with `prefix`, from `from` on.
    fn scan(
        &self,
        cf: &::rocksdb::ColumnFamily,
        prefix: &[u8],
        from: &[u8],
        max: usize,
    ) -> Result<Vec<Row>, StateError> {
        let mut ro = ReadOptions::default();
        if let Some(end) = prefix_end(prefix) {
            ro.set_iterate_upper_bound(end);
        }
        let mut out = Vec::new();
        for item in self.db().iterator_cf_opt(cf, ro, IteratorMode::From(from, Direction::Forward)) {
            let (k, v) = item.map_err(storage_error)?;
            if !k.starts_with(prefix) || out.len() == max {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn map_key(k: &KeyRef<'_>, user_key: &[u8]) -> Vec<u8> {
        let mut key = map_prefix(k.key_group, k.key);
        key.extend_from_slice(user_key);
        key
    }

    fn list(&self, s: StateId, k: &KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        self.check(k)?;
        self.get(s, &keyed_key(k.key_group, k.key))
    }
}

/// A new, empty working directory under `localdir` for a database of the
/// subtask `name`: `<name>-<pid>-<n>`, so that [`remove_orphans`] knows
/// whose it is.
fn working_dir(localdir: &Path, name: &str) -> Result<PathBuf, StateError> {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let path = crate::paths::join_under(localdir, &format!("{name}-{}-{n}", std::process::id()))
        .map_err(|e| StateError::Storage(e.to_string()))?;
    if path.exists() {
        std::fs::remove_dir_all(&path).map_err(|e| StateError::Storage(format!("{}: {e}", path.display())))?;
    }
    std::fs::create_dir_all(&path).map_err(|e| StateError::Storage(format!("{}: {e}", path.display())))?;
    Ok(path)
}

/// The database and its timers column family, borrowed apart from the
/// backend's other fields (the timer queues update beside them).
fn with_timers(db: &Option<DB>) -> (&DB, &::rocksdb::ColumnFamily) {
    let db = db.as_ref().expect("open until dropped");
    (db, db.cf_handle(TIMERS).expect("timers column family"))
}

impl Drop for Database {
    fn drop(&mut self) {
        drop(self.db.take());
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn page(items: Vec<&[u8]>, start: u32, max: u32) -> Vec<Vec<u8>> {
    items.into_iter().skip(start as usize).take(max as usize).map(<[u8]>::to_vec).collect()
}

impl Registry for Database {
    fn register(&mut self, d: StateDescriptor) -> Result<StateId, StateError> {
        if let Some(id) = check_registration(&self.descriptors, &d)? {
            // A new module version re-declares the state; later snapshots
            // record the version its values now have.
            self.descriptors[id as usize].version = d.version;
            return Ok(id);
        }
        let id = self.descriptors.len() as StateId;
        let clock = ExpiryClock::default();
        let options = state_cf_options(&self.options, d.kind.shape(), &clock);
        self.db.as_mut().expect("open").create_cf(cf_name(id), &options).map_err(storage_error)?;
        self.descriptors.push(d);
        self.expiry.push(clock);
        Ok(id)
    }

    fn expire_in_background(&mut self, s: StateId, clock: &Clock) -> bool {
        let Some(slot) = self.expiry.get(s as usize) else { return false };
        // A re-registration keeps the first clock; both read the same time.
        let _ = slot.set(clock.clone());
        true
    }

    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }
}

impl ValueState for Database {
    fn value_get(&mut self, s: StateId, k: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        self.read_value(s, &k)
    }

    fn value_get_many(
        &mut self,
        s: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        self.read_values(s, keys, out, spans)
    }

    fn value_set_many(&mut self, s: StateId, keys: &[KeyRef<'_>], values: &[Option<&[u8]>]) -> Result<(), StateError> {
        for (k, v) in keys.iter().zip(values) {
            self.write_value(s, k, *v)?;
        }
        Ok(())
    }

    fn value_set(&mut self, s: StateId, k: KeyRef<'_>, value: &[u8]) -> Result<(), StateError> {
        self.write_value(s, &k, Some(value))
    }

    fn value_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.write_value(s, &k, None)
    }
}

impl ListState for Database {
    fn list_add(&mut self, s: StateId, k: KeyRef<'_>, values: &[&[u8]]) -> Result<(), StateError> {
        self.check(&k)?;
        if values.is_empty() {
            return Ok(());
        }
        let mut encoded = Vec::new();
        encode_list(&mut encoded, values);
        self.db().merge_cf_opt(self.cf(s), keyed_key(k.key_group, k.key), encoded, &self.write).map_err(storage_error)
    }

    fn list_update(&mut self, s: StateId, k: KeyRef<'_>, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        self.check(&k)?;
        let key = keyed_key(k.key_group, k.key);
        if values.is_empty() {
            return self.delete(s, &key);
        }
        let mut encoded = Vec::new();
        encode_list(&mut encoded, &values.iter().map(Vec::as_slice).collect::<Vec<_>>());
        self.put(s, &key, &encoded)
    }

    fn list_read(&mut self, s: StateId, k: KeyRef<'_>, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        Ok(self.list(s, &k)?.map(|l| page(decode_list(&l), start, max)).unwrap_or_default())
    }

    fn list_len(&mut self, s: StateId, k: KeyRef<'_>) -> Result<u32, StateError> {
        Ok(self.list(s, &k)?.map(|l| decode_list(&l).len() as u32).unwrap_or(0))
    }

    fn list_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.check(&k)?;
        self.delete(s, &keyed_key(k.key_group, k.key))
    }
}

impl MapState for Database {
    fn map_get(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.check(&k)?;
        self.get(s, &Self::map_key(&k, uk))
    }

    fn map_put(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.check(&k)?;
        self.put(s, &Self::map_key(&k, uk), value)
    }

    fn map_remove(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<(), StateError> {
        self.check(&k)?;
        self.delete(s, &Self::map_key(&k, uk))
    }

    fn map_contains(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<bool, StateError> {
        Ok(self.map_get(s, k, uk)?.is_some())
    }

    fn map_is_empty(&mut self, s: StateId, k: KeyRef<'_>) -> Result<bool, StateError> {
        self.check(&k)?;
        let prefix = map_prefix(k.key_group, k.key);
        Ok(self.scan(self.cf(s), &prefix, &prefix, 1)?.is_empty())
    }

    fn map_entries(
        &mut self,
        s: StateId,
        k: KeyRef<'_>,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError> {
        self.check(&k)?;
        let prefix = map_prefix(k.key_group, k.key);
        let mut from = prefix.clone();
        if let Some(a) = after {
            // The first key after `prefix ++ a`: append a zero byte.
            from.extend_from_slice(a);
            from.push(0);
        }
        Ok(self
            .scan(self.cf(s), &prefix, &from, max as usize)?
            .into_iter()
            .map(|(key, v)| (key[prefix.len()..].to_vec(), v))
            .collect())
    }

    fn map_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.check(&k)?;
        let prefix = map_prefix(k.key_group, k.key);
        match prefix_end(&prefix) {
            Some(end) => {
                let mut batch = WriteBatch::default();
                batch.delete_range_cf(self.cf(s), &prefix, &end);
                self.db().write_opt(batch, &self.write).map_err(storage_error)
            }
            None => {
                for (key, _) in self.scan(self.cf(s), &prefix, &prefix, usize::MAX)? {
                    self.delete(s, &key)?;
                }
                Ok(())
            }
        }
    }
}

impl KeyScan for Database {
    fn scan_keys(&mut self, s: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        // A new round starts from RocksDB with everything written taken
        // in, so a round sees every key present when it began.
        if cursor == 0 && self.settle().is_err() {
            return (Vec::new(), None);
        }
        let from = if cursor == 0 { Vec::new() } else { self.scan_after.get(&s).cloned().unwrap_or_default() };
        let is_map = self.descriptors[s as usize].kind == StateKind::Map;
        let mut out: Vec<(u16, Vec<u8>)> = Vec::new();
        let mut last = from.clone();
        // One row per key, but a map has a row per entry: read more for maps.
        let rows_wanted = if is_map { max as usize * 64 + 64 } else { max as usize + 2 };
        let Ok(rows) = self.scan(self.cf(s), b"", &from, rows_wanted) else {
            return (Vec::new(), None);
        };
        // A full read may have stopped inside the state: there is more.
        let mut more = rows.len() == rows_wanted;
        for (key, _) in rows {
            if key == from && cursor != 0 {
                continue;
            }
            let parsed = if is_map {
                split_map_key(&key).map(|(kg, k, _)| (kg, k.to_vec()))
            } else {
                (key.len() >= 2).then(|| (u16::from_be_bytes([key[0], key[1]]), key[2..].to_vec()))
            };
            let Some(entry) = parsed else { continue };
            if out.last() == Some(&entry) {
                last = key;
                continue;
            }
            if out.len() == max as usize {
                more = true;
                break;
            }
            out.push(entry);
            last = key;
        }
        if more {
            self.scan_after.insert(s, last);
            (out, Some(1))
        } else {
            self.scan_after.remove(&s);
            (out, None)
        }
    }
}

impl OperatorState for Database {
    fn operator_list_add(&mut self, s: StateId, values: &[&[u8]]) -> Result<(), StateError> {
        let mut encoded = Vec::new();
        encode_list(&mut encoded, values);
        self.db().merge_cf_opt(self.cf(s), b"", encoded, &self.write).map_err(storage_error)
    }

    fn operator_list_update(&mut self, s: StateId, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        let mut encoded = Vec::new();
        encode_list(&mut encoded, &values.iter().map(Vec::as_slice).collect::<Vec<_>>());
        self.put(s, b"", &encoded)
    }

    fn operator_list_read(&mut self, s: StateId, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        Ok(self.get(s, b"")?.map(|l| page(decode_list(&l), start, max)).unwrap_or_default())
    }

    fn operator_list_len(&mut self, s: StateId) -> Result<u32, StateError> {
        Ok(self.get(s, b"")?.map(|l| decode_list(&l).len() as u32).unwrap_or(0))
    }

    fn broadcast_get(&mut self, s: StateId, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.get(s, uk)
    }

    fn broadcast_put(&mut self, s: StateId, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.put(s, uk, value)
    }

    fn broadcast_remove(&mut self, s: StateId, uk: &[u8]) -> Result<(), StateError> {
        self.delete(s, uk)
    }

    fn broadcast_entries(&mut self, s: StateId, after: Option<&[u8]>, max: u32) -> Result<Vec<MapEntry>, StateError> {
        let mut from = Vec::new();
        if let Some(a) = after {
            from.extend_from_slice(a);
            from.push(0);
        }
        self.scan(self.cf(s), b"", &from, max as usize)
    }

    fn broadcast_len(&mut self, s: StateId) -> Result<usize, StateError> {
        Ok(self.scan(self.cf(s), b"", b"", usize::MAX)?.len())
    }

    fn broadcast_clear(&mut self, s: StateId) -> Result<(), StateError> {
        for (key, _) in self.scan(self.cf(s), b"", b"", usize::MAX)? {
            self.delete(s, &key)?;
        }
        Ok(())
    }
}

impl TimerService for Database {
    fn timer_register(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.check(&k)?;
        let (db, cf) = with_timers(&self.db);
        self.timers.register(db, cf, &self.write, d, timer_key(d, time, k.key_group, k.key))
    }

    fn timer_delete(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.check(&k)?;
        let (db, cf) = with_timers(&self.db);
        self.timers.delete(db, cf, &self.write, d, &timer_key(d, time, k.key_group, k.key))
    }

    fn timer_pop_due(&mut self, d: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)> {
        let (db, cf) = with_timers(&self.db);
        self.timers.pop_due(db, cf, &self.write, d, up_to)
    }

    fn timer_next(&self, d: TimeDomain) -> Option<i64> {
        let (db, cf) = with_timers(&self.db);
        self.timers.next(db, cf, d)
    }

    fn timer_count(&self, d: TimeDomain) -> usize {
        self.timers.count(d)
    }
}

impl Snapshots for Database {
    fn freeze(&mut self) -> Box<dyn FrozenState> {
        Box::new(self.freeze_db())
    }
}

impl Restore for Database {
    fn restore_entry(&mut self, kg: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError> {
        restore_by_calls(self, kg, entry)
    }
}

impl Accounting for Database {
    fn key_count(&self, s: StateId) -> usize {
        let is_map = self.descriptors[s as usize].kind == StateKind::Map;
        let Ok(rows) = self.scan(self.cf(s), b"", b"", usize::MAX) else { return 0 };
        if !is_map {
            return self.value_keys(s, rows.into_iter().map(|(k, _)| k).collect());
        }
        let mut keys: Vec<(u16, Vec<u8>)> =
            rows.iter().filter_map(|(k, _)| split_map_key(k).map(|(kg, key, _)| (kg, key.to_vec()))).collect();
        keys.dedup();
        keys.len()
    }
}

impl Database {
    /// The state now, as [`Snapshots::freeze`] gives it.
    fn freeze_db(&mut self) -> FrozenRocksDb {
        self.freezes += 1;
        // Beside the working directory, not in it: the snapshot may still be
        // uploading when the subtask ends and removes its directory.
        let dir = PathBuf::from(format!("{}.f{}", self.path.display(), self.freezes));
        // The cache's written values become a layer the checkpoint lists
        // beside the database's files: none is written on the record path,
        // and the flush the RocksDB checkpoint makes holds only list, map and
        // timer writes.
        let taken = self.ingest_layers(Wait::Ready).and_then(|()| self.push_layer()).and_then(|()| {
            ::rocksdb::checkpoint::Checkpoint::new(self.db())
                .and_then(|c| c.create_checkpoint(&dir))
                .map_err(storage_error)
        });
        FrozenRocksDb {
            dir,
            failed: taken.err(),
            db: None,
            layers: self.layers.iter().map(|l| l.written.clone()).collect(),
            in_memory: self.layers.iter().map(|l| l.in_memory()).collect(),
            range: self.range,
            descriptors: self.descriptors.clone(),
            timers_by_group: None,
            keyed_only: false,
        }
    }
}

#[cfg(test)]
mod tests;
