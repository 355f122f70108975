//! Cluster mode (`[cluster] kind = "kafka-group"`): many `host` processes
//! run one job, each the partitions of its Kafka input that the consumer
//! group gives it. The group, not Weir, decides who owns what and notices
//! a member that went silent; a partition moves with its checkpoints, on
//! storage every member reaches. See `docs/cluster.md`.
//!
//! A member runs one copy of the job per partition it owns
//! ([`partitioned`]), each on a thread of its own, resumed from that
//! partition's latest checkpoint; a revoked partition's copy is cancelled
//! before the group may give it to another member. Each copy claims its
//! partition's commit log when it starts, so a member that lost the
//! partition without knowing (paused past the session timeout) can commit
//! nothing more for it. The member reacts to
//! messages: the group's events and the copies' ends. [`overview`] reads
//! what the whole group does from the shared storage.

pub mod overview;
pub mod partitioned;

use crate::checkpoint::storage::StorageError;
use crate::config::LoadedJob;
use crate::connectors::kafka::ClusterOptions;
use crate::connectors::kafka::group::{self, GroupEvent};
use crate::control::Request;
use crate::coordinator::checkpointing::CheckpointingError;
use crate::coordinator::{JobError, StartFrom, run_job_with};
use crate::fault::{Classify, Domain, RetryHint};
use crate::runtime::error::{ConnectorError, TaskError};
use crossbeam_channel::{Receiver, Sender, select, unbounded};
use partitioned::{NotPartitionable, SharedInput, copy_for, copy_name};
use std::collections::BTreeMap;
use std::thread::JoinHandle;
use thiserror::Error;

/// Why a member stopped.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The job does not fit cluster mode.
    #[error(transparent)]
    NotPartitionable(#[from] NotPartitionable),
    /// The consumer group could not be joined or left the member.
    #[error("consumer group '{group}': {cause}")]
    Group {
        /// The group.
        group: String,
        /// What went wrong.
        cause: ConnectorError,
    },
    /// A partition's commit log could not be read.
    #[error("partition {partition}'s commit log: {cause}")]
    CommitLog {
        /// The partition.
        partition: i32,
        /// Why.
        cause: StorageError,
    },
    /// The copy of the job for a partition failed.
    #[error("partition {partition} (job '{copy}'): {cause}")]
    Partition {
        /// The partition.
        partition: i32,
        /// The copy's name.
        copy: String,
        /// Its failure.
        cause: Box<JobError>,
    },
}

impl Classify for ClusterError {
    fn domain(&self) -> Domain {
        match self {
            ClusterError::NotPartitionable(_) => Domain::User,
            ClusterError::Group { cause, .. } => cause.domain(),
            ClusterError::CommitLog { cause, .. } => cause.domain(),
            ClusterError::Partition { cause, .. } => cause.domain(),
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            ClusterError::NotPartitionable(_) => RetryHint::NoRetry,
            ClusterError::Group { cause, .. } => cause.retry(),
            ClusterError::CommitLog { cause, .. } => cause.retry(),
            ClusterError::Partition { cause, .. } => cause.retry(),
        }
    }
}

/// One partition's copy of the job, running.
struct Copy {
    /// Which start of the partition's copy on this member: a copy stopped
    /// on revocation still reports its end, maybe after the partition came
    /// back and a new copy started.
    run: u64,
    requests: Sender<Request>,
    thread: JoinHandle<()>,
}

/// A copy's end: partition, run, outcome.
type Ended = (i32, u64, Result<(), JobError>);

/// Runs `job` as one member of its `[cluster]` group until a copy fails or
/// the group is lost; a member with nothing left to do keeps its
/// partitions (so they are not moved for nothing) until it is stopped.
pub fn run_member(job: &LoadedJob) -> Result<(), ClusterError> {
    let cluster = job.spec.cluster.clone().expect("run_member runs a job with [cluster]");
    let input = partitioned::check(job, &cluster)?;
    let options = group_options(&input, &cluster);
    let group_error = |cause| ClusterError::Group { group: cluster.group.clone(), cause };
    let (member, events) =
        group::join(&options, &cluster.group, &input.topic, cluster.session_timeout).map_err(group_error)?;
    tracing::info!(
        job = %job.spec.name, group = %cluster.group, topic = %input.topic,
        "joined the consumer group; each partition it assigns runs as {}",
        copy_name(&job.spec.name, 0).replace("-p0", "-p<partition>")
    );
    let (ended_tx, ended) = unbounded::<Ended>();
    let mut copies: BTreeMap<i32, Copy> = BTreeMap::new();
    let outcome = serve(job, &input, &events, &ended_tx, &ended, &mut copies);
    stop_all(std::mem::take(&mut copies).into_iter().collect());
    // The group's last revocation must not wait for a supervisor that is
    // gone: dropping the receiver first lets it through.
    drop(events);
    drop(member);
    outcome.map_err(|e| match e {
        Served::Group(cause) => group_error(ConnectorError::Refused(cause)),
        Served::Partition(p, cause) => {
            ClusterError::Partition { partition: p, copy: copy_name(&job.spec.name, p), cause: Box::new(cause) }
        }
    })
}

/// Why serving ended.
enum Served {
    Group(String),
    Partition(i32, JobError),
}

fn serve(
    job: &LoadedJob,
    input: &SharedInput,
    events: &Receiver<GroupEvent>,
    ended_tx: &Sender<Ended>,
    ended: &Receiver<Ended>,
    copies: &mut BTreeMap<i32, Copy>,
) -> Result<(), Served> {
    let mut runs = 0u64;
    loop {
        select! {
            recv(events) -> event => match event {
                Ok(GroupEvent::Assigned(partitions)) => {
                    tracing::info!(?partitions, "partitions assigned");
                    for p in partitions {
                        if let std::collections::btree_map::Entry::Vacant(slot) = copies.entry(p) {
                            runs += 1;
                            let copy = start(job, input, p, runs, ended_tx.clone());
                            slot.insert(copy.map_err(|e| Served::Group(e.to_string()))?);
                        }
                    }
                }
                Ok(GroupEvent::Revoked(partitions, released)) => {
                    tracing::info!(?partitions, "partitions revoked; stopping them here");
                    stop_all(partitions.iter().filter_map(|p| copies.remove(p).map(|c| (*p, c))).collect());
                    let _ = released.send(());
                }
                Ok(GroupEvent::Failed(why)) => tracing::warn!("consumer group: {why}"),
                Err(_) => return Err(Served::Group("the membership ended".into())),
            },
            recv(ended) -> message => {
                let (p, run, result) = message.expect("the member holds a sender");
                // A copy stopped on revocation reports too; it is no longer
                // listed (or another run of the partition is), and its end
                // means nothing.
                if copies.get(&p).is_none_or(|c| c.run != run) {
                    continue;
                }
                let copy = copies.remove(&p).expect("listed");
                let _ = copy.thread.join();
                match result {
                    Ok(()) => tracing::info!(partition = p, "partition finished: its input ended"),
                    // Another member owns it now; the group will say so
                    // here too. Nothing of it was committed after the fence.
                    Err(e) if fenced(&e) => {
                        tracing::warn!(partition = p, "partition taken over by another member; stopped here: {e}");
                    }
                    Err(e) => return Err(Served::Partition(p, e)),
                }
            }
        }
    }
}

/// Whether a copy ended because another member claimed its partition.
fn fenced(e: &JobError) -> bool {
    matches!(
        e,
        JobError::Checkpoints(
            CheckpointingError::Fenced(_)
                | CheckpointingError::FinalCheckpoint { cause: StorageError::Fenced { .. }, .. }
        ) | JobError::Storage(StorageError::Fenced { .. })
            | JobError::Task(TaskError::Sink { cause: ConnectorError::Fenced(_), .. })
    )
}

/// The group client's options: the source's brokers and properties unless
/// `[cluster]` names other brokers.
fn group_options(input: &SharedInput, cluster: &crate::config::ClusterSpec) -> ClusterOptions {
    ClusterOptions {
        bootstrap_servers: cluster.bootstrap_servers.clone().unwrap_or_else(|| input.bootstrap_servers.clone()),
        request_timeout: None,
        create_topic: false,
        partitions: None,
        properties: input.properties.clone().into_iter().collect(),
    }
}

/// Starts the copy for partition `p`, resumed from its latest checkpoint.
fn start(job: &LoadedJob, input: &SharedInput, p: i32, run: u64, ended: Sender<Ended>) -> std::io::Result<Copy> {
    let copy = copy_for(job, input, p, partitioned::member_name());
    let (requests, requests_rx) = unbounded();
    let own = requests.clone();
    let thread = std::thread::Builder::new().name(format!("partition-{p}")).spawn(move || {
        let result = run_job_with(&copy, &StartFrom::Latest, (own, requests_rx)).map(|_| ());
        let _ = ended.send((p, run, result));
    })?;
    Ok(Copy { run, requests, thread })
}

/// Cancels the copies (all at once: they stop side by side) and waits
/// until each ended: after this nothing of them runs here, and each one's
/// last completed checkpoint is where the next owner resumes.
fn stop_all(copies: Vec<(i32, Copy)>) {
    let (reply, _replied) = unbounded();
    for (_, c) in &copies {
        let _ = c.requests.send(Request::Cancel(reply.clone()));
    }
    for (p, c) in copies {
        if c.thread.join().is_err() {
            tracing::error!(partition = p, "the partition's thread panicked");
        }
    }
}
