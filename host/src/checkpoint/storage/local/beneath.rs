//! The file system beneath a local storage directory, reached without ever
//! following a link: every path component is a plain name opened on its
//! own, relative to the directory before it, with `O_NOFOLLOW` (what
//! `openat2`'s `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` does in one call, here
//! component by component so that each directory on the way is also
//! checked and, when writing, created). A link, a FIFO, a device or a
//! socket where Weir expects its own file or directory is refused with the
//! path named; so is a directory another user owns or others may write
//! (they could swap what it holds between two calls). Weir's directories
//! are created 0700 and its files 0600.
//!
//! Only the directory a setting names (the base) is reached through the
//! ordinary path lookup: the host settings are trusted, the tree beneath is
//! not. This module does I/O only; it does not know what Weir stores.

use crate::paths::UnsafeName;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a path beneath a local storage directory cannot be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The file system failed.
    #[error("{path}: {cause}")]
    Io {
        /// Where.
        path: PathBuf,
        /// The system's error.
        cause: io::Error,
    },
    /// Nothing there.
    #[error("{path} does not exist")]
    NotFound {
        /// Where.
        path: PathBuf,
    },
    /// A create-only write found the name taken.
    #[error("{path} exists already")]
    Exists {
        /// Where.
        path: PathBuf,
    },
    /// A symbolic link where Weir expects its own file or directory.
    #[error("{path} is a symbolic link: Weir follows no link in its storage directories (remove it)")]
    Link {
        /// Where.
        path: PathBuf,
    },
    /// A FIFO, socket, device, or a directory where a file belongs (or
    /// the other way round).
    #[error("{path} is {kind}, not {expected}: refused")]
    NotRegular {
        /// Where.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
        /// What Weir expected.
        expected: &'static str,
    },
    /// A directory others can change.
    #[error("{path} {why}")]
    Untrusted {
        /// The directory.
        path: PathBuf,
        /// Whose it is, or who may write it.
        why: String,
    },
    /// A stored name that is no plain file name.
    #[error("{path}: {cause}")]
    BadName {
        /// The directory it would have been in.
        path: PathBuf,
        /// What is wrong with it.
        cause: UnsafeName,
    },
}

impl LocalError {
    /// Whether the directory's own state is at fault (a link, a FIFO, an
    /// untrusted directory, a bad name): nothing a retry changes.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            LocalError::Link { .. }
                | LocalError::NotRegular { .. }
                | LocalError::Untrusted { .. }
                | LocalError::BadName { .. }
        )
    }
}

/// Mode of the directories Weir creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files Weir creates.
pub const FILE_MODE: u32 = 0o600;

/// What a file-system object is, in words, for errors.
pub fn kind_of(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown type",
    }
}

/// Fails unless the open directory `dir` (at `path`) belongs to the host's
/// user and no one else may write it (as ssh treats its keys).
pub fn check_trusted(dir: &File, path: &Path) -> Result<(), LocalError> {
    let meta = dir.metadata().map_err(|cause| LocalError::Io { path: path.to_path_buf(), cause })?;
    let untrusted = |why: String| Err(LocalError::Untrusted { path: path.to_path_buf(), why });
    if !meta.is_dir() {
        return Err(LocalError::NotRegular {
            path: path.to_path_buf(),
            kind: "not a directory",
            expected: "a directory",
        });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return untrusted(format!("belongs to user {}, not to the user running the host ({me}): refused", meta.uid()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return untrusted(format!("is writable by others (mode {mode:o}): refused (chmod go-w it)"));
    }
    Ok(())
}

/// Creates `path` and its missing parents with mode 0700 (fsyncing each
/// new directory's parent when `fsync`), without following a link at
/// `path` itself, and checks that it is a directory the host's user owns
/// and no one else may write. For the directories settings name (the
/// RocksDB local directory, a checkpoint or savepoint directory).
pub fn ensure_private_dir(path: &Path, fsync: bool) -> Result<File, LocalError> {
    create_missing(path, fsync).map_err(|cause| LocalError::Io { path: path.to_path_buf(), cause })?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| open_error(path, e.into(), "a directory"))?;
    let dir = File::from(fd);
    check_trusted(&dir, path)?;
    Ok(dir)
}

/// Creates `path` (0700) and its missing parents, each new one's parent
/// fsynced when `fsync`. A name that exists (whatever it is) is left to
/// the caller's check.
fn create_missing(path: &Path, fsync: bool) -> io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        create_missing(parent, fsync)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(path) {
        // Another thread made it meanwhile: checked like any.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        other => other?,
    }
    match parent {
        Some(parent) if fsync => crate::durable::sync(parent),
        _ => Ok(()),
    }
}

/// The error of opening `path` without following links, expecting
/// `expected`.
fn open_error(path: &Path, cause: io::Error, expected: &'static str) -> LocalError {
    let path = path.to_path_buf();
    match cause.raw_os_error().map(rustix::io::Errno::from_raw_os_error) {
        Some(rustix::io::Errno::NOENT) => LocalError::NotFound { path },
        Some(rustix::io::Errno::LOOP) => LocalError::Link { path },
        Some(rustix::io::Errno::NOTDIR) => describe(&path, expected).unwrap_or(LocalError::Io { path, cause }),
        Some(rustix::io::Errno::EXIST) => LocalError::Exists { path },
        _ => LocalError::Io { path, cause },
    }
}

/// What is at `path` if it is not `expected`, without following a link.
fn describe(path: &Path, expected: &'static str) -> Option<LocalError> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let t = FileType::from_raw_mode(meta.mode());
    Some(match t {
        FileType::Symlink => LocalError::Link { path: path.to_path_buf() },
        _ => LocalError::NotRegular { path: path.to_path_buf(), kind: kind_of(t), expected },
    })
}

/// A directory beneath the base, open, with the directories above it up
/// to the base (the base first).
pub struct Chain {
    /// Open directories, the base first.
    pub dirs: Vec<File>,
    /// Where the last one is.
    pub path: PathBuf,
}

impl Chain {
    /// The directory the chain reaches.
    pub fn last(&self) -> &File {
        self.dirs.last().expect("a chain holds at least the base")
    }
}

/// What opening a storage directory that does not exist does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    /// Creates it (0700), to write in: a job's checkpoints, a savepoint's
    /// target.
    Create,
    /// Fails with [`LocalError::NotFound`]: to read from.
    Fail,
}

/// A local storage directory (the base) and the way into it.
pub struct Base {
    /// Where it is.
    pub path: PathBuf,
    dir: File,
    /// Whether what is written is made durable before a call returns.
    pub fsync: bool,
}

impl Base {
    /// Opens the directory `path`, which a setting or a command names
    /// (creating it 0700 if missing and `if_missing` says so), and checks
    /// it is the host user's alone.
    pub fn open(path: &Path, fsync: bool, if_missing: IfMissing) -> Result<Self, LocalError> {
        let dir = if path.exists() {
            // The setting's own path may go through links (it is the host's
            // choice); the directory it reaches must be trusted.
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd =
                rustix::fs::open(path, flags, Mode::empty()).map_err(|e| open_error(path, e.into(), "a directory"))?;
            let dir = File::from(fd);
            check_trusted(&dir, path)?;
            dir
        } else if if_missing == IfMissing::Create {
            ensure_private_dir(path, fsync)?
        } else {
            // Reading creates nothing: a missing directory's path may lead
            // through a link someone else planted.
            return Err(LocalError::NotFound { path: path.to_path_buf() });
        };
        Ok(Base { path: path.to_path_buf(), dir, fsync })
    }

    /// `names`, checked to be plain names, joined to the base's path.
    pub fn plain(&self, names: &[&str]) -> Result<PathBuf, LocalError> {
        let mut path = self.path.clone();
        for name in names {
            path = crate::paths::join_under(&path, name).map_err(|cause| LocalError::BadName { path, cause })?;
        }
        Ok(path)
    }

    /// Opens the directories `names` beneath the base, each without
    /// following a link and checked like the base; creates missing ones
    /// (0700) when `create`, else returns `None` for a missing one.
    pub fn dirs(&self, names: &[&str], create: bool) -> Result<Option<Chain>, LocalError> {
        let base = self.dir.try_clone().map_err(|cause| LocalError::Io { path: self.path.clone(), cause })?;
        let mut chain = Chain { dirs: vec![base], path: self.path.clone() };
        for name in names {
            let path = crate::paths::join_under(&chain.path, name)
                .map_err(|cause| LocalError::BadName { path: chain.path.clone(), cause })?;
            let parent = chain.last();
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let opened = match rustix::fs::openat(parent, *name, flags, Mode::empty()) {
                Err(rustix::io::Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(parent, *name, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(LocalError::Io { path, cause: e.into() }),
                    }
                    if self.fsync {
                        parent.sync_all().map_err(|cause| LocalError::Io { path: chain.path.clone(), cause })?;
                    }
                    rustix::fs::openat(parent, *name, flags, Mode::empty())
                }
                other => other,
            };
            let dir = match opened {
                Ok(fd) => File::from(fd),
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(e) => return Err(self.describe_at(parent, name, path, e, "a directory")),
            };
            check_trusted(&dir, &path)?;
            chain.dirs.push(dir);
            chain.path = path;
        }
        Ok(Some(chain))
    }

    /// The error of opening `name` in `dir` (at `path`), expecting `expected`.
    fn describe_at(
        &self,
        dir: &File,
        name: &str,
        path: PathBuf,
        e: rustix::io::Errno,
        expected: &'static str,
    ) -> LocalError {
        match e {
            rustix::io::Errno::EXIST => return LocalError::Exists { path },
            // Gone, whatever is there a moment later.
            rustix::io::Errno::NOENT => return LocalError::NotFound { path },
            _ => {}
        }
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => LocalError::Link { path },
                t if e == rustix::io::Errno::LOOP
                    || e == rustix::io::Errno::NOTDIR
                    || e == rustix::io::Errno::ISDIR =>
                {
                    LocalError::NotRegular { path, kind: kind_of(t), expected }
                }
                _ => LocalError::Io { path, cause: e.into() },
            },
            Err(rustix::io::Errno::NOENT) => LocalError::NotFound { path },
            Err(_) => LocalError::Io { path, cause: e.into() },
        }
    }

    /// Opens file `name` of `chain` for reading: never through a link,
    /// never blocking on a FIFO (opened non-blocking, then refused), and
    /// only if it is a regular file.
    pub fn open_file(&self, chain: &Chain, name: &str) -> Result<File, LocalError> {
        let path = crate::paths::join_under(&chain.path, name)
            .map_err(|cause| LocalError::BadName { path: chain.path.clone(), cause })?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = rustix::fs::openat(chain.last(), name, flags, Mode::empty())
            .map_err(|e| self.describe_at(chain.last(), name, path.clone(), e, "a regular file"))?;
        regular(fd, &path)
    }

    /// Creates file `name` in `chain`, which must not exist (nor be a
    /// link), mode 0600.
    pub fn create_file(&self, chain: &Chain, name: &str) -> Result<File, LocalError> {
        let path = crate::paths::join_under(&chain.path, name)
            .map_err(|cause| LocalError::BadName { path: chain.path.clone(), cause })?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(chain.last(), name, flags, Mode::from_raw_mode(FILE_MODE))
            .map_err(|e| self.describe_at(chain.last(), name, path, e, "a new file"))?;
        Ok(File::from(fd))
    }

    /// What entry `name` of `dir` is, without following a link; `None`
    /// when it is gone.
    pub fn entry_type(&self, dir: &File, name: &str, path: &Path) -> Result<Option<(FileType, u64)>, LocalError> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some((FileType::from_raw_mode(st.st_mode), st.st_size.max(0) as u64))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(LocalError::Io { path: path.to_path_buf(), cause: e.into() }),
        }
    }
}

/// `fd` as a file if it is a regular one.
fn regular(fd: OwnedFd, path: &Path) -> Result<File, LocalError> {
    let file = File::from(fd);
    let meta = file.metadata().map_err(|cause| LocalError::Io { path: path.to_path_buf(), cause })?;
    let t = FileType::from_raw_mode(meta.mode());
    if t != FileType::RegularFile {
        return Err(LocalError::NotRegular { path: path.to_path_buf(), kind: kind_of(t), expected: "a regular file" });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn links_fifos_and_open_directories_are_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let base = Base::open(&tmp.path().join("base"), false, IfMissing::Create).unwrap();
        assert_eq!(std::fs::metadata(tmp.path().join("base")).unwrap().mode() & 0o777, 0o700);
        let chain = base.dirs(&["job", "chk-1"], true).unwrap().unwrap();
        assert_eq!(std::fs::metadata(&chain.path).unwrap().mode() & 0o777, 0o700);
        drop(base.create_file(&chain, "f").unwrap());
        assert_eq!(std::fs::metadata(chain.path.join("f")).unwrap().mode() & 0o777, 0o600);
        assert!(matches!(base.create_file(&chain, "f"), Err(LocalError::Exists { .. })));
        // A link to a directory, as a directory and as a file.
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, tmp.path().join("base/job/chk-2")).unwrap();
        let err = base.dirs(&["job", "chk-2"], true).err().unwrap();
        assert!(matches!(err, LocalError::Link { .. }) && err.to_string().contains("job/chk-2"), "{err}");
        std::os::unix::fs::symlink(victim.join("x"), chain.path.join("g")).unwrap();
        assert!(matches!(base.open_file(&chain, "g"), Err(LocalError::Link { .. })));
        assert!(matches!(base.create_file(&chain, "g"), Err(LocalError::Exists { .. } | LocalError::Link { .. })));
        assert!(!victim.join("x").exists());
        // A FIFO is refused at once, not waited on.
        rustix::fs::mknodat(chain.last(), "fifo", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        let err = base.open_file(&chain, "fifo").unwrap_err();
        assert!(err.to_string().contains("is a FIFO, not a regular file"), "{err}");
        // A directory others may write.
        std::fs::set_permissions(&chain.path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = base.dirs(&["job", "chk-1"], false).err().unwrap();
        assert!(err.to_string().contains("is writable by others (mode 777)"), "{err}");
        assert!(base.dirs(&["job", "missing"], false).unwrap().is_none());
        assert!(matches!(base.dirs(&[".."], false), Err(LocalError::BadName { .. })));
    }

    #[test]
    fn a_private_dir_is_never_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let made = tmp.path().join("a/b");
        ensure_private_dir(&made, true).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&made, &link).unwrap();
        assert!(matches!(ensure_private_dir(&link, false), Err(LocalError::Link { .. })));
    }
}
