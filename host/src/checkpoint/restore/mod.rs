//! Restoring: finding and reading a checkpoint or savepoint ([`load`],
//! [`load_latest`], [`load_savepoint`], [`Target`]), remembering what a
//! run started from for the next `--resume` ([`origin`]), deciding what each
//! operator subtask takes from it ([`plan`]), and opening a subtask's state
//! backend with that state ([`backend::open_backend`]): the one restore
//! path, for a fresh start, a restart, `--resume`, `--from-checkpoint`,
//! `--from-savepoint`, at any parallelism, into either backend.
//!
//! Everything a restore needs from `_metadata` and the state files is read
//! and checked here before any task starts, so a damaged checkpoint is
//! reported instead of failing tasks half-way.

pub mod backend;
pub mod origin;
pub mod plan;

use super::metadata::{CheckpointMetadata, DbFile, MetadataError, StateHandle};
use super::modules::ModuleStoreError;
use super::storage::{CheckpointStorage, IfMissing, StorageError};
use crate::config::StorageSettings;
use crate::fault::{Classify, Domain, RetryHint};
use crate::state::StateError;
use crate::state::snapshot::{SnapshotError, verify_snapshot, verify_snapshot_within};
use bytes::Bytes;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// Why a checkpoint or savepoint cannot be restored.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// Storage failed or a file does not match `_metadata`.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// `_metadata` is damaged.
    #[error("{location}: {cause}")]
    Metadata {
        /// Where.
        location: String,
        /// How.
        cause: MetadataError,
    },
    /// A state file is damaged.
    #[error("{location}: {cause}")]
    Snapshot {
        /// Where.
        location: String,
        /// How.
        cause: SnapshotError,
    },
    /// Every checkpoint of the job is damaged.
    #[error("no usable checkpoint in {dir}; nothing was deleted:\n{}", reasons.join("\n"))]
    NoneUsable {
        /// The job's checkpoint directory.
        dir: String,
        /// One line per checkpoint.
        reasons: Vec<String>,
    },
    /// The last run started from a savepoint or checkpoint, completed no
    /// checkpoint of its own, and what it started from cannot be read.
    #[error(
        "{record}: the job's last run started from {uri} and completed no checkpoint of its own, so --resume continues from there, but it cannot be read: {cause}; bring it back, or choose where to start with --from-savepoint or --from-checkpoint"
    )]
    OriginGone {
        /// The record naming it.
        record: String,
        /// What it names.
        uri: String,
        /// Why it cannot be read.
        cause: Box<RestoreError>,
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
    /// A stored name would leave the directory it is written to.
    #[error("{location}: {cause}")]
    UnsafeName {
        /// The checkpoint.
        location: String,
        /// The name and why.
        cause: crate::paths::UnsafeName,
    },
    /// An incremental checkpoint's files lack the state descriptors.
    #[error("{location}: the checkpoint lists no {}", upload_descriptors())]
    NoDescriptors {
        /// The checkpoint.
        location: String,
    },
    /// Local scratch space for downloaded state failed.
    #[error("cannot write {}: {cause}", path.display())]
    Local {
        /// Where.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The state backend could not be opened or refused the state.
    #[error(transparent)]
    Backend(#[from] StateError),
    /// The checkpoint's state belongs to a module swapped in while the job
    /// ran, which is not in the job's module store as `_metadata` records.
    #[error(
        "{location}: operator '{uid}' runs a module swapped in while the job ran ({path}), which is loaded only from the job's module store, and cannot be: {cause}"
    )]
    SwappedModule {
        /// The checkpoint.
        location: String,
        /// The operator.
        uid: String,
        /// Where the module was swapped in from (never read).
        path: String,
        /// Why (boxed: every restore returns this error type).
        cause: Box<ModuleStoreError>,
    },
}

fn upload_descriptors() -> &'static str {
    super::upload::DESCRIPTORS_FILE
}

impl Classify for RestoreError {
    fn domain(&self) -> Domain {
        match self {
            RestoreError::Storage(e) => e.domain(),
            RestoreError::Local { .. } => Domain::External,
            RestoreError::Backend(e) => e.domain(),
            RestoreError::OriginGone { cause, .. } => cause.domain(),
            RestoreError::SwappedModule { cause, .. } => cause.domain(),
            _ => Domain::User,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            RestoreError::Storage(e) => e.retry(),
            RestoreError::Local { .. } => RetryHint::Restart,
            RestoreError::Backend(e) => e.retry(),
            RestoreError::OriginGone { cause, .. } => cause.retry(),
            RestoreError::SwappedModule { cause, .. } => cause.retry(),
            // Damaged or foreign files stay damaged.
            _ => RetryHint::NoRetry,
        }
    }
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

impl RestoreSource {
    /// Its stored size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            RestoreSource::Snapshot(bytes) => bytes.len() as u64,
            RestoreSource::File { size, .. } => *size,
            RestoreSource::Rocksdb(files) => files.iter().map(|f| f.size).sum(),
        }
    }
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
    /// The storage it is in (state files are read from there).
    pub storage: Arc<CheckpointStorage>,
}

/// Reads checkpoint `id` whole and checks every part of it (the files of
/// incremental RocksDB state are checked when a subtask downloads them).
pub fn load(storage: &Arc<CheckpointStorage>, id: u64) -> Result<Restored, RestoreError> {
    let location = storage.checkpoint_location(id);
    let bytes = storage.read_metadata(id)?;
    let metadata = CheckpointMetadata::decode(&bytes)
        .map_err(|source| RestoreError::Metadata { location: format!("{location}/_metadata"), cause: source })?;
    let mut states = HashMap::new();
    for (uid, op) in &metadata.operators {
        let mut subtasks = Vec::with_capacity(op.subtasks.len());
        for (i, handle) in op.subtasks.iter().enumerate() {
            let snapshot_error = |place: String, source| RestoreError::Snapshot {
                location: format!("{place}: state of operator '{uid}' subtask {i}"),
                cause: source,
            };
            match handle {
                StateHandle::Rocksdb { files } => subtasks.push(RestoreSource::Rocksdb(files.clone())),
                StateHandle::Inline { data } => {
                    verify_snapshot(&mut &data[..]).map_err(|e| snapshot_error(location.clone(), e))?;
                    subtasks.push(RestoreSource::Snapshot(Bytes::from(data.clone())));
                }
                StateHandle::File { path, size, crc32 } => {
                    // Checked whole now, streamed (never held whole in
                    // memory), and streamed again by the subtask.
                    let mut reader = storage.open_reader(path, *size, *crc32)?;
                    verify_snapshot_within(&mut reader, storage.limits().max_section_size)
                        .map_err(|e| snapshot_error(format!("{}/{path}", storage.display()), e))?;
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
    let storage = Arc::new(CheckpointStorage::open_savepoint(settings, uri, IfMissing::Fail)?);
    let restored = load(&storage, 0)?;
    if !restored.metadata.savepoint {
        return Err(RestoreError::BadSavepointUri(uri.to_string()));
    }
    Ok(restored)
}

/// What `--resume` continues from: the latest usable checkpoint of the
/// job in `storage`, falling back past damaged ones (each with a warning);
/// but when the last run started from `origin` and completed no usable
/// checkpoint since, that origin, read with the S3 options of `settings`.
/// `Ok(None)` when there is nothing at all.
pub fn load_latest(
    storage: &Arc<CheckpointStorage>,
    origin: Option<&origin::Origin>,
    settings: &StorageSettings,
) -> Result<Option<Restored>, RestoreError> {
    load_latest_with(storage, origin, settings, &mut |_| Ok(()))
}

/// [`load_latest`], where a checkpoint is usable only if `usable` also
/// accepts it once it was read (the job's own conditions, such as its
/// swapped modules being in the module store); one it refuses is passed
/// over like a damaged one.
pub fn load_latest_with(
    storage: &Arc<CheckpointStorage>,
    origin: Option<&origin::Origin>,
    settings: &StorageSettings,
    usable: &mut dyn FnMut(&Restored) -> Result<(), RestoreError>,
) -> Result<Option<Restored>, RestoreError> {
    let ids = storage.list_checkpoints()?;
    let mut reasons = Vec::new();
    // Checkpoints at or below `after` predate the origin: resuming from one
    // would undo what the run that started from the origin published.
    let after = origin.map_or(0, |o| o.after);
    for &id in ids.iter().rev().filter(|&&id| origin.is_none() || id > after) {
        match load(storage, id).and_then(|r| usable(&r).map(|()| r)) {
            Ok(r) => return Ok(Some(r)),
            Err(e) => {
                tracing::warn!(checkpoint = id, error = %e, "checkpoint is unusable; trying the one before");
                reasons.push(format!("  chk-{id}: {e}"));
            }
        }
    }
    if let Some(o) = origin {
        tracing::info!(
            origin = %o.uri,
            "--resume: the last run started from this and completed no checkpoint since; continuing from it"
        );
        let gone = |cause| RestoreError::OriginGone {
            record: format!("{}/{}", storage.display(), origin::FILE),
            uri: o.uri.clone(),
            cause: Box::new(cause),
        };
        return Target::parse(&o.uri).load(settings).and_then(|r| usable(&r).map(|()| r)).map(Some).map_err(gone);
    }
    if ids.is_empty() {
        Ok(None)
    } else {
        Err(RestoreError::NoneUsable { dir: storage.display().to_string(), reasons })
    }
}

/// What a URI given to `--from-checkpoint`, `--from-savepoint` or
/// `host inspect` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `<dir>/<job>/chk-<n>[/_metadata]`: checkpoint `id` of job `job`.
    Checkpoint {
        /// The checkpoint directory (`state.checkpoints.dir`).
        dir: String,
        /// The job.
        job: String,
        /// The checkpoint.
        id: u64,
    },
    /// A savepoint's own directory.
    Savepoint(String),
}

impl Target {
    /// Reads a URI: a path ending in `chk-<n>` names a checkpoint, anything
    /// else a savepoint directory.
    pub fn parse(uri: &str) -> Target {
        match parse_checkpoint_uri(uri) {
            Ok((dir, job, id)) => Target::Checkpoint { dir, job, id },
            Err(_) => Target::Savepoint(uri.to_string()),
        }
    }

    /// Loads what the URI names, with the S3 options of `settings`.
    pub fn load(&self, settings: &StorageSettings) -> Result<Restored, RestoreError> {
        match self {
            Target::Checkpoint { dir, job, id } => {
                let settings = StorageSettings { dir: Some(dir.clone()), ..settings.clone() };
                load(&Arc::new(CheckpointStorage::open_existing(&settings, job)?), *id)
            }
            Target::Savepoint(uri) => load_savepoint(uri, settings),
        }
    }
}

/// Splits `<dir>/<job>/chk-<n>[/_metadata]` into (dir, job, n).
pub fn parse_checkpoint_uri(uri: &str) -> Result<(String, String, u64), RestoreError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_dir_job_and_id() {
        assert_eq!(
            parse_checkpoint_uri("file:///var/ck/wc/chk-12").unwrap(),
            ("file:///var/ck".to_string(), "wc".to_string(), 12)
        );
        assert_eq!(
            parse_checkpoint_uri("s3://b/p/wc/chk-3/_metadata").unwrap(),
            ("s3://b/p".to_string(), "wc".to_string(), 3)
        );
        assert!(parse_checkpoint_uri("file:///var/ck/wc").is_err());
        assert!(parse_checkpoint_uri("/var/ck/wc/chk-1").is_err());
        assert_eq!(Target::parse("file:///sp/savepoint-wc-1"), Target::Savepoint("file:///sp/savepoint-wc-1".into()));
    }
}
