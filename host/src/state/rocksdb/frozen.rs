//! A frozen RocksDB state: a RocksDB checkpoint (hard links of the SST
//! files) and the write-back cache's layers its database had not ingested,
//! opened on the snapshot writer's thread and read key group by key group
//! in the canonical snapshot's terms, each group's values with the layers'
//! over them, read in memory, so a reader never waits for the layers'
//! files; also how a downloaded incremental checkpoint is read
//! ([`open_checkpoint`]), whose layers are files to ingest.

use super::handoff::DatabaseHandOff;
use super::keys::{TIMERS, cf_name, decode_list, list_append, prefix_end, split_map_key, split_timer_key};
use super::layers::{self, InMemory, Written};
use super::storage_error;
use crate::state::key_group::KeyGroupRange;
use crate::state::{
    FrozenState, HandOff, NativeCheckpoint, Shape, SnapshotEntry, StateDescriptor, StateError, StateId, TimeDomain,
};
use ::rocksdb::{ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, ReadOptions};
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A key and its value, read from a frozen checkpoint.
type FrozenRow = (Box<[u8]>, Box<[u8]>);
/// A timer of a frozen state, filed under its key group.
type GroupTimer = (TimeDomain, i64, Vec<u8>);

/// A RocksDB checkpoint of the backend, read on the snapshot writer's
/// thread; removed when dropped.
pub(super) struct FrozenRocksDb {
    /// The checkpoint's directory, removed when this is dropped.
    pub(super) dir: PathBuf,
    /// Why taking the checkpoint failed, if it did: reported on first read.
    pub(super) failed: Option<StateError>,
    pub(super) db: Option<DB>,
    /// The cache's layers the checkpoint's database lacks, oldest first:
    /// their files, for a native checkpoint to store, ...
    pub(super) layers: Vec<Arc<Written>>,
    /// ... and their values in memory, which the canonical reads take
    /// instead (a rescale's hand-off would otherwise wait hundreds of
    /// milliseconds for the files started at its barrier).
    pub(super) in_memory: Vec<InMemory>,
    pub(super) range: KeyGroupRange,
    pub(super) descriptors: Vec<StateDescriptor>,
    pub(super) timers_by_group: Option<BTreeMap<u16, Vec<GroupTimer>>>,
    /// Keyed state only: operator and broadcast state are someone else's
    /// to write (a hand-off's view, whose snapshot carried them).
    pub(super) keyed_only: bool,
}

impl FrozenRocksDb {
    /// The RocksDB checkpoint in `dir` (removed when this is dropped),
    /// holding `range`, with no pending layers.
    pub(super) fn over(dir: PathBuf, range: KeyGroupRange, descriptors: Vec<StateDescriptor>) -> Self {
        FrozenRocksDb {
            dir,
            failed: None,
            db: None,
            layers: Vec::new(),
            in_memory: Vec::new(),
            range,
            descriptors,
            timers_by_group: None,
            keyed_only: false,
        }
    }

    fn open(&mut self) -> Result<&DB, StateError> {
        if let Some(e) = &self.failed {
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
            // A downloaded checkpoint's layers are files beside the
            // database's, ingested in order; a frozen backend's are read
            // from memory (see `in_memory`).
            let db = if layers::has_layers(&self.dir) {
                let db = DB::open_cf_descriptors(&o, &self.dir, cfs).map_err(storage_error)?;
                layers::ingest_dir(&db, &self.dir)?;
                db
            } else {
                DB::open_cf_descriptors_read_only(&o, &self.dir, cfs, false).map_err(storage_error)?
            };
            self.db = Some(db);
        }
        Ok(self.db.as_ref().expect("opened above"))
    }
}

/// Visits the values of state `s` in key group `kg`: the database's
/// `rows` with each layer's writes in that group over them, the newest
/// layer's winning (as ingesting their files in order would). Nothing is
/// copied: the layers' values are visited where they are, after the rows
/// they leave as they were; the order within the group is not kept.
fn visit_with_layers(
    rows: &[FrozenRow],
    layers: &[InMemory],
    s: StateId,
    kg: u16,
    visit: &mut dyn FnMut(SnapshotEntry<'_>),
) {
    let mut written: HashMap<&[u8], Option<&[u8]>> = HashMap::new();
    for layer in layers {
        written.extend(layer.written_in_group(s, kg));
    }
    for (k, v) in rows {
        if !written.contains_key(&k[..]) {
            visit(SnapshotEntry::Value { state: s, key: &k[2..], value: v });
        }
    }
    for (k, v) in written {
        if let Some(value) = v {
            visit(SnapshotEntry::Value { state: s, key: &k[2..], value });
        }
    }
}

impl Drop for FrozenRocksDb {
    fn drop(&mut self) {
        drop(self.db.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(super) fn rows(db: &DB, cf: &str, prefix: &[u8]) -> Result<Vec<FrozenRow>, StateError> {
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
        self.open()?;
        let db = self.db.as_ref().expect("opened above");
        let prefix = kg.to_be_bytes();
        for (i, shape) in shapes.iter().enumerate() {
            let state = i as StateId;
            match shape {
                Shape::Value => {
                    let rows = rows(db, &cf_name(state), &prefix)?;
                    visit_with_layers(&rows, &self.in_memory, state, kg, visit);
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

    fn native_checkpoint(&mut self) -> Option<Result<NativeCheckpoint, StateError>> {
        if self.failed.is_some() {
            // Read as a snapshot, which reports why.
            return None;
        }
        let mut layers = Vec::new();
        for written in &self.layers {
            match written.wait() {
                Ok(files) => layers.extend(files.files.iter().map(|(_, name, path)| (name.clone(), path.clone()))),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(NativeCheckpoint { dir: self.dir.clone(), layers }))
    }

    fn hand_off(&mut self) -> Option<HandOff> {
        match self.handed() {
            Ok(db) => Some(HandOff::Databases(DatabaseHandOff::new(self.range, self.descriptors.clone(), vec![db]))),
            Err(e) => {
                // The state goes as a snapshot instead: slower, not wrong.
                tracing::warn!(error = %e, "handing the database over failed; sending a snapshot");
                None
            }
        }
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        let shapes: Vec<Shape> = self.descriptors.iter().map(|d| d.kind.shape()).collect();
        // Opening the checkpoint takes tens of milliseconds: not for nothing
        // (a rescale's hand-off writes operator state alone, on the pause).
        if self.keyed_only || !shapes.iter().any(|s| matches!(s, Shape::OperatorList | Shape::BroadcastMap)) {
            return Ok(());
        }
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

/// A RocksDB checkpoint directory (an incremental checkpoint, downloaded)
/// as a frozen state holding every key group, so it can be written out in
/// the canonical format and restored by any backend at any parallelism.
/// The directory is removed when the frozen state is dropped.
pub fn open_checkpoint(dir: &Path, descriptors: Vec<StateDescriptor>, max_parallelism: u32) -> Box<dyn FrozenState> {
    Box::new(FrozenRocksDb::over(
        dir.to_path_buf(),
        KeyGroupRange { start: 0, end: max_parallelism as u16 },
        descriptors,
    ))
}
