//! What the whole group is doing, from what any machine can read: the
//! input topic's partitions (from the broker) and each partition's commit
//! log on the shared checkpoint storage, whose last entry says which member
//! last claimed or committed the partition and its latest committed
//! checkpoint, whose metadata holds the partition's committed offset; the
//! broker's end offset beside it gives the lag. `host status <job file>`
//! prints it beside the copies that run on the machine it is asked on.

use super::partitioned::{self, SharedInput, copy_name};
use super::{ClusterError, group_options};
use crate::checkpoint::metadata::{CheckpointMetadata, SourcePosition};
use crate::checkpoint::storage::{CheckpointStorage, LastEntry};
use crate::config::LoadedJob;
use crate::connectors::kafka::{KafkaConsumer, partition_counts};
use rdkafka::consumer::Consumer;

/// One partition of the input, as the shared storage tells it.
#[derive(Debug, Clone)]
pub struct PartitionView {
    /// The input partition.
    pub partition: i32,
    /// The name its copy of the job runs under (`<job>-p<n>`).
    pub copy: String,
    /// Its commit log's last entry; `None` until a member ran it.
    pub last: Option<LastEntry>,
    /// The offset its latest committed checkpoint resumes at: `None` before
    /// the first checkpoint, once the input ended, or when that checkpoint
    /// cannot be read (a warning says why).
    pub committed: Option<i64>,
    /// The partition's input ended (`end = "latest"` reached) before its
    /// latest committed checkpoint: nothing is left to read.
    pub input_ended: bool,
    /// The broker's end offset of the partition (the next record's).
    pub end: i64,
}

impl PartitionView {
    /// Records in the partition past its latest committed checkpoint.
    pub fn lag(&self) -> Option<i64> {
        self.committed.map(|c| (self.end - c).max(0))
    }
}

/// The group's input topic and each of its partitions.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The consumer group.
    pub group: String,
    /// The topic the members share.
    pub topic: String,
    /// Every partition, in order.
    pub partitions: Vec<PartitionView>,
}

/// Reads the overview of the cluster job `job`.
pub fn overview(job: &LoadedJob) -> Result<Overview, ClusterError> {
    let cluster = job.spec.cluster.clone().expect("overview of a job with [cluster]");
    let input = partitioned::check(job, &cluster)?;
    let options = group_options(&input, &cluster);
    let group_error = |cause| ClusterError::Group { group: cluster.group.clone(), cause };
    let consumer: KafkaConsumer = options.create(&[]).map_err(group_error)?;
    let counts = partition_counts(&consumer, &options, std::slice::from_ref(&input.topic)).map_err(group_error)?;
    let count = counts.get(&input.topic).copied().unwrap_or(0);
    let mut partitions = Vec::new();
    for p in 0..count {
        let copy = copy_name(&job.spec.name, p);
        let log_error = |cause| ClusterError::CommitLog { partition: p, cause };
        let storage = CheckpointStorage::open(&job.settings.storage, &copy).map_err(log_error)?;
        let last = storage.last_commit().map_err(log_error)?;
        let position = last.as_ref().and_then(|l| l.checkpoint).map(|id| committed_position(&storage, id, &input, p));
        let (committed, input_ended) = match position {
            Some(Position::At(offset)) => (Some(offset), false),
            Some(Position::Ended) => (None, true),
            Some(Position::Unknown) | None => (None, false),
        };
        let (_, end) = consumer.fetch_watermarks(&input.topic, p, options.timeout()).map_err(|e| {
            group_error(crate::runtime::error::ConnectorError::Unavailable(format!(
                "cannot read the end offset of {}/{p}: {e}",
                input.topic
            )))
        })?;
        partitions.push(PartitionView { partition: p, copy, last, committed, input_ended, end });
    }
    Ok(Overview { group: cluster.group, topic: input.topic, partitions })
}

/// Where a committed checkpoint leaves a partition's input.
enum Position {
    /// The offset of the next record.
    At(i64),
    /// The source had finished: a checkpoint records no position for it.
    Ended,
    /// The checkpoint could not be read, or names no offset for it.
    Unknown,
}

/// Where checkpoint `id` leaves partition `partition` of `input`; a
/// checkpoint that cannot be read gets a warning saying why.
fn committed_position(storage: &CheckpointStorage, id: u64, input: &SharedInput, partition: i32) -> Position {
    let unreadable = |e: &dyn std::fmt::Display| {
        tracing::warn!(partition, checkpoint = id, "cannot read the committed offset: {e}");
    };
    let Ok(bytes) = storage.read_metadata(id).inspect_err(|e| unreadable(e)) else { return Position::Unknown };
    let Ok(metadata) = CheckpointMetadata::decode(&bytes).inspect_err(|e| unreadable(e)) else {
        return Position::Unknown;
    };
    match metadata.sources.get(&input.source_id) {
        None => Position::Ended,
        Some(SourcePosition::Partitions(topics)) => {
            topics.get(&input.topic).and_then(|t| t.get(&partition)).map_or(Position::Unknown, |&o| Position::At(o))
        }
        Some(SourcePosition::Offset(_)) => Position::Unknown,
    }
}
