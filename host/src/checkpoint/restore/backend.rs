//! Opening one operator subtask's state backend, empty or with its state
//! from a checkpoint or savepoint as a [`SubtaskPlan`] says: the single
//! place where restored bytes become live state. Also reads any stored
//! subtask state as a canonical snapshot stream ([`read_canonical`]), which
//! `host inspect` shares, and copies an incremental checkpoint's RocksDB
//! files into a local directory ([`download_rocksdb`]). Stored bytes are
//! streamed, never held whole: snapshot sections are bounded by
//! `state.checkpoints.max_section_size`, files by `max_file_size`.

use super::plan::{SourceForm, SubtaskPlan, plan_subtask};
use super::{RestoreError, RestoreSource, Restored};
use crate::checkpoint::metadata::DbFile;
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::upload::DESCRIPTORS_FILE;
use crate::clock::Clock;
use crate::config::{BackendKind, RocksDbSettings};
#[cfg(feature = "rocksdb")]
use crate::state::Registry;
use crate::state::hashmap::HashMapBackend;
use crate::state::key_group::KeyGroupRange;
use crate::state::snapshot::{decode_descriptors, restore_snapshot_stream_within};
use crate::state::ttl::TtlBackend;
use crate::state::{StateBackend, StateDescriptor};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// How a subtask's backend is built.
#[derive(Clone)]
pub struct BackendSpec {
    /// Which backend.
    pub kind: BackendKind,
    /// RocksDB options (for that backend, and as scratch space for
    /// downloads).
    pub rocksdb: RocksDbSettings,
    /// The job's key groups.
    pub max_parallelism: u32,
    /// Processing time, for state TTL.
    pub clock: Clock,
}

/// What a subtask restores: the checkpoint, its operator's state in it,
/// and the plan.
#[derive(Debug, Clone)]
pub struct SubtaskRestore {
    /// The checkpoint or savepoint.
    pub from: Arc<Restored>,
    /// The operator's state in it, one entry per old subtask.
    pub sources: Arc<Vec<RestoreSource>>,
    /// What this subtask takes.
    pub plan: SubtaskPlan,
}

impl SubtaskRestore {
    /// What subtask `subtask` of operator `uid`, at `parallelism` over
    /// `max_parallelism` key groups on `backend`, restores from `from`;
    /// `None` when it holds no state of that operator.
    pub fn plan(
        from: &Arc<Restored>,
        uid: &str,
        subtask: u32,
        parallelism: u32,
        max_parallelism: u32,
        backend: BackendKind,
    ) -> Option<SubtaskRestore> {
        let sources = from.states.get(uid)?.clone();
        let forms: Vec<SourceForm> = sources
            .iter()
            .map(|s| match s {
                RestoreSource::Rocksdb(_) => SourceForm::RocksdbFiles,
                RestoreSource::Snapshot(_) | RestoreSource::File { .. } => SourceForm::Canonical,
            })
            .collect();
        let same_key_groups = from.metadata.max_parallelism == max_parallelism;
        let plan = plan_subtask(&forms, subtask, parallelism, same_key_groups, backend);
        Some(SubtaskRestore { from: from.clone(), sources, plan })
    }
}

/// A subtask's backend, opened.
pub struct Opened {
    /// The backend, with the TTL layer on top.
    pub backend: Box<dyn StateBackend>,
    /// Stored files its database keeps under their stored names (an
    /// incremental uploader need not store them again).
    pub adopted: Vec<DbFile>,
    /// What was restored into it.
    pub restored: Restore,
}

/// What opening a backend restored, for the log.
#[derive(Debug, Clone, Copy, Default)]
pub struct Restore {
    /// Entries inserted from snapshots.
    pub entries: u64,
    /// Stored bytes read or taken over (snapshots, RocksDB files).
    pub bytes: u64,
}

/// Opens the backend of subtask `name` (`<uid>-<subtask>`), owning `range`,
/// with the state `restore` gives it (none: empty).
pub fn open_backend(
    spec: &BackendSpec,
    name: &str,
    range: KeyGroupRange,
    restore: Option<&SubtaskRestore>,
) -> Result<Opened, RestoreError> {
    let adopt = restore.and_then(|r| Some((r, r.plan.adopt?)));
    let mut opened = match adopt {
        Some((r, i)) => adopt_files(spec, name, range, r, i)?,
        None => Opened { backend: empty(spec, name, range)?, adopted: Vec::new(), restored: Restore::default() },
    };
    let Some(r) = restore else { return Ok(opened) };
    for &(i, share) in &r.plan.read {
        let scratch = scratch_dir(spec)?;
        let source =
            r.sources.get(i).ok_or_else(|| RestoreError::BadUri(format!("{}: subtask {i}", r.from.location)))?;
        let mut reader = read_canonical(&r.from.storage, source, r.from.metadata.max_parallelism, scratch.path())?;
        let max_section = r.from.storage.limits().max_section_size;
        let backend = opened.backend.as_mut();
        let summary =
            restore_snapshot_stream_within(&mut reader, backend, range, spec.max_parallelism, share, max_section)
                .map_err(|source| RestoreError::Snapshot {
                    location: format!("{}: state of subtask {i}", r.from.location),
                    cause: source,
                })?;
        opened.restored.entries += summary.entries;
        opened.restored.bytes += source.size();
    }
    Ok(opened)
}

/// An empty backend of `spec`'s kind.
fn empty(spec: &BackendSpec, name: &str, range: KeyGroupRange) -> Result<Box<dyn StateBackend>, RestoreError> {
    let _ = name;
    match spec.kind {
        BackendKind::HashMap => {
            Ok(Box::new(TtlBackend::new(HashMapBackend::new(range), spec.clock.clone(), spec.max_parallelism)))
        }
        #[cfg(feature = "rocksdb")]
        BackendKind::RocksDb => {
            use crate::state::rocksdb::RocksDbBackend;
            local_dir(spec)?;
            let db = RocksDbBackend::open(&spec.rocksdb.localdir, name, range, memory(&spec.rocksdb))?;
            Ok(Box::new(TtlBackend::new(db, spec.clock.clone(), spec.max_parallelism)))
        }
        #[cfg(not(feature = "rocksdb"))]
        BackendKind::RocksDb => Err(crate::state::StateError::Unsupported {
            name: name.to_string(),
            what: "the RocksDB backend (this host was built without the `rocksdb` feature)",
        }
        .into()),
    }
}

#[cfg(feature = "rocksdb")]
fn memory(s: &RocksDbSettings) -> crate::state::rocksdb::RocksDbMemory {
    crate::state::rocksdb::RocksDbMemory {
        block_cache: s.block_cache as usize,
        write_buffers: s.write_buffers as usize,
        write_cache: s.write_cache as usize,
    }
}

/// Takes over old subtask `i`'s incremental RocksDB files as this
/// subtask's database.
fn adopt_files(
    spec: &BackendSpec,
    name: &str,
    range: KeyGroupRange,
    r: &SubtaskRestore,
    i: usize,
) -> Result<Opened, RestoreError> {
    let Some(RestoreSource::Rocksdb(files)) = r.sources.get(i) else {
        // The plan adopts only RocksDB files; anything else is read.
        return Err(RestoreError::BadUri(format!("{}: subtask {i} holds no RocksDB files", r.from.location)));
    };
    #[cfg(feature = "rocksdb")]
    {
        use crate::state::rocksdb::RocksDbBackend;
        let scratch = scratch_dir(spec)?;
        let descriptors = download_rocksdb(&r.from.storage, files, scratch.path(), &r.from.location)?;
        // The database holds values as the TTL layer stored them: it sees
        // the states without TTL, and the layer over it registers them
        // again in stored order, so their ids line up.
        let inner: Vec<StateDescriptor> =
            descriptors.iter().map(|d| StateDescriptor { ttl: None, ..d.clone() }).collect();
        let db =
            RocksDbBackend::adopt(&spec.rocksdb.localdir, name, range, memory(&spec.rocksdb), scratch.path(), inner)?;
        let mut backend = TtlBackend::new(db, spec.clock.clone(), spec.max_parallelism);
        for d in descriptors {
            backend.register(d)?;
        }
        // Only the files the database keeps under their names count as
        // stored: a file of the same name written later is then the same
        // file. Taking an ingested layer's name as stored would let a new
        // layer of that name pass for it, and a checkpoint hold old values.
        let adopted = files.iter().filter(|f| RocksDbBackend::keeps_name(&f.name)).cloned().collect();
        let bytes = files.iter().map(|f| f.size).sum();
        Ok(Opened { backend: Box::new(backend), adopted, restored: Restore { bytes, ..Restore::default() } })
    }
    #[cfg(not(feature = "rocksdb"))]
    {
        let _ = (spec, name, range, files);
        Err(crate::state::StateError::Unsupported { name: name.to_string(), what: "restoring RocksDB files" }.into())
    }
}

/// The RocksDB local directory, created 0700 if missing, and refused if it
/// is a link, belongs to another user or others may write it: they could
/// plant or swap the databases and checkpoints it holds.
fn local_dir(spec: &BackendSpec) -> Result<&Path, RestoreError> {
    let dir = &spec.rocksdb.localdir;
    crate::checkpoint::storage::local::beneath::ensure_private_dir(dir, false)
        .map_err(|e| RestoreError::Storage(StorageError::Local(e)))?;
    Ok(dir)
}

/// A scratch directory for downloads, under the RocksDB local directory
/// (where restored files end up, so adopting them is a rename), removed
/// when dropped.
fn scratch_dir(spec: &BackendSpec) -> Result<tempfile::TempDir, RestoreError> {
    let dir = local_dir(spec)?;
    tempfile::Builder::new()
        .prefix("restore-")
        .tempdir_in(dir)
        .map_err(|cause| RestoreError::Local { path: dir.to_path_buf(), cause })
}

/// One stored subtask state as a canonical snapshot stream, whatever form
/// it was stored in: inline bytes, a snapshot file (streamed from storage),
/// or an incremental RocksDB checkpoint (downloaded into `scratch` and
/// converted into a snapshot file there). `max_parallelism` is the
/// checkpoint's.
pub fn read_canonical<'a>(
    storage: &'a CheckpointStorage,
    source: &'a RestoreSource,
    max_parallelism: u32,
    scratch: &Path,
) -> Result<Box<dyn Read + 'a>, RestoreError> {
    match source {
        RestoreSource::Snapshot(bytes) => Ok(Box::new(&bytes[..])),
        RestoreSource::File { path, size, crc32 } => Ok(Box::new(storage.open_reader(path, *size, *crc32)?)),
        RestoreSource::Rocksdb(files) => {
            if !cfg!(feature = "rocksdb") {
                // Nothing could convert the files: fetch none of them.
                return Err(without_rocksdb());
            }
            let location = storage.display().to_string();
            let db = scratch.join("db");
            let descriptors = download_rocksdb(storage, files, &db, &location)?;
            let converted = scratch.join("snapshot");
            convert_rocksdb(&db, descriptors, max_parallelism, &converted)?;
            let file = std::fs::File::open(&converted)
                .map_err(|cause| RestoreError::Local { path: converted.clone(), cause })?;
            Ok(Box::new(std::io::BufReader::with_capacity(1 << 20, file)))
        }
    }
}

/// Writes the RocksDB checkpoint in `db` as a canonical snapshot file.
#[cfg(feature = "rocksdb")]
fn convert_rocksdb(
    db: &Path,
    descriptors: Vec<StateDescriptor>,
    max_parallelism: u32,
    to: &Path,
) -> Result<(), RestoreError> {
    use crate::state::snapshot::SnapshotError;
    use std::io::Write;
    /// Either side of the conversion.
    enum Failed {
        Read(SnapshotError),
        Write(std::io::Error),
    }
    impl From<SnapshotError> for Failed {
        fn from(e: SnapshotError) -> Self {
            Failed::Read(e)
        }
    }
    let mut frozen = crate::state::rocksdb::open_checkpoint(db, descriptors, max_parallelism);
    let file = std::fs::File::create(to).map_err(|cause| RestoreError::Local { path: to.to_path_buf(), cause })?;
    let mut out = std::io::BufWriter::new(file);
    crate::state::snapshot::write_snapshot_streamed::<Failed>(frozen.as_mut(), max_parallelism, 1 << 20, &mut |p| {
        out.write_all(p).map_err(Failed::Write)
    })
    .and_then(|()| out.flush().map_err(Failed::Write))
    .map_err(|e| match e {
        Failed::Read(source) => RestoreError::Snapshot { location: db.display().to_string(), cause: source },
        Failed::Write(source) => RestoreError::Local { path: to.to_path_buf(), cause: source },
    })
}

#[cfg(not(feature = "rocksdb"))]
fn convert_rocksdb(
    _db: &Path,
    _descriptors: Vec<StateDescriptor>,
    _max_parallelism: u32,
    _to: &Path,
) -> Result<(), RestoreError> {
    Err(without_rocksdb())
}

/// Why a host built without RocksDB cannot read an incremental checkpoint.
fn without_rocksdb() -> RestoreError {
    crate::state::StateError::Unsupported {
        name: "(incremental checkpoint)".into(),
        what: "reading RocksDB files (this host was built without the `rocksdb` feature)",
    }
    .into()
}

/// Downloads an incremental checkpoint's files into `dir` (created; it must
/// not exist yet); returns the state descriptors stored with them. A file
/// is written only under a plain name directly inside `dir`. Every file's
/// size is checked against `state.checkpoints.max_file_size` before any is
/// fetched; each is then streamed to disk ([`copy_stored`]), never held in
/// memory whole, and only the descriptors are read into memory.
pub fn download_rocksdb(
    storage: &CheckpointStorage,
    files: &[DbFile],
    dir: &Path,
    location: &str,
) -> Result<Vec<StateDescriptor>, RestoreError> {
    for f in files {
        storage.check_file_size(&f.path, f.size)?;
    }
    std::fs::create_dir_all(dir).map_err(|cause| RestoreError::Local { path: dir.to_path_buf(), cause })?;
    let mut descriptors = None;
    for f in files {
        if f.name == DESCRIPTORS_FILE {
            let bytes = storage.read_object(&f.path, f.size, f.crc32)?;
            let (_, d) = decode_descriptors(&bytes).map_err(|source| RestoreError::Snapshot {
                location: format!("{location}/{}", f.path),
                cause: source,
            })?;
            descriptors = Some(d);
        } else {
            let to = crate::paths::join_under(dir, &f.name)
                .map_err(|cause| RestoreError::UnsafeName { location: location.to_string(), cause })?;
            copy_stored(storage, f, &to)?;
        }
    }
    descriptors.ok_or_else(|| RestoreError::NoDescriptors { location: location.to_string() })
}

/// Bytes per read and write of [`copy_stored`].
const COPY_CHUNK: usize = 1 << 20;

/// Copies stored file `f` to `to`, a new local file, a chunk at a time,
/// checked as it goes against the size and CRC-32 `_metadata` gives it
/// (the reader fails past the size, and at the end on a wrong size or
/// checksum). A chunk of zeros is skipped rather than written, as
/// `cp --sparse` does: a sparse stored file stays sparse on this disk.
fn copy_stored(storage: &CheckpointStorage, f: &DbFile, to: &Path) -> Result<(), RestoreError> {
    use std::io::{Seek, SeekFrom, Write};
    let local = |cause| RestoreError::Local { path: to.to_path_buf(), cause };
    let mut reader = storage.open_reader(&f.path, f.size, f.crc32)?;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(to).map_err(local)?;
    let (mut buf, zeros) = (vec![0u8; COPY_CHUNK], vec![0u8; COPY_CHUNK]);
    let mut copied = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let location = format!("{}/{}", storage.display(), f.path);
                return Err(StorageError::Corrupt { location, message: e.to_string() }.into());
            }
        };
        if buf[..n] == zeros[..n] {
            file.seek(SeekFrom::Current(n as i64)).map_err(local)?;
        } else {
            file.write_all(&buf[..n]).map_err(local)?;
        }
        copied += n as u64;
    }
    // A file ending in zeros ends in a hole: give it its length.
    file.set_len(copied).map_err(local)
}
