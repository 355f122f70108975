//! The asynchronous part of a subtask's snapshot: a background thread
//! writes the frozen state in the snapshot format and stores it, or, for
//! incremental RocksDB checkpoints, stores the checkpoint's files that are
//! not stored yet; then it acknowledges the checkpoint to the coordinator
//! with the state's handle (or declines it with the reason). The task
//! thread goes on processing as soon as it has frozen its state and
//! forwarded the barrier.

use super::metadata::{DbFile, StateHandle, TaskSnapshot};
use super::protocol::CheckpointId;
use super::savepoint::SavepointTargets;
use super::storage::CheckpointStorage;
use crate::runtime::events::{TaskEvent, TaskId};
use crate::state::FrozenState;
use crate::state::snapshot::{SnapshotError, encode_descriptors, write_snapshot_sized, write_snapshot_streamed};
use crossbeam_channel::Sender;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Stores one subtask's snapshots.
pub struct Uploader {
    task: TaskId,
    storage: Arc<CheckpointStorage>,
    events: Sender<TaskEvent>,
    max_parallelism: u32,
    /// The size of the last snapshot, to size the next one's buffer.
    last_size: Arc<AtomicUsize>,
    /// Incremental: SST files already stored, by (name, size), with where.
    shared: Option<Arc<Mutex<SharedFiles>>>,
    /// Savepoints in flight: their state goes there, canonically.
    savepoints: Arc<SavepointTargets>,
}

/// SST files already stored, by (name, size).
type SharedFiles = HashMap<(String, u64), DbFile>;

/// Bytes a streamed snapshot hands to storage at a time.
const STREAM_PIECE: usize = 1 << 20;

/// The name under which an incremental checkpoint keeps the state
/// descriptors, beside the database files.
pub const DESCRIPTORS_FILE: &str = "WEIR-DESCRIPTORS";

impl Uploader {
    /// An uploader for subtask `task`.
    pub fn new(
        task: TaskId,
        storage: Arc<CheckpointStorage>,
        savepoints: Arc<SavepointTargets>,
        events: Sender<TaskEvent>,
        max_parallelism: u32,
    ) -> Self {
        Uploader {
            task,
            storage,
            events,
            max_parallelism,
            last_size: Arc::new(AtomicUsize::new(0)),
            shared: None,
            savepoints,
        }
    }

    /// Stores backends that can (RocksDB) incrementally: files already
    /// stored are referenced again, not uploaded. `known` are the files of
    /// the checkpoint the subtask was restored from.
    pub fn incremental(mut self, known: &[DbFile]) -> Self {
        let map = known.iter().filter(|f| f.path.starts_with("shared/")).map(|f| ((f.name.clone(), f.size), f.clone()));
        self.shared = Some(Arc::new(Mutex::new(map.collect())));
        self
    }

    /// Writes and stores `frozen` for checkpoint `id` on a background
    /// thread; `sync` is the pause the task took for it. A savepoint's
    /// state is always written canonically, into the savepoint's directory.
    pub fn upload(&self, id: CheckpointId, mut frozen: Box<dyn FrozenState>, sync: Duration) {
        let task = self.task.clone();
        let savepoint = self.savepoints.get(id);
        let storage = savepoint.clone().unwrap_or_else(|| self.storage.clone());
        let events = self.events.clone();
        let max_parallelism = self.max_parallelism;
        let last_size = self.last_size.clone();
        let shared = self.shared.clone().filter(|_| savepoint.is_none());
        let spawned = std::thread::Builder::new().name(format!("weir-snap-{task}")).spawn(move || {
            if let (Some(shared), Some(dir)) = (shared, frozen.native_checkpoint()) {
                let descriptors = encode_descriptors(max_parallelism, frozen.descriptors());
                let event = match upload_files(&storage, &task, id, dir, descriptors, &shared) {
                    Ok(files) => TaskEvent::Acknowledged {
                        task,
                        id,
                        snapshot: TaskSnapshot::Operator(StateHandle::Rocksdb { files }),
                        sync,
                    },
                    Err(reason) => TaskEvent::Declined { task, id, reason },
                };
                drop(frozen);
                let _ = events.send(event);
                return;
            }
            let name = format!("{}-{}.snap", task.node, task.subtask);
            let result = if savepoint.is_some() {
                // A savepoint streams: its state is never in memory whole.
                storage.put_state_streamed(id, &task.to_string(), &name, &mut |sink| {
                    write_snapshot_streamed(frozen.as_mut(), max_parallelism, STREAM_PIECE, &mut |piece| {
                        sink(piece).map_err(SnapshotError::Read)
                    })
                    .map_err(|e| format!("cannot write its snapshot: {e}"))
                })
            } else {
                // A checkpoint is written into one buffer sized from the last
                // one, then stored: the fastest way for the state sizes a
                // periodic checkpoint holds in memory anyway (the hashmap
                // backend keeps it there).
                let hint = last_size.load(Ordering::Relaxed);
                write_snapshot_sized(frozen.as_mut(), max_parallelism, hint + hint / 8)
                    .map_err(|e| format!("cannot write its snapshot: {e}"))
                    .and_then(|bytes| {
                        last_size.store(bytes.len(), Ordering::Relaxed);
                        storage
                            .put_state(id, &task.to_string(), &name, bytes)
                            .map_err(|e| format!("cannot store it: {e}"))
                    })
            };
            drop(frozen);
            let event = match result {
                Ok(handle) => TaskEvent::Acknowledged { task, id, snapshot: TaskSnapshot::Operator(handle), sync },
                Err(reason) => TaskEvent::Declined { task, id, reason },
            };
            let _ = events.send(event);
        });
        if let Err(e) = spawned {
            let reason = format!("cannot start a snapshot thread: {e}");
            let _ = self.events.send(TaskEvent::Declined { task: self.task.clone(), id, reason });
        }
    }
}

/// Stores a RocksDB checkpoint directory: SST files not stored before go to
/// `shared/`, under a name unique to this run of this subtask (a restored
/// database numbers its files from where the checkpoint left off, so names
/// alone could repeat across runs); the other files, and the descriptors,
/// to `chk-<id>/`.
fn upload_files(
    storage: &CheckpointStorage,
    task: &TaskId,
    id: CheckpointId,
    dir: &Path,
    descriptors: Vec<u8>,
    shared: &Mutex<SharedFiles>,
) -> Result<Vec<DbFile>, String> {
    let owner = format!("{}-{}", task.node, task.subtask);
    let run = run_token();
    let mut files = Vec::new();
    let mut known = shared.lock().expect("not poisoned").clone();
    let mut now_shared = HashMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let size = entry.metadata().map_err(|e| format!("{name}: {e}"))?.len();
        let is_sst = name.ends_with(".sst");
        if is_sst && let Some(f) = known.remove(&(name.clone(), size)) {
            now_shared.insert((name, size), f.clone());
            files.push(f);
            continue;
        }
        let bytes = std::fs::read(entry.path()).map_err(|e| format!("cannot read {}: {e}", entry.path().display()))?;
        let path = if is_sst {
            format!("shared/{owner}-{run}/{name}")
        } else {
            format!("{}/{owner}/{name}", super::storage::checkpoint_dir_name(id))
        };
        let (size, crc32) = storage.put_object(&path, bytes).map_err(|e| format!("cannot store it: {e}"))?;
        let f = DbFile { name: name.clone(), path, size, crc32 };
        if is_sst {
            now_shared.insert((name, size), f.clone());
            crate::crash_point::crash_point("upload.shared-file");
        }
        files.push(f);
    }
    let path = format!("{}/{owner}/{DESCRIPTORS_FILE}", super::storage::checkpoint_dir_name(id));
    let (size, crc32) = storage.put_object(&path, descriptors).map_err(|e| format!("cannot store it: {e}"))?;
    files.push(DbFile { name: DESCRIPTORS_FILE.to_string(), path, size, crc32 });
    // Files the database dropped are not offered again.
    *shared.lock().expect("not poisoned") = now_shared;
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
