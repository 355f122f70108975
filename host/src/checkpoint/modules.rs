//! The job's module store: WebAssembly components that a job's checkpoints
//! name, kept beside them and content-addressed, at
//! `<job>/modules/<sha256>.wasm`. A module swapped in while the job ran
//! (`host swap`) is stored here before any `_metadata` names it, and so is
//! the job file's module of each operator that records its input
//! (`replay.record`), so that `--resume` and `host replay` run exactly
//! those bytes, read from Weir's own storage and checked against their
//! SHA-256, never from a path that a stored file names.
//!
//! Only names Weir writes (`<64 lowercase hex digits>.wasm`) are read or
//! deleted; anything else under `modules/` is left as it is. This module
//! stores and reads bytes; it knows nothing of compiling them.

use super::storage::{CheckpointStorage, StorageError};
use crate::fault::{Classify, Domain, RetryHint};
use crate::wasm::module::MAX_MODULE_BYTES;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::Path;
use thiserror::Error;

/// The store's directory, relative to the job directory.
pub const DIR: &str = "modules";

/// Why a module cannot be taken from (or put into) the store.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ModuleStoreError {
    /// `_metadata` names no stored copy: an earlier version of Weir wrote
    /// it, which recorded only the module's path.
    #[error(
        "the checkpoint keeps no copy of it in the job's module store (it was written by a version of Weir that recorded only the module's path, which is not loaded from a stored file)"
    )]
    NotStored,
    /// The stored copy is gone.
    #[error("{location} is missing")]
    Missing {
        /// Where it should be.
        location: String,
    },
    /// The stored copy holds other bytes than `_metadata` says.
    #[error("{location} holds other bytes (SHA-256 {found}, not the recorded {expected}): it was altered")]
    Altered {
        /// The stored copy.
        location: String,
        /// SHA-256 of what it holds.
        found: String,
        /// SHA-256 `_metadata` records.
        expected: String,
    },
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Classify for ModuleStoreError {
    fn domain(&self) -> Domain {
        match self {
            ModuleStoreError::Storage(e) => e.domain(),
            _ => Domain::User,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            ModuleStoreError::Storage(e) => e.retry(),
            // A missing or altered copy stays so until someone puts it back.
            _ => RetryHint::NoRetry,
        }
    }
}

/// Where the module with SHA-256 `sha256` is stored, relative to the job
/// directory.
pub fn path_of(sha256: &str) -> String {
    format!("{DIR}/{sha256}.wasm")
}

/// The SHA-256 that `path` (relative to the job directory) names, when it
/// is a name Weir writes: `modules/<64 lowercase hex digits>.wasm`.
pub fn sha256_of_path(path: &str) -> Option<&str> {
    let sha256 = path.strip_prefix(DIR)?.strip_prefix('/')?.strip_suffix(".wasm")?;
    is_sha256(sha256).then_some(sha256)
}

/// Whether `s` is a SHA-256 as Weir writes it: 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// SHA-256 of `bytes`, as Weir writes it.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Keeps `bytes` in the module store of `storage`; returns where, relative
/// to the job directory. Written once: a copy already there whose bytes
/// hash right is left alone; one that does not is replaced. Returns once
/// the copy is durable (on a local directory, fsynced with its directory;
/// on S3, once the put completed), so a `_metadata` written after it may
/// name it.
pub fn store(storage: &CheckpointStorage, bytes: &[u8]) -> Result<String, ModuleStoreError> {
    let sha256 = sha256(bytes);
    let path = path_of(&sha256);
    match read(storage, &sha256) {
        Ok(_) => return Ok(path),
        Err(ModuleStoreError::Missing { .. }) => {}
        Err(ModuleStoreError::Altered { location, found, .. }) => {
            tracing::warn!(module = %location, found = %found, "a stored module was altered; storing it again");
        }
        Err(e) => return Err(e),
    }
    storage.put_object(&path, bytes.to_vec())?;
    Ok(path)
}

/// The bytes of the module with SHA-256 `sha256` from the module store of
/// `storage`, checked: at most [`MAX_MODULE_BYTES`] are read, and they must
/// hash to `sha256`.
pub fn read(storage: &CheckpointStorage, sha256: &str) -> Result<Vec<u8>, ModuleStoreError> {
    if !is_sha256(sha256) {
        return Err(ModuleStoreError::NotStored);
    }
    let path = path_of(sha256);
    let location = format!("{}/{path}", storage.display());
    let bytes = match storage.read_bounded(&path, MAX_MODULE_BYTES, "not a module Weir stored") {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => {
            return Err(ModuleStoreError::Missing { location });
        }
        Err(e) => return Err(e.into()),
    };
    let found = self::sha256(&bytes);
    if found != sha256 {
        return Err(ModuleStoreError::Altered { location, found, expected: sha256.to_string() });
    }
    Ok(bytes.to_vec())
}

/// The stored module that `stored` (a path from `_metadata`, if any) names
/// for SHA-256 `sha256`: its bytes, checked, from the store of `storage`.
pub fn read_named(
    storage: &CheckpointStorage,
    stored: Option<&str>,
    sha256: &str,
) -> Result<Vec<u8>, ModuleStoreError> {
    // `_metadata` is checked when decoded: a stored path is always where
    // this module keeps `sha256`. The path is not opened for itself.
    match stored {
        Some(path) if sha256_of_path(path) == Some(sha256) => read(storage, sha256),
        _ => Err(ModuleStoreError::NotStored),
    }
}

/// Deletes from the module store of `storage` every module Weir stored
/// that `keep` (paths relative to the job directory) does not name;
/// returns how many. Names Weir does not write are left.
pub fn sweep(storage: &CheckpointStorage, keep: &HashSet<String>) -> Result<usize, StorageError> {
    let mut deleted = 0;
    for object in storage.list_under(DIR)? {
        if sha256_of_path(&object).is_some() && !keep.contains(&object) {
            storage.delete_object(&object)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// SHA-256 of the module file at `path` (a job file's), read as the host
/// reads modules: a regular file of at most [`MAX_MODULE_BYTES`].
pub fn sha256_of_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut file = std::fs::File::open(path)?.take(MAX_MODULE_BYTES + 1);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    if total > MAX_MODULE_BYTES {
        return Err(std::io::Error::other(format!("larger than {MAX_MODULE_BYTES} bytes")));
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{S3Settings, StorageSettings};

    fn storage(dir: &Path) -> CheckpointStorage {
        let settings = StorageSettings {
            dir: Some(format!("file://{}", dir.display())),
            inline_threshold: 16,
            memory_max_state_size: 64,
            fsync: true,
            s3: S3Settings::default(),
            fenced_by: None,
            limits: crate::config::settings::ReadLimits::default(),
        };
        CheckpointStorage::open(&settings, "job").unwrap()
    }

    #[test]
    fn a_module_is_stored_once_under_its_hash_and_read_back_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let s = storage(tmp.path());
        let bytes = b"\0asm a component".to_vec();
        let expected = hex::encode(Sha256::digest(&bytes));
        let path = store(&s, &bytes).unwrap();
        assert_eq!(path, format!("modules/{expected}.wasm"));
        let file = tmp.path().join("job").join(&path);
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
        assert_eq!(read(&s, &expected).unwrap(), bytes);
        // Present and right: not written again (its inode stays).
        use std::os::unix::fs::MetadataExt;
        let inode = std::fs::metadata(&file).unwrap().ino();
        store(&s, &bytes).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), inode);
        // Altered: named as such on read, and replaced by the next store.
        std::fs::write(&file, b"other bytes").unwrap();
        let err = read(&s, &expected).unwrap_err().to_string();
        assert!(err.contains("holds other bytes") && err.contains(&expected), "{err}");
        store(&s, &bytes).unwrap();
        assert_eq!(read(&s, &expected).unwrap(), bytes);
        // Gone.
        std::fs::remove_file(&file).unwrap();
        assert!(matches!(read(&s, &expected), Err(ModuleStoreError::Missing { .. })));
    }

    #[test]
    fn only_the_path_weir_keeps_a_hash_at_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let s = storage(tmp.path());
        let path = store(&s, b"module").unwrap();
        let sha = sha256(b"module");
        assert_eq!(read_named(&s, Some(&path), &sha).unwrap(), b"module");
        for other in ["../module.wasm", "/tmp/x.wasm", "modules/x.wasm", &path.to_uppercase()] {
            assert!(matches!(read_named(&s, Some(other), &sha), Err(ModuleStoreError::NotStored)), "{other}");
        }
        assert!(matches!(read_named(&s, None, &sha), Err(ModuleStoreError::NotStored)));
        assert!(matches!(read(&s, &sha.to_uppercase()), Err(ModuleStoreError::NotStored)));
    }

    #[test]
    fn a_sweep_deletes_only_unkept_modules_it_wrote() {
        let tmp = tempfile::tempdir().unwrap();
        let s = storage(tmp.path());
        let kept = store(&s, b"kept").unwrap();
        let dropped = store(&s, b"dropped").unwrap();
        std::fs::write(tmp.path().join("job/modules/notes.txt"), b"the user's").unwrap();
        assert_eq!(sweep(&s, &HashSet::from([kept.clone()])).unwrap(), 1);
        assert!(tmp.path().join("job").join(&kept).is_file());
        assert!(!tmp.path().join("job").join(&dropped).exists());
        assert!(tmp.path().join("job/modules/notes.txt").is_file());
        assert_eq!(sha256_of_path(&kept), Some(sha256(b"kept").as_str()));
        assert_eq!(sha256_of_path("shared/x.wasm"), None);
    }

    #[test]
    fn a_job_files_module_is_hashed_as_the_host_reads_it() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("m.wasm");
        std::fs::write(&file, b"module bytes").unwrap();
        assert_eq!(sha256_of_file(&file).unwrap(), hex::encode(Sha256::digest(b"module bytes")));
        assert!(sha256_of_file(tmp.path()).unwrap_err().to_string().contains("not a regular file"));
    }
}
