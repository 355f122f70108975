//! Where a source resumes, as `_metadata` records it: a byte offset or
//! record count for a source read in order, or each partition's next
//! offset for a partitioned one (written as a list: JSON has no integer
//! map keys). Whether a source had finished is recorded beside it
//! (`finished_sources` in [`super::CheckpointMetadata`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A partitioned source's position: topic to partition to the offset of
/// the next record.
pub type PartitionOffsets = BTreeMap<String, BTreeMap<i32, i64>>;

/// Where a source resumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "PositionRepr", into = "PositionRepr")]
pub enum SourcePosition {
    /// One input read in order (a file's byte offset, a generator's
    /// record count): the next record.
    Offset(u64),
    /// A partitioned input (Kafka): topic to partition to the offset of
    /// the next record, merged over the source's subtasks (each owns
    /// disjoint partitions), so a restore at any parallelism deals them
    /// out again.
    Partitions(PartitionOffsets),
}

/// How a position is written: a number, or a list of partitions (JSON
/// has no integer map keys).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum PositionRepr {
    Offset(u64),
    Partitions(Vec<PartitionOffset>),
}

/// One partition's next offset.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionOffset {
    topic: String,
    partition: i32,
    offset: i64,
}

impl From<PositionRepr> for SourcePosition {
    fn from(r: PositionRepr) -> Self {
        match r {
            PositionRepr::Offset(n) => SourcePosition::Offset(n),
            PositionRepr::Partitions(list) => {
                let mut m = PartitionOffsets::new();
                for p in list {
                    m.entry(p.topic).or_default().insert(p.partition, p.offset);
                }
                SourcePosition::Partitions(m)
            }
        }
    }
}

impl From<SourcePosition> for PositionRepr {
    fn from(p: SourcePosition) -> Self {
        match p {
            SourcePosition::Offset(n) => PositionRepr::Offset(n),
            SourcePosition::Partitions(m) => PositionRepr::Partitions(
                m.into_iter()
                    .flat_map(|(topic, ps)| {
                        ps.into_iter().map(move |(partition, offset)| PartitionOffset {
                            topic: topic.clone(),
                            partition,
                            offset,
                        })
                    })
                    .collect(),
            ),
        }
    }
}

impl Default for SourcePosition {
    fn default() -> Self {
        SourcePosition::Offset(0)
    }
}

impl SourcePosition {
    /// Adds `other`, a position of another subtask of the same source.
    pub fn merge(&mut self, other: SourcePosition) {
        match (self, other) {
            (SourcePosition::Partitions(mine), SourcePosition::Partitions(theirs)) => {
                for (topic, partitions) in theirs {
                    mine.entry(topic).or_default().extend(partitions);
                }
            }
            (me, other) => *me = other,
        }
    }
}

impl std::fmt::Display for SourcePosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourcePosition::Offset(n) => write!(f, "{n}"),
            SourcePosition::Partitions(topics) => {
                let mut first = true;
                for (topic, partitions) in topics {
                    for (p, o) in partitions {
                        write!(f, "{}{topic}/{p}@{o}", if first { "" } else { ", " })?;
                        first = false;
                    }
                }
                if first { write!(f, "no partitions") } else { Ok(()) }
            }
        }
    }
}
