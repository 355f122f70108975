//! What the whole group is doing, from what any machine can read: the
//! input topic's partitions (from the broker) and each partition's commit
//! log on the shared checkpoint storage, whose last entry says which member
//! last claimed or committed the partition and its latest committed
//! checkpoint. `host status <job file>` prints it beside the copies that
//! run on the machine it is asked on.

use super::partitioned::{self, copy_name};
use super::{ClusterError, group_options};
use crate::checkpoint::storage::{CheckpointStorage, LastEntry};
use crate::config::LoadedJob;
use crate::connectors::kafka::{KafkaConsumer, partition_counts};

/// One partition of the input, as the shared storage tells it.
#[derive(Debug, Clone)]
pub struct PartitionView {
    /// The input partition.
    pub partition: i32,
    /// The name its copy of the job runs under (`<job>-p<n>`).
    pub copy: String,
    /// Its commit log's last entry; `None` until a member ran it.
    pub last: Option<LastEntry>,
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
        partitions.push(PartitionView { partition: p, copy, last: storage.last_commit().map_err(log_error)? });
    }
    Ok(Overview { group: cluster.group, topic: input.topic, partitions })
}
