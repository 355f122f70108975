//! `_metadata`: what one completed checkpoint holds, task by task: each
//! operator subtask's state handle, each source's offset, each sink's
//! pending files. Written last, so a checkpoint whose `_metadata` exists
//! and reads back whole is complete.
//!
//! Encoding (see `docs/checkpoint-format.md`): one header line
//! `WEIRMETA <version> <crc32 of the rest, 8 hex digits>`, then JSON. The
//! checksum catches a flipped digit that would still parse.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// The metadata version this host writes and reads.
pub const METADATA_VERSION: u32 = 1;

/// Where a subtask's snapshot bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StateHandle {
    /// Small: the bytes themselves, in `_metadata`.
    Inline {
        /// The snapshot, hex in JSON: twice the size, but readable and exact.
        #[serde(with = "hex::serde")]
        data: Vec<u8>,
    },
    /// A file, relative to the job's checkpoint directory.
    File {
        /// `chk-<n>/<name>`.
        path: String,
        /// Its length.
        size: u64,
        /// CRC-32 of its bytes.
        crc32: u32,
    },
    /// An incremental RocksDB checkpoint: the files of a RocksDB checkpoint
    /// directory. SST files live under `shared/` and are reused by later
    /// checkpoints for as long as the database keeps them; the rest
    /// (`MANIFEST`, `CURRENT`, `OPTIONS`, the state descriptors) are this
    /// checkpoint's own.
    Rocksdb {
        /// The files, by their name in the database directory.
        files: Vec<DbFile>,
    },
}

/// One file of an incremental RocksDB checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbFile {
    /// Its name in the database directory.
    pub name: String,
    /// Where it is stored, relative to the job directory.
    pub path: String,
    /// Its length.
    pub size: u64,
    /// CRC-32 of its bytes.
    pub crc32: u32,
}

impl StateHandle {
    /// Bytes of state this handle stands for.
    pub fn size(&self) -> u64 {
        match self {
            StateHandle::Inline { data } => data.len() as u64,
            StateHandle::File { size, .. } => *size,
            StateHandle::Rocksdb { files } => files.iter().map(|f| f.size).sum(),
        }
    }

    /// Paths of the stored files this handle uses, relative to the job
    /// directory.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            StateHandle::Inline { .. } => Vec::new(),
            StateHandle::File { path, .. } => vec![path.as_str()],
            StateHandle::Rocksdb { files } => files.iter().map(|f| f.path.as_str()).collect(),
        }
    }
}

/// What a sink needs to resume exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SinkState {
    /// Transactional file sink: part files made pending up to this
    /// checkpoint and not yet published; a restore publishes them and
    /// discards every other unpublished file.
    Parts {
        /// File names in the sink's directory.
        pending: Vec<String>,
    },
    /// Plain file sink: the file's length at the barrier; a restore cuts
    /// the file back to it.
    File {
        /// Bytes written before the barrier.
        length: u64,
    },
}

/// One operator's subtasks, by index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorState {
    /// Its parallelism when the checkpoint was taken.
    pub parallelism: u32,
    /// Subtask `i`'s state.
    pub subtasks: Vec<StateHandle>,
}

/// A completed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// The job name.
    pub job: String,
    /// Checkpoint id.
    pub id: u64,
    /// When it was triggered, in milliseconds since the epoch.
    pub triggered_at_ms: i64,
    /// Trigger to last acknowledgement, in milliseconds.
    pub duration_ms: u64,
    /// Taken when the job finished: nothing is left to process; restoring
    /// it only publishes what sinks still had pending.
    pub finished: bool,
    /// A savepoint: every state in the canonical format, every path
    /// relative to the savepoint's own directory.
    #[serde(default)]
    pub savepoint: bool,
    /// Key groups of the job.
    pub max_parallelism: u32,
    /// Operator uid to its state.
    pub operators: BTreeMap<String, OperatorState>,
    /// Source id to offset.
    pub sources: BTreeMap<String, u64>,
    /// Sink id to its position.
    pub sinks: BTreeMap<String, SinkState>,
}

impl CheckpointMetadata {
    /// Bytes of state referenced (inline and files).
    pub fn state_size(&self) -> u64 {
        self.operators.values().flat_map(|o| &o.subtasks).map(StateHandle::size).sum()
    }

    /// Files this checkpoint references, relative to the job directory.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.operators.values().flat_map(|o| &o.subtasks).flat_map(StateHandle::paths)
    }

    /// Encodes: the header line, then JSON.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec_pretty(self).expect("metadata serializes");
        let mut out = format!("WEIRMETA {METADATA_VERSION} {:08x}\n", crc32fast::hash(&json)).into_bytes();
        out.extend_from_slice(&json);
        out
    }

    /// Decodes and checks bytes written by [`CheckpointMetadata::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Self, MetadataError> {
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or(MetadataError::NotMetadata)?;
        let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| MetadataError::NotMetadata)?;
        let mut parts = header.split(' ');
        if parts.next() != Some("WEIRMETA") {
            return Err(MetadataError::NotMetadata);
        }
        let version: u32 = parts.next().and_then(|v| v.parse().ok()).ok_or(MetadataError::NotMetadata)?;
        if version != METADATA_VERSION {
            return Err(MetadataError::UnsupportedVersion(version));
        }
        let crc = parts.next().and_then(|c| u32::from_str_radix(c, 16).ok()).ok_or(MetadataError::NotMetadata)?;
        let json = &bytes[newline + 1..];
        if crc32fast::hash(json) != crc {
            return Err(MetadataError::Checksum);
        }
        serde_json::from_slice(json).map_err(|e| MetadataError::Json(e.to_string()))
    }
}

/// Why `_metadata` cannot be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataError {
    /// No header line.
    #[error("not a Weir checkpoint _metadata file")]
    NotMetadata,
    /// Another version.
    #[error("_metadata version {0} is not supported (this host reads version {METADATA_VERSION})")]
    UnsupportedVersion(u32),
    /// The body does not match its checksum.
    #[error("_metadata is corrupt (checksum mismatch)")]
    Checksum,
    /// The body is not the expected JSON.
    #[error("_metadata is corrupt: {0}")]
    Json(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CheckpointMetadata {
        CheckpointMetadata {
            job: "wc".into(),
            id: 7,
            triggered_at_ms: 1_700_000_000_000,
            duration_ms: 12,
            finished: false,
            savepoint: false,
            max_parallelism: 128,
            operators: [(
                "counter".to_string(),
                OperatorState {
                    parallelism: 2,
                    subtasks: vec![
                        StateHandle::Inline { data: vec![0, 1, 254, 255] },
                        StateHandle::File { path: "chk-7/counter-1.snap".into(), size: 30000, crc32: 5 },
                    ],
                },
            )]
            .into(),
            sources: [("lines".to_string(), 1234)].into(),
            sinks: [("out".to_string(), SinkState::Parts { pending: vec![".part-7.pending".to_string()] })].into(),
        }
    }

    #[test]
    fn round_trips_and_reports_size_and_files() {
        let m = sample();
        assert_eq!(CheckpointMetadata::decode(&m.encode()).unwrap(), m);
        assert_eq!(m.state_size(), 30004);
        assert_eq!(m.files().collect::<Vec<_>>(), ["chk-7/counter-1.snap"]);
    }

    #[test]
    fn corruption_is_detected() {
        let good = sample().encode();
        let digit = good.iter().rposition(|&b| b == b'4').unwrap(); // in "1234"
        let mut bad = good.clone();
        bad[digit] = b'5';
        assert_eq!(CheckpointMetadata::decode(&bad), Err(MetadataError::Checksum));
        assert_eq!(CheckpointMetadata::decode(&good[..good.len() - 3]), Err(MetadataError::Checksum));
        assert_eq!(CheckpointMetadata::decode(b"{}"), Err(MetadataError::NotMetadata));
        let v2 = String::from_utf8(good).unwrap().replacen("WEIRMETA 1", "WEIRMETA 2", 1);
        assert_eq!(CheckpointMetadata::decode(v2.as_bytes()), Err(MetadataError::UnsupportedVersion(2)));
    }
}
