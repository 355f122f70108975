//! The control API's client, for the `host status`, `host savepoint`,
//! `host swap`, `host rescale`, `host shadow` and `host cancel` commands: finds a running
//! job through its run file and makes one request.

use super::server::alive;
use super::{
    Accepted, Operation, RescaleDone, RescaleRequest, RunFile, SavepointDone, SavepointRequest, ShadowReport,
    ShadowRequest, ShadowStarted, Status, SwapDone, SwapRequest, run_file_path,
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

/// A running job, found by name.
pub struct Client {
    run: RunFile,
}

impl Client {
    /// Finds the running job `job`.
    pub fn find(job: &str) -> Result<Self, ClientError> {
        let file = run_file_path(job);
        let not_running = || ClientError::NotRunning { job: job.to_string(), file: file.display().to_string() };
        let text = std::fs::read_to_string(&file).map_err(|_| not_running())?;
        let run: RunFile = serde_json::from_str(&text).map_err(|_| not_running())?;
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
