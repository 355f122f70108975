//! The wait between two attempts of a job: the restart strategy's delay,
//! during which the control API still gets answers (a status that says the
//! job is restarting, its plan and checkpoint history) and a cancel ends
//! the job; actions are refused until the next attempt runs.

use super::checkpointing::Checkpoints;
use super::job_state::JobState;
use super::plan::Plan;
use super::run_info::RunInfo;
use super::views::{checkpoint_config, graph, run_status};
use crate::api::{Metrics, Request, RequestError};
use crate::config::LoadedJob;
use crossbeam_channel::Receiver;
use std::time::{Duration, Instant};

/// How long a restarting job waits, answering requests: a cancel ends the
/// wait (and the job), a status says it is restarting.
pub fn wait_to_restart(
    delay: Duration,
    requests: &Receiver<Request>,
    job: &LoadedJob,
    plan: &Plan,
    attempt: u32,
    run: &RunInfo,
    checkpoints: &Checkpoints,
) -> bool {
    let until = Instant::now() + delay;
    let name = &job.spec.name;
    loop {
        match requests.recv_deadline(until) {
            Ok(Request::Cancel(reply)) => {
                tracing::warn!(job = %name, "cancelled on request while restarting");
                let _ = reply.send(());
                return false;
            }
            Ok(Request::Status(reply)) => {
                let _ = reply.send(run_status(job, run, attempt, JobState::Restarting, plan));
            }
            Ok(Request::Metrics(reply)) => {
                let uptime_ms = run.uptime_ms();
                let _ = reply.send(Metrics { job: name.clone(), restarts: attempt, uptime_ms, ..Metrics::default() });
            }
            Ok(Request::Plan(reply)) => {
                let _ = reply.send(graph(job, plan, run, checkpoints));
            }
            Ok(Request::Checkpoints(reply)) => {
                let _ = reply.send(checkpoints.history.overview());
            }
            Ok(Request::CheckpointDetails(id, reply)) => {
                let _ = reply.send(checkpoints.history.details(id));
            }
            Ok(Request::CheckpointConfig(reply)) => {
                let _ = reply.send(checkpoint_config(job));
            }
            Ok(Request::Savepoint(_, reply)) => {
                let _ = reply.send(Err(RequestError::Failing));
            }
            // The partition's next owner resumes from the latest
            // checkpoint, and a cancel follows: an attempt started now
            // could take a change only to lose it.
            Ok(Request::HandOver(reply)) => {
                tracing::warn!(job = %name, "handing the partition over while restarting: not restarting");
                let _ = reply.send(Err(RequestError::Failing));
                return false;
            }
            Ok(Request::Swap(_, reply)) => {
                let _ = reply.send(Err(RequestError::Failing));
            }
            Ok(Request::Rescale(_, reply)) => {
                let _ = reply.send(Err(RequestError::Failing));
            }
            Ok(Request::Shadow(_, reply)) => {
                let _ = reply.send(Err(RequestError::Failing));
            }
            Ok(Request::ShadowReport(reply)) => {
                let _ = reply.send(None);
            }
            Ok(Request::StopShadow(reply)) => {
                let _ = reply.send(Err(RequestError::NoShadow));
            }
            Ok(Request::PromoteShadow(reply)) => {
                let _ = reply.send(Err(RequestError::NoShadow));
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => return true,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
                return true;
            }
        }
    }
}
