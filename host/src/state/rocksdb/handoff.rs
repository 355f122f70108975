//! Live rescale of RocksDB state without a snapshot: an old subtask hands
//! over its databases as files, and each new subtask opens a copy of each
//! database that holds some of its key groups, keeping only those.
//!
//! Copying keys into a new database cost as much as a savepoint and a
//! restore (the profile: the write-back cache, the layers' SST files and
//! the pages under both). Here nothing is copied per key. The barrier's
//! freeze already made a RocksDB checkpoint (hard links of the SST files);
//! the hand-off links it once more into a directory of its own, and each
//! new subtask links that into its working directory and opens it. The
//! cut to its own key groups is a range deletion per column family
//! (keys start with the key group), and the timers of other groups are
//! deleted as the timers are counted. The write-back cache's layers the
//! checkpoint lacks go along in memory (shared tables) with their files,
//! which the new database ingests once written, cutting again.
//!
//! Where one new subtask takes all of a database's key groups (the
//! parallelism falling, 3 -> 1 or 4 -> 2), even the open goes: once its
//! checkpoint is frozen and uploading, the old subtask, which ends next,
//! gives the database up open, with its cache, layers and timers, and
//! that new subtask takes it as it is. The files stay for the others.

use super::frozen::FrozenRocksDb;
use super::keys::{TIMERS, cf_name};
use super::layers::Layer;
use super::options::{ExpiryClock, state_cf_options};
use super::timers::Timers;
use super::{Database, ValueCache, storage_error, with_timers, working_dir};
use crate::state::key_group::KeyGroupRange;
use crate::state::{FrozenState, Shape, StateDescriptor, StateError, StateId};
use ::rocksdb::{ColumnFamilyDescriptor, DB, FlushOptions, IteratorMode, Options, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// An old subtask's RocksDB state, handed to the new subtasks of a live
/// rescale: one database, or several if it had taken some over itself.
pub struct DatabaseHandOff {
    /// The old subtask's key groups.
    range: KeyGroupRange,
    /// Its states, as registered (with TTL, once the TTL layer has set
    /// them), for the new subtask's checks.
    descriptors: Vec<StateDescriptor>,
    databases: Vec<HandedDb>,
}

/// One database of a hand-off.
pub(super) struct HandedDb {
    /// The key groups it holds.
    pub(super) range: KeyGroupRange,
    /// A RocksDB checkpoint of it, linked for the hand-off alone; removed
    /// when the last new subtask has linked its own copy.
    dir: PathBuf,
    /// The write-back cache's layers the checkpoint lacks, oldest first.
    layers: Vec<Layer>,
    /// Its states in its own id order (its column families' numbering).
    pub(super) descriptors: Vec<StateDescriptor>,
    /// The database itself, still open, once the old subtask gave it up
    /// ([`RocksDbBackend::give_up_into`](crate::state::Snapshots::give_up_into)):
    /// the new subtask that takes all of its key groups takes it as it is.
    live: Mutex<Option<Database>>,
}

impl Drop for HandedDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl std::fmt::Debug for DatabaseHandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseHandOff")
            .field("range", &self.range)
            .field("databases", &self.databases.iter().map(|d| d.range).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl DatabaseHandOff {
    pub(super) fn new(range: KeyGroupRange, descriptors: Vec<StateDescriptor>, databases: Vec<HandedDb>) -> Self {
        DatabaseHandOff { range, descriptors, databases }
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

    pub(super) fn databases(&self) -> &[HandedDb] {
        &self.databases
    }

    pub(super) fn databases_mut(&mut self) -> &mut [HandedDb] {
        &mut self.databases
    }

    /// How many of its databases were given up open and not taken yet,
    /// and how many it has.
    #[cfg(test)]
    pub fn live_left(&self) -> (usize, usize) {
        let left = self.databases.iter().filter(|d| d.live.lock().is_ok_and(|l| l.is_some())).count();
        (left, self.databases.len())
    }

    /// The key groups of `range` in each handed database, as frozen
    /// states of their keyed entries and timers (operator state went in
    /// the hand-off's snapshot): for a backend that cannot adopt
    /// databases, which restores them as snapshots.
    pub fn views(&self, range: KeyGroupRange) -> Result<Vec<Box<dyn FrozenState>>, StateError> {
        let mut views: Vec<Box<dyn FrozenState>> = Vec::new();
        for (i, handed) in self.databases.iter().enumerate() {
            let range = handed.range.intersect(range);
            if range.is_empty() {
                continue;
            }
            let dir = PathBuf::from(format!("{}.v{i}g{}", handed.dir.display(), range.start));
            link_copy(&handed.dir, &dir)?;
            // Under the hand-off's descriptors (with the TTL layer's TTL),
            // in the database's order.
            let descriptors = handed
                .descriptors
                .iter()
                .map(|d| self.descriptors.iter().find(|h| h.name == d.name).unwrap_or(d).clone())
                .collect();
            let mut frozen = FrozenRocksDb::over(dir, range, descriptors);
            frozen.layers = handed.layers.iter().map(|l| l.written.clone()).collect();
            frozen.in_memory = handed.layers.iter().map(Layer::in_memory).collect();
            frozen.keyed_only = true;
            views.push(Box::new(frozen));
        }
        Ok(views)
    }
}

impl HandedDb {
    /// Puts the old subtask's open database `db` beside its files.
    pub(super) fn give(&mut self, db: Database) {
        *self.live.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(db);
    }

    /// The open database, for the one new subtask that takes all of its
    /// key groups; `None` if it was not given up or is taken.
    pub(super) fn take_live(&self) -> Option<Database> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl FrozenRocksDb {
    /// This frozen database as a hand-off's: its checkpoint linked into a
    /// directory of the hand-off's own (the checkpoint stays, for the
    /// barrier's checkpoint to store), its pending layers shared.
    pub(super) fn handed(&self) -> Result<HandedDb, StateError> {
        if let Some(e) = &self.failed {
            return Err(StateError::Storage(format!("taking a RocksDB checkpoint failed: {e}")));
        }
        let dir = PathBuf::from(format!("{}.h", self.dir.display()));
        link_copy(&self.dir, &dir)?;
        let layers = self.in_memory.iter().zip(&self.layers).map(|(m, w)| m.with_files(w.clone())).collect();
        Ok(HandedDb { range: self.range, dir, layers, descriptors: self.descriptors.clone(), live: Mutex::new(None) })
    }
}

/// Copies the RocksDB checkpoint directory `from` into a new directory
/// `to`: the SST files as hard links (they are never changed), the
/// others (manifest, options, current) as copies, since the database
/// opened there writes to them.
fn link_copy(from: &Path, to: &Path) -> Result<(), StateError> {
    let io = |p: &Path, e: std::io::Error| StateError::Storage(format!("{}: {e}", p.display()));
    std::fs::create_dir(to).map_err(|e| io(to, e))?;
    let copied = (|| {
        for entry in std::fs::read_dir(from).map_err(|e| io(from, e))? {
            let entry = entry.map_err(|e| io(from, e))?;
            let (source, target) = (entry.path(), to.join(entry.file_name()));
            if entry.file_name().to_string_lossy().ends_with(".sst") {
                std::fs::hard_link(&source, &target).map_err(|e| io(&target, e))?;
            } else {
                std::fs::copy(&source, &target).map_err(|e| io(&target, e))?;
            }
        }
        Ok(())
    })();
    if copied.is_err() {
        let _ = std::fs::remove_dir_all(to);
    }
    copied
}

/// The first key past every key group: keys start with the group, big
/// endian, and a group number is below 2^15.
const PAST_EVERY_GROUP: [u8; 2] = u16::MAX.to_be_bytes();

impl Database {
    /// A database of its own for the key groups `range` of `handed`, in a
    /// new working directory under `localdir`: the handed files linked and
    /// opened with `options` (the home database's: one block cache), the
    /// other key groups and all operator state cut away, the handed layers
    /// read until their files are ingested. `expiry`: the TTL clock of
    /// each handed state, by its id.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn adopt_handed(
        localdir: &Path,
        name: &str,
        options: &Options,
        handed: &HandedDb,
        range: KeyGroupRange,
        cache_limit: usize,
        expiry: Vec<ExpiryClock>,
    ) -> Result<Database, StateError> {
        let path = working_dir(localdir, name)?;
        let db_dir = path.join("db");
        // The files are a checkpoint this process took a moment ago: the
        // statistics an open reads from them are skipped, and their tables
        // are opened on this thread. They are in the page cache, and
        // RocksDB's pool of file-opening threads (16 by default) cost
        // 15-85 ms of waiting per open on 2 busy cores, where this
        // thread alone opens them in about 1 ms.
        let mut options = options.clone();
        options.set_skip_stats_update_on_db_open(true);
        options.set_max_file_opening_threads(1);
        let options = &options;
        let linked = link_copy(&handed.dir, &db_dir);
        let opened = linked.and_then(|()| {
            let mut cfs = vec![ColumnFamilyDescriptor::new(TIMERS, options.clone())];
            for (i, (d, clock)) in handed.descriptors.iter().zip(&expiry).enumerate() {
                let o = state_cf_options(options, d.kind.shape(), clock);
                cfs.push(ColumnFamilyDescriptor::new(cf_name(i as StateId), o));
            }
            DB::open_cf_descriptors(options, &db_dir, cfs).map_err(storage_error)
        });
        let db = match opened {
            Ok(db) => db,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                return Err(e);
            }
        };
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        // From here the working directory is the database's to remove.
        let mut b = Database {
            db: Some(db),
            path,
            range,
            descriptors: handed.descriptors.clone(),
            options: options.clone(),
            write,
            timers: Timers::empty(),
            scan_after: BTreeMap::new(),
            freezes: 0,
            cache: ValueCache::new(range),
            cache_limit,
            layers: handed.layers.iter().cloned().collect(),
            expiry,
        };
        let whole = range.covers(handed.range);
        if !whole {
            b.clip_keyed()?;
        }
        b.clear_operator_state()?;
        let (db, cf) = with_timers(&b.db);
        b.timers = Timers::restored_in(db, cf, &b.write, (!whole).then_some(range))?;
        b.flush_in_background()?;
        Ok(b)
    }

    /// This database, given up whole by an old subtask at a live rescale,
    /// as a new subtask's: with its share `cache_limit` of the write-back
    /// cache's budget, and no operator state (the new subtask's share of
    /// it came in the hand-off's snapshot, into its home). Its files,
    /// cache, layers and timers stay as they are; its block cache stays the
    /// old subtask's, so the job's memory is what it was until a restart.
    pub(super) fn taken_live(mut self, cache_limit: usize) -> Result<Database, StateError> {
        self.cache_limit = cache_limit;
        self.scan_after.clear();
        self.clear_operator_state()?;
        Ok(self)
    }

    /// Starts a flush of every column family's memtable, not waiting for
    /// it: the deletions of the cut would otherwise be written by the next
    /// freeze, in the pause of the next checkpoint or rescale (10-15 ms
    /// each on 2 cores).
    fn flush_in_background(&self) -> Result<(), StateError> {
        let mut flush = FlushOptions::default();
        flush.set_wait(false);
        let mut cfs = vec![self.db().cf_handle(TIMERS).expect("the timers column family")];
        cfs.extend((0..self.descriptors.len() as StateId).map(|s| self.cf(s)));
        self.db().flush_cfs_opt(&cfs, &flush).map_err(storage_error)
    }

    /// Deletes the keyed entries of key groups outside the range.
    pub(super) fn clip_keyed(&self) -> Result<(), StateError> {
        let (start, end) = (self.range.start.to_be_bytes(), self.range.end.to_be_bytes());
        let mut batch = WriteBatch::default();
        for (i, d) in self.descriptors.iter().enumerate() {
            if matches!(d.kind.shape(), Shape::Value | Shape::List | Shape::Map) {
                let cf = self.cf(i as StateId);
                if self.range.start > 0 {
                    batch.delete_range_cf(cf, [0u8, 0], start);
                }
                batch.delete_range_cf(cf, end, PAST_EVERY_GROUP);
            }
        }
        self.db().write_opt(batch, &self.write).map_err(storage_error)
    }

    /// Deletes every operator list and broadcast entry: a database taken
    /// over at a rescale holds keyed state only (the new subtask's share of
    /// operator state came in the hand-off's snapshot, into its home).
    fn clear_operator_state(&self) -> Result<(), StateError> {
        let mut batch = WriteBatch::default();
        for (i, d) in self.descriptors.iter().enumerate() {
            if matches!(d.kind.shape(), Shape::OperatorList | Shape::BroadcastMap) {
                let cf = self.cf(i as StateId);
                for item in self.db().iterator_cf(cf, IteratorMode::Start) {
                    batch.delete_cf(cf, item.map_err(storage_error)?.0);
                }
            }
        }
        self.db().write_opt(batch, &self.write).map_err(storage_error)
    }

    /// About how many keyed entries the database holds (RocksDB's estimate,
    /// which counts deleted ones until compaction).
    pub(super) fn estimated_entries(&self) -> u64 {
        (0..self.descriptors.len() as StateId)
            .filter_map(|s| self.db().property_int_value_cf(self.cf(s), "rocksdb.estimate-num-keys").ok().flatten())
            .sum()
    }
}
