//! The asynchronous part of a subtask's snapshot: a background thread
//! writes the frozen state in the snapshot format and stores it, or, for
//! incremental RocksDB checkpoints, stores the checkpoint's files that are
//! not stored yet; then it reports the state's handle (or why it failed) to
//! whoever asked. The task goes on processing as soon as it has frozen its
//! state and forwarded the barrier.
//!
//! This module knows storage and state, not tasks: how a result reaches
//! the coordinator is the caller's business (a closure).

use super::metadata::{DbFile, StateHandle};
use super::protocol::CheckpointId;
use super::recording::SegmentFile;
use super::storage::{CheckpointStorage, StorageError, checkpoint_dir_name};
use crate::fault::{Classify, Domain, RetryHint};
use crate::state::snapshot::{SnapshotError, encode_descriptors, write_snapshot_sized, write_snapshot_streamed};
use crate::state::{FrozenState, NativeCheckpoint};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Why a subtask could not store its part of a checkpoint.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Writing the snapshot failed (the backend could not be read).
    #[error("cannot write its snapshot: {0}")]
    Snapshot(SnapshotError),
    /// Storing it failed.
    #[error("cannot store it: {0}")]
    Storage(StorageError),
    /// A file of a RocksDB checkpoint could not be read.
    #[error("cannot read {}: {cause}", path.display())]
    LocalFile {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// No thread could be started for the upload.
    #[error("cannot start a snapshot thread: {0}")]
    Thread(std::io::Error),
}

// By hand rather than `#[from]`, which would also make the inner error the
// `source()` and print it twice in an error chain: the message says it.
impl From<SnapshotError> for CheckpointError {
    fn from(e: SnapshotError) -> Self {
        CheckpointError::Snapshot(e)
    }
}

impl From<StorageError> for CheckpointError {
    fn from(e: StorageError) -> Self {
        CheckpointError::Storage(e)
    }
}

impl Classify for CheckpointError {
    fn domain(&self) -> Domain {
        match self {
            CheckpointError::Storage(e) => e.domain(),
            CheckpointError::Snapshot(_) | CheckpointError::LocalFile { .. } => Domain::External,
            CheckpointError::Thread(_) => Domain::Internal,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            CheckpointError::Storage(e) => e.retry(),
            _ => RetryHint::Restart,
        }
    }
}

/// Stores one subtask's snapshots.
pub struct Uploader {
    /// `<node>-<subtask>`: names its files.
    owner: String,
    storage: Arc<CheckpointStorage>,
    max_parallelism: u32,
    /// The size of the last snapshot, to size the next one's buffer.
    last_size: Arc<AtomicUsize>,
    /// Incremental: SST files already stored. Shared only with this
    /// subtask's own upload threads (an aborted checkpoint's upload may
    /// still run when the next one starts).
    shared: Option<Arc<Mutex<SharedFiles>>>,
    /// What uploads wait for before they start ([`Self::start_after`]).
    after: Option<crossbeam_channel::Receiver<()>>,
    /// The upload threads that may still run ([`Self::wait_for_uploads`]).
    running: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// How long an upload waits for [`Uploader::start_after`]'s gate at most.
const GATE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// SST files already stored.
#[derive(Clone, Default)]
struct SharedFiles {
    /// By (name, size): the database names each file once.
    by_name: HashMap<(String, u64), DbFile>,
    /// By (size, 128-bit hash of the bytes): a layer stored with one
    /// checkpoint comes back in the next under the name the database gave
    /// it when it ingested the layer, with the same bytes.
    by_content: HashMap<(u64, u128), DbFile>,
    /// Names this database's files in `shared/`: unique to the process run
    /// and to the database (a subtask's database built anew numbers its
    /// files from the start, so names alone would repeat).
    token: String,
}

/// Bytes a streamed snapshot hands to storage at a time.
const STREAM_PIECE: usize = 1 << 20;

/// The name under which an incremental checkpoint keeps the state
/// descriptors, beside the database files.
pub const DESCRIPTORS_FILE: &str = "WEIR-DESCRIPTORS";

impl Uploader {
    /// An uploader for the subtask named `owner` (`<node>-<subtask>`).
    pub fn new(owner: String, storage: Arc<CheckpointStorage>, max_parallelism: u32) -> Self {
        Uploader {
            owner,
            storage,
            max_parallelism,
            last_size: Arc::new(AtomicUsize::new(0)),
            shared: None,
            after: None,
            running: Mutex::new(Vec::new()),
        }
    }

    /// Returns once every upload started has reported its result. A
    /// subtask that ends waits here, so its part of the checkpoint in
    /// flight reaches the coordinator before its end does: the end of a
    /// subtask still awaited cancels that checkpoint, which must not
    /// happen to one it already took its snapshot for.
    pub fn wait_for_uploads(&self) {
        let running = std::mem::take(&mut *self.running.lock().unwrap_or_else(|e| e.into_inner()));
        for thread in running {
            // A thread that panicked reported nothing; the checkpoint
            // times out as with any lost acknowledgement.
            let _ = thread.join();
        }
    }

    /// Uploads from now on start once every sender of `gate` is gone (or
    /// after a second at most): a live rescale's old subtask, whose upload
    /// of the barrier's checkpoint would otherwise share the cores with the
    /// new subtasks taking their state over, the pause of the job.
    pub fn start_after(&mut self, gate: crossbeam_channel::Receiver<()>) {
        self.after = Some(gate);
    }

    /// Stores backends that can (RocksDB) incrementally: files already
    /// stored are referenced again, not uploaded. `known` are the files of
    /// the checkpoint the subtask was restored from that its database keeps
    /// under their names (none after a rebuild: a new database numbers its
    /// files afresh, so nothing it writes may pass for a file stored
    /// before).
    pub fn incremental(&mut self, known: &[DbFile]) {
        let by_name =
            known.iter().filter(|f| f.path.starts_with("shared/")).map(|f| ((f.name.clone(), f.size), f.clone()));
        static DATABASES: AtomicUsize = AtomicUsize::new(0);
        let token = format!("{}-{}", run_token(), DATABASES.fetch_add(1, Ordering::Relaxed));
        self.shared =
            Some(Arc::new(Mutex::new(SharedFiles { by_name: by_name.collect(), by_content: HashMap::new(), token })));
    }

    /// Stores `segment` in the job's checkpoint directory, now (a
    /// subtask's last recorded input, at its end).
    pub fn store_now(&self, segment: &SegmentFile) -> Result<(), CheckpointError> {
        segment.store(&self.storage)?;
        Ok(())
    }

    /// Writes and stores `frozen` for checkpoint `id` on a background
    /// thread, then calls `done` there with the handle. A savepoint
    /// (`savepoint` names its directory) is always written canonically and
    /// streamed, never whole in memory. `recording` (the subtask's input
    /// recorded up to this barrier) is stored first, in the job's checkpoint
    /// directory, so a committed checkpoint implies the recording that
    /// leads to it.
    pub fn upload<F>(
        &self,
        id: CheckpointId,
        savepoint: Option<Arc<CheckpointStorage>>,
        frozen: Box<dyn FrozenState>,
        recording: Option<SegmentFile>,
        done: F,
    ) where
        F: FnOnce(Result<StateHandle, CheckpointError>) + Send + 'static,
    {
        let owner = self.owner.clone();
        let storage = savepoint.clone().unwrap_or_else(|| self.storage.clone());
        let max_parallelism = self.max_parallelism;
        let last_size = self.last_size.clone();
        let shared = self.shared.clone().filter(|_| savepoint.is_none());
        let work = move || {
            let mut frozen = frozen;
            let native = if shared.is_some() { frozen.native_checkpoint() } else { None };
            let result = match (shared, native) {
                (Some(shared), Some(native)) => native.map_err(|e| SnapshotError::from(e).into()).and_then(|native| {
                    let descriptors = encode_descriptors(max_parallelism, frozen.descriptors());
                    upload_files(&storage, &owner, id, &native, descriptors, &shared)
                        .map(|files| StateHandle::Rocksdb { files })
                }),
                _ if savepoint.is_some() => storage.put_state_streamed(id, &owner, &format!("{owner}.snap"), |sink| {
                    write_snapshot_streamed::<CheckpointError>(frozen.as_mut(), max_parallelism, STREAM_PIECE, sink)
                }),
                _ => {
                    // A checkpoint is written into one buffer sized from
                    // the last one, then stored: the fastest way for the
                    // state sizes a periodic checkpoint holds in memory
                    // anyway (the hashmap backend keeps it there).
                    let hint = last_size.load(Ordering::Relaxed);
                    write_snapshot_sized(frozen.as_mut(), max_parallelism, hint + hint / 8)
                        .map_err(CheckpointError::from)
                        .and_then(|bytes| {
                            last_size.store(bytes.len(), Ordering::Relaxed);
                            Ok(storage.put_state(id, &owner, &format!("{owner}.snap"), bytes)?)
                        })
                }
            };
            // The frozen state (a RocksDB checkpoint directory, shared
            // tables) is released before the result is reported.
            drop(frozen);
            result
        };
        self.spawn(recording, work, done);
    }

    /// Whether this subtask's checkpoints store its state in the snapshot
    /// format (they are not incremental), so that a snapshot of the state
    /// frozen at the barrier, written for another reason, can be stored as
    /// its part of the checkpoint ([`Uploader::upload_written`]).
    pub fn writes_snapshots(&self) -> bool {
        self.shared.is_none()
    }

    /// Stores `snapshot`, the whole state frozen at checkpoint `id`'s
    /// barrier already written in the snapshot format (a rescale writes it
    /// to hand the state over), as [`Uploader::upload`] would have stored
    /// that state, on a background thread; then calls `done` there. Only
    /// for checkpoints, and only where [`Uploader::writes_snapshots`].
    pub fn upload_written<F>(&self, id: CheckpointId, snapshot: Arc<Vec<u8>>, recording: Option<SegmentFile>, done: F)
    where
        F: FnOnce(Result<StateHandle, CheckpointError>) + Send + 'static,
    {
        let (storage, owner, last_size) = (self.storage.clone(), self.owner.clone(), self.last_size.clone());
        let work = move || {
            last_size.store(snapshot.len(), Ordering::Relaxed);
            // The new subtasks may still read the bytes: then a copy.
            let bytes = Arc::unwrap_or_clone(snapshot);
            Ok(storage.put_state(id, &owner, &format!("{owner}.snap"), bytes)?)
        };
        self.spawn(recording, work, done);
    }

    /// Runs `work` on a thread of its own after storing `recording`, and
    /// hands its result (or why it could not run) to `done` there.
    fn spawn<W, F>(&self, recording: Option<SegmentFile>, work: W, done: F)
    where
        W: FnOnce() -> Result<StateHandle, CheckpointError> + Send + 'static,
        F: FnOnce(Result<StateHandle, CheckpointError>) + Send + 'static,
    {
        let (checkpoints, gate) = (self.storage.clone(), self.after.clone());
        // The work reaches the thread through a channel, so a thread that
        // cannot start leaves it here to be answered.
        let (tx, rx) = std::sync::mpsc::channel::<(W, F)>();
        let spawned = std::thread::Builder::new().name(format!("weir-snap-{}", self.owner)).spawn(move || {
            let Ok((work, done)) = rx.recv() else { return };
            if let Some(gate) = gate {
                // Nothing is ever sent: it ends when the senders are gone.
                let _ = gate.recv_timeout(GATE_LIMIT);
            }
            if let Some(segment) = recording
                && let Err(e) = segment.store(&checkpoints)
            {
                return done(Err(e.into()));
            }
            done(work());
        });
        match spawned {
            Ok(thread) => {
                let _ = tx.send((work, done));
                let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
                running.retain(|t| !t.is_finished());
                running.push(thread);
            }
            Err(e) => done(Err(CheckpointError::Thread(e))),
        }
    }
}

/// Stores a RocksDB checkpoint directory and its layers: SST files not
/// stored before (by name, or by content) go to `shared/`, under a name
/// unique to this run of this subtask (a restored database numbers its
/// files from where the checkpoint left off, so names alone could repeat
/// across runs); the other files, and the descriptors, to `chk-<id>/`.
fn upload_files(
    storage: &CheckpointStorage,
    owner: &str,
    id: CheckpointId,
    native: &NativeCheckpoint,
    descriptors: Vec<u8>,
    shared: &Mutex<SharedFiles>,
) -> Result<Vec<DbFile>, CheckpointError> {
    let local = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CheckpointError::LocalFile { path, cause: source }
    };
    let dir = native.dir.as_path();
    let mut local_files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(local(dir))? {
        let entry = entry.map_err(local(dir))?;
        let size = entry.metadata().map_err(local(&entry.path()))?.len();
        local_files.push((entry.file_name().to_string_lossy().into_owned(), entry.path(), size));
    }
    for (name, path) in &native.layers {
        let size = std::fs::metadata(path).map_err(local(path))?.len();
        local_files.push((name.clone(), path.clone(), size));
    }
    let mut files = Vec::new();
    let known = shared.lock().expect("not poisoned").clone();
    let run = known.token.clone();
    let mut now = SharedFiles { token: run.clone(), ..SharedFiles::default() };
    for (name, path, size) in local_files {
        let is_sst = name.ends_with(".sst");
        if is_sst && let Some(f) = known.by_name.get(&(name.clone(), size)) {
            now.by_name.insert((name, size), f.clone());
            files.push(f.clone());
            continue;
        }
        let bytes = std::fs::read(&path).map_err(local(&path))?;
        let content = (bytes.len() as u64, xxhash_rust::xxh3::xxh3_128(&bytes));
        if is_sst && let Some(f) = known.by_content.get(&content) {
            let f = DbFile { name: name.clone(), ..f.clone() };
            now.by_name.insert((name, size), f.clone());
            now.by_content.insert(content, f.clone());
            files.push(f);
            continue;
        }
        let stored = if is_sst {
            format!("shared/{owner}-{run}/{name}")
        } else {
            format!("{}/{owner}/{name}", checkpoint_dir_name(id))
        };
        let (size, crc32) = storage.put_object(&stored, bytes)?;
        let f = DbFile { name: name.clone(), path: stored, size, crc32 };
        if is_sst {
            now.by_name.insert((name, size), f.clone());
            now.by_content.insert(content, f.clone());
            crate::crash_point::crash_point("upload.shared-file");
        }
        files.push(f);
    }
    let path = format!("{}/{owner}/{DESCRIPTORS_FILE}", checkpoint_dir_name(id));
    let (size, crc32) = storage.put_object(&path, descriptors)?;
    files.push(DbFile { name: DESCRIPTORS_FILE.to_string(), path, size, crc32 });
    // Files the database dropped are not offered again.
    *shared.lock().expect("not poisoned") = now;
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// A token unique to this process run.
fn run_token() -> String {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
            format!("{:x}{:x}", std::process::id(), nanos & 0xffff_ffff)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::{S3Settings, StorageSettings};
    use std::time::Duration;

    fn uploader() -> Uploader {
        let memory = StorageSettings {
            dir: None,
            inline_threshold: 0,
            memory_max_state_size: 1 << 20,
            fsync: false,
            s3: S3Settings::default(),
            fenced_by: None,
            limits: crate::config::settings::ReadLimits::default(),
        };
        Uploader::new("op-0".into(), Arc::new(CheckpointStorage::open(&memory, "job").unwrap()), 128)
    }

    #[test]
    fn an_upload_after_a_gate_starts_once_its_senders_are_gone() {
        let mut u = uploader();
        let (open, gate) = crossbeam_channel::bounded::<()>(0);
        u.start_after(gate);
        let (done_tx, done) = crossbeam_channel::bounded(1);
        u.upload_written(1, Arc::new(vec![1, 2, 3]), None, move |r| {
            let _ = done_tx.send(r.is_ok());
        });
        // The gate waits up to a second from the thread's start.
        assert!(done.recv_timeout(Duration::from_millis(300)).is_err(), "stored before the gate opened");
        drop(open);
        assert_eq!(done.recv_timeout(Duration::from_secs(10)), Ok(true));
        // A gate kept shut holds an upload back for a second at most.
        let (_shut, gate) = crossbeam_channel::bounded::<()>(0);
        u.start_after(gate);
        let (done_tx, done) = crossbeam_channel::bounded(1);
        u.upload_written(2, Arc::new(vec![4]), None, move |r| {
            let _ = done_tx.send(r.is_ok());
        });
        assert_eq!(done.recv_timeout(Duration::from_secs(30)), Ok(true));
    }
}
