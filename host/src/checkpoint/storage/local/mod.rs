//! The `file://` store: object_store's interface over a local directory,
//! in place of its `LocalFileSystem`, which follows symbolic links when it
//! lists, writes and deletes (a `chk-<n>` link to another tree had that
//! tree listed, written into and emptied by retention). Here nothing
//! beneath the directory is reached through a link ([`beneath`]): listing
//! refuses a link, FIFO or other non-regular entry with its path, opens
//! refuse them too, deletes remove one regular file and then the
//! directories it leaves empty (never a tree, never through a link), and
//! every directory on the way must be the host user's alone. New
//! directories are 0700 and files 0600; with `fsync`, a write returns only
//! once the file and the name it was given are durable.
//!
//! Writes go to `<name>#<n>` first and are renamed (or, create-only, hard
//! linked) into place, as `LocalFileSystem` did, so a reader never sees a
//! half-written object and a write cut short leaves only a `#<n>` name,
//! which [`LocalStore::delete_staged`] removes. S3 and host memory are not
//! this module's.

pub mod beneath;

use async_trait::async_trait;
use beneath::{Base, Chain, IfMissing, LocalError};
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path as ObjectPath;
use object_store::{
    Attributes, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};
use rustix::fs::{AtFlags, FileType};
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A local directory as an object store.
pub struct LocalStore {
    base: Arc<Base>,
}

impl fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalStore").field("dir", &self.base.path).finish()
    }
}

impl fmt::Display for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalStore({})", self.base.path.display())
    }
}

/// Whether `name` is a staged write's (`<name>#<digits>`).
fn is_staged(name: &str) -> bool {
    name.rsplit_once('#').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// An object path's parts: its directories and its file name.
fn split(location: &ObjectPath) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = location.as_ref().split('/').filter(|p| !p.is_empty()).collect();
    let name = parts.pop().unwrap_or("");
    (parts, name)
}

impl LocalStore {
    /// The store over directory `dir` (created 0700 if missing and
    /// `if_missing` says so), which must be the host user's alone.
    pub fn open(dir: &Path, fsync: bool, if_missing: IfMissing) -> Result<Self, LocalError> {
        Ok(LocalStore { base: Arc::new(Base::open(dir, fsync, if_missing)?) })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.base.path
    }

    /// Opens the object at `parts` (plain names, relative to the store)
    /// for reading: a regular file, reached without a link, or an error
    /// naming what is there instead.
    pub fn open_read(&self, parts: &[&str]) -> Result<File, LocalError> {
        let Some((name, dirs)) = parts.split_last() else {
            return Err(LocalError::NotFound { path: self.base.path.clone() });
        };
        let chain = self.chain(dirs, false)?;
        self.base.open_file(&chain, name)
    }

    fn chain(&self, dirs: &[&str], create: bool) -> Result<Chain, LocalError> {
        self.base.dirs(dirs, create)?.ok_or_else(|| LocalError::NotFound {
            path: self.base.plain(dirs).unwrap_or_else(|_| self.base.path.clone()),
        })
    }

    /// Every object under directory `dirs`, checking the whole tree on the
    /// way: a link, FIFO or other non-regular entry, or a directory
    /// another user owns or others may write, fails the listing with its
    /// path. Staged writes are listed only with `staged`.
    pub fn walk(&self, dirs: &[&str], staged: bool) -> Result<Vec<(Vec<String>, u64)>, LocalError> {
        let Some(chain) = self.base.dirs(dirs, false)? else { return Ok(Vec::new()) };
        let mut found = Vec::new();
        let prefix: Vec<String> = dirs.iter().map(|d| d.to_string()).collect();
        let mut pending = vec![(chain.dirs.into_iter().last().expect("the base"), chain.path, prefix)];
        while let Some((dir, path, prefix)) = pending.pop() {
            let entries =
                rustix::fs::Dir::read_from(&dir).map_err(|e| LocalError::Io { path: path.clone(), cause: e.into() })?;
            for entry in entries {
                let entry = entry.map_err(|e| LocalError::Io { path: path.clone(), cause: e.into() })?;
                let Ok(name) = entry.file_name().to_str() else {
                    tracing::warn!(dir = %path.display(), name = ?entry.file_name(), "skipping a name that is not UTF-8");
                    continue;
                };
                if name == "." || name == ".." {
                    continue;
                }
                let child = path.join(name);
                let Some((kind, size)) = self.base.entry_type(&dir, name, &child)? else { continue };
                let mut parts = prefix.clone();
                parts.push(name.to_string());
                match kind {
                    FileType::RegularFile if staged || !is_staged(name) => found.push((parts, size)),
                    FileType::RegularFile => {}
                    FileType::Directory => {
                        let dirs: Vec<&str> = parts.iter().map(String::as_str).collect();
                        // Gone since it was read (a concurrent delete): skipped,
                        // as a vanished file is.
                        let Some(chain) = self.base.dirs(&dirs, false)? else { continue };
                        pending.push((chain.dirs.into_iter().last().expect("the base"), chain.path, parts));
                    }
                    FileType::Symlink => return Err(LocalError::Link { path: child }),
                    other => {
                        return Err(LocalError::NotRegular {
                            path: child,
                            kind: beneath::kind_of(other),
                            expected: "a regular file or directory",
                        });
                    }
                }
            }
        }
        Ok(found)
    }

    /// Deletes, under directory `dirs`, the files writes cut short left
    /// (`<name>#<n>`); returns how many.
    pub fn delete_staged(&self, dirs: &[&str]) -> Result<usize, LocalError> {
        let mut deleted = 0;
        for (parts, _) in self.walk(dirs, true)? {
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let (dirs, name) = parts.split_at(parts.len() - 1);
            if is_staged(name[0]) {
                self.delete_file(dirs, name[0])?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Writes `payload` as `dirs/name`: staged, then renamed into place,
    /// or hard-linked when `create_only` (failing if it exists), then
    /// synced.
    fn put_file(&self, dirs: &[&str], name: &str, payload: &PutPayload, create_only: bool) -> Result<(), LocalError> {
        let chain = self.chain(dirs, true)?;
        let (file, staged) = self.stage(&chain, name)?;
        let written = (|| {
            let mut offset = 0u64;
            for chunk in payload.iter() {
                file.write_all_at(chunk, offset)?;
                offset += chunk.len() as u64;
            }
            Ok(())
        })();
        let path = chain.path.join(name);
        let placed = written
            .map_err(|cause| LocalError::Io { path: path.clone(), cause })
            .and_then(|()| self.place(&chain, &staged, name, create_only));
        if placed.is_err() {
            let _ = rustix::fs::unlinkat(chain.last(), staged.as_str(), AtFlags::empty());
        }
        placed
    }

    /// A new staged file for `name` in `chain`.
    fn stage(&self, chain: &Chain, name: &str) -> Result<(File, String), LocalError> {
        loop {
            let staged = format!("{name}#{}", rand::random::<u32>());
            match self.base.create_file(chain, &staged) {
                Err(LocalError::Exists { .. }) => continue,
                other => return other.map(|f| (f, staged)),
            }
        }
    }

    /// Moves written file `staged` of `chain` to `name`, durably.
    fn place(&self, chain: &Chain, staged: &str, name: &str, create_only: bool) -> Result<(), LocalError> {
        let path = crate::paths::join_under(&chain.path, name)
            .map_err(|cause| LocalError::BadName { path: chain.path.clone(), cause })?;
        let dir = chain.last();
        if create_only {
            // A hard link fails if the name exists, whatever it is.
            match rustix::fs::linkat(dir, staged, dir, name, AtFlags::empty()) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => return Err(LocalError::Exists { path }),
                Err(e) => return Err(LocalError::Io { path, cause: e.into() }),
            }
            let _ = rustix::fs::unlinkat(dir, staged, AtFlags::empty());
        } else {
            // A rename replaces a link at `name` itself, never its target.
            rustix::fs::renameat(dir, staged, dir, name)
                .map_err(|e| LocalError::Io { path: path.clone(), cause: e.into() })?;
        }
        if self.base.fsync {
            // The file by its final name, then the directory holding the
            // name: both durable before the call returns.
            self.base
                .open_file(chain, name)?
                .sync_all()
                .map_err(|cause| LocalError::Io { path: path.clone(), cause })?;
            dir.sync_all().map_err(|cause| LocalError::Io { path: chain.path.clone(), cause })?;
        }
        Ok(())
    }

    /// Deletes file `dirs/name` (a link there: the link itself, never what
    /// it names), then each directory above it that it left empty, up to
    /// the store's own.
    fn delete_file(&self, dirs: &[&str], name: &str) -> Result<(), LocalError> {
        let chain = self.chain(dirs, false)?;
        let path = self.base.plain(dirs)?.join(name);
        match rustix::fs::unlinkat(chain.last(), name, AtFlags::empty()) {
            Ok(()) => {}
            Err(rustix::io::Errno::NOENT) => return Err(LocalError::NotFound { path }),
            Err(e) => return Err(LocalError::Io { path, cause: e.into() }),
        }
        // rmdir removes only an empty directory, and never through a link.
        for (i, dir) in dirs.iter().enumerate().rev() {
            if rustix::fs::unlinkat(&chain.dirs[i], *dir, AtFlags::REMOVEDIR).is_err() {
                break;
            }
        }
        Ok(())
    }

    fn stat_file(&self, location: &ObjectPath) -> Result<(ObjectMeta, File), LocalError> {
        let (dirs, name) = split(location);
        let file = self.open_read(&[dirs.as_slice(), &[name]].concat())?;
        let size = file
            .metadata()
            .map_err(|cause| LocalError::Io { path: self.base.path.join(location.as_ref()), cause })?
            .len();
        Ok((meta(location.clone(), size), file))
    }
}

fn meta(location: ObjectPath, size: u64) -> ObjectMeta {
    // Modification times are not kept: nothing of Weir's reads them.
    ObjectMeta { location, last_modified: Default::default(), size, e_tag: None, version: None }
}

/// `e` as object_store says it.
pub fn to_store(e: LocalError) -> object_store::Error {
    match e {
        LocalError::NotFound { ref path } => {
            object_store::Error::NotFound { path: path.display().to_string(), source: Box::new(e) }
        }
        LocalError::Exists { ref path } => {
            object_store::Error::AlreadyExists { path: path.display().to_string(), source: Box::new(e) }
        }
        other => object_store::Error::Generic { store: "local", source: Box::new(other) },
    }
}

fn not_implemented() -> object_store::Error {
    object_store::Error::NotImplemented
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let create_only = match opts.mode {
            PutMode::Overwrite => false,
            PutMode::Create => true,
            PutMode::Update(_) => return Err(not_implemented()),
        };
        let (dirs, name) = split(location);
        self.put_file(&dirs, name, &payload, create_only).map_err(to_store)?;
        Ok(PutResult { e_tag: None, version: None })
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let (dirs, name) = split(location);
        let chain = self.chain(&dirs, true).map_err(to_store)?;
        let (file, staged) = self.stage(&chain, name).map_err(to_store)?;
        Ok(Box::new(Upload {
            store: LocalStore { base: self.base.clone() },
            dirs: dirs.iter().map(|d| d.to_string()).collect(),
            name: name.to_string(),
            staged,
            file: Arc::new(file),
            offset: 0,
            failed: None,
        }))
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        if options.range.is_some() || options.if_match.is_some() || options.if_none_match.is_some() {
            return Err(not_implemented());
        }
        let (meta, file) = self.stat_file(location).map_err(to_store)?;
        let path = self.base.path.join(location.as_ref());
        Ok(GetResult {
            range: 0..meta.size,
            meta,
            payload: GetResultPayload::File(file, path),
            attributes: Attributes::default(),
        })
    }

    async fn delete(&self, location: &ObjectPath) -> object_store::Result<()> {
        let (dirs, name) = split(location);
        self.delete_file(&dirs, name).map_err(to_store)
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let dirs: Vec<&str> =
            prefix.map(|p| p.as_ref().split('/').filter(|p| !p.is_empty()).collect()).unwrap_or_default();
        let listed = self.walk(&dirs, false).map_err(to_store).and_then(|found| {
            found
                .into_iter()
                .map(|(parts, size)| {
                    ObjectPath::parse(parts.join("/"))
                        .map(|location| meta(location, size))
                        .map_err(|e| object_store::Error::Generic { store: "local", source: Box::new(e) })
                })
                .collect::<object_store::Result<Vec<_>>>()
        });
        match listed {
            Ok(all) => futures::stream::iter(all.into_iter().map(Ok)).boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        }
    }

    async fn list_with_delimiter(&self, _prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        Err(not_implemented())
    }

    async fn copy(&self, _from: &ObjectPath, _to: &ObjectPath) -> object_store::Result<()> {
        Err(not_implemented())
    }

    async fn copy_if_not_exists(&self, _from: &ObjectPath, _to: &ObjectPath) -> object_store::Result<()> {
        Err(not_implemented())
    }
}

/// A streamed write: parts are written in order into the staged file as
/// they come (the caller's thread does the I/O), renamed into place at the
/// end.
struct Upload {
    store: LocalStore,
    dirs: Vec<String>,
    name: String,
    staged: String,
    file: Arc<File>,
    offset: u64,
    /// The first write that failed, reported by the next call.
    failed: Option<String>,
}

impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upload").field("name", &self.name).field("offset", &self.offset).finish()
    }
}

impl Upload {
    fn chain(&self) -> Result<Chain, LocalError> {
        let dirs: Vec<&str> = self.dirs.iter().map(String::as_str).collect();
        self.store.chain(&dirs, false)
    }

    fn path(&self) -> PathBuf {
        self.store.base.path.join(self.dirs.join("/")).join(&self.name)
    }
}

#[async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        if self.failed.is_none() {
            for chunk in data.iter() {
                if let Err(e) = self.file.write_all_at(chunk, self.offset) {
                    self.failed = Some(e.to_string());
                    break;
                }
                self.offset += chunk.len() as u64;
            }
        }
        let result = match &self.failed {
            Some(e) => Err(to_store(LocalError::Io { path: self.path(), cause: std::io::Error::other(e.clone()) })),
            None => Ok(()),
        };
        Box::pin(futures::future::ready(result))
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if let Some(e) = &self.failed {
            return Err(to_store(LocalError::Io { path: self.path(), cause: std::io::Error::other(e.clone()) }));
        }
        let chain = self.chain().map_err(to_store)?;
        self.store.place(&chain, &self.staged, &self.name, false).map_err(to_store)?;
        Ok(PutResult { e_tag: None, version: None })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        let chain = self.chain().map_err(to_store)?;
        match rustix::fs::unlinkat(chain.last(), self.staged.as_str(), AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(to_store(LocalError::Io { path: self.path(), cause: e.into() })),
        }
    }
}

/// `bytes` of `location`, for tests.
#[cfg(test)]
fn read(store: &LocalStore, location: &str) -> bytes::Bytes {
    use std::io::Read;
    let parts: Vec<&str> = location.split('/').collect();
    let mut out = Vec::new();
    store.open_read(&parts).unwrap().read_to_end(&mut out).unwrap();
    bytes::Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use std::os::unix::fs::MetadataExt;

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    #[test]
    fn objects_round_trip_and_deletes_stop_at_links_and_full_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let store = LocalStore::open(&tmp.path().join("ck"), true, IfMissing::Create).unwrap();
        let at = |s: &str| ObjectPath::parse(s).unwrap();
        block(store.put(&at("job/chk-1/a"), PutPayload::from_static(b"one"))).unwrap();
        block(store.put(&at("job/chk-1/b"), PutPayload::from_static(b"two"))).unwrap();
        assert_eq!(read(&store, "job/chk-1/a"), &b"one"[..]);
        let create = PutOptions { mode: PutMode::Create, ..Default::default() };
        let err = block(store.put_opts(&at("job/chk-1/a"), PutPayload::from_static(b"x"), create.clone())).unwrap_err();
        assert!(matches!(err, object_store::Error::AlreadyExists { .. }), "{err}");
        assert_eq!(std::fs::metadata(tmp.path().join("ck/job/chk-1/a")).unwrap().mode() & 0o777, 0o600);
        let mut listed: Vec<String> = block(store.list(Some(&at("job"))).try_collect::<Vec<_>>())
            .unwrap()
            .iter()
            .map(|m| m.location.to_string())
            .collect();
        listed.sort();
        assert_eq!(listed, ["job/chk-1/a", "job/chk-1/b"]);
        // A planted link: listing names it, nothing is deleted through it.
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("precious"), b"v").unwrap();
        std::os::unix::fs::symlink(&victim, tmp.path().join("ck/job/chk-2")).unwrap();
        let err = block(store.list(Some(&at("job"))).try_collect::<Vec<_>>()).unwrap_err();
        assert!(err.to_string().contains("job/chk-2 is a symbolic link"), "{err}");
        assert!(block(store.delete(&at("job/chk-2/precious"))).is_err());
        assert!(block(store.put(&at("job/chk-2/new"), PutPayload::from_static(b"x"))).is_err());
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
        // Deleting the link's own name removes the link, not its target.
        block(store.delete(&at("job/chk-2"))).unwrap();
        assert!(victim.join("precious").exists());
        assert!(std::fs::symlink_metadata(tmp.path().join("ck/job/chk-2")).is_err());
        // Deleting the last file of a directory removes the directory.
        block(store.delete(&at("job/chk-1/a"))).unwrap();
        block(store.delete(&at("job/chk-1/b"))).unwrap();
        assert!(!tmp.path().join("ck/job/chk-1").exists());
        assert!(matches!(block(store.delete(&at("job/chk-1/b"))), Err(object_store::Error::NotFound { .. })));
    }

    #[test]
    fn streamed_writes_land_whole_and_staged_ones_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let store = LocalStore::open(tmp.path(), false, IfMissing::Create).unwrap();
        let at = ObjectPath::parse("job/chk-1/big").unwrap();
        let mut up = block(store.put_multipart(&at)).unwrap();
        block(up.put_part(PutPayload::from_static(b"ab"))).unwrap();
        block(up.put_part(PutPayload::from_static(b"cd"))).unwrap();
        assert!(store.walk(&["job"], false).unwrap().is_empty(), "not there until complete");
        block(up.complete()).unwrap();
        assert_eq!(read(&store, "job/chk-1/big"), &b"abcd"[..]);
        let mut cut = block(store.put_multipart(&ObjectPath::parse("job/chk-1/cut").unwrap())).unwrap();
        block(cut.put_part(PutPayload::from_static(b"x"))).unwrap();
        drop(cut);
        assert_eq!(store.delete_staged(&["job"]).unwrap(), 1);
        assert_eq!(store.walk(&["job"], true).unwrap().len(), 1);
    }
}
