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

use super::metadata::StateHandle;
use crate::config::StorageSettings;
use crate::fault::{Classify, Domain, RetryHint};
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreScheme, PutMode, PutOptions, PutPayload};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Why storage failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The directory setting cannot be used.
    #[error("state.checkpoints.dir = \"{dir}\": {message}")]
    BadDir {
        /// The setting.
        dir: String,
        /// What is wrong.
        message: String,
    },
    /// `_metadata` of this checkpoint exists already: another run (or host)
    /// committed it first.
    #[error("{location} already exists: another run of this job committed checkpoint {id} first")]
    AlreadyCommitted {
        /// The checkpoint.
        id: u64,
        /// Where.
        location: String,
    },
    /// A state is too large for in-memory storage.
    #[error(
        "{task}: state is {size} bytes, over the {limit}-byte limit of in-memory checkpoint storage (set state.checkpoints.dir to a file:// or s3:// directory, or raise state.checkpoints.memory_max_state_size)"
    )]
    TooLargeForMemory {
        /// The subtask.
        task: String,
        /// Its state's size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A read, write, list or delete failed.
    #[error("{op} {location}: {cause}")]
    Io {
        /// "writing", "reading", ...
        op: &'static str,
        /// Where.
        location: String,
        /// The store's error.
        cause: object_store::Error,
    },
    /// A state file does not match what `_metadata` says of it.
    #[error("{location} is corrupt: {message}")]
    Corrupt {
        /// Where.
        location: String,
        /// How.
        message: String,
    },
    /// The background runtime that drives the store could not start.
    #[error("cannot start the storage runtime: {0}")]
    Runtime(std::io::Error),
}

impl Classify for StorageError {
    fn domain(&self) -> Domain {
        match self {
            StorageError::BadDir { .. } | StorageError::TooLargeForMemory { .. } => Domain::User,
            StorageError::AlreadyCommitted { .. } | StorageError::Io { .. } | StorageError::Corrupt { .. } => {
                Domain::External
            }
            StorageError::Runtime(_) => Domain::Internal,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            // A store that was down may be up again; a lost race for one
            // checkpoint id does not repeat (the next attempt takes another).
            StorageError::Io { .. } | StorageError::AlreadyCommitted { .. } | StorageError::Runtime(_) => {
                RetryHint::Restart
            }
            StorageError::BadDir { .. } | StorageError::TooLargeForMemory { .. } | StorageError::Corrupt { .. } => {
                RetryHint::NoRetry
            }
        }
    }
}

/// Where checkpoints of one job are stored.
pub struct CheckpointStorage {
    store: Arc<dyn ObjectStore>,
    /// `<prefix>/<job>`: every object of this job is under it.
    root: ObjectPath,
    /// The job directory as the user would write it, for messages.
    display: String,
    /// Some(limit) when the store is host memory.
    memory_limit: Option<u64>,
    inline_threshold: u64,
    /// A savepoint directory: one checkpoint, its files at the root, rather
    /// than a job's `chk-<n>/` directories.
    savepoint: bool,
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
        let runtime = runtime()?;
        let Some(dir) = settings.dir.as_deref() else {
            return Ok(CheckpointStorage {
                store: Arc::new(object_store::memory::InMemory::new()),
                root: ObjectPath::from(job),
                display: format!("memory:/{job}"),
                memory_limit: Some(settings.memory_max_state_size),
                inline_threshold: settings.inline_threshold,
                savepoint: false,
                runtime,
            });
        };
        let (store, root) = open_dir(dir, &settings.s3)?;
        Ok(CheckpointStorage {
            store,
            root: root.child(job),
            display: format!("{}/{job}", dir.trim_end_matches('/')),
            memory_limit: None,
            inline_threshold: settings.inline_threshold,
            savepoint: false,
            runtime,
        })
    }

    /// Opens savepoint directory `uri` (`file://` or `s3://`, with the S3
    /// options of `settings`): `_metadata` and state files at its root, so
    /// the directory can be copied elsewhere whole and still be restored.
    pub fn open_savepoint(settings: &StorageSettings, uri: &str) -> Result<Self, StorageError> {
        let runtime = runtime()?;
        let uri = uri.trim_end_matches('/');
        let uri = uri.strip_suffix("/_metadata").unwrap_or(uri);
        let (store, root) = open_dir(uri, &settings.s3)?;
        Ok(CheckpointStorage {
            store,
            root,
            display: uri.to_string(),
            memory_limit: None,
            inline_threshold: settings.inline_threshold,
            savepoint: true,
            runtime,
        })
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

    /// Reads a snapshot handle's bytes, checking size and checksum. An
    /// incremental RocksDB handle is a set of files: read them with
    /// [`CheckpointStorage::get_object`].
    pub fn read_state(&self, handle: &StateHandle) -> Result<Bytes, StorageError> {
        match handle {
            StateHandle::Inline { data } => Ok(Bytes::from(data.clone())),
            StateHandle::File { path, size, crc32 } => self.get_object(path, *size, *crc32),
            StateHandle::Rocksdb { .. } => Err(StorageError::Corrupt {
                location: self.display.clone(),
                message: "an incremental RocksDB handle is not one snapshot file".into(),
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
        Ok((size, crc))
    }

    /// Reads `relative`, checking it has `size` bytes with CRC-32 `crc32`.
    /// It is read as a stream and never held past `size` bytes, whatever
    /// the store holds.
    pub fn get_object(&self, relative: &str, size: u64, crc32: u32) -> Result<Bytes, StorageError> {
        use std::io::Read;
        let mut reader = self.open_reader(relative, size, crc32)?;
        let mut bytes = Vec::new();
        let corrupt = |message: String| StorageError::Corrupt { location: self.location(relative), message };
        reader.read_to_end(&mut bytes).map_err(|e| corrupt(e.to_string()))?;
        Ok(Bytes::from(bytes))
    }

    /// Opens `relative` for reading as a stream, chunk by chunk, so it is
    /// never in memory whole; at its end the reader checks it had `size`
    /// bytes with CRC-32 `crc32`, and fails the read if not.
    pub fn open_reader(&self, relative: &str, size: u64, crc32: u32) -> Result<ObjectReader<'_>, StorageError> {
        let location = self.location(relative);
        let stream = self
            .runtime
            .block_on(self.store.get(&self.path(relative)))
            .map_err(|source| StorageError::Io { op: "reading", location: location.clone(), cause: source })?
            .into_stream();
        Ok(ObjectReader {
            storage: self,
            stream,
            chunk: Bytes::new(),
            hasher: crc32fast::Hasher::new(),
            read: 0,
            size,
            crc32,
            location,
        })
    }

    /// Deletes `relative`; a missing object is not an error.
    pub fn delete_object(&self, relative: &str) -> Result<(), StorageError> {
        match self.runtime.block_on(self.store.delete(&self.path(relative))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StorageError::Io { op: "deleting", location: self.location(relative), cause: source }),
        }
    }

    /// Writes `_metadata` of checkpoint `id`, create-only: if it exists
    /// (another run committed this id), nothing is written.
    pub fn write_metadata(&self, id: u64, bytes: Vec<u8>) -> Result<(), StorageError> {
        let relative = format!("{}_metadata", self.dir_of(id));
        let path = self.path(&relative);
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.runtime.block_on(self.store.put_opts(&path, PutPayload::from(bytes), opts)) {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {
                Err(StorageError::AlreadyCommitted { id, location: self.location(&relative) })
            }
            Err(source) => Err(StorageError::Io { op: "writing", location: self.location(&relative), cause: source }),
        }
    }

    /// Reads `_metadata` of checkpoint `id`, refusing one over
    /// [`MAX_METADATA`] bytes before reading it whole.
    pub fn read_metadata(&self, id: u64) -> Result<Bytes, StorageError> {
        use futures::StreamExt;
        let relative = format!("{}_metadata", self.dir_of(id));
        let path = self.path(&relative);
        let io = |cause| StorageError::Io { op: "reading", location: self.location(&relative), cause };
        self.runtime.block_on(async {
            let mut stream = self.store.get(&path).await.map_err(io)?.into_stream();
            let mut bytes = Vec::new();
            while let Some(chunk) = stream.next().await {
                bytes.extend_from_slice(&chunk.map_err(io)?);
                if bytes.len() as u64 > MAX_METADATA {
                    return Err(StorageError::Corrupt {
                        location: self.location(&relative),
                        message: format!("larger than {MAX_METADATA} bytes: not a _metadata Weir wrote"),
                    });
                }
            }
            Ok(Bytes::from(bytes))
        })
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

/// A stored object read as a stream ([`CheckpointStorage::open_reader`]).
pub struct ObjectReader<'a> {
    storage: &'a CheckpointStorage,
    stream: futures::stream::BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
    hasher: crc32fast::Hasher,
    read: u64,
    size: u64,
    crc32: u32,
    location: String,
}

impl std::io::Read for ObjectReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use futures::StreamExt;
        while self.chunk.is_empty() {
            match self.storage.runtime.block_on(self.stream.next()) {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => return Err(std::io::Error::other(format!("reading {}: {e}", self.location))),
                None => {
                    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
                    if self.read != self.size {
                        return Err(bad(format!("{} bytes, _metadata says {} (truncated?)", self.read, self.size)));
                    }
                    if self.hasher.clone().finalize() != self.crc32 {
                        return Err(bad("checksum mismatch".into()));
                    }
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.chunk.len());
        if self.read + n as u64 > self.size {
            // Never hand on more than `_metadata` said the object holds.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("more than the {} bytes _metadata says", self.size),
            ));
        }
        let part = self.chunk.split_to(n);
        buf[..n].copy_from_slice(&part);
        self.hasher.update(&part);
        self.read += n as u64;
        Ok(n)
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, StorageError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("weir-storage")
        .enable_all()
        .build()
        .map_err(StorageError::Runtime)
}

/// The store behind a `file://` or `s3://` directory, and the path of the
/// directory in it (a local directory is created). object_store parses the
/// URI; the stores are built here rather than by `parse_url_opts`, which
/// cannot set the retry policy S3 needs (see [`s3_store`]).
fn open_dir(dir: &str, s3: &crate::config::S3Settings) -> Result<(Arc<dyn ObjectStore>, ObjectPath), StorageError> {
    let bad = |message: String| StorageError::BadDir { dir: dir.to_string(), message };
    if !(dir.starts_with("file://") || dir.starts_with("s3://")) {
        return Err(bad("must start with file:// or s3://".into()));
    }
    let url =
        url::Url::parse(dir).map_err(|e| bad(format!("not a URI ({e}): use file:///path or s3://bucket/prefix")))?;
    if url.scheme() == "s3" && url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no bucket: write s3://bucket or s3://bucket/prefix".into()));
    }
    match (url.scheme(), ObjectStoreScheme::parse(&url)) {
        ("file", _) => {
            let path = url.to_file_path().ok().filter(|p| p.is_absolute()).ok_or_else(|| {
                bad("a file:// directory must be absolute, as in file:///var/lib/weir/checkpoints".into())
            })?;
            std::fs::create_dir_all(&path).map_err(|e| bad(format!("cannot create {}: {e}", path.display())))?;
            let local = object_store::local::LocalFileSystem::new_with_prefix(&path)
                .map_err(|e| bad(e.to_string()))?
                .with_automatic_cleanup(true);
            Ok((Arc::new(local), ObjectPath::default()))
        }
        ("s3", Ok((ObjectStoreScheme::AmazonS3, prefix))) => {
            let store = s3_store(&url, s3).map_err(|e| bad(e.to_string()))?;
            Ok((Arc::new(store), prefix))
        }
        _ => Err(bad("must start with file:// or s3://".into())),
    }
}

/// An S3 client for the bucket of `url`: the standard AWS environment
/// variables, then the `state.checkpoints.s3.*` settings over them. Retries
/// are few and short, so an unreachable store fails one checkpoint in
/// seconds rather than stalling the job (object_store's default retries for
/// minutes).
fn s3_store(
    url: &url::Url,
    s3: &crate::config::S3Settings,
) -> Result<object_store::aws::AmazonS3, object_store::Error> {
    use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
    use object_store::{BackoffConfig, ClientOptions, RetryConfig};
    let mut b = AmazonS3Builder::from_env()
        .with_url(url.as_str())
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 3,
            retry_timeout: Duration::from_secs(10),
        })
        .with_client_options(
            ClientOptions::new().with_timeout(Duration::from_secs(30)).with_connect_timeout(Duration::from_secs(5)),
        );
    if let Some(e) = &s3.endpoint {
        b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        if e.starts_with("http://") {
            b = b.with_allow_http(true);
        }
    }
    // Our client options replace those `from_env` read, AWS_ALLOW_HTTP
    // among them: honour it here.
    let env_http = std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    if s3.allow_http || env_http {
        b = b.with_allow_http(true);
    }
    if let Some(r) = &s3.region {
        b = b.with_region(r);
    }
    if let Some(k) = &s3.access_key_id {
        b = b.with_access_key_id(k);
    }
    if let Some(k) = &s3.secret_access_key {
        b = b.with_secret_access_key(k);
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: Option<String>) -> StorageSettings {
        StorageSettings {
            dir,
            inline_threshold: 16,
            memory_max_state_size: 64,
            s3: crate::config::S3Settings::default(),
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
        s.write_metadata(1, b"m1".to_vec()).unwrap();
        let err = s.write_metadata(1, b"other".to_vec()).unwrap_err();
        assert!(matches!(err, StorageError::AlreadyCommitted { id: 1, .. }), "{err}");
        assert_eq!(s.read_metadata(1).unwrap(), &b"m1"[..], "the first commit stands");
        s.write_metadata(3, b"m3".to_vec()).unwrap();
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
