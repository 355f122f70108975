//! The RocksDB state backend (Flink's EmbeddedRocksDBStateBackend): one
//! embedded RocksDB per operator subtask, in a working directory of its own
//! under `state.backend.rocksdb.localdir`, removed when the subtask ends.
//! State lives on local disk, so it can grow past memory.
//!
//! Layout: one column family per registered state (`state-<id>`) plus
//! `timers`. Keys start with the key group, big-endian, so one key group is
//! one contiguous range (a scan per key group for snapshots; a range delete
//! to drop one):
//! - value-like and list states: `kg(2) key`;
//! - map states: `kg(2) len(key) as u32 BE, key, user key`, so one key's
//!   map is contiguous and ordered by user key;
//! - timers: `domain(1) time(8, sign-flipped BE) kg(2) key`, ordered as they
//!   fire;
//! - operator lists: one value under the empty key; broadcast maps: user
//!   key to value.
//!
//! Lists are `len(u32 LE) bytes` repeated; appends are RocksDB merges, so
//! adding to a list never reads it. Writes skip the write-ahead log:
//! durability comes from checkpoints.
//!
//! Value-shaped states go through a bounded write-back cache ([`ValueCache`]):
//! a read-modify-write per record then costs a hash lookup instead of a
//! memtable search and insert.
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
//! Snapshots: `freeze` takes a RocksDB checkpoint (memtables flushed, SST
//! files hard-linked into a directory `<working dir>.f<k>` beside the
//! subtask's own, which the snapshot owns and removes), cheap and independent
//! of the state's size beyond the memtable; the background writer opens it
//! read-only and writes the canonical snapshot format from it, key group by
//! key group.

use super::key_group::KeyGroupRange;
use super::ttl::{self, Clock};
use super::{
    FrozenState, KeyRef, MapEntry, Shape, SnapshotEntry, StateBackend, StateDescriptor, StateError, StateId, StateKind,
    TimeDomain, check_registration, push_value,
};
use ::rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, Direction, IteratorMode, MergeOperands, Options, ReadOptions,
    WriteBatch, WriteOptions, compaction_filter::Decision,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

const TIMERS: &str = "timers";

/// Memory settings of one subtask's RocksDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocksDbMemory {
    /// Block cache shared by the column families.
    pub block_cache: usize,
    /// Memtables of all column families together.
    pub write_buffers: usize,
    /// The write-back cache of value states.
    pub write_cache: usize,
}

impl Default for RocksDbMemory {
    fn default() -> Self {
        RocksDbMemory { block_cache: 64 << 20, write_buffers: 64 << 20, write_cache: 64 << 20 }
    }
}

fn storage_error(e: ::rocksdb::Error) -> StateError {
    StateError::Storage(e.to_string())
}

/// List values: `len(u32 LE) bytes`, repeated.
fn encode_list(out: &mut Vec<u8>, values: &[&[u8]]) {
    for v in values {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}

fn decode_list(mut b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let n = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        let end = (4 + n).min(b.len());
        out.push(&b[4..end]);
        b = &b[end..];
    }
    out
}

/// The list merge: concatenation, which is associative.
fn list_append(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands.iter() {
        out.extend_from_slice(op);
    }
    Some(out)
}

fn keyed_key(kg: u16, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + key.len());
    k.extend_from_slice(&kg.to_be_bytes());
    k.extend_from_slice(key);
    k
}

fn map_prefix(kg: u16, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(6 + key.len());
    k.extend_from_slice(&kg.to_be_bytes());
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Splits a map key into (key group, key, user key).
fn split_map_key(k: &[u8]) -> Option<(u16, &[u8], &[u8])> {
    let kg = u16::from_be_bytes(k.get(..2)?.try_into().ok()?);
    let n = u32::from_be_bytes(k.get(2..6)?.try_into().ok()?) as usize;
    let key = k.get(6..6 + n)?;
    Some((kg, key, &k[6 + n..]))
}

fn timer_key(d: TimeDomain, time: i64, kg: u16, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(11 + key.len());
    k.push(domain_byte(d));
    k.extend_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    k.extend_from_slice(&kg.to_be_bytes());
    k.extend_from_slice(key);
    k
}

fn split_timer_key(k: &[u8]) -> Option<(TimeDomain, i64, u16, &[u8])> {
    let d = match *k.first()? {
        0 => TimeDomain::EventTime,
        _ => TimeDomain::ProcessingTime,
    };
    let time = (u64::from_be_bytes(k.get(1..9)?.try_into().ok()?) ^ (1 << 63)) as i64;
    let kg = u16::from_be_bytes(k.get(9..11)?.try_into().ok()?);
    Some((d, time, kg, &k[11..]))
}

fn domain_byte(d: TimeDomain) -> u8 {
    match d {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

/// The smallest key after every key starting with `prefix`, if any.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Removes working directories `<name>-<pid>-<n>` (and frozen checkpoints
/// `<name>-<pid>-<n>.f<k>`) under `localdir` left by processes that no
/// longer run (killed before they could clean up).
fn remove_orphans(localdir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(localdir) else { return };
    for e in entries.flatten() {
        let file_name = e.file_name().to_string_lossy().into_owned();
        let mut parts = file_name.rsplitn(3, '-');
        let (Some(_n), Some(pid), Some(rest)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if rest == name && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!(dir = %e.path().display(), "removing the RocksDB directory of a process that is gone");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn cf_name(id: StateId) -> String {
    format!("state-{id}")
}

fn cf_options(memory: &RocksDbMemory, cache: &Cache) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    o.set_merge_operator_associative("weir-list-append", list_append);
    o.set_compression_type(::rocksdb::DBCompressionType::Lz4);
    o.set_db_write_buffer_size(memory.write_buffers);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    // Index and filters live in the bounded block cache, so memory stays
    // within `block_cache`. Partitioned, so a lookup loads one small filter
    // partition rather than a whole SST file's filter: with whole filters a
    // cache smaller than the filters re-read megabytes per get.
    table.set_cache_index_and_filter_blocks(true);
    table.set_index_type(::rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    o.set_block_based_table_factory(&table);
    o
}

/// The clock of one state's TTL clean-up: unset (nothing expires in
/// compaction) until the TTL layer hands it over.
type ExpiryClock = Arc<OnceLock<Clock>>;

/// Options of a state's column family: `base` plus a compaction filter that
/// drops what expired, once `clock` is set.
fn state_cf_options(base: &Options, shape: Shape, clock: &ExpiryClock) -> Options {
    let mut o = base.clone();
    let clock = clock.clone();
    o.set_compaction_filter("weir-ttl", move |_level: u32, _key: &[u8], value: &[u8]| {
        let Some(now) = clock.get().map(|c| c()) else { return Decision::Keep };
        let expired = |v: &[u8]| ttl::expires_at(v) <= now;
        let drop = match shape {
            Shape::Value | Shape::Map => expired(value),
            // Trimming a list would need `Decision::Change`, which takes a
            // `'static` slice; reads trim lists instead.
            Shape::List => decode_list(value).into_iter().all(expired),
            Shape::OperatorList | Shape::BroadcastMap => false,
        };
        if drop { Decision::Remove } else { Decision::Keep }
    });
    o
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A cached value: the latest one (`None`: absent), and whether RocksDB
/// has it yet.
struct Cached {
    value: Option<Vec<u8>>,
    dirty: bool,
}

/// The write-back cache in front of value-shaped states: reads after the
/// first and every write stay in memory until the cache is full or a
/// checkpoint comes, when the dirty entries go to RocksDB in one sorted
/// write batch. A read-modify-write per record (a counter) then costs a
/// hash lookup, not a memtable search and insert.
#[derive(Default)]
struct ValueCache {
    /// Per state id: encoded key to entry.
    states: Vec<hashbrown::HashMap<Vec<u8>, Cached>>,
    /// Approximate bytes held.
    bytes: usize,
}

impl ValueCache {
    fn get(&self, s: StateId, key: &[u8]) -> Option<&Cached> {
        self.states.get(s as usize)?.get(key)
    }
}

/// A key and its value, copied out of the database.
type Row = (Vec<u8>, Vec<u8>);
/// A key and its value, read from a frozen checkpoint.
type FrozenRow = (Box<[u8]>, Box<[u8]>);
/// A timer of a frozen state, filed under its key group.
type GroupTimer = (TimeDomain, i64, Vec<u8>);

/// State of one operator subtask in an embedded RocksDB.
pub struct RocksDbBackend {
    db: Option<DB>,
    path: PathBuf,
    range: KeyGroupRange,
    descriptors: Vec<StateDescriptor>,
    options: Options,
    write: WriteOptions,
    timer_counts: [usize; 2],
    /// Where `scan_keys` continues, per state (keys are the cursor).
    scan_after: BTreeMap<StateId, Vec<u8>>,
    /// Freezes taken, for unique checkpoint directory names.
    freezes: u64,
    /// Value-state write-back cache, and its byte budget.
    cache: ValueCache,
    cache_limit: usize,
    /// Per state: the clock of its TTL compaction filter.
    expiry: Vec<ExpiryClock>,
}

impl RocksDbBackend {
    /// Opens a fresh database for a subtask owning `range`, in a new
    /// directory under `localdir` named after `name`.
    pub fn open(localdir: &Path, name: &str, range: KeyGroupRange, memory: RocksDbMemory) -> Result<Self, StateError> {
        remove_orphans(localdir, name);
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let path = localdir.join(format!("{name}-{}-{n}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| StateError::Storage(format!("{}: {e}", path.display())))?;
        }
        std::fs::create_dir_all(&path).map_err(|e| StateError::Storage(format!("{}: {e}", path.display())))?;
        let cache = Cache::new_lru_cache(memory.block_cache);
        let options = cf_options(&memory, &cache);
        let db =
            DB::open_cf_descriptors(&options, path.join("db"), [ColumnFamilyDescriptor::new(TIMERS, options.clone())])
                .map_err(storage_error)?;
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        Ok(RocksDbBackend {
            db: Some(db),
            path,
            range,
            descriptors: Vec::new(),
            options,
            write,
            timer_counts: [0, 0],
            scan_after: BTreeMap::new(),
            freezes: 0,
            cache: ValueCache::default(),
            cache_limit: memory.write_cache,
            expiry: Vec::new(),
        })
    }

    /// Opens a database restored from an incremental checkpoint: the files
    /// in `files` (a RocksDB checkpoint directory) become this subtask's
    /// database, with the states `descriptors` describes.
    pub fn adopt(
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
        for (k, _) in b.scan(b.timers(), b"", b"", usize::MAX)? {
            if let Some((d, ..)) = split_timer_key(&k) {
                b.timer_counts[usize::from(domain_byte(d))] += 1;
            }
        }
        Ok(b)
    }

    /// The working directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db(&self) -> &DB {
        self.db.as_ref().expect("open until dropped")
    }

    fn cf(&self, s: StateId) -> &::rocksdb::ColumnFamily {
        self.db().cf_handle(&cf_name(s)).expect("registered state has a column family")
    }

    fn timers(&self) -> &::rocksdb::ColumnFamily {
        self.db().cf_handle(TIMERS).expect("timers column family")
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

    /// Puts a value in the cache, writing everything back first if the
    /// cache is full.
    fn cache_insert(
        &mut self,
        s: StateId,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        dirty: bool,
    ) -> Result<(), StateError> {
        if self.cache.bytes >= self.cache_limit {
            self.write_back()?;
            self.cache.states.iter_mut().for_each(hashbrown::HashMap::clear);
            self.cache.bytes = 0;
        }
        let states = &mut self.cache.states;
        if states.len() <= s as usize {
            states.resize_with(s as usize + 1, hashbrown::HashMap::new);
        }
        let size = key.len() + value.as_ref().map_or(0, Vec::len) + 48;
        match states[s as usize].entry(key) {
            hashbrown::hash_map::Entry::Occupied(mut e) => {
                let c = e.get_mut();
                c.dirty |= dirty;
                c.value = value;
            }
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(Cached { value, dirty });
                self.cache.bytes += size;
            }
        }
        Ok(())
    }

    /// Writes every dirty cached value to RocksDB, in key order, and marks
    /// it clean.
    fn write_back(&mut self) -> Result<(), StateError> {
        if self.cache.bytes == 0 {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        for (i, state) in self.cache.states.iter_mut().enumerate() {
            let mut dirty: Vec<(&Vec<u8>, &mut Cached)> = state.iter_mut().filter(|(_, c)| c.dirty).collect();
            if dirty.is_empty() {
                continue;
            }
            dirty.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let cf = self.db.as_ref().expect("open").cf_handle(&cf_name(i as StateId)).expect("registered");
            for (key, c) in dirty {
                match &c.value {
                    Some(v) => batch.put_cf(cf, key, v),
                    None => batch.delete_cf(cf, key),
                }
                c.dirty = false;
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.db().write_opt(batch, &self.write).map_err(storage_error)
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

impl Drop for RocksDbBackend {
    fn drop(&mut self) {
        drop(self.db.take());
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn page(items: Vec<&[u8]>, start: u32, max: u32) -> Vec<Vec<u8>> {
    items.into_iter().skip(start as usize).take(max as usize).map(<[u8]>::to_vec).collect()
}

impl StateBackend for RocksDbBackend {
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

    fn value_get(&mut self, s: StateId, k: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        self.check(&k)?;
        let key = keyed_key(k.key_group, k.key);
        if let Some(c) = self.cache.get(s, &key) {
            return Ok(c.value.clone());
        }
        let v = self.get(s, &key)?;
        self.cache_insert(s, key, v.clone(), false)?;
        Ok(v)
    }

    fn value_get_many(
        &mut self,
        s: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        for k in keys {
            self.check(k)?;
        }
        let encoded: Vec<Vec<u8>> = keys.iter().map(|k| keyed_key(k.key_group, k.key)).collect();
        // Hits answer from the cache; misses go to RocksDB in one multi-get.
        // Misses enter the cache only once the answers are written: an
        // insert may write the cache back and empty it.
        let hits: Vec<Option<&Cached>> = encoded.iter().map(|k| self.cache.get(s, k)).collect();
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
                Some(c) => c.value.as_deref(),
                None => next.next().and_then(Option::as_deref),
            };
            push_value(out, spans, value);
        }
        drop(hits);
        let mut misses = missing.into_iter().zip(fetched).peekable();
        for (i, key) in encoded.into_iter().enumerate() {
            if let Some((_, v)) = misses.next_if(|(m, _)| *m == i) {
                self.cache_insert(s, key, v, false)?;
            }
        }
        Ok(())
    }

    fn value_set_many(&mut self, s: StateId, keys: &[KeyRef<'_>], values: &[Option<&[u8]>]) -> Result<(), StateError> {
        for (k, v) in keys.iter().zip(values) {
            self.check(k)?;
            self.cache_insert(s, keyed_key(k.key_group, k.key), v.map(<[u8]>::to_vec), true)?;
        }
        Ok(())
    }

    fn value_set(&mut self, s: StateId, k: KeyRef<'_>, value: &[u8]) -> Result<(), StateError> {
        self.check(&k)?;
        self.cache_insert(s, keyed_key(k.key_group, k.key), Some(value.to_vec()), true)
    }

    fn value_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        self.check(&k)?;
        self.cache_insert(s, keyed_key(k.key_group, k.key), None, true)
    }

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

    fn timer_register(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.check(&k)?;
        let key = timer_key(d, time, k.key_group, k.key);
        let timers = self.timers();
        if self.db().get_pinned_cf(timers, &key).map_err(storage_error)?.is_none() {
            self.db().put_cf_opt(timers, &key, b"", &self.write).map_err(storage_error)?;
            self.timer_counts[usize::from(domain_byte(d))] += 1;
        }
        Ok(())
    }

    fn timer_delete(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        self.check(&k)?;
        let key = timer_key(d, time, k.key_group, k.key);
        let timers = self.timers();
        if self.db().get_pinned_cf(timers, &key).map_err(storage_error)?.is_some() {
            self.db().delete_cf_opt(timers, &key, &self.write).map_err(storage_error)?;
            self.timer_counts[usize::from(domain_byte(d))] -= 1;
        }
        Ok(())
    }

    fn timer_pop_due(&mut self, d: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)> {
        let prefix = [domain_byte(d)];
        let (key, _) = self.scan(self.timers(), &prefix, &prefix, 1).ok()?.into_iter().next()?;
        let (_, time, _, k) = split_timer_key(&key)?;
        if time > up_to {
            return None;
        }
        let k = k.to_vec();
        self.db().delete_cf_opt(self.timers(), &key, &self.write).ok()?;
        self.timer_counts[usize::from(domain_byte(d))] -= 1;
        Some((time, k))
    }

    fn timer_next(&self, d: TimeDomain) -> Option<i64> {
        let prefix = [domain_byte(d)];
        let (key, _) = self.scan(self.timers(), &prefix, &prefix, 1).ok()?.into_iter().next()?;
        split_timer_key(&key).map(|(_, t, _, _)| t)
    }

    fn timer_count(&self, d: TimeDomain) -> usize {
        self.timer_counts[usize::from(domain_byte(d))]
    }

    fn scan_keys(&mut self, s: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        // A new round starts from RocksDB with the write-back cache written
        // back, so a round sees every key present when it began.
        if cursor == 0 && self.write_back().is_err() {
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

    fn freeze(&mut self) -> Box<dyn FrozenState> {
        self.freezes += 1;
        // Beside the working directory, not in it: the snapshot may still be
        // uploading when the subtask ends and removes its directory.
        let dir = PathBuf::from(format!("{}.f{}", self.path.display(), self.freezes));
        // The cache's dirty values first: the checkpoint must hold them.
        let taken = self.write_back().map_err(|e| e.to_string()).and_then(|()| {
            ::rocksdb::checkpoint::Checkpoint::new(self.db())
                .and_then(|c| c.create_checkpoint(&dir))
                .map_err(|e| e.to_string())
        });
        Box::new(FrozenRocksDb {
            dir,
            taken,
            db: None,
            range: self.range,
            descriptors: self.descriptors.clone(),
            timers_by_group: None,
        })
    }

    fn key_count(&self, s: StateId) -> usize {
        let is_map = self.descriptors[s as usize].kind == StateKind::Map;
        let Ok(rows) = self.scan(self.cf(s), b"", b"", usize::MAX) else { return 0 };
        if !is_map {
            // RocksDB's keys, as the write-back cache changes them.
            let mut keys: std::collections::BTreeSet<Vec<u8>> = rows.into_iter().map(|(k, _)| k).collect();
            if let Some(cached) = self.cache.states.get(s as usize) {
                for (k, c) in cached {
                    if c.value.is_some() {
                        keys.insert(k.clone());
                    } else {
                        keys.remove(k);
                    }
                }
            }
            return keys.len();
        }
        let mut keys: Vec<(u16, Vec<u8>)> =
            rows.iter().filter_map(|(k, _)| split_map_key(k).map(|(kg, key, _)| (kg, key.to_vec()))).collect();
        keys.dedup();
        keys.len()
    }
}

/// A RocksDB checkpoint of the backend, read on the snapshot writer's
/// thread; removed when dropped.
struct FrozenRocksDb {
    dir: PathBuf,
    taken: Result<(), String>,
    db: Option<DB>,
    range: KeyGroupRange,
    descriptors: Vec<StateDescriptor>,
    timers_by_group: Option<BTreeMap<u16, Vec<GroupTimer>>>,
}

impl FrozenRocksDb {
    fn open(&mut self) -> Result<&DB, StateError> {
        if let Err(e) = &self.taken {
            return Err(StateError::Storage(format!("taking a RocksDB checkpoint failed: {e}")));
        }
        if self.db.is_none() {
            let mut names = vec![TIMERS.to_string()];
            names.extend((0..self.descriptors.len()).map(|i| cf_name(i as StateId)));
            let mut o = Options::default();
            o.set_merge_operator_associative("weir-list-append", list_append);
            let cfs = names.iter().map(|n| {
                let mut c = Options::default();
                c.set_merge_operator_associative("weir-list-append", list_append);
                ColumnFamilyDescriptor::new(n, c)
            });
            self.db = Some(DB::open_cf_descriptors_read_only(&o, &self.dir, cfs, false).map_err(storage_error)?);
        }
        Ok(self.db.as_ref().expect("opened above"))
    }
}

impl Drop for FrozenRocksDb {
    fn drop(&mut self) {
        drop(self.db.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rows(db: &DB, cf: &str, prefix: &[u8]) -> Result<Vec<FrozenRow>, StateError> {
    let cf = db.cf_handle(cf).ok_or_else(|| StateError::Storage(format!("checkpoint lacks column family {cf}")))?;
    let mut ro = ReadOptions::default();
    if let Some(end) = prefix_end(prefix) {
        ro.set_iterate_upper_bound(end);
    }
    let mut out = Vec::new();
    for item in db.iterator_cf_opt(cf, ro, IteratorMode::From(prefix, Direction::Forward)) {
        let (k, v) = item.map_err(storage_error)?;
        if !k.starts_with(prefix) {
            break;
        }
        out.push((k, v));
    }
    Ok(out)
}

impl FrozenState for FrozenRocksDb {
    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }

    fn range(&self) -> KeyGroupRange {
        self.range
    }

    fn key_group(&mut self, kg: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        let shapes: Vec<Shape> = self.descriptors.iter().map(|d| d.kind.shape()).collect();
        let db = self.open()?;
        let prefix = kg.to_be_bytes();
        for (i, shape) in shapes.iter().enumerate() {
            let state = i as StateId;
            match shape {
                Shape::Value => {
                    for (k, v) in rows(db, &cf_name(state), &prefix)? {
                        visit(SnapshotEntry::Value { state, key: &k[2..], value: &v });
                    }
                }
                Shape::List => {
                    for (k, v) in rows(db, &cf_name(state), &prefix)? {
                        for item in decode_list(&v) {
                            visit(SnapshotEntry::ListItem { state, key: &k[2..], value: item });
                        }
                    }
                }
                Shape::Map => {
                    for (k, v) in rows(db, &cf_name(state), &prefix)? {
                        if let Some((_, key, user_key)) = split_map_key(&k) {
                            visit(SnapshotEntry::MapItem { state, key, user_key, value: &v });
                        }
                    }
                }
                Shape::OperatorList | Shape::BroadcastMap => {}
            }
        }
        if self.timers_by_group.is_none() {
            let mut m: BTreeMap<u16, Vec<GroupTimer>> = BTreeMap::new();
            for (k, _) in rows(self.open()?, TIMERS, b"")? {
                if let Some((d, time, tkg, key)) = split_timer_key(&k) {
                    m.entry(tkg).or_default().push((d, time, key.to_vec()));
                }
            }
            self.timers_by_group = Some(m);
        }
        let timers = self.timers_by_group.as_mut().and_then(|m| m.remove(&kg)).unwrap_or_default();
        for (domain, time, key) in timers {
            visit(SnapshotEntry::Timer { domain, time, key: &key });
        }
        Ok(())
    }

    fn native_checkpoint(&self) -> Option<&Path> {
        self.taken.is_ok().then_some(self.dir.as_path())
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        let shapes: Vec<Shape> = self.descriptors.iter().map(|d| d.kind.shape()).collect();
        let db = self.open()?;
        for (i, shape) in shapes.iter().enumerate() {
            let state = i as StateId;
            match shape {
                Shape::OperatorList => {
                    for (_, v) in rows(db, &cf_name(state), b"")? {
                        for item in decode_list(&v) {
                            visit(SnapshotEntry::OperatorItem { state, value: item });
                        }
                    }
                }
                Shape::BroadcastMap => {
                    for (k, v) in rows(db, &cf_name(state), b"")? {
                        visit(SnapshotEntry::BroadcastItem { state, user_key: &k, value: &v });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Reads a RocksDB checkpoint directory (an incremental checkpoint,
/// downloaded) as a canonical snapshot, so any backend at any parallelism
/// can restore the key groups it owns from it.
pub fn checkpoint_to_snapshot(
    dir: &Path,
    descriptors: Vec<StateDescriptor>,
    max_parallelism: u32,
) -> Result<Vec<u8>, super::snapshot::SnapshotError> {
    let mut frozen = FrozenRocksDb {
        dir: dir.to_path_buf(),
        taken: Ok(()),
        db: None,
        range: KeyGroupRange { start: 0, end: max_parallelism as u16 },
        descriptors,
        timers_by_group: None,
    };
    let bytes = super::snapshot::write_snapshot(&mut frozen, max_parallelism);
    // Dropping removes the directory: it was a download.
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let localdir = dir.path().to_path_buf();
        super::super::conformance::run_all(&move |range| {
            Box::new(RocksDbBackend::open(&localdir, "test", range, RocksDbMemory::default()).unwrap())
        });
    }

    #[test]
    fn passes_the_conformance_suite_when_the_write_back_cache_keeps_filling() {
        let dir = tempfile::tempdir().unwrap();
        let localdir = dir.path().to_path_buf();
        let memory = RocksDbMemory { write_cache: 512, ..RocksDbMemory::default() };
        super::super::conformance::run_all(&move |range| {
            Box::new(RocksDbBackend::open(&localdir, "test", range, memory).unwrap())
        });
    }

    #[test]
    fn a_full_write_back_cache_loses_no_value_in_a_batch_read() {
        let dir = tempfile::tempdir().unwrap();
        let range = KeyGroupRange { start: 0, end: 16 };
        let memory = RocksDbMemory { write_cache: 1024, ..RocksDbMemory::default() };
        let mut b = RocksDbBackend::open(dir.path(), "t", range, memory).unwrap();
        let s = b.register(StateKind::Value.descriptor("n")).unwrap();
        let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i}").into_bytes()).collect();
        let refs: Vec<KeyRef<'_>> = keys
            .iter()
            .map(|k| {
                let hash = super::super::key_group::key_hash(k);
                KeyRef { key: k, hash, key_group: super::super::key_group::key_group_of_hash(hash, 16) }
            })
            .collect();
        let values: Vec<Option<&[u8]>> = keys.iter().map(|k| Some(k.as_slice())).collect();
        b.value_set_many(s, &refs, &values).unwrap();
        for _ in 0..3 {
            let (mut out, mut spans) = (Vec::new(), Vec::new());
            b.value_get_many(s, &refs, &mut out, &mut spans).unwrap();
            for (k, (start, len, present)) in keys.iter().zip(spans) {
                assert!(present);
                assert_eq!(&out[start as usize..(start + len) as usize], &k[..]);
            }
        }
        assert_eq!(b.key_count(s), 500);
    }

    impl RocksDbBackend {
        /// Every state's entries on disk, compacted twice (merged lists
        /// reach the compaction filter as values only the second time).
        fn compact_and_count(&mut self) -> Vec<usize> {
            self.write_back().unwrap();
            (0..self.descriptors.len() as StateId)
                .map(|s| {
                    for _ in 0..2 {
                        self.db().flush_cf(self.cf(s)).unwrap();
                        self.db().compact_range_cf(self.cf(s), None::<&[u8]>, None::<&[u8]>);
                    }
                    self.scan(self.cf(s), b"", b"", usize::MAX).unwrap().len()
                })
                .collect()
        }
    }

    #[test]
    fn compaction_drops_what_expired_without_any_access() {
        use crate::state::TtlConfig;
        use crate::state::ttl::TtlBackend;
        use std::sync::atomic::AtomicI64;
        let dir = tempfile::tempdir().unwrap();
        let now = Arc::new(AtomicI64::new(1_000));
        let clock_now = now.clone();
        let clock: Clock = Arc::new(move || clock_now.load(Ordering::SeqCst));
        let range = KeyGroupRange { start: 0, end: 16 };
        let db = RocksDbBackend::open(dir.path(), "t", range, RocksDbMemory::default()).unwrap();
        let mut b = TtlBackend::new(db, clock, 16);
        let ttl = Some(TtlConfig { ttl_ms: 100, renew_on_read: false, return_expired: false });
        let [value, list, map] = [StateKind::Value, StateKind::List, StateKind::Map]
            .map(|kind| b.register(StateDescriptor { ttl, ..kind.descriptor(kind.name()) }).unwrap());
        let plain = b.register(StateKind::Value.descriptor("no-ttl")).unwrap();
        let keys: Vec<Vec<u8>> = (0..300).map(|i| format!("k{i}").into_bytes()).collect();
        fn at(k: &[u8]) -> KeyRef<'_> {
            let hash = super::super::key_group::key_hash(k);
            KeyRef { key: k, hash, key_group: super::super::key_group::key_group_of_hash(hash, 16) }
        }
        for k in &keys {
            b.value_set(value, at(k), b"v").unwrap();
            b.list_add(list, at(k), &[b"old"]).unwrap();
            b.map_put(map, at(k), b"uk", b"m").unwrap();
            b.value_set(plain, at(k), b"kept").unwrap();
        }
        // Written later: 100 keys of each state still live when the rest
        // expired, and 100 lists with one live element among expired ones.
        now.store(1_050, Ordering::SeqCst);
        for k in &keys[..100] {
            b.value_set(value, at(k), b"v2").unwrap();
            b.map_put(map, at(k), b"uk", b"m2").unwrap();
            b.list_add(list, at(k), &[b"new"]).unwrap();
        }
        assert_eq!(b.inner().compact_and_count(), vec![300, 300, 300, 300], "nothing expired yet");
        now.store(1_120, Ordering::SeqCst);
        assert_eq!(b.inner().compact_and_count(), vec![100, 100, 100, 300], "expired entries gone, others kept");
        assert_eq!(b.value_get(value, at(&keys[0])).unwrap().as_deref(), Some(&b"v2"[..]));
        assert_eq!(b.list_read(list, at(&keys[0]), 0, 10).unwrap(), vec![b"new".to_vec()]);
        assert_eq!(b.value_get(value, at(&keys[200])).unwrap(), None);
        now.store(1_200, Ordering::SeqCst);
        assert_eq!(b.inner().compact_and_count(), vec![0, 0, 0, 300]);
    }

    #[test]
    fn the_working_directory_goes_away_with_the_backend() {
        let dir = tempfile::tempdir().unwrap();
        let b = RocksDbBackend::open(dir.path(), "op-0", KeyGroupRange { start: 0, end: 4 }, RocksDbMemory::default())
            .unwrap();
        let path = b.path().to_path_buf();
        assert!(path.join("db").is_dir());
        drop(b);
        assert!(!path.exists());
    }

    #[test]
    fn directories_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        // A pid above Linux's maximum: no such process.
        let orphan = dir.path().join("op-0-4194999-0");
        let other_operator = dir.path().join("op-1-4194999-0");
        std::fs::create_dir_all(&orphan).unwrap();
        std::fs::create_dir_all(&other_operator).unwrap();
        let b = RocksDbBackend::open(dir.path(), "op-0", KeyGroupRange { start: 0, end: 4 }, RocksDbMemory::default())
            .unwrap();
        assert!(!orphan.exists());
        assert!(other_operator.exists(), "only directories of the same subtask name are touched");
        assert!(b.path().exists());
    }

    #[test]
    fn keys_and_timers_sort_as_documented() {
        assert!(timer_key(TimeDomain::EventTime, -5, 0, b"a") < timer_key(TimeDomain::EventTime, 3, 0, b"a"));
        assert!(timer_key(TimeDomain::EventTime, 3, 0, b"b") < timer_key(TimeDomain::EventTime, 3, 1, b"a"));
        assert_eq!(
            split_timer_key(&timer_key(TimeDomain::ProcessingTime, -7, 9, b"k")),
            Some((TimeDomain::ProcessingTime, -7, 9, &b"k"[..]))
        );
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
        let m = {
            let mut k = map_prefix(3, b"key");
            k.extend_from_slice(b"uk");
            k
        };
        assert_eq!(split_map_key(&m), Some((3, &b"key"[..], &b"uk"[..])));
    }
}
