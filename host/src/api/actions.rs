//! The control API's actions and their answers: a savepoint (or a stop
//! with one), a module swap, a rescale, as requested and as done; the
//! `202 Accepted` an action is answered with, and the operation a client
//! follows until it has an outcome.
//!
//! Times are milliseconds: `*_time_ms` since the Unix epoch, `*_ms`
//! durations.

use serde::{Deserialize, Serialize};

/// A request for a savepoint; every field may be left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SavepointRequest {
    /// Parent directory (`file://` or `s3://`); the job's
    /// `state.savepoints.dir` if none.
    pub dir: Option<String>,
    /// Stop the job once the savepoint completed.
    pub stop: bool,
    /// With `stop`: advance event time to the end first, firing every
    /// event-time timer, as Flink's `stop --drain`.
    pub drain: bool,
}

/// A completed savepoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavepointDone {
    /// Its checkpoint id.
    pub id: u64,
    /// Its directory, to give to `host run --from-savepoint`.
    pub location: String,
    /// Bytes of state.
    pub size: u64,
    /// Trigger to completion, in milliseconds.
    pub duration_ms: u64,
    /// The job stopped with it.
    pub stopped: bool,
}

/// A request to replace one operator's module while the job runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapRequest {
    /// The operator's uid.
    pub operator: String,
    /// The new component, as an absolute path on the host's machine.
    pub module: String,
    /// Parent directory of the swap's savepoint; the job's
    /// `state.savepoints.dir` if none.
    #[serde(default)]
    pub dir: Option<String>,
}

/// A module swap that took effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwapDone {
    /// The savepoint taken at the swap (the state before it, for rollback).
    pub savepoint: SavepointDone,
    /// How long the operator stopped processing, in milliseconds: from the
    /// first subtask's barrier to the new module taking over everywhere.
    pub pause_ms: f64,
}

/// A request to change one operator's parallelism while the job runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RescaleRequest {
    /// The operator's uid.
    pub operator: String,
    /// Its new number of subtasks; the job refuses 0 and more than its
    /// `max_parallelism`.
    pub parallelism: u32,
}

/// A rescale that took effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RescaleDone {
    /// The operator's uid.
    pub operator: String,
    /// Its parallelism before.
    pub from: u32,
    /// Its parallelism after.
    pub to: u32,
    /// The id of the checkpoint whose barrier carried the rescale.
    pub checkpoint: u64,
    /// How long the operator stopped processing, in milliseconds: from the
    /// first old subtask's barrier to the first record processed at the
    /// new parallelism.
    pub pause_ms: f64,
}

/// `POST /v1/savepoints`, `/v1/swaps`, `/v1/rescales`, `/v1/shadows` and
/// `/v1/shadow/promote` answer where to follow the action.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accepted {
    /// The action's id.
    pub request_id: String,
    /// Its resource: `GET` it until its status is no longer "in-progress".
    pub location: String,
}

/// An action (savepoint, stop with savepoint, swap, rescale, the start of
/// a shadow run) and its outcome: `GET /v1/savepoints/{request_id}`,
/// `GET /v1/swaps/{request_id}`, `GET /v1/rescales/{request_id}`,
/// `GET /v1/shadows/{request_id}`, `GET /v1/operations`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operation {
    /// Its id.
    pub request_id: String,
    /// "savepoint", "stop", "swap", "rescale" or "shadow".
    pub kind: String,
    /// "in-progress", "completed" or "failed".
    pub status: String,
    /// When it was asked for.
    pub start_time_ms: u64,
    /// When it ended.
    pub end_time_ms: Option<u64>,
    /// A savepoint's outcome.
    pub savepoint: Option<SavepointDone>,
    /// A swap's outcome.
    pub swap: Option<SwapDone>,
    /// A rescale's outcome.
    pub rescale: Option<RescaleDone>,
    /// A shadow run that started.
    #[serde(default)]
    pub shadow: Option<super::ShadowStarted>,
    /// Why it failed.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rescale_request_takes_an_operator_and_a_parallelism_and_nothing_else() {
        let r: RescaleRequest = serde_json::from_str(r#"{"operator": "counter", "parallelism": 4}"#).unwrap();
        assert_eq!((r.operator.as_str(), r.parallelism), ("counter", 4));
        // 0 parses; the coordinator refuses it, saying why.
        let zero: RescaleRequest = serde_json::from_str(r#"{"operator": "counter", "parallelism": 0}"#).unwrap();
        assert_eq!(zero.parallelism, 0);
        for bad in [
            r#"{"operator": "counter", "parallelism": 4, "dir": null}"#,
            r#"{"operator": "counter"}"#,
            r#"{"parallelism": 4}"#,
            r#"{"operator": "counter", "parallelism": -1}"#,
            r#"{"operator": "counter", "parallelism": "4"}"#,
        ] {
            assert!(serde_json::from_str::<RescaleRequest>(bad).is_err(), "{bad}");
        }
    }
}
