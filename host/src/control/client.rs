//! The control API's client, for the `host status`, `host savepoint`,
//! `host swap`, `host rescale`, `host shadow` and `host cancel` commands: finds a running
//! job through its run file (only one of the user's own, [`run_file`]) and
//! makes one request.

use super::run_file::{self, UntrustedRunFile};
use super::server::alive;
use super::{RunFile, run_file_path};
use crate::api::{
    Accepted, GraphEdge, JobGraph, Operation, RescaleDone, RescaleRequest, SavepointDone, SavepointRequest,
    ShadowReport, ShadowRequest, ShadowStarted, Status, SwapDone, SwapRequest,
};
use std::time::Duration;
use thiserror::Error;

/// Why a request to a running job failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No process runs the job.
    #[error("job '{job}' is not running on this machine (no live run file {file})")]
    NotRunning {
        /// Job name.
        job: String,
        /// Where its run file would be.
        file: String,
    },
    /// The run file could be another user's.
    #[error(transparent)]
    Untrusted(#[from] UntrustedRunFile),
    /// The connection.
    #[error("job '{job}': {message}")]
    Io {
        /// Job name.
        job: String,
        /// What failed.
        message: String,
    },
    /// The job answered with an error.
    #[error("job '{job}': {message}")]
    Refused {
        /// Job name.
        job: String,
        /// The job's reason.
        message: String,
    },
}

/// What a whole-job rescale ([`Client::rescale_job`]) changes: the
/// operators a live rescale can bring to the new parallelism (or to their
/// own max parallelism, if lower), in the graph's order, and those it
/// cannot, with why. Sources and sinks keep theirs (a live rescale moves
/// an operator's key groups).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRescale {
    /// Operator uids to rescale, each with its new parallelism.
    pub operators: Vec<(String, u32)>,
    /// Operators left as they are, with the reason.
    pub stay: Vec<(String, String)>,
}

impl JobRescale {
    /// The whole-job rescale of `graph` to `parallelism`: every operator
    /// not already there, at most at its own max parallelism (as a start
    /// with `--parallelism` does), but those joined to a neighbour by a
    /// forward edge (the job refuses to rescale them alone: forward pairs
    /// subtask i with subtask i).
    pub fn of(graph: &JobGraph, parallelism: u32) -> Self {
        let mut plan = JobRescale { operators: Vec::new(), stay: Vec::new() };
        for node in graph.nodes.iter().filter(|n| n.role == "operator") {
            let to = node
                .max_parallelism
                .filter(|&cap| cap < graph.max_parallelism)
                .map_or(parallelism, |cap| parallelism.min(cap));
            if node.parallelism == to {
                let why = if to < parallelism { ", its max_parallelism".to_string() } else { String::new() };
                plan.stay.push((node.id.clone(), format!("already runs on {to} subtasks{why}")));
                continue;
            }
            // A sink's input edge is planned anew for the operator's new
            // parallelism (forward from one subtask, else rebalance): it
            // binds nothing.
            let into_operator = |e: &&GraphEdge| graph.nodes.iter().any(|n| n.id == e.to && n.role == "operator");
            let forward = graph
                .edges
                .iter()
                .filter(into_operator)
                .find(|e| e.partitioning == "forward" && (e.from == node.id || e.to == node.id));
            match forward {
                Some(e) => plan.stay.push((
                    node.id.clone(),
                    format!(
                        "stays on {} subtasks: joined to '{}' by a forward edge, which pairs subtask i with \
                         subtask i (partition = \"rebalance\" or \"key\" there lets it change)",
                        node.parallelism,
                        if e.from == node.id { &e.to } else { &e.from }
                    ),
                )),
                None => plan.operators.push((node.id.clone(), to)),
            }
        }
        plan
    }
}

/// A running job, found by name.
pub struct Client {
    run: RunFile,
}

impl Client {
    /// Finds the running job `job`.
    pub fn find(job: &str) -> Result<Self, ClientError> {
        let file = run_file_path(job);
        let not_running = || ClientError::NotRunning { job: job.to_string(), file: file.display().to_string() };
        let run = run_file::read(&file)?.ok_or_else(not_running)?;
        if !alive(run.pid) {
            return Err(not_running());
        }
        Ok(Client { run })
    }

    /// The run file it was found by.
    pub fn run_file(&self) -> &RunFile {
        &self.run
    }

    /// The job's status.
    pub fn status(&self) -> Result<Status, ClientError> {
        self.call("GET", "/v1/job", None)
    }

    /// The job graph: nodes with their parallelism now, and edges.
    pub fn graph(&self) -> Result<JobGraph, ClientError> {
        self.call("GET", "/v1/job/plan", None)
    }

    /// Takes a savepoint; returns once it completed (or failed).
    pub fn savepoint(&self, request: &SavepointRequest) -> Result<SavepointDone, ClientError> {
        let accepted: Accepted =
            self.call("POST", "/v1/savepoints", Some(serde_json::to_vec(request).expect("serializes")))?;
        let done = self.follow(&accepted)?;
        done.savepoint.ok_or_else(|| self.refused("the savepoint completed without a location".into()))
    }

    /// Replaces an operator's module; returns once the swap took effect
    /// (or was rolled back).
    pub fn swap(&self, request: &SwapRequest) -> Result<SwapDone, ClientError> {
        let accepted: Accepted =
            self.call("POST", "/v1/swaps", Some(serde_json::to_vec(request).expect("serializes")))?;
        let done = self.follow(&accepted)?;
        done.swap.ok_or_else(|| self.refused("the swap completed without an outcome".into()))
    }

    /// Changes an operator's parallelism; returns once the rescale took
    /// effect (or was refused or failed).
    pub fn rescale(&self, request: &RescaleRequest) -> Result<RescaleDone, ClientError> {
        let accepted: Accepted =
            self.call("POST", "/v1/rescales", Some(serde_json::to_vec(request).expect("serializes")))?;
        let done = self.follow(&accepted)?;
        done.rescale.ok_or_else(|| self.refused("the rescale completed without an outcome".into()))
    }

    /// Brings every operator of the job that can change live to
    /// `parallelism`, one after another, each at its own barrier (as
    /// [`Client::rescale`]); `done` sees each as it took effect. Stops at
    /// the first refusal or failure: the operators before it stay
    /// rescaled. Refused, changing nothing, when no operator can change.
    pub fn rescale_job(&self, parallelism: u32, mut done: impl FnMut(&RescaleDone)) -> Result<JobRescale, ClientError> {
        let plan = JobRescale::of(&self.graph()?, parallelism);
        if plan.operators.is_empty() {
            let mut why = format!("no operator can change to {parallelism} subtasks");
            for (uid, reason) in &plan.stay {
                why.push_str(&format!("; '{uid}' {reason}"));
            }
            return Err(self.refused(why));
        }
        let mut rescaled: Vec<&str> = Vec::new();
        for (uid, parallelism) in &plan.operators {
            let request = RescaleRequest { operator: uid.clone(), parallelism: *parallelism };
            let outcome = self.rescale(&request).map_err(|e| match e {
                ClientError::Refused { job, message } if !rescaled.is_empty() => ClientError::Refused {
                    job,
                    message: format!("{message} (rescaled before it: '{}')", rescaled.join("', '")),
                },
                e => e,
            })?;
            done(&outcome);
            rescaled.push(uid);
        }
        Ok(plan)
    }

    /// Starts a shadow run; returns once its state was forked (or it was
    /// refused).
    pub fn shadow(&self, request: &ShadowRequest) -> Result<ShadowStarted, ClientError> {
        let accepted: Accepted =
            self.call("POST", "/v1/shadows", Some(serde_json::to_vec(request).expect("serializes")))?;
        let done = self.follow(&accepted)?;
        done.shadow.ok_or_else(|| self.refused("the shadow run started without an outcome".into()))
    }

    /// The shadow run's report so far (the last run's, once it ended).
    pub fn shadow_report(&self) -> Result<ShadowReport, ClientError> {
        self.call("GET", "/v1/shadow", None)
    }

    /// Ends the shadow run; its final report.
    pub fn stop_shadow(&self) -> Result<ShadowReport, ClientError> {
        self.call("POST", "/v1/shadow/stop", Some(b"{}".to_vec()))
    }

    /// Ends the shadow run and swaps its module in, with the live state;
    /// returns once the swap took effect (or was rolled back).
    pub fn promote_shadow(&self) -> Result<SwapDone, ClientError> {
        let accepted: Accepted = self.call("POST", "/v1/shadow/promote", Some(b"{}".to_vec()))?;
        let done = self.follow(&accepted)?;
        done.swap.ok_or_else(|| self.refused("the promotion completed without an outcome".into()))
    }

    /// Polls an accepted action until it completed (or failed: its error).
    fn follow(&self, accepted: &Accepted) -> Result<Operation, ClientError> {
        let mut wait = Duration::from_millis(20);
        loop {
            let o: Operation = self.call("GET", &accepted.location, None)?;
            match o.status.as_str() {
                "in-progress" => {}
                "completed" => return Ok(o),
                _ => return Err(self.refused(o.error.unwrap_or_else(|| format!("{} failed", o.kind)))),
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_millis(250));
        }
    }

    fn refused(&self, message: String) -> ClientError {
        ClientError::Refused { job: self.run.job.clone(), message }
    }

    /// Cancels the job.
    pub fn cancel(&self) -> Result<(), ClientError> {
        self.call::<serde_json::Value>("POST", "/v1/cancel", Some(b"{}".to_vec())).map(|_| ())
    }

    fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, ClientError> {
        let job = &self.run.job;
        let io = |message: String| ClientError::Io { job: job.clone(), message };
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| io(format!("cannot make an HTTP client: {e}")))?;
        let url = format!("{}{path}", self.run.url());
        let request = match method {
            "GET" => client.get(&url),
            _ => client.post(&url).header("Content-Type", "application/json").body(body.unwrap_or_default()),
        };
        let response = request.bearer_auth(&self.run.token).send().map_err(|e| io(format!("cannot reach it: {e}")))?;
        let status = response.status();
        let body = response.bytes().map_err(|e| io(format!("no answer: {e}")))?;
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(ClientError::Refused { job: job.clone(), message });
        }
        serde_json::from_slice(&body).map_err(|e| io(format!("bad answer: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::GraphNode;

    fn node(id: &str, role: &str, parallelism: u32) -> GraphNode {
        GraphNode {
            id: id.into(),
            role: role.into(),
            kind: "wasm".into(),
            parallelism,
            max_parallelism: (role == "operator").then_some(128),
            module: None,
            backend: None,
        }
    }

    fn edge(from: &str, to: &str, partitioning: &str) -> GraphEdge {
        GraphEdge { from: from.into(), to: to.into(), partitioning: partitioning.into() }
    }

    #[test]
    fn a_whole_job_rescale_takes_every_operator_but_those_already_there_or_forward_joined() {
        let graph = JobGraph {
            job: "j".into(),
            max_parallelism: 128,
            nodes: vec![
                node("src", "source", 1),
                node("parse", "operator", 1),
                node("count", "operator", 2),
                node("top", "operator", 3),
                node("enrich", "operator", 2),
                node("out", "sink", 2),
            ],
            edges: vec![
                edge("src", "parse", "forward"),
                edge("parse", "count", "key"),
                edge("count", "top", "rebalance"),
                edge("top", "enrich", "key"),
                edge("enrich", "out", "forward"),
            ],
        };
        let plan = JobRescale::of(&graph, 3);
        let uids = |plan: &JobRescale| plan.operators.iter().map(|(uid, _)| uid.clone()).collect::<Vec<_>>();
        // A sink's forward input binds nothing: the plan wires it anew.
        assert_eq!(uids(&plan), ["count", "enrich"]);
        let stay: Vec<&str> = plan.stay.iter().map(|(uid, _)| uid.as_str()).collect();
        assert_eq!(stay, ["parse", "top"]);
        assert!(plan.stay[0].1.contains("joined to 'src' by a forward edge"), "{:?}", plan.stay);
        assert!(plan.stay[1].1.contains("already runs on 3"), "{:?}", plan.stay);
        // Sources and sinks are never in it.
        let plan = JobRescale::of(&graph, 2);
        assert_eq!(plan.operators, [("top".to_string(), 2)]);
        // An operator's own max parallelism caps its share.
        let mut graph = graph;
        graph.nodes[3].max_parallelism = Some(4);
        graph.nodes[4].max_parallelism = Some(2);
        let plan = JobRescale::of(&graph, 8);
        assert_eq!(plan.operators, [("count".to_string(), 8), ("top".to_string(), 4)]);
        assert!(plan.stay[1].1.contains("already runs on 2 subtasks, its max_parallelism"), "{:?}", plan.stay);
        // Between two operators, a forward edge binds both.
        graph.edges[2].partitioning = "forward".into();
        let plan = JobRescale::of(&graph, 3);
        assert!(plan.operators.is_empty(), "{:?}", plan.operators);
    }
}
