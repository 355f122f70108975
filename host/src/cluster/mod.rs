//! Cluster mode (`[cluster] kind = "kafka-group"`): many `host` processes
//! run one job, each the partitions of its Kafka input that the consumer
//! group gives it. The group, not Weir, decides who owns what and notices
//! a member that went silent; a partition moves with its checkpoints, on
//! storage every member reaches. See `docs/cluster.md`.
//!
//! A member runs one copy of the job per partition it owns
//! ([`partitioned`]), each on a thread of its own, resumed from that
//! partition's latest checkpoint; a revoked partition's copy takes a last
//! checkpoint and is cancelled before the group may give it to another
//! member. Each copy claims its
//! partition's commit log when it starts, so a member that lost the
//! partition without knowing (paused past the session timeout) can commit
//! nothing more for it. The member reacts to
//! messages: the group's events, the copies' ends and requests to its own
//! control endpoint ([`endpoint`]). [`overview`] reads what the whole group
//! does from the shared storage.

mod endpoint;
pub mod overview;
pub mod partitioned;
pub mod stages;

use crate::api::Request;
use crate::checkpoint::storage::StorageError;
use crate::config::LoadedJob;
use crate::connectors::kafka::ClusterOptions;
use crate::connectors::kafka::group::{self, GroupEvent};
use crate::connectors::kafka::{KafkaConsumer, partition_counts};
use crate::coordinator::checkpointing::CheckpointingError;
use crate::coordinator::{JobError, StartFrom, run_job_with};
use crate::fault::{Classify, Domain, RetryHint};
use crate::runtime::error::{ConnectorError, TaskError};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, select, unbounded};
use partitioned::{NotPartitionable, SharedInput, copy_for, copy_name};
use stages::Stage;
use std::collections::BTreeMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
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
    /// Its job name, `<stage>-p<partition>`.
    name: String,
    /// Which start of the partition's copy on this member: a copy stopped
    /// on revocation still reports its end, maybe after the partition came
    /// back and a new copy started.
    run: u64,
    requests: Sender<Request>,
    thread: JoinHandle<()>,
}

/// A partition of a stage: the stage's index, the partition.
type Slot = (usize, i32);

/// A copy's end: its slot, run, outcome.
type Ended = (Slot, u64, Result<(), JobError>);

/// Runs `job` as one member of its `[cluster]` group until a copy fails,
/// the group is lost or the member is cancelled (`host cancel <job>`), and
/// hands its partitions over; a member with nothing left to do keeps its
/// partitions (so they are not moved for nothing) until it is stopped.
pub fn run_member(job: &LoadedJob) -> Result<(), ClusterError> {
    let cluster = job.spec.cluster.clone().expect("run_member runs a job with [cluster]");
    let stages = stages_of(job)?;
    let options = group_options(&stages[0].input, &cluster);
    // One membership per stage; their events come out of one channel,
    // tagged with the stage.
    let (events_tx, events) = unbounded::<(usize, GroupEvent)>();
    let mut members = Vec::new();
    for (i, stage) in stages.iter().enumerate() {
        let group_error = |cause| ClusterError::Group { group: stage.group.clone(), cause };
        let (member, stage_events) =
            group::join(&options, &stage.group, &stage.input.topic, cluster.session_timeout).map_err(group_error)?;
        forward(i, stage_events, events_tx.clone());
        members.push(member);
        tracing::info!(
            job = %stage.job.spec.name, group = %stage.group, topic = %stage.input.topic,
            "joined the consumer group; each partition it assigns runs as {}",
            copy_name(&stage.job.spec.name, 0).replace("-p0", "-p<partition>")
        );
    }
    drop(events_tx);
    let (ended_tx, ended) = unbounded::<Ended>();
    let mut copies: BTreeMap<Slot, Copy> = BTreeMap::new();
    // `asks` lives while the member serves, so `requests` never disconnects.
    let (asks, requests) = unbounded();
    let _server = endpoint::start(job, asks.clone());
    cancel_on_termination(asks.clone());
    let inbox = Inbox { events: &events, ended: &ended, requests: &requests };
    let outcome = serve(job, &stages, inbox, &ended_tx, &mut copies);
    drop(asks);
    hand_over(std::mem::take(&mut copies).into_iter().map(|((_, p), c)| (p, c)).collect(), hand_over_time(job));
    // The group's last revocation must not wait for a supervisor that is
    // gone: dropping the receiver first lets it through.
    drop(events);
    drop(members);
    outcome.map_err(|e| match e {
        Served::Group(cause) => {
            ClusterError::Group { group: cluster.group.clone(), cause: ConnectorError::Refused(cause) }
        }
        Served::Partition((stage, p), cause) => {
            ClusterError::Partition { partition: p, copy: copy_name(&stages[stage].job.spec.name, p), cause }
        }
    })
}

/// The stages of the cluster job `job` (one, unless a keyed operator reads
/// another operator's output), with the repartition topics between them
/// created where no member created them yet.
pub fn stages_of(job: &LoadedJob) -> Result<Vec<Stage>, ClusterError> {
    let cluster = job.spec.cluster.clone().expect("a job with [cluster]");
    let input = partitioned::check(job, &cluster)?;
    // The graph is checked before any broker is asked; the partition count
    // only sizes the repartition topics.
    stages::split(job, &input, &cluster.group, 1)?;
    let options = group_options(&input, &cluster);
    let group_error = |cause| ClusterError::Group { group: cluster.group.clone(), cause };
    let consumer: KafkaConsumer = options.create(&[]).map_err(group_error)?;
    let counts = partition_counts(&consumer, &options, std::slice::from_ref(&input.topic)).map_err(group_error)?;
    let count = counts.get(&input.topic).copied().unwrap_or(1);
    let stages = stages::split(job, &input, &cluster.group, count)?;
    for stage in &stages {
        let Some(partitions) = stage.creates else { continue };
        let creating = ClusterOptions { create_topic: true, partitions: Some(partitions), ..options.clone() };
        partition_counts(&consumer, &creating, std::slice::from_ref(&stage.input.topic)).map_err(group_error)?;
    }
    Ok(stages)
}

/// Passes stage `stage`'s group events on, tagged, until either side is
/// gone. A revocation it cannot pass on is dropped, which lets the group
/// go on (nothing runs its partitions here any more).
fn forward(stage: usize, events: Receiver<GroupEvent>, to: Sender<(usize, GroupEvent)>) {
    let spawned = std::thread::Builder::new().name(format!("stage-{stage}-events")).spawn(move || {
        for e in events {
            if to.send((stage, e)).is_err() {
                break;
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot follow the consumer group of stage {stage}: {e}");
    }
}

/// Why serving ended.
enum Served {
    Group(String),
    Partition(Slot, Box<JobError>),
}

/// What a member reacts to: the group's events, its copies' ends, and
/// requests to its own control endpoint.
struct Inbox<'a> {
    events: &'a Receiver<(usize, GroupEvent)>,
    ended: &'a Receiver<Ended>,
    requests: &'a Receiver<Request>,
}

/// Serves the group until a copy fails, the group is lost (`Err`) or the
/// member is cancelled (`Ok`).
fn serve(
    job: &LoadedJob,
    stages: &[Stage],
    inbox: Inbox<'_>,
    ended_tx: &Sender<Ended>,
    copies: &mut BTreeMap<Slot, Copy>,
) -> Result<(), Served> {
    let Inbox { events, ended, requests } = inbox;
    let since = endpoint::Since::now();
    let mut runs = 0u64;
    loop {
        select! {
            recv(requests) -> request => match request {
                Ok(Request::Cancel(reply)) => {
                    tracing::warn!("cancelled: handing the partitions over and leaving the group");
                    let _ = reply.send(());
                    return Ok(());
                }
                Ok(request) => {
                    let here = copies.iter().map(|((_, p), c)| (*p, c.requests.clone())).collect();
                    endpoint::answer(job, since, here, request);
                }
                Err(_) => {}
            },
            recv(events) -> event => match event {
                Ok((stage, GroupEvent::Assigned(partitions))) => {
                    let name = &stages[stage].job.spec.name;
                    tracing::info!(stage = %name, ?partitions, "partitions assigned");
                    for p in partitions {
                        if let std::collections::btree_map::Entry::Vacant(slot) = copies.entry((stage, p)) {
                            runs += 1;
                            let copy = start(&stages[stage], (stage, p), runs, ended_tx.clone());
                            slot.insert(copy.map_err(|e| Served::Group(e.to_string()))?);
                        }
                    }
                }
                Ok((stage, GroupEvent::Revoked(partitions, released))) => {
                    let name = &stages[stage].job.spec.name;
                    tracing::info!(stage = %name, ?partitions, "partitions revoked; handing them over");
                    let revoked =
                        partitions.iter().filter_map(|p| copies.remove(&(stage, *p)).map(|c| (*p, c))).collect();
                    hand_over(revoked, hand_over_time(job));
                    let _ = released.send(());
                }
                Ok((_, GroupEvent::Failed(why))) => tracing::warn!("consumer group: {why}"),
                Ok((_, GroupEvent::Refused(why))) => return Err(Served::Group(why)),
                Err(_) => return Err(Served::Group("the membership ended".into())),
            },
            recv(ended) -> message => {
                let (slot, run, result) = message.expect("the member holds a sender");
                // A copy stopped on revocation reports too; it is no longer
                // listed (or another run of the partition is), and its end
                // means nothing.
                if copies.get(&slot).is_none_or(|c| c.run != run) {
                    continue;
                }
                let copy = copies.remove(&slot).expect("listed");
                let _ = copy.thread.join();
                let (partition, name) = (slot.1, &copy.name);
                match result {
                    Ok(()) => tracing::info!(partition, job = %name, "partition finished: its input ended"),
                    // Another member owns it now; the group will say so
                    // here too. Nothing of it was committed after the fence.
                    Err(e) if fenced(&e) => tracing::warn!(
                        partition, job = %name, "partition taken over by another member; stopped here: {e}"
                    ),
                    Err(e) => return Err(Served::Partition(slot, Box::new(e))),
                }
            }
        }
    }
}

/// Makes the first SIGTERM or SIGINT cancel the member (it hands its
/// partitions over and leaves the group, which moves them at once) instead
/// of killing it, after which the group would wait a session for them:
/// Kubernetes stops a pod with SIGTERM. A second signal exits at once.
fn cancel_on_termination(requests: Sender<Request>) {
    let watch = move || -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async {
            let (mut term, mut int) = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            let (reply, _) = bounded(1);
            let _ = requests.send(Request::Cancel(reply));
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            tracing::warn!("a second signal: exiting without handing the partitions over");
            std::process::exit(130)
        })
    };
    let spawned = std::thread::Builder::new().name("member-signals".into()).spawn(move || {
        if let Err(e) = watch() {
            tracing::warn!("cannot watch for SIGTERM; a stopped member's partitions move after its session: {e}");
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch for SIGTERM; a stopped member's partitions move after its session: {e}");
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
            | JobError::Task(TaskError::Sink {
                cause: ConnectorError::Fenced(_) | ConnectorError::ProducerFenced(_),
                ..
            })
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

/// Starts the copy of `stage` for partition `slot`, resumed from its
/// latest checkpoint.
fn start(stage: &Stage, slot: Slot, run: u64, ended: Sender<Ended>) -> std::io::Result<Copy> {
    let p = slot.1;
    let copy = copy_for(&stage.job, &stage.input, p, partitioned::member_name());
    let name = copy.spec.name.clone();
    let (requests, requests_rx) = unbounded();
    let own = requests.clone();
    // Every line the copy logs, its tasks' included, names the partition.
    let span = tracing::info_span!("copy", partition = p);
    let thread = std::thread::Builder::new().name(format!("partition-{p}")).spawn(move || {
        let _entered = span.enter();
        let result = run_job_with(&copy, &StartFrom::Latest, (own, requests_rx)).map(|_| ());
        let _ = ended.send((slot, run, result));
    })?;
    Ok(Copy { name, run, requests, thread })
}

/// How long revoked partitions may take their last checkpoint. The whole
/// group's rebalance waits for it, and what it saves the next owner is
/// reading again at most a checkpoint interval's input: so no longer than
/// that interval, nor than half a session.
fn hand_over_time(job: &LoadedJob) -> Duration {
    let session = job.spec.cluster.as_ref().map_or(Duration::ZERO, |c| c.session_timeout / 2);
    job.settings.checkpointing.map_or(Duration::ZERO, |c| c.interval).min(session)
}

/// Hands revoked partitions over: each copy completes a checkpoint (the
/// one in flight, or one taken now), so that the next owner resumes close
/// to where this one stopped instead of reading a checkpoint interval's
/// input again; then they are cancelled. A copy whose checkpoint does not
/// complete `within` is cancelled all the same, and its next owner resumes
/// from its latest periodic checkpoint.
fn hand_over(copies: Vec<(i32, Copy)>, within: Duration) {
    let asked: Vec<(i32, Receiver<_>)> = copies
        .iter()
        .map(|(p, c)| {
            let (reply, answer) = bounded(1);
            let _ = c.requests.send(Request::HandOver(reply));
            (*p, answer)
        })
        .collect();
    let deadline = Instant::now() + within;
    for ((p, answer), (_, copy)) in asked.into_iter().zip(&copies) {
        let job = &copy.name;
        match answer.recv_deadline(deadline) {
            Ok(Ok(id)) => {
                tracing::info!(partition = p, %job, checkpoint = id, "handed over at a checkpoint just completed")
            }
            Ok(Err(why)) => tracing::info!(partition = p, %job, "handed over at its latest checkpoint ({why})"),
            // The copy ended first (another member claimed the partition,
            // or it failed): what it committed last is where the next
            // owner resumes.
            Err(RecvTimeoutError::Disconnected) => {
                tracing::info!(partition = p, %job, "the copy ended before a checkpoint; handed over at its latest one")
            }
            Err(RecvTimeoutError::Timeout) => tracing::warn!(
                partition = p, %job,
                "no checkpoint completed within {} ms; handed over at its latest one",
                within.as_millis()
            ),
        }
    }
    stop_all(copies);
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
