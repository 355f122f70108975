//! Finding and reading a checkpoint to restore: the latest usable one of a
//! job (`--resume`, falling back past damaged ones with a warning), or one
//! named by its URI (`--from-checkpoint`). Everything a restore needs is
//! read and checked here, before any task starts, so a damaged checkpoint
//! is reported instead of failing tasks half-way.

use super::metadata::{CheckpointMetadata, DbFile, MetadataError, StateHandle};
use super::storage::{CheckpointStorage, StorageError};
use super::uploader::DESCRIPTORS_FILE;
use crate::config::StorageSettings;
use crate::state::StateDescriptor;
use crate::state::snapshot::{SnapshotError, decode_descriptors, verify_snapshot, verify_snapshot_stream};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use thiserror::Error;

/// Why a checkpoint cannot be restored.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// Storage failed or a file does not match `_metadata`.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `_metadata` is damaged.
    #[error("{location}: {source}")]
    Metadata {
        /// Where.
        location: String,
        /// How.
        source: MetadataError,
    },
    /// A state file is damaged.
    #[error("{location}: {source}")]
    Snapshot {
        /// Where.
        location: String,
        /// How.
        source: SnapshotError,
    },
    /// Every checkpoint of the job is damaged.
    #[error("no usable checkpoint in {dir}; nothing was deleted:\n{}", reasons.join("\n"))]
    NoneUsable {
        /// The job's checkpoint directory.
        dir: String,
        /// One line per checkpoint.
        reasons: Vec<String>,
    },
    /// The URI does not name a checkpoint.
    #[error(
        "{0:?} does not name a checkpoint: use <dir>/<job>/chk-<n>, as in file:///var/lib/weir/checkpoints/wordcount/chk-12"
    )]
    BadUri(String),
    /// The URI does not name a savepoint.
    #[error(
        "{0:?} is not a savepoint directory (one holding a savepoint's _metadata): use the location `host savepoint` printed, as in file:///var/lib/weir/savepoints/savepoint-wordcount-1764428000000"
    )]
    BadSavepointUri(String),
}

/// One subtask's state in a checkpoint, as a restoring subtask gets it.
#[derive(Debug, Clone)]
pub enum RestoreSource {
    /// A canonical snapshot inlined in `_metadata`, checked.
    Snapshot(Bytes),
    /// A canonical snapshot file, checked; the subtask streams it.
    File {
        /// Relative to the storage's root.
        path: String,
        /// Its size.
        size: u64,
        /// Its CRC-32.
        crc32: u32,
    },
    /// An incremental RocksDB checkpoint: files the subtask downloads.
    Rocksdb(Vec<DbFile>),
}

/// A checkpoint read and checked, ready to hand to tasks.
#[derive(Debug)]
pub struct Restored {
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// Operator uid to the state of each of its subtasks.
    pub states: HashMap<String, Arc<Vec<RestoreSource>>>,
    /// Where it was read from, for messages.
    pub location: String,
    /// The storage it is in (incremental state is downloaded from there).
    pub storage: Arc<CheckpointStorage>,
}

/// Reads checkpoint `id` whole and checks every part of it (the files of
/// incremental RocksDB state are checked when a subtask downloads them).
pub fn load(storage: &Arc<CheckpointStorage>, id: u64) -> Result<Restored, RestoreError> {
    let location = storage.checkpoint_location(id);
    let bytes = storage.read_metadata(id)?;
    let metadata = CheckpointMetadata::decode(&bytes)
        .map_err(|source| RestoreError::Metadata { location: format!("{location}/_metadata"), source })?;
    let mut states = HashMap::new();
    for (uid, op) in &metadata.operators {
        let mut subtasks = Vec::with_capacity(op.subtasks.len());
        for (i, handle) in op.subtasks.iter().enumerate() {
            let snapshot_error = |source| RestoreError::Snapshot {
                location: format!("{location}: state of operator '{uid}' subtask {i}"),
                source,
            };
            match handle {
                StateHandle::Rocksdb { files } => subtasks.push(RestoreSource::Rocksdb(files.clone())),
                StateHandle::Inline { data } => {
                    verify_snapshot(data).map_err(snapshot_error)?;
                    subtasks.push(RestoreSource::Snapshot(Bytes::from(data.clone())));
                }
                StateHandle::File { path, size, crc32 } => {
                    // Checked whole now, streamed (never held whole in
                    // memory), and streamed again by the subtask.
                    let mut reader = storage.open_reader(path, *size, *crc32)?;
                    verify_snapshot_stream(&mut reader).map_err(|source| RestoreError::Snapshot {
                        location: format!("{}/{path}: state of operator '{uid}' subtask {i}", storage.display()),
                        source,
                    })?;
                    subtasks.push(RestoreSource::File { path: path.clone(), size: *size, crc32: *crc32 });
                }
            }
        }
        states.insert(uid.clone(), Arc::new(subtasks));
    }
    Ok(Restored { metadata, states, location, storage: storage.clone() })
}

/// Reads the savepoint in directory `uri` whole and checks every part of
/// it, with the S3 options of `settings`.
pub fn load_savepoint(uri: &str, settings: &StorageSettings) -> Result<Restored, RestoreError> {
    if !(uri.starts_with("file://") || uri.starts_with("s3://")) {
        return Err(RestoreError::BadSavepointUri(uri.to_string()));
    }
    let storage = Arc::new(CheckpointStorage::open_savepoint(settings, uri)?);
    let restored = load(&storage, 0)?;
    if !restored.metadata.savepoint {
        return Err(RestoreError::BadSavepointUri(uri.to_string()));
    }
    Ok(restored)
}

/// The latest usable checkpoint of the job in `storage`, falling back past
/// damaged ones (each with a warning). `Ok(None)` when there is none at all.
pub fn load_latest(storage: &Arc<CheckpointStorage>) -> Result<Option<Restored>, RestoreError> {
    let ids = storage.list_checkpoints()?;
    let mut reasons = Vec::new();
    for &id in ids.iter().rev() {
        match load(storage, id) {
            Ok(r) => return Ok(Some(r)),
            Err(e) => {
                tracing::warn!(checkpoint = id, error = %e, "checkpoint is unusable; trying the one before");
                reasons.push(format!("  chk-{id}: {e}"));
            }
        }
    }
    if ids.is_empty() {
        Ok(None)
    } else {
        Err(RestoreError::NoneUsable { dir: storage.display().to_string(), reasons })
    }
}

/// Downloads an incremental checkpoint's files into `dir` (created, emptied
/// first); returns the state descriptors stored with them.
pub fn download_rocksdb(
    storage: &CheckpointStorage,
    files: &[DbFile],
    dir: &std::path::Path,
) -> Result<Vec<StateDescriptor>, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut descriptors = None;
    for f in files {
        let bytes = storage.get_object(&f.path, f.size, f.crc32).map_err(|e| e.to_string())?;
        if f.name == DESCRIPTORS_FILE {
            let (_, d) = decode_descriptors(&bytes).map_err(|e| format!("{}: {e}", f.path))?;
            descriptors = Some(d);
        } else {
            let to = dir.join(&f.name);
            std::fs::write(&to, &bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
        }
    }
    descriptors.ok_or_else(|| format!("the checkpoint lists no {DESCRIPTORS_FILE}"))
}

/// Splits `<dir>/<job>/chk-<n>[/_metadata]` into (dir, job, n).
pub fn parse_uri(uri: &str) -> Result<(String, String, u64), RestoreError> {
    let bad = || RestoreError::BadUri(uri.to_string());
    let trimmed = uri.trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/_metadata").unwrap_or(trimmed);
    let (rest, chk) = trimmed.rsplit_once('/').ok_or_else(bad)?;
    let id: u64 = chk.strip_prefix("chk-").and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    let (dir, job) = rest.rsplit_once('/').ok_or_else(bad)?;
    if job.is_empty() || !(dir.starts_with("file://") || dir.starts_with("s3://")) || dir.ends_with(':') {
        return Err(bad());
    }
    Ok((dir.to_string(), job.to_string(), id))
}

/// Opens the storage a checkpoint URI points into, with the S3 options of
/// `settings`.
pub fn open_uri(uri: &str, settings: &StorageSettings) -> Result<(Arc<CheckpointStorage>, String, u64), RestoreError> {
    let (dir, job, id) = parse_uri(uri)?;
    let settings = StorageSettings { dir: Some(dir), ..settings.clone() };
    Ok((Arc::new(CheckpointStorage::open(&settings, &job)?), job, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_dir_job_and_id() {
        assert_eq!(
            parse_uri("file:///var/ck/wc/chk-12").unwrap(),
            ("file:///var/ck".to_string(), "wc".to_string(), 12)
        );
        assert_eq!(parse_uri("s3://b/p/wc/chk-3/_metadata").unwrap(), ("s3://b/p".to_string(), "wc".to_string(), 3));
        assert!(parse_uri("file:///var/ck/wc").is_err());
        assert!(parse_uri("/var/ck/wc/chk-1").is_err());
    }
}
