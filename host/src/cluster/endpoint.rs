//! A member's own control endpoint: the control API on the job's
//! `rest.bind`, under the job's name (`host status wc`), for everything the
//! member runs. Its reads are answered by asking the member's copies
//! (each a job with its own coordinator and endpoint) by message and
//! merging what they say: a node's subtasks are the member's partitions
//! (`subtask_index` is the input partition in `/metrics`), and `GET /v1/job`
//! adds the whole group (`cluster`: every partition's owner, checkpoint,
//! offset and lag). Its one action is cancel, which makes the member hand
//! its partitions over and leave the group; the others (savepoint, swap,
//! rescale, shadow) belong to a partition's copy, or to `host swap <job
//! file>` for all of them.

use super::overview::group_view;
use crate::api::{CheckpointMetrics, CheckpointOverview, Metrics, NodeStatus, Request, RequestError, Status};
use crate::clock::now_ms;
use crate::config::LoadedJob;
use crate::control::server::ControlServer;
use crossbeam_channel::{Receiver, Sender, bounded};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long the member waits for its copies' answers.
const WAIT: Duration = Duration::from_secs(5);

/// The member's endpoint and the requests it receives. Without an
/// endpoint (its port is taken, or another member on this machine has the
/// job's name) the member runs all the same: each copy has its own.
pub(super) fn start(job: &LoadedJob, requests: Sender<Request>) -> Option<ControlServer> {
    ControlServer::start(&job.spec.name, requests, &job.settings.rest)
        .inspect_err(|e| {
            tracing::info!(
                "this member has no control endpoint of its own ({e}); each partition's copy has its own (host status {}-p<n>)",
                job.spec.name
            );
        })
        .ok()
}

/// When the member started, for its status.
#[derive(Clone, Copy)]
pub(super) struct Since {
    at: Instant,
    ms: u64,
}

impl Since {
    pub(super) fn now() -> Self {
        Since { at: Instant::now(), ms: now_ms().max(0) as u64 }
    }
}

/// Answers `request` (anything but cancel, which the member carries out)
/// on a thread of its own, so that the member goes on serving the group
/// while its copies answer.
pub(super) fn answer(job: &LoadedJob, since: Since, copies: Vec<(i32, Sender<Request>)>, request: Request) {
    let job = job.clone();
    let spawned = std::thread::Builder::new()
        .name("member-endpoint".into())
        .spawn(move || answer_now(&job, since, &copies, request));
    if let Err(e) = spawned {
        tracing::warn!("cannot answer a control request: {e}");
    }
}

fn refuse() -> RequestError {
    RequestError::Refused(
        "this is a cluster member's endpoint: savepoints, swaps, rescales and shadow runs are a partition's \
         (host savepoint <job>-p<n>, ...); host swap <job file> swaps every partition on this machine"
            .into(),
    )
}

fn answer_now(job: &LoadedJob, since: Since, copies: &[(i32, Sender<Request>)], request: Request) {
    match request {
        Request::Status(reply) => {
            let statuses = gather(copies, Request::Status);
            let _ = reply.send(status(job, since, &statuses));
        }
        Request::Metrics(reply) => {
            let _ = reply.send(metrics(job, since, gather(copies, Request::Metrics)));
        }
        Request::Plan(reply) => {
            if let Some((_, mut graph)) = gather(&copies[..copies.len().min(1)], Request::Plan).pop() {
                graph.job = job.spec.name.clone();
                for n in &mut graph.nodes {
                    n.parallelism = copies.len() as u32;
                }
                let _ = reply.send(graph);
            }
        }
        Request::CheckpointConfig(reply) => {
            if let Some((_, config)) = gather(&copies[..copies.len().min(1)], Request::CheckpointConfig).pop() {
                let _ = reply.send(config);
            }
        }
        // Each partition has its own checkpoints: `host checkpoints` on a
        // copy, or the group view, lists them.
        Request::Checkpoints(reply) => _ = reply.send(CheckpointOverview::default()),
        Request::CheckpointDetails(_, reply) => _ = reply.send(None),
        Request::ShadowReport(reply) => _ = reply.send(None),
        Request::Savepoint(_, reply) => _ = reply.send(Err(refuse())),
        Request::Swap(_, reply) => _ = reply.send(Err(refuse())),
        Request::Rescale(_, reply) => _ = reply.send(Err(refuse())),
        Request::Shadow(_, reply) => _ = reply.send(Err(refuse())),
        Request::StopShadow(reply) => _ = reply.send(Err(refuse())),
        Request::PromoteShadow(reply) => _ = reply.send(Err(refuse())),
        Request::HandOver(reply) => _ = reply.send(Err(refuse())),
        // The member itself carries a cancel out; none comes here.
        Request::Cancel(reply) => _ = reply.send(()),
    }
}

/// Each copy's answer to `make`, by partition; a copy that does not answer
/// within [`WAIT`] (it is ending) is left out.
fn gather<T: Send>(copies: &[(i32, Sender<Request>)], make: impl Fn(Sender<T>) -> Request) -> Vec<(i32, T)> {
    let asked: Vec<(i32, Receiver<T>)> = copies
        .iter()
        .filter_map(|(p, c)| {
            let (tx, rx) = bounded(1);
            c.send(make(tx)).ok().map(|()| (*p, rx))
        })
        .collect();
    let until = Instant::now() + WAIT;
    asked.into_iter().filter_map(|(p, rx)| rx.recv_deadline(until).ok().map(|a| (p, a))).collect()
}

/// The member's status: its copies' counts summed, each node's
/// parallelism the number of partitions here, and the group.
fn status(job: &LoadedJob, since: Since, copies: &[(i32, Status)]) -> Status {
    let mut nodes: Vec<NodeStatus> = Vec::new();
    for n in copies.iter().flat_map(|(_, s)| &s.nodes) {
        match nodes.iter_mut().find(|m| m.role == n.role && m.id == n.id) {
            Some(m) => {
                m.parallelism += n.parallelism;
                m.records_in += n.records_in;
                m.records_out += n.records_out;
            }
            None => nodes.push(n.clone()),
        }
    }
    let by_copy: BTreeMap<&str, &Status> = copies.iter().map(|(_, s)| (s.job.as_str(), s)).collect();
    let cluster = group_view(job, |copy| by_copy.get(copy).map(|s| (*s).clone()))
        .inspect_err(|e| tracing::warn!("the group view for the control API: {e}"))
        .ok();
    let partitions: Vec<i32> = copies.iter().map(|(p, _)| *p).collect();
    Status {
        job: job.spec.name.clone(),
        pid: std::process::id(),
        attempt: copies.iter().map(|(_, s)| s.attempt).max().unwrap_or(0),
        state: if copies.is_empty() { "idle".into() } else { "running".into() },
        uptime_ms: since.at.elapsed().as_millis() as u64,
        records_read: copies.iter().map(|(_, s)| s.records_read).sum(),
        records_written: copies.iter().map(|(_, s)| s.records_written).sum(),
        checkpoints: Some(format!("cluster member running partitions {partitions:?}; each checkpoints on its own")),
        latest_checkpoint: None,
        nodes,
        start_time_ms: since.ms,
        parallelism: copies.len() as u32,
        max_parallelism: job.spec.max_parallelism,
        restarts: copies.iter().flat_map(|(_, s)| s.restarts.iter().cloned()).collect(),
        cluster,
    }
}

/// The member's metrics: every copy's subtasks, each under its partition's
/// number as subtask index, and the copies' checkpoint counts summed.
fn metrics(job: &LoadedJob, since: Since, copies: Vec<(i32, Metrics)>) -> Metrics {
    let mut checkpoints = CheckpointMetrics::default();
    let mut tasks = Vec::new();
    let mut restarts = 0;
    for (p, m) in copies {
        restarts += m.restarts;
        if let Some(c) = m.checkpoints {
            checkpoints.completed += c.completed;
            checkpoints.failed += c.failed;
            checkpoints.in_progress += c.in_progress;
        }
        tasks.extend(m.tasks.into_iter().map(|mut t| {
            t.subtask = p as u32;
            t
        }));
    }
    Metrics {
        job: job.spec.name.clone(),
        restarts,
        uptime_ms: since.at.elapsed().as_millis() as u64,
        tasks,
        checkpoints: Some(checkpoints),
    }
}
