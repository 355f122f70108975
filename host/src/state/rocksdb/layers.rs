//! Layers of the write-back cache: the values written since the last
//! layer, frozen at a barrier or when the cache fills, and taken into the
//! database off the record path.
//!
//! Writing a million cached values into the memtables, and flushing those
//! before a RocksDB checkpoint, took about a second on the record thread.
//! Instead, the cache freezes (pointer copies of its tables, see
//! [`ValueCache::freeze`](super::cache::ValueCache::freeze)) into an
//! immutable [`Layer`], a thread of the layer's own writes the values the
//! layer's generation wrote, sorted, as one SST file per state, and the
//! backend *ingests* the files into its database once they are written,
//! oldest layer first, between two state calls. Until then a layer answers
//! the reads the cache cannot (it was cleared when full), newest first. A
//! checkpoint taken meanwhile is the database's RocksDB checkpoint plus the
//! layers it has not ingested yet, in order ([`LAYER_PREFIX`] files, named
//! so that their order is their names' order); whoever opens it ingests
//! them in that order ([`ingest_dir`]), which gives the database the layer
//! values over the older ones as ingestion assigns newer sequence numbers.
//!
//! Value states are written only through layers, so their column families'
//! memtables stay empty: an ingestion never waits for a flush, and the
//! flush inside a RocksDB checkpoint holds only list, map and timer writes.

use super::cache::{Layout, Tables, lookup};
use super::keys::cf_name;
use super::storage_error;
use crate::state::key_group::KeyGroupRange;
use crate::state::{StateError, StateId};
use ::rocksdb::{DB, IngestExternalFileOptions, Options, SstFileWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Names of layer files in a checkpoint: `WEIR-LAYER-<seq>-<state>.sst`,
/// `seq` zero-padded to 20 digits.
pub const LAYER_PREFIX: &str = "WEIR-LAYER-";

/// Layer numbers, unique in the process: stored layer files are named
/// after them, so a rebuilt backend cannot reuse a stored name.
static NEXT_LAYER: AtomicU64 = AtomicU64::new(1);

/// Names of the links a layer file is ingested through, unique in the
/// process.
static NEXT_LINK: AtomicU64 = AtomicU64::new(1);

/// Layer writer threads still running. A subtask may end with its last
/// layer still being written (a checkpoint may be storing it), and RocksDB
/// tears its static state down as the process exits: a writer still in
/// RocksDB then aborts the process ("pthread lock: Invalid argument") after
/// the job succeeded. The process waits for them ([`wait_for_writers`]).
static WRITERS: Writers = Writers { running: Mutex::new(0), idle: Condvar::new() };

struct Writers {
    running: Mutex<usize>,
    idle: Condvar,
}

/// One running writer thread, counted until it is dropped, the last thing
/// the thread does.
struct Running;

impl Running {
    fn start() -> Running {
        *WRITERS.running.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = WRITERS.running.lock().unwrap_or_else(PoisonError::into_inner);
        *running -= 1;
        if *running == 0 {
            WRITERS.idle.notify_all();
        }
    }
}

/// Waits, at most `limit`, until no layer is being written; whether none
/// is. The process calls it before it exits.
pub fn wait_for_writers(limit: Duration) -> bool {
    let running = WRITERS.running.lock().unwrap_or_else(PoisonError::into_inner);
    let (running, _) =
        WRITERS.idle.wait_timeout_while(running, limit, |n| *n > 0).unwrap_or_else(PoisonError::into_inner);
    *running == 0
}

/// A layer's SST files, once written; the directory goes when the last
/// holder (the backend until it ingested them, checkpoints until they are
/// stored) lets go.
pub(super) struct LayerFiles {
    dir: PathBuf,
    /// Per state with entries: the stored name and the local file.
    pub(super) files: Vec<(StateId, String, PathBuf)>,
}

impl Drop for LayerFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a layer's writing stands, shared by its writer thread, the
/// backend and the checkpoints that include the layer.
#[derive(Default)]
pub(super) struct Written {
    done: AtomicBool,
    result: Mutex<Option<Result<Arc<LayerFiles>, StateError>>>,
    ready: Condvar,
}

impl Written {
    fn finish(&self, result: Result<Arc<LayerFiles>, StateError>) {
        *self.result.lock().expect("not poisoned") = Some(result);
        self.done.store(true, Ordering::Release);
        self.ready.notify_all();
    }

    /// Whether the files are written (or failed): waiting would not block.
    pub(super) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The files, waiting until they are written.
    pub(super) fn wait(&self) -> Result<Arc<LayerFiles>, StateError> {
        let mut slot = self.result.lock().expect("not poisoned");
        while slot.is_none() {
            slot = self.ready.wait(slot).expect("not poisoned");
        }
        match slot.as_ref().expect("set above") {
            Ok(files) => Ok(files.clone()),
            Err(e) => Err(StateError::Storage(format!("writing a cache layer: {e}"))),
        }
    }
}

/// The cache at one instant, its generation's written values being
/// written as SST files.
#[derive(Clone)]
pub(super) struct Layer {
    tables: Arc<Tables>,
    layout: Layout,
    /// The generation whose written values the layer hands over.
    pub(super) generation: u64,
    pub(super) written: Arc<Written>,
}

impl Layer {
    /// Takes the cache's frozen `tables` as a layer and starts writing the
    /// values `generation` wrote into a directory named after `base`
    /// (beside the working directory: a checkpoint may still be storing the
    /// files when the subtask ends). `options` are the database's, so the
    /// files are what a flush would have written.
    pub(super) fn start(base: &Path, (tables, generation): (Tables, u64), layout: Layout, options: &Options) -> Layer {
        let seq = NEXT_LAYER.fetch_add(1, Ordering::Relaxed);
        let dir = PathBuf::from(format!("{}.L{seq}", base.display()));
        let tables = Arc::new(tables);
        let written = Arc::new(Written::default());
        let job = {
            let (tables, written, options) = (tables.clone(), written.clone(), options.clone());
            move || written.finish(write(&dir, seq, (&tables, layout), generation, &options).map(Arc::new))
        };
        // Written on this thread if no thread can be started: slower, not wrong.
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        // Dropped with the closure: at the thread's end, or here if it
        // cannot start.
        let running = Running::start();
        let spawned = std::thread::Builder::new().name(format!("weir-layer-{seq}")).spawn(move || {
            let _running = running;
            if let Ok(job) = rx.recv() {
                job();
            }
        });
        match spawned {
            Ok(_) => {
                let _ = tx.send(Box::new(job));
            }
            Err(_) => job(),
        }
        Layer { tables, layout, generation, written }
    }

    /// The value this layer holds for `key` of state `s`, if any: as the
    /// cache had it when frozen.
    pub(super) fn get(&self, s: StateId, key: &[u8], hash: u64) -> Option<Option<&[u8]>> {
        lookup(&self.tables, &self.layout, s, key, hash).map(|c| c.value())
    }

    /// The layer's values as they are in memory, for a frozen state to
    /// read without waiting for its files.
    pub(super) fn in_memory(&self) -> InMemory {
        InMemory { tables: self.tables.clone(), layout: self.layout, generation: self.generation }
    }

    /// The key groups the layer may hold values of.
    pub(super) fn range(&self) -> KeyGroupRange {
        self.layout.range()
    }

    /// The values of state `s` written in this layer's generation.
    pub(super) fn written_values(&self, s: StateId) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let generation = self.generation;
        self.tables
            .get(s as usize)
            .into_iter()
            .flatten()
            .flat_map(move |t| t.iter().filter(move |(_, c)| c.written == generation).map(|(k, c)| (&k[..], c.value())))
    }
}

/// A layer's values in memory (the same tables its files are written
/// from): what a frozen state reads when it cannot wait for the files.
#[derive(Clone)]
pub(super) struct InMemory {
    tables: Arc<Tables>,
    layout: Layout,
    generation: u64,
}

impl InMemory {
    /// The layer again, its files those `written` is writing: a frozen
    /// state's layer, handed to another database at a live rescale.
    pub(super) fn with_files(&self, written: Arc<Written>) -> Layer {
        Layer { tables: self.tables.clone(), layout: self.layout, generation: self.generation, written }
    }

    /// The values of state `s` in key group `kg` that the layer's
    /// generation wrote (`None`: deleted), in no order.
    pub(super) fn written_in_group(&self, s: StateId, kg: u16) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let generation = self.generation;
        let tables = self.tables.get(s as usize).zip(self.layout.group(kg)).and_then(|(t, r)| t.get(r));
        tables
            .into_iter()
            .flatten()
            .flat_map(move |t| t.iter().filter(move |(_, c)| c.written == generation).map(|(k, c)| (&k[..], c.value())))
    }
}

/// Writes one SST file per state with values written in `generation`,
/// sorted by key; a `None` value is a deletion.
fn write(
    dir: &Path,
    seq: u64,
    (tables, layout): (&Tables, Layout),
    generation: u64,
    options: &Options,
) -> Result<LayerFiles, StateError> {
    std::fs::create_dir_all(dir).map_err(|e| StateError::Storage(format!("{}: {e}", dir.display())))?;
    // Removes the directory if writing fails half-way.
    let mut layer = LayerFiles { dir: dir.to_path_buf(), files: Vec::new() };
    for (s, groups) in tables.iter().enumerate() {
        // Keys start with their key group, big-endian, and the tables are in
        // key-group order: sorting each group's tables together sorts all.
        // Sized once for every entry the tables hold (those of older
        // generations are skipped, so it may be too large, never too
        // small): grown by doubling, the list of a layer of a few hundred
        // thousand values was copied and faulted into fresh pages over and
        // over (a profile of a RocksDB rescale showed it).
        let mut sorted: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(groups.iter().map(|t| t.len()).sum());
        for group in groups.chunks(layout.parts) {
            let start = sorted.len();
            for table in group {
                sorted.extend(table.iter().filter(|(_, c)| c.written == generation).map(|(k, c)| (&k[..], c.value())));
            }
            sorted[start..].sort_unstable_by(|a, b| a.0.cmp(b.0));
        }
        if sorted.is_empty() {
            continue;
        }
        let s = s as StateId;
        let name = layer_name(seq, s);
        let path = dir.join(&name);
        let failed = |e: ::rocksdb::Error| StateError::Storage(format!("{}: {e}", path.display()));
        let mut writer = SstFileWriter::create(options);
        writer.open(&path).map_err(failed)?;
        for (key, value) in sorted {
            match value {
                Some(v) => writer.put(key, v),
                None => writer.delete(key),
            }
            .map_err(failed)?;
        }
        writer.finish().map_err(failed)?;
        layer.files.push((s, name, path));
    }
    Ok(layer)
}

/// `WEIR-LAYER-<seq>-<state>.sst`.
fn layer_name(seq: u64, s: StateId) -> String {
    format!("{LAYER_PREFIX}{seq:020}-{s}.sst")
}

/// The state a layer file's name is for, if it is one.
fn parse_layer_name(name: &str) -> Option<StateId> {
    let rest = name.strip_prefix(LAYER_PREFIX)?.strip_suffix(".sst")?;
    let (seq, state) = rest.split_once('-')?;
    (seq.len() == 20 && seq.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
    state.parse().ok()
}

/// Ingests `file` into state `s`'s column family, moving it into the
/// database. Keys the layer holds get newer sequence numbers than every
/// value already there, so the layer's values win.
pub(super) fn ingest(db: &DB, s: StateId, file: &Path) -> Result<(), StateError> {
    let cf = db
        .cf_handle(&cf_name(s))
        .ok_or_else(|| StateError::Storage(format!("{} is for state {s}, which is not registered", file.display())))?;
    let mut o = IngestExternalFileOptions::default();
    o.set_move_files(true);
    db.ingest_external_file_cf_opts(cf, &o, vec![file]).map_err(storage_error)
}

/// Ingests a written layer into `db`, through hard links of its files, so
/// that the files stay for the checkpoints that list them (and for the
/// other databases a live rescale handed the layer to, which link it under
/// names of their own).
pub(super) fn ingest_layer(db: &DB, files: &LayerFiles) -> Result<(), StateError> {
    for (s, _, path) in &files.files {
        let link = path.with_extension(format!("ingest{}", NEXT_LINK.fetch_add(1, Ordering::Relaxed)));
        std::fs::hard_link(path, &link).map_err(|e| StateError::Storage(format!("{}: {e}", link.display())))?;
        ingest(db, *s, &link)?;
    }
    Ok(())
}

/// Ingests the layer files a checkpoint directory holds, in the order of
/// their names (the order the layers were taken in); each is moved into
/// the database.
pub(super) fn ingest_dir(db: &DB, dir: &Path) -> Result<(), StateError> {
    let read = |e: std::io::Error| StateError::Storage(format!("{}: {e}", dir.display()));
    let mut layers: Vec<(String, StateId)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let name = entry.map_err(read)?.file_name().to_string_lossy().into_owned();
        if name.starts_with(LAYER_PREFIX) {
            let s = parse_layer_name(&name)
                .ok_or_else(|| StateError::Storage(format!("{}: not a layer file name: {name}", dir.display())))?;
            layers.push((name, s));
        }
    }
    layers.sort();
    for (name, s) in layers {
        ingest(db, s, &dir.join(name))?;
    }
    Ok(())
}

/// Whether `dir` holds layer files.
pub(super) fn has_layers(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().starts_with(LAYER_PREFIX)))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names_sort_in_layer_order_and_parse_back() {
        let mut names = vec![layer_name(10, 2), layer_name(9, 3), layer_name(100, 0)];
        names.sort();
        assert_eq!(names, vec![layer_name(9, 3), layer_name(10, 2), layer_name(100, 0)]);
        assert_eq!(parse_layer_name(&layer_name(7, 4)), Some(4));
        for bad in ["WEIR-LAYER-1-0.sst", "WEIR-LAYER-00000000000000000001-x.sst", "WEIR-LAYER-00000000000000000001-0"]
        {
            assert_eq!(parse_layer_name(bad), None, "{bad}");
        }
    }
}
