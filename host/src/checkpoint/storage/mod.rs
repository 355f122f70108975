//! Checkpoint storage: where state files and `_metadata` go, through
//! `object_store` (a local directory, S3 or an S3-compatible store, or host
//! memory). All object-store I/O of the checkpoint code happens here, behind
//! blocking calls, so the protocol and the tasks stay synchronous.
//!
//! Layout under the configured directory (see `docs/checkpoint-format.md`):
//! `<job>/chk-<n>/_metadata`, written last and create-only, beside
//! `<job>/chk-<n>/<operator>-<subtask>.snap`, one per subtask whose state is
//! larger than the inline threshold. Paths inside `_metadata` are relative
//! to `<job>/`, so a job directory can be copied elsewhere and still read.
//!
//! On a local directory every object written is made durable before the
//! call returns (the file, then the directory naming it, each new directory
//! in its parent), so the coordinator's order (state files, then
//! `_metadata`, then `Complete`, then retention) is also the order on disk.
//! A local directory is Weir's own store ([`local`]): nothing beneath it is
//! reached through a link, and a job or savepoint directory holding a link,
//! a FIFO or another non-regular file, or a directory another user owns or
//! others may write, is refused when it is opened.

mod error;
mod fence;
pub mod local;
mod reader;
mod stores;

pub use error::StorageError;
pub use fence::{CLAIM_IDS, Claimed, LastEntry, LogPosition};

pub use reader::ObjectReader;

use super::metadata::StateHandle;
use crate::config::StorageSettings;
use crate::config::settings::ReadLimits;
use bytes::Bytes;
use futures::TryStreamExt;
use local::LocalStore;
pub use local::beneath::IfMissing;
use local::beneath::LocalError;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use std::fmt;
use std::sync::Arc;
use stores::{open_dir, runtime};

/// Where checkpoints of one job are stored.
pub struct CheckpointStorage {
    store: Arc<dyn ObjectStore>,
    /// `<prefix>/<job>`: every object of this job is under it.
    root: ObjectPath,
    /// The job directory as the user would write it, for messages.
    display: String,
    /// The store again, for a `file://` directory, for the calls that go
    /// to it directly; `root` is a path in it. It fsyncs its writes unless
    /// `state.checkpoints.fsync` is off.
    local: Option<Arc<LocalStore>>,
    /// Some(limit) when the store is host memory.
    memory_limit: Option<u64>,
    /// What reading a stored file may cost at most.
    limits: ReadLimits,
    inline_threshold: u64,
    /// A savepoint directory: one checkpoint, its files at the root, rather
    /// than a job's `chk-<n>/` directories.
    savepoint: bool,
    /// Cluster mode: commits go through the commit log.
    fence: Option<fence::Fence>,
    runtime: tokio::runtime::Runtime,
}

impl fmt::Debug for CheckpointStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointStorage").field("dir", &self.display).finish()
    }
}

/// Name of checkpoint `id`'s directory.
pub fn checkpoint_dir_name(id: u64) -> String {
    format!("chk-{id}")
}

impl CheckpointStorage {
    /// Opens the storage of job `job` as `settings` say: a `file://` or
    /// `s3://` directory, or host memory when none is set.
    pub fn open(settings: &StorageSettings, job: &str) -> Result<Self, StorageError> {
        Self::open_job(settings, job, IfMissing::Create)
    }

    /// Opens the storage of job `job` to read a checkpoint from it: as
    /// [`open`](Self::open), but a `file://` directory that does not exist
    /// is an error, not created.
    pub fn open_existing(settings: &StorageSettings, job: &str) -> Result<Self, StorageError> {
        Self::open_job(settings, job, IfMissing::Fail)
    }

    fn open_job(settings: &StorageSettings, job: &str, if_missing: IfMissing) -> Result<Self, StorageError> {
        let runtime = runtime()?;
        let Some(dir) = settings.dir.as_deref() else {
            return Ok(CheckpointStorage {
                store: Arc::new(object_store::memory::InMemory::new()),
                root: ObjectPath::from(job),
                display: format!("memory:/{job}"),
                local: None,
                memory_limit: Some(settings.memory_max_state_size),
                limits: settings.limits,
                inline_threshold: settings.inline_threshold,
                savepoint: false,
                fence: None,
                runtime,
            });
        };
        let stores::OpenDir { store, root, local } = open_dir(dir, &settings.s3, settings.fsync, if_missing)?;
        let storage = CheckpointStorage {
            store,
            root: root.child(job),
            display: format!("{}/{job}", dir.trim_end_matches('/')),
            local,
            memory_limit: None,
            limits: settings.limits,
            inline_threshold: settings.inline_threshold,
            savepoint: false,
            fence: settings.fenced_by.as_deref().map(fence::Fence::new),
            runtime,
        };
        storage.check_local()?;
        Ok(storage)
    }

    /// Opens savepoint directory `uri` (`file://` or `s3://`, with the S3
    /// options of `settings`): `_metadata` and state files at its root, so
    /// the directory can be copied elsewhere whole and still be restored.
    /// A `file://` directory that does not exist is created to write a
    /// savepoint in ([`IfMissing::Create`]), never to read one.
    pub fn open_savepoint(settings: &StorageSettings, uri: &str, if_missing: IfMissing) -> Result<Self, StorageError> {
        let runtime = runtime()?;
        let uri = uri.trim_end_matches('/');
        let uri = uri.strip_suffix("/_metadata").unwrap_or(uri);
        let stores::OpenDir { store, root, local } = open_dir(uri, &settings.s3, settings.fsync, if_missing)?;
        let storage = CheckpointStorage {
            store,
            root,
            display: uri.to_string(),
            local,
            memory_limit: None,
            limits: settings.limits,
            inline_threshold: settings.inline_threshold,
            savepoint: true,
            fence: None,
            runtime,
        };
        storage.check_local()?;
        Ok(storage)
    }

    /// On a local directory, checks the job's (or savepoint's) whole tree
    /// before anything reads, writes or deletes in it: a link (planted
    /// `chk-<n>`, `shared` or state file), a FIFO or other non-regular
    /// file, or a directory another user owns or others may write, is
    /// refused with its path rather than followed or waited on.
    fn check_local(&self) -> Result<(), StorageError> {
        let Some(local) = &self.local else { return Ok(()) };
        let root = self.root.as_ref().split('/').filter(|p| !p.is_empty()).collect::<Vec<_>>();
        local.walk(&root, true).map(|_| ()).map_err(StorageError::Local)
    }

    /// Where checkpoint `id` keeps its files, relative to the root, with a
    /// trailing slash (nothing for a savepoint directory).
    fn dir_of(&self, id: u64) -> String {
        if self.savepoint { String::new() } else { format!("{}/", checkpoint_dir_name(id)) }
    }

    /// Where checkpoint `id` is, for messages and listings.
    pub fn checkpoint_location(&self, id: u64) -> String {
        if self.savepoint { self.display.clone() } else { format!("{}/{}", self.display, checkpoint_dir_name(id)) }
    }

    /// The job's directory, as the user would write it.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// What reading a stored file may cost at most: the largest file read,
    /// and the largest part of one held in memory whole (a snapshot's
    /// section, which its parser bounds by it).
    pub fn limits(&self) -> ReadLimits {
        self.limits
    }

    /// Whether checkpoints survive the process.
    pub fn is_durable(&self) -> bool {
        self.memory_limit.is_none()
    }

    fn path(&self, relative: &str) -> ObjectPath {
        let mut p = self.root.clone();
        for part in relative.split('/') {
            p = p.child(part);
        }
        p
    }

    fn location(&self, relative: &str) -> String {
        format!("{}/{relative}", self.display)
    }

    /// Stores the state of `task` for checkpoint `id`: inlined in the
    /// metadata when small, a file `chk-<id>/<name>` otherwise.
    pub fn put_state(&self, id: u64, task: &str, name: &str, bytes: Vec<u8>) -> Result<StateHandle, StorageError> {
        let size = bytes.len() as u64;
        if let Some(limit) = self.memory_limit
            && size > limit
        {
            return Err(StorageError::TooLargeForMemory { task: task.to_string(), size, limit });
        }
        if size <= self.inline_threshold {
            return Ok(StateHandle::Inline { data: bytes });
        }
        let relative = format!("{}{name}", self.dir_of(id));
        let (size, crc32) = self.put_object(&relative, bytes)?;
        Ok(StateHandle::File { path: relative, size, crc32 })
    }

    /// Stores the state of `task` for checkpoint `id` as `write` produces
    /// it, piece by piece: inlined in the metadata if it all fits under the
    /// inline threshold, else streamed into the file `<dir>/<name>` with a
    /// multipart upload, a few parts in flight, so the snapshot is never in
    /// memory whole. `write` gets a sink for each piece.
    pub fn put_state_streamed<E: From<StorageError>>(
        &self,
        id: u64,
        task: &str,
        name: &str,
        write: impl FnOnce(&mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E>,
    ) -> Result<StateHandle, E> {
        use object_store::WriteMultipart;
        let relative = format!("{}{name}", self.dir_of(id));
        let io = |source| StorageError::Io { op: "writing", location: self.location(&relative), cause: source };
        let mut head: Vec<u8> = Vec::new();
        let mut upload: Option<WriteMultipart> = None;
        let (mut size, mut hasher) = (0u64, crc32fast::Hasher::new());
        let _runtime = self.runtime.enter();
        let mut sink = |piece: &[u8]| -> Result<(), E> {
            size += piece.len() as u64;
            hasher.update(piece);
            if let Some(limit) = self.memory_limit
                && size > limit
            {
                return Err(StorageError::TooLargeForMemory { task: task.to_string(), size, limit }.into());
            }
            if upload.is_none() {
                if size <= self.inline_threshold {
                    head.extend_from_slice(piece);
                    return Ok(());
                }
                let started = self.runtime.block_on(self.store.put_multipart(&self.path(&relative))).map_err(io)?;
                let mut w = WriteMultipart::new_with_chunk_size(started, UPLOAD_PART);
                w.write(&std::mem::take(&mut head));
                upload = Some(w);
            }
            let w = upload.as_mut().expect("started");
            self.runtime.block_on(w.wait_for_capacity(UPLOADS_IN_FLIGHT)).map_err(io)?;
            w.write(piece);
            crate::crash_point::crash_point("storage.piece-written");
            Ok(())
        };
        let written = write(&mut sink);
        if let Err(e) = written {
            if let Some(w) = upload {
                let _ = self.runtime.block_on(w.abort());
            }
            return Err(e);
        }
        match upload {
            None => Ok(StateHandle::Inline { data: head }),
            Some(w) => {
                self.runtime.block_on(w.finish()).map_err(io)?;
                Ok(StateHandle::File { path: relative, size, crc32: hasher.finalize() })
            }
        }
    }

    /// Reads a handle's bytes whole into memory (a Kafka sink's held
    /// output), checking size and checksum. A stored file is refused unread
    /// if `_metadata` gives it more than `state.checkpoints.max_section_size`.
    /// An incremental RocksDB handle is a set of files: stream them with
    /// [`CheckpointStorage::open_reader`].
    pub fn read_state(&self, handle: &StateHandle) -> Result<Vec<u8>, StorageError> {
        match handle {
            StateHandle::Inline { data } => Ok(data.clone()),
            StateHandle::File { path, size, crc32 } => self.read_object(path, *size, *crc32),
            StateHandle::Rocksdb { .. } => Err(StorageError::Corrupt {
                location: self.display.clone(),
                message: "an incremental RocksDB handle is not one stored file".into(),
            }),
        }
    }

    /// Stores `bytes` at `relative` (to the job directory); returns its size
    /// and CRC-32.
    pub fn put_object(&self, relative: &str, bytes: Vec<u8>) -> Result<(u64, u32), StorageError> {
        let (size, crc) = (bytes.len() as u64, crc32fast::hash(&bytes));
        self.runtime
            .block_on(self.store.put(&self.path(relative), PutPayload::from(bytes)))
            .map_err(|source| StorageError::Io { op: "writing", location: self.location(relative), cause: source })?;
        crate::crash_point::crash_point("storage.object-written");
        Ok((size, crc))
    }

    /// Deletes `relative`; a missing object is not an error.
    pub fn delete_object(&self, relative: &str) -> Result<(), StorageError> {
        match self.runtime.block_on(self.store.delete(&self.path(relative))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StorageError::Io { op: "deleting", location: self.location(relative), cause: source }),
        }
    }

    /// Deletes, in a local directory, the files writes cut short left:
    /// a write goes to `<name>#<n>` and is renamed into place, so a kill in
    /// between leaves a file no listing shows. Only for a run that is the
    /// job's only writer. Returns how many.
    pub fn delete_staged(&self) -> Result<usize, StorageError> {
        let Some(local) = &self.local else { return Ok(0) };
        let root = self.root.as_ref().split('/').filter(|p| !p.is_empty()).collect::<Vec<_>>();
        local.delete_staged(&root).map_err(StorageError::Local)
    }

    /// Writes `_metadata` of checkpoint `id`, create-only: if it exists
    /// (another run committed this id), nothing is written. Returns once
    /// it is durable: the checkpoint is committed then. In cluster mode
    /// the commit is the commit log's entry at `log`, this run's position
    /// (from its claim), which moves on; other storage takes `None`.
    pub fn write_metadata(&self, id: u64, bytes: Vec<u8>, log: Option<&mut LogPosition>) -> Result<(), StorageError> {
        let relative = format!("{}_metadata", self.dir_of(id));
        let path = self.path(&relative);
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.runtime.block_on(self.store.put_opts(&path, PutPayload::from(bytes), opts)) {
            Ok(_) => {
                let committed = self.append_commit(id, log);
                if committed.is_err() {
                    // Not committed: nothing may take it for a checkpoint.
                    let _ = self.runtime.block_on(self.store.delete(&path));
                }
                committed
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                Err(StorageError::AlreadyCommitted { id, location: self.location(&relative) })
            }
            Err(source) => Err(StorageError::Io { op: "writing", location: self.location(&relative), cause: source }),
        }
    }

    /// Reads `_metadata` of checkpoint `id`, refusing one over
    /// [`MAX_METADATA`] bytes before reading it whole.
    pub fn read_metadata(&self, id: u64) -> Result<Bytes, StorageError> {
        let relative = format!("{}_metadata", self.dir_of(id));
        self.read_bounded(&relative, MAX_METADATA, "not a _metadata Weir wrote")
    }

    /// Opens `relative` in local directory `local`. Part by part, each a
    /// plain name, none a link, the file itself a regular one (a FIFO is
    /// refused, not waited on): the path stays under the directory
    /// whatever a file read from storage said.
    fn open_local(&self, local: &LocalStore, relative: &str) -> Result<std::fs::File, StorageError> {
        let mut parts: Vec<&str> = self.root.as_ref().split('/').filter(|p| !p.is_empty()).collect();
        for part in relative.split('/') {
            crate::paths::plain_name(part)
                .map_err(|e| StorageError::Corrupt { location: self.location(relative), message: e.to_string() })?;
            parts.push(part);
        }
        // A missing file stays object_store's NotFound, which callers
        // look for (an optional file, a segment not written).
        local.open_read(&parts).map_err(|e| match e {
            LocalError::NotFound { .. } => {
                StorageError::Io { op: "reading", location: self.location(relative), cause: local::to_store(e) }
            }
            other => StorageError::Local(other),
        })
    }

    /// Reads `relative` whole, refusing it, with `what` said, once it has
    /// more than `max` bytes: an object whose size nothing vouches for is
    /// never read past that.
    pub fn read_bounded(&self, relative: &str, max: u64, what: &str) -> Result<Bytes, StorageError> {
        use futures::StreamExt;
        let too_large = || StorageError::Corrupt {
            location: self.location(relative),
            message: format!("larger than {max} bytes: {what}"),
        };
        if let Some(local) = &self.local {
            // Directly: object_store's local store reads in 8 KiB chunks
            // through the runtime's blocking pool.
            use std::io::Read;
            let mut bytes = Vec::new();
            self.open_local(local, relative)?.take(max + 1).read_to_end(&mut bytes).map_err(|e| StorageError::Io {
                op: "reading",
                location: self.location(relative),
                cause: object_store::Error::Generic { store: "local", source: Box::new(e) },
            })?;
            return if bytes.len() as u64 > max { Err(too_large()) } else { Ok(Bytes::from(bytes)) };
        }
        let path = self.path(relative);
        let io = |cause| StorageError::Io { op: "reading", location: self.location(relative), cause };
        self.runtime.block_on(async {
            let mut stream = self.store.get(&path).await.map_err(io)?.into_stream();
            let mut bytes = Vec::new();
            while let Some(chunk) = stream.next().await {
                bytes.extend_from_slice(&chunk.map_err(io)?);
                if bytes.len() as u64 > max {
                    return Err(too_large());
                }
            }
            Ok(Bytes::from(bytes))
        })
    }

    /// The objects under `prefix` (relative to the job directory; all of
    /// them for ""), as paths relative to it, in no set order.
    pub fn list_under(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        let under = if prefix.is_empty() { self.root.clone() } else { self.path(prefix) };
        let objects: Vec<_> = self
            .runtime
            .block_on(self.store.list(Some(&under)).try_collect::<Vec<_>>())
            .map_err(|source| StorageError::Io { op: "listing", location: self.location(prefix), cause: source })?;
        Ok(objects
            .iter()
            .filter_map(|o| {
                Some(o.location.prefix_match(&self.root)?.map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/"))
            })
            .collect())
    }

    /// Ids of the checkpoints that have a `_metadata` (complete ones, or
    /// corrupt ones a reader will find out about), in increasing order.
    pub fn list_checkpoints(&self) -> Result<Vec<u64>, StorageError> {
        let objects: Vec<_> = self
            .runtime
            .block_on(self.store.list(Some(&self.root)).try_collect::<Vec<_>>())
            .map_err(|source| StorageError::Io { op: "listing", location: self.display.clone(), cause: source })?;
        let mut ids: Vec<u64> = objects
            .iter()
            .filter_map(|o| {
                let parts: Vec<_> = o.location.prefix_match(&self.root)?.collect();
                match parts.as_slice() {
                    [dir, file] if file.as_ref() == "_metadata" => dir.as_ref().strip_prefix("chk-")?.parse().ok(),
                    _ => None,
                }
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// Deletes checkpoint `id`: `_metadata` first, so a deletion cut short
    /// never leaves something that looks complete.
    pub fn delete_checkpoint(&self, id: u64) -> Result<(), StorageError> {
        let dir = checkpoint_dir_name(id);
        let prefix = if self.savepoint { self.root.clone() } else { self.path(&dir) };
        let location = self.checkpoint_location(id);
        let io = |source| StorageError::Io { op: "deleting", location: location.clone(), cause: source };
        let metadata = prefix.child("_metadata");
        match self.runtime.block_on(self.store.delete(&metadata)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(io(e)),
        }
        crate::crash_point::crash_point("delete.metadata-deleted");
        let rest: Vec<_> = self.runtime.block_on(self.store.list(Some(&prefix)).try_collect::<Vec<_>>()).map_err(io)?;
        for o in rest {
            match self.runtime.block_on(self.store.delete(&o.location)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(io(e)),
            }
        }
        Ok(())
    }
}

/// The largest `_metadata` read: far more than any real one (state past
/// the inline threshold lives in files; RocksDB checkpoints list file
/// names).
pub const MAX_METADATA: u64 = 64 << 20;

/// Bytes per part of a streamed upload (S3's minimum is 5 MiB).
const UPLOAD_PART: usize = 8 << 20;
/// Parts of one streamed upload in flight at once.
const UPLOADS_IN_FLIGHT: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: Option<String>) -> StorageSettings {
        StorageSettings {
            dir,
            inline_threshold: 16,
            memory_max_state_size: 64,
            fsync: true,
            s3: crate::config::S3Settings::default(),
            fenced_by: None,
            limits: crate::config::settings::ReadLimits::default(),
        }
    }

    #[test]
    fn files_round_trip_metadata_is_create_only_and_deletes_go_metadata_first() {
        let tmp = tempfile::tempdir().unwrap();
        let s = CheckpointStorage::open(&settings(Some(format!("file://{}", tmp.path().display()))), "job").unwrap();
        assert!(matches!(s.put_state(1, "op#0", "op-0.snap", b"small".to_vec()).unwrap(), StateHandle::Inline { .. }));
        let big = vec![7u8; 100];
        let handle = s.put_state(1, "op#0", "op-0.snap", big.clone()).unwrap();
        assert!(tmp.path().join("job/chk-1/op-0.snap").is_file());
        assert_eq!(s.read_state(&handle).unwrap(), big);
        assert_eq!(s.list_checkpoints().unwrap(), Vec::<u64>::new(), "no _metadata, not listed");
        s.write_metadata(1, b"m1".to_vec(), None).unwrap();
        let err = s.write_metadata(1, b"other".to_vec(), None).unwrap_err();
        assert!(matches!(err, StorageError::AlreadyCommitted { id: 1, .. }), "{err}");
        assert_eq!(s.read_metadata(1).unwrap(), &b"m1"[..], "the first commit stands");
        s.write_metadata(3, b"m3".to_vec(), None).unwrap();
        assert_eq!(s.list_checkpoints().unwrap(), vec![1, 3]);
        // A file that changed on disk is caught.
        std::fs::write(tmp.path().join("job/chk-1/op-0.snap"), vec![7u8; 99]).unwrap();
        assert!(matches!(s.read_state(&handle), Err(StorageError::Corrupt { .. })));
        s.delete_checkpoint(1).unwrap();
        assert_eq!(s.list_checkpoints().unwrap(), vec![3]);
        assert!(!tmp.path().join("job/chk-1/op-0.snap").exists());
    }

    #[test]
    fn memory_storage_has_a_size_limit() {
        let s = CheckpointStorage::open(&settings(None), "job").unwrap();
        assert!(!s.is_durable());
        let h = s.put_state(1, "op#0", "op-0.snap", vec![1u8; 40]).unwrap();
        assert_eq!(s.read_state(&h).unwrap().len(), 40);
        let err = s.put_state(1, "op#0", "op-0.snap", vec![1u8; 65]).unwrap_err();
        assert!(err.to_string().contains("over the 64-byte limit"), "{err}");
    }

    #[test]
    fn bad_dirs_are_named() {
        let err = CheckpointStorage::open(&settings(Some("file://relative/x".into())), "job").unwrap_err();
        assert!(err.to_string().contains("must be absolute"), "{err}");
        let err = CheckpointStorage::open(&settings(Some("s3://".into())), "job").unwrap_err();
        assert!(err.to_string().contains("no bucket"), "{err}");
    }
}
