//! What the whole group is doing, from what any machine can read: the
//! input topic's partitions (from the broker) and each partition's commit
//! log on the shared checkpoint storage, whose last entry says which member
//! last claimed or committed the partition and its latest committed
//! checkpoint, whose metadata holds the partition's committed offset; the
//! broker's end offset beside it gives the lag. `host status <job file>`
//! prints it beside the copies that run on the machine it is asked on, and
//! a member's own endpoint answers it ([`group_view`]).

use super::partitioned::{SharedInput, copy_name};
use super::{ClusterError, group_options, stages_of};
use crate::api::Status;
use crate::api::{GroupView, PartitionStatus};
use crate::checkpoint::metadata::{CheckpointMetadata, SourcePosition};
use crate::checkpoint::storage::{CheckpointStorage, LastEntry};
use crate::config::LoadedJob;
use crate::connectors::kafka::{KafkaConsumer, partition_counts};
use rdkafka::consumer::Consumer;

/// One partition of the input, as the shared storage tells it.
#[derive(Debug, Clone)]
pub struct PartitionView {
    /// The topic: the job's input, or a repartition topic in front of a
    /// later stage.
    pub topic: String,
    /// The operators its copy runs (its stage's).
    pub operators: Vec<String>,
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

/// Reads the overview of the cluster job `job`: the partitions of every
/// stage, the first stage's first.
pub fn overview(job: &LoadedJob) -> Result<Overview, ClusterError> {
    let cluster = job.spec.cluster.clone().expect("overview of a job with [cluster]");
    let stages = stages_of(job)?;
    let options = group_options(&stages[0].input, &cluster);
    let group_error = |cause| ClusterError::Group { group: cluster.group.clone(), cause };
    let consumer: KafkaConsumer = options.create(&[]).map_err(group_error)?;
    let mut partitions = Vec::new();
    for stage in &stages {
        let input = &stage.input;
        let counts = partition_counts(&consumer, &options, std::slice::from_ref(&input.topic)).map_err(group_error)?;
        let operators: Vec<String> = stage.job.spec.operators.iter().map(|o| o.uid.clone()).collect();
        for p in 0..counts.get(&input.topic).copied().unwrap_or(0) {
            let copy = copy_name(&stage.job.spec.name, p);
            let log_error = |cause| ClusterError::CommitLog { partition: p, cause };
            let storage = CheckpointStorage::open(&job.settings.storage, &copy).map_err(log_error)?;
            let last = storage.last_commit().map_err(log_error)?;
            let position =
                last.as_ref().and_then(|l| l.checkpoint).map(|id| committed_position(&storage, id, input, p));
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
            let topic = input.topic.clone();
            let operators = operators.clone();
            partitions.push(PartitionView { topic, operators, partition: p, copy, last, committed, input_ended, end });
        }
    }
    Ok(Overview { group: cluster.group, topic: stages[0].input.topic.clone(), partitions })
}

/// The group of the cluster job `job` as the control API shows it; `here`
/// gives the status of a copy (by its job name) that runs where the view
/// is taken.
pub fn group_view(job: &LoadedJob, here: impl Fn(&str) -> Option<Status>) -> Result<GroupView, ClusterError> {
    let o = overview(job)?;
    let partitions: Vec<PartitionStatus> = o
        .partitions
        .into_iter()
        .map(|p| PartitionStatus {
            topic: p.topic.clone(),
            lag: p.lag(),
            partition: p.partition,
            here: here(&p.copy).map(Box::new),
            job: p.copy,
            owner: p.last.as_ref().map(|l| l.owner.clone()),
            claimed: p.last.as_ref().is_some_and(|l| l.claim),
            offset: p.committed,
            end: p.end,
            input_ended: p.input_ended,
            checkpoint: p.last.and_then(|l| l.checkpoint),
        })
        .collect();
    Ok(GroupView {
        job: job.spec.name.clone(),
        group: o.group,
        topic: o.topic,
        members: GroupView::members_of(&partitions),
        partitions,
    })
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
