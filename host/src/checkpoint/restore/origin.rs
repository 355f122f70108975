//! Where the job's latest run started when that was not the job's own
//! latest checkpoint (`--from-savepoint`, `--from-checkpoint`): the
//! `_restored-from` record in the job's checkpoint directory, which
//! `--resume` reads so that a run that dies before its first checkpoint
//! resumes from what it started from, never from an older checkpoint of
//! the directory.
//!
//! Without it, `--resume` would take the newest checkpoint in the
//! directory, which may be older than the savepoint the dead run restored
//! (a run stopped with a savepoint leaves its checkpoints behind). The dead
//! run's sinks had already published what the savepoint covers, and
//! resuming from the older checkpoint would withdraw that output after a
//! reader may have seen it. Flink keeps the savepoint it restored as the
//! latest completed checkpoint in its HA store for the same reason.
//!
//! The record is written and made durable before any task starts, so
//! before any sink publishes; a fresh run of the job deletes it.

use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use serde::{Deserialize, Serialize};

/// The record's name in the job's checkpoint directory.
pub const FILE: &str = "_restored-from";
/// The most a record may hold: far more than a URI and a number.
const MAX: u64 = 64 << 10;

/// What a run started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The savepoint or checkpoint, as given to the run.
    pub uri: String,
    /// The highest checkpoint id in the directory when the run started:
    /// the run's own checkpoints have higher ids, so a checkpoint above it
    /// supersedes the origin and one at or below it predates it.
    pub after: u64,
}

/// Records `origin` durably (the write is atomic: a reader sees the old
/// record or the new one).
pub fn record(storage: &CheckpointStorage, origin: &Origin) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec_pretty(origin).expect("plain data serializes");
    storage.put_object(FILE, bytes).map(|_| ())
}

/// Deletes the record: the run starts the job over.
pub fn clear(storage: &CheckpointStorage) -> Result<(), StorageError> {
    storage.delete_object(FILE)
}

/// The record, if the directory has one; a record that is not one Weir
/// wrote is an error naming the file, never skipped: skipping it could
/// resume from a checkpoint older than the origin.
pub fn read(storage: &CheckpointStorage) -> Result<Option<Origin>, StorageError> {
    let bytes = match storage.read_bounded(FILE, MAX, "not a record Weir wrote") {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| StorageError::Corrupt {
        location: format!("{}/{FILE}", storage.display()),
        message: format!("{e}: not a record Weir wrote (delete it to resume from the job's latest checkpoint)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{S3Settings, StorageSettings};

    fn storage(dir: &std::path::Path) -> CheckpointStorage {
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
    fn a_record_round_trips_is_replaced_and_cleared() {
        let tmp = tempfile::tempdir().unwrap();
        let s = storage(tmp.path());
        assert_eq!(read(&s).unwrap(), None, "no record yet");
        let first = Origin { uri: "file:///sp/savepoint-job-1".into(), after: 2 };
        record(&s, &first).unwrap();
        assert_eq!(read(&s).unwrap(), Some(first));
        let second = Origin { uri: "file:///ck/job/chk-1".into(), after: 9 };
        record(&s, &second).unwrap();
        assert_eq!(read(&s).unwrap(), Some(second));
        clear(&s).unwrap();
        assert_eq!(read(&s).unwrap(), None);
        clear(&s).unwrap();
    }

    #[test]
    fn a_record_weir_did_not_write_is_named_not_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let s = storage(tmp.path());
        std::fs::create_dir_all(tmp.path().join("job")).unwrap();
        std::fs::write(tmp.path().join("job").join(FILE), b"{\"uri\": 3}").unwrap();
        let err = read(&s).unwrap_err().to_string();
        assert!(err.contains("_restored-from") && err.contains("not a record Weir wrote"), "{err}");
        std::fs::write(tmp.path().join("job").join(FILE), vec![b' '; MAX as usize + 1]).unwrap();
        let err = read(&s).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }
}
