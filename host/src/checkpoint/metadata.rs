//! `_metadata`: what one completed checkpoint holds, task by task: each
//! operator subtask's state handle, each source's offset, each sink's
//! pending files. Written last, so a checkpoint whose `_metadata` exists
//! and reads back whole is complete.
//!
//! Encoding (see `docs/checkpoint-format.md`): one header line
//! `WEIRMETA <version> <crc32 of the rest, 8 hex digits>`, then JSON. The
//! checksum catches a flipped digit that would still parse.

use super::modules;
use crate::config::job::MAX_MAX_PARALLELISM as MAX_KEY_GROUPS;
use crate::paths::{is_id, plain_name, relative_dir};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

mod position;
pub use position::{PartitionOffsets, SourcePosition};

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
    /// Kafka sink publishing after checkpoints: the batches of records
    /// held back until a checkpoint covering them completes, and not yet
    /// published when this one was taken. A restore publishes them, minus
    /// what the output topic shows already arrived.
    Kafka {
        /// Oldest first.
        batches: Vec<HeldBatch>,
    },
    /// Kafka sink in `mode = "transactions"`: the transactions ended
    /// (pre-committed) at this checkpoint's barrier or before and not yet
    /// committed. A restore commits each one the broker still has open.
    KafkaTransactions {
        /// Oldest first.
        pending: Vec<PendingTxn>,
    },
}

/// A Kafka transaction ended at a barrier, as its transaction coordinator
/// knows it: enough to commit it after a restart, and to tell it from a
/// later transaction of the same transactional id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTxn {
    /// The checkpoint whose barrier ended it.
    pub checkpoint: u64,
    /// Its transactional id.
    pub transactional_id: String,
    /// The producer id that ran it.
    pub producer_id: i64,
    /// That producer's epoch.
    pub epoch: i16,
    /// When it began, on the coordinator's clock (ms).
    pub start_ms: i64,
}

/// One checkpoint interval's records of a Kafka sink subtask, stored with
/// the checkpoint until they are published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBatch {
    /// The checkpoint whose barrier closed the batch (0: the end of input).
    pub checkpoint: u64,
    /// Random, fixed when the batch was closed: every record published
    /// from it carries it, so a restore recognises it in the topic.
    pub nonce: u64,
    /// Records in it.
    pub records: u64,
    /// Where its bytes are.
    pub handle: StateHandle,
}

/// A module swapped in while the job ran (`host swap`), which the
/// checkpoint's state belongs to rather than the job file's module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwappedModule {
    /// The component's path on the host that ran the job, for logs and
    /// `host status` only: nothing is ever loaded from it.
    pub path: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// SHA-256 of the job file's module it replaced: a resume runs the
    /// swapped module only while the job file still names that one.
    pub replaced_sha256: String,
    /// Where its bytes are kept, relative to the job directory: always
    /// `modules/<sha256>.wasm` ([`super::modules`]), the only place a resume
    /// loads it from; `None` from a version that kept only the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<String>,
}

/// The job file's module of an operator that records its input
/// (`replay.record`), kept in the job's module store so that `host replay`
/// runs the bytes that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedModule {
    /// The job file's path to it, for messages only.
    pub path: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// Where its bytes are kept: `modules/<sha256>.wasm`.
    pub stored: String,
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
    /// Source id to where it resumes.
    pub sources: BTreeMap<String, SourcePosition>,
    /// Sources every subtask of which had read its input to the end before
    /// this checkpoint's barrier: a restore starts them finished, so they
    /// read nothing again and only end their stream. Absent in checkpoints
    /// of earlier versions, which were never taken after a source finished.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub finished_sources: BTreeSet<String>,
    /// Sink id to its position.
    pub sinks: BTreeMap<String, SinkState>,
    /// Operator uid to the module swapped in before this checkpoint (a
    /// checkpoint only; a savepoint holds the state of the job file's
    /// modules, or of the modules before a swap that rode on it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub swapped: BTreeMap<String, SwappedModule>,
    /// Operator uid to the job file's module of each operator recording its
    /// input, as the run that took it ran (a checkpoint only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recorded: BTreeMap<String, RecordedModule>,
}

impl CheckpointMetadata {
    /// Bytes of state referenced (inline and files).
    pub fn state_size(&self) -> u64 {
        self.operators.values().flat_map(|o| &o.subtasks).map(StateHandle::size).sum()
    }

    /// Files this checkpoint references, relative to the job directory.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.operators.values().flat_map(|o| &o.subtasks).chain(self.held_batches()).flat_map(StateHandle::paths)
    }

    /// The files under `shared/` it references (incremental RocksDB files,
    /// which later checkpoints may reference too).
    pub fn shared_files(&self) -> Vec<String> {
        self.files().filter(|p| p.starts_with("shared/")).map(str::to_string).collect()
    }

    /// The modules it names in the job's module store, relative to the job
    /// directory (several checkpoints may name one).
    pub fn stored_modules(&self) -> impl Iterator<Item = &str> {
        let swapped = self.swapped.values().filter_map(|m| m.stored.as_deref());
        swapped.chain(self.recorded.values().map(|m| m.stored.as_str()))
    }

    /// The handles of the sinks' held batches.
    fn held_batches(&self) -> impl Iterator<Item = &StateHandle> {
        self.sinks
            .values()
            .flat_map(|s| match s {
                SinkState::Kafka { batches } => batches.as_slice(),
                _ => &[],
            })
            .map(|b| &b.handle)
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
        let m: CheckpointMetadata = serde_json::from_slice(json).map_err(|e| MetadataError::Json(e.to_string()))?;
        m.check()?;
        Ok(m)
    }

    /// Refuses what a checkpoint Weir wrote never holds: ids that are not
    /// ids, a key-group count out of range, a parallelism that does not
    /// match the subtasks listed, stored paths that climb out of the
    /// checkpoint's directory, file names that are not plain names, RocksDB
    /// files in a savepoint. A file from elsewhere is untrusted until it passes.
    fn check(&self) -> Result<(), MetadataError> {
        let bad = |m: String| Err(MetadataError::Invalid(m));
        if !is_id(&self.job) {
            return bad(format!("job name {:?} is not a job name", self.job));
        }
        if !(1..=MAX_KEY_GROUPS).contains(&self.max_parallelism) {
            return bad(format!("max_parallelism {} is not between 1 and {MAX_KEY_GROUPS}", self.max_parallelism));
        }
        for (uid, op) in &self.operators {
            if !is_id(uid) {
                return bad(format!("operator uid {uid:?} is not a uid"));
            }
            if op.parallelism == 0 || op.parallelism as usize != op.subtasks.len() {
                return bad(format!(
                    "operator '{uid}' has parallelism {} but {} subtask states",
                    op.parallelism,
                    op.subtasks.len()
                ));
            }
            for handle in &op.subtasks {
                if self.savepoint && matches!(handle, StateHandle::Rocksdb { .. }) {
                    return bad(format!("operator '{uid}': RocksDB files in a savepoint, which holds snapshots only"));
                }
                for path in handle.paths() {
                    if !is_relative_path(path) {
                        return bad(format!(
                            "operator '{uid}': stored path {path:?} leaves the checkpoint's directory"
                        ));
                    }
                }
                if let StateHandle::Rocksdb { files } = handle
                    && let Some(e) = files.iter().find_map(|f| plain_name(&f.name).err())
                {
                    return bad(format!("operator '{uid}': {e}"));
                }
            }
        }
        for id in self.sources.keys().chain(self.sinks.keys()).chain(&self.finished_sources) {
            if !is_id(id) {
                return bad(format!("source or sink id {id:?} is not an id"));
            }
        }
        let sha256 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        // A stored module is where the store keeps its hash, or nowhere.
        let kept = |stored: &str, sha256: &str| modules::sha256_of_path(stored) == Some(sha256);
        for (uid, m) in &self.swapped {
            if !is_id(uid) || !sha256(&m.sha256) || !sha256(&m.replaced_sha256) {
                return bad(format!("swapped module of {uid:?} is not a uid with SHA-256 hashes"));
            }
            if let Some(stored) = m.stored.as_deref().filter(|s| !kept(s, &m.sha256)) {
                return bad(format!("operator '{uid}': swapped module at {stored:?}, not modules/<sha256>.wasm"));
            }
        }
        for (uid, m) in &self.recorded {
            if !is_id(uid) || !kept(&m.stored, &m.sha256) {
                return bad(format!("recorded module of {uid:?} is not a uid with modules/<sha256>.wasm"));
            }
        }
        for (id, state) in &self.sinks {
            // `<file>`, or `<bucket>/<file>` for a sink with buckets.
            let part_file = |n: &str| {
                let (bucket, file) = n.rsplit_once('/').map_or((None, n), |(b, f)| (Some(b), f));
                bucket.is_none_or(|b| relative_dir(b).is_ok())
                    && plain_name(file).is_ok()
                    && file.starts_with(".part-")
                    && file.ends_with(".pending")
            };
            if let SinkState::Parts { pending } = state
                && let Some(name) = pending.iter().find(|n| !part_file(n))
            {
                return bad(format!("sink '{id}': {name:?} is not a pending part file name"));
            }
            if let SinkState::KafkaTransactions { pending } = state
                && let Some(t) = pending.iter().find(|t| {
                    t.transactional_id.is_empty()
                        || t.transactional_id.len() > 249
                        || t.transactional_id.chars().any(char::is_control)
                })
            {
                return bad(format!("sink '{id}': {:?} is not a transactional id Weir writes", t.transactional_id));
            }
            if let SinkState::Kafka { batches } = state {
                for b in batches {
                    let inside = b.handle.paths().iter().all(|p| is_relative_path(p));
                    if matches!(b.handle, StateHandle::Rocksdb { .. }) || !inside {
                        return bad(format!(
                            "sink '{id}': held batch of checkpoint {} is not a stored file",
                            b.checkpoint
                        ));
                    }
                }
            }
        }
        for (id, position) in &self.sources {
            if let SourcePosition::Partitions(topics) = position {
                for (topic, partitions) in topics {
                    if !is_topic_name(topic) {
                        return bad(format!("source '{id}': {topic:?} is not a Kafka topic name"));
                    }
                    if let Some((p, o)) = partitions.iter().find(|(p, o)| **p < 0 || **o < 0) {
                        return bad(format!("source '{id}': topic {topic} partition {p} at offset {o}"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether `name` is a legal Kafka topic name: 1 to 249 letters, digits,
/// '.', '_' or '-'.
pub fn is_topic_name(name: &str) -> bool {
    (1..=249).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
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
    /// The JSON holds what no checkpoint Weir writes holds.
    #[error("_metadata is invalid: {0}")]
    Invalid(String),
}

/// Whether `path` (relative to a checkpoint's directory) stays inside it:
/// relative, and every part a plain name.
fn is_relative_path(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|part| plain_name(part).is_ok())
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
            sources: [
                ("lines".to_string(), SourcePosition::Offset(1234)),
                ("topic".to_string(), SourcePosition::Partitions([("words".into(), [(0, 5), (3, 9)].into())].into())),
            ]
            .into(),
            finished_sources: ["lines".to_string()].into(),
            sinks: [
                ("out".to_string(), SinkState::Parts { pending: vec![".part-7.pending".to_string()] }),
                (
                    "topic-out".to_string(),
                    SinkState::Kafka {
                        batches: vec![HeldBatch {
                            checkpoint: 7,
                            nonce: 1,
                            records: 2,
                            handle: StateHandle::File {
                                path: "chk-7/sink-topic-out-0.held".into(),
                                size: 40,
                                crc32: 9,
                            },
                        }],
                    },
                ),
            ]
            .into(),
            swapped: [(
                "counter".to_string(),
                SwappedModule {
                    path: "/m/v2.wasm".into(),
                    sha256: "a".repeat(64),
                    replaced_sha256: "b".repeat(64),
                    stored: Some(format!("modules/{}.wasm", "a".repeat(64))),
                },
            )]
            .into(),
            recorded: [(
                "counter".to_string(),
                RecordedModule {
                    path: "/m/v1.wasm".into(),
                    sha256: "b".repeat(64),
                    stored: format!("modules/{}.wasm", "b".repeat(64)),
                },
            )]
            .into(),
        }
    }

    #[test]
    fn round_trips_and_reports_size_and_files() {
        let m = sample();
        assert_eq!(CheckpointMetadata::decode(&m.encode()).unwrap(), m);
        assert_eq!(m.state_size(), 30004);
        assert_eq!(m.files().collect::<Vec<_>>(), ["chk-7/counter-1.snap", "chk-7/sink-topic-out-0.held"]);
        let (a, b) = (format!("modules/{}.wasm", "a".repeat(64)), format!("modules/{}.wasm", "b".repeat(64)));
        assert_eq!(m.stored_modules().collect::<Vec<_>>(), [a, b]);
        assert!(m.shared_files().is_empty(), "modules are not shared state files: retention leaves them");
    }

    /// A checkpoint of a version that kept only the swapped module's path
    /// still decodes, with nothing stored (a resume then passes over it).
    #[test]
    fn a_checkpoint_from_before_the_module_store_still_decodes() {
        let old = crafted(|v| {
            v["swapped"]["counter"].as_object_mut().unwrap().remove("stored");
            v.as_object_mut().unwrap().remove("recorded");
            v.as_object_mut().unwrap().remove("finished_sources");
        });
        let m = CheckpointMetadata::decode(&old).unwrap();
        assert_eq!(
            (m.swapped["counter"].stored.as_deref(), m.recorded.len(), m.stored_modules().count()),
            (None, 0, 0)
        );
        assert!(m.finished_sources.is_empty(), "a checkpoint from before finished sources has none");
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

    /// Re-encodes `m` after `edit` changed its JSON, with a valid checksum:
    /// what a crafted file looks like.
    fn crafted(edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
        let mut v = serde_json::to_value(sample()).unwrap();
        edit(&mut v);
        let json = serde_json::to_vec(&v).unwrap();
        let mut out = format!("WEIRMETA {METADATA_VERSION} {:08x}\n", crc32fast::hash(&json)).into_bytes();
        out.extend_from_slice(&json);
        out
    }

    #[test]
    fn crafted_contents_are_refused_not_trusted() {
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let other: serde_json::Value = format!("modules/{}.wasm", "c".repeat(64)).into();
        let cases: Vec<(&str, Edit)> = vec![
            ("non-ASCII hex", Box::new(|v| v["operators"]["counter"]["subtasks"][0]["data"] = "é1".into())),
            ("max_parallelism 0", Box::new(|v| v["max_parallelism"] = 0.into())),
            ("a path out", Box::new(|v| v["operators"]["counter"]["subtasks"][1]["path"] = "../../x.snap".into())),
            ("an absolute path", Box::new(|v| v["operators"]["counter"]["subtasks"][1]["path"] = "/etc/passwd".into())),
            (
                "a uid that is a path",
                Box::new(|v| {
                    let op = v["operators"]["counter"].clone();
                    v["operators"] = serde_json::json!({ "/tmp/x": op });
                }),
            ),
            ("a parallelism that lies", Box::new(|v| v["operators"]["counter"]["parallelism"] = 5.into())),
            ("a pending file elsewhere", Box::new(|v| v["sinks"]["out"]["pending"][0] = "../../home/x".into())),
            (
                "a pending file in a bucket out",
                Box::new(|v| v["sinks"]["out"]["pending"][0] = "dt=1/../../.part-7.pending".into()),
            ),
            ("a bucket from the root", Box::new(|v| v["sinks"]["out"]["pending"][0] = "/etc/.part-7.pending".into())),
            ("a bucket's file not pending", Box::new(|v| v["sinks"]["out"]["pending"][0] = "dt=1/x".into())),
            (
                "held output elsewhere",
                Box::new(|v| v["sinks"]["topic-out"]["batches"][0]["handle"]["path"] = "../x.held".into()),
            ),
            ("a topic that is a path", Box::new(|v| v["sources"]["topic"][0]["topic"] = "../x".into())),
            ("a negative offset", Box::new(|v| v["sources"]["topic"][0]["offset"] = (-3).into())),
            ("a negative partition", Box::new(|v| v["sources"]["topic"][1]["partition"] = (-1).into())),
            ("a position of another shape", Box::new(|v| v["sources"]["topic"] = "seven".into())),
            ("swapped, stored out", Box::new(|v| v["swapped"]["counter"]["stored"] = "../v2.wasm".into())),
            ("swapped, another hash", Box::new(move |v| v["swapped"]["counter"]["stored"] = other.clone())),
            ("a recorded module at a path", Box::new(|v| v["recorded"]["counter"]["stored"] = "/tmp/x.wasm".into())),
            ("a finished source that is a path", Box::new(|v| v["finished_sources"][0] = "../x".into())),
            ("a recorded module without a hash", Box::new(|v| v["recorded"]["counter"]["sha256"] = "b".into())),
        ];
        for (what, edit) in cases {
            let e = CheckpointMetadata::decode(&crafted(edit));
            assert!(matches!(e, Err(MetadataError::Json(_) | MetadataError::Invalid(_))), "{what}: {e:?}");
        }
        assert!(CheckpointMetadata::decode(&crafted(|_| {})).is_ok(), "an untouched file reads");
        let bucketed = crafted(|v| v["sinks"]["out"]["pending"][0] = "dt=2025-01-01/hm=10:07/.part-7.pending".into());
        assert!(CheckpointMetadata::decode(&bucketed).is_ok(), "a bucket's pending file reads");
    }
}
