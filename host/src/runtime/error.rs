//! Why a task stopped ([`TaskError`]), why a connector failed
//! ([`ConnectorError`]), each saying whose fault it is and whether a
//! restart can help, and why a subtask could not take a swapped-in module
//! ([`SwapError`], reported to the coordinator, which rolls the swap back).

use super::task_id::TaskId;
use crate::checkpoint::restore::RestoreError;
use crate::fault::{Classify, Domain, RetryHint};
use crate::wasm::{FailureKind, GuestFailure, WasmError};
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// Why a source or sink failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConnectorError {
    /// A file operation failed.
    #[error("cannot {op} {}: {cause}", path.display())]
    Io {
        /// "read", "create", "rename", ...
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// A record of the input cannot be read as the source is configured (a
    /// line that is not JSON, a missing key field).
    #[error("{0}")]
    BadRecord(String),
    /// Output or a position a checkpoint recorded is not what it was (a
    /// file changed outside the job, a pending part missing).
    #[error("{0}")]
    Inconsistent(String),
    /// The connector refuses to start as configured (output of an earlier
    /// run in the way).
    #[error("{0}")]
    Refused(String),
    /// A service the connector reads or writes (a Kafka cluster) did not
    /// answer or failed a request: it may be back after a restart.
    #[error("{0}")]
    Unavailable(String),
    /// Another run took the job over (cluster mode): what this one holds
    /// must not be published, now or after a restart.
    #[error("output not published: {0}")]
    Fenced(Box<crate::checkpoint::storage::StorageError>),
    /// A transactional producer was fenced: another run of the sink
    /// initialised its transactional id, so this one must stop.
    #[error("{0}")]
    ProducerFenced(String),
    /// The run was cancelled while the connector was busy (opening).
    #[error("cancelled")]
    Cancelled,
}

impl Classify for ConnectorError {
    fn domain(&self) -> Domain {
        match self {
            ConnectorError::Io { .. }
            | ConnectorError::Inconsistent(_)
            | ConnectorError::Unavailable(_)
            | ConnectorError::Fenced(_)
            | ConnectorError::ProducerFenced(_) => Domain::External,
            ConnectorError::Cancelled => Domain::Internal,
            ConnectorError::BadRecord(_) | ConnectorError::Refused(_) => Domain::User,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            // A disk that was full or a file system that was away may be
            // back; a bad line is still bad after a restart.
            ConnectorError::Io { .. } | ConnectorError::Unavailable(_) => RetryHint::Restart,
            _ => RetryHint::NoRetry,
        }
    }
}

/// Why a task stopped without finishing.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The guest failed in a call.
    #[error("operator '{uid}' (subtask {subtask} of {parallelism}) {what}: {}", failure.message)]
    Guest {
        /// Operator uid.
        uid: Arc<str>,
        /// Subtask index.
        subtask: u32,
        /// Parallelism.
        parallelism: u32,
        /// Where: "failed in open", "failed on input record 12 (key \"x\")".
        what: String,
        /// The failure (boxed: errors travel by value, and this one is big).
        failure: Box<GuestFailure>,
    },
    /// A subtask's state backend could not be opened or restored.
    #[error("operator '{uid}' (subtask {subtask}) cannot open its state: {cause}")]
    State {
        /// Operator uid.
        uid: Arc<str>,
        /// Subtask index.
        subtask: u32,
        /// Why (boxed: errors travel by value, and this one is big).
        cause: Box<RestoreError>,
    },
    /// The module could not be instantiated.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// A source failed.
    #[error("source '{id}': {cause}")]
    Source {
        /// Source id.
        id: Arc<str>,
        /// What failed.
        cause: ConnectorError,
    },
    /// A sink failed.
    #[error("sink '{id}': {cause}")]
    Sink {
        /// Sink id.
        id: Arc<str>,
        /// What failed.
        cause: ConnectorError,
    },
    /// A record without key was sent over a keyed edge.
    #[error(
        "'{from}' emitted a record without a key, but '{to}' reads it with partition = \"key\" (emit keyed records, or change the partition)"
    )]
    MissingKey {
        /// Sender.
        from: Arc<str>,
        /// Keyed receiver.
        to: Arc<str>,
    },
    /// The host's own task code panicked: a bug in Weir.
    #[error("task {task} panicked (a bug in the host; please report it): {message}")]
    Panicked {
        /// The task.
        task: TaskId,
        /// The panic's message.
        message: String,
    },
    /// A peer task went away; a consequence of another failure.
    #[error("'{0}' lost a neighbouring task")]
    Disconnected(Arc<str>),
    /// Stopped by the coordinator.
    #[error("cancelled")]
    Cancelled,
}

impl TaskError {
    /// Whether this error only follows from another task's failure.
    pub fn is_secondary(&self) -> bool {
        matches!(self, TaskError::Disconnected(_) | TaskError::Cancelled)
    }
}

impl Classify for TaskError {
    fn domain(&self) -> Domain {
        match self {
            TaskError::Guest { .. } | TaskError::MissingKey { .. } | TaskError::Wasm(_) => Domain::User,
            TaskError::State { cause, .. } => cause.domain(),
            TaskError::Source { cause, .. } | TaskError::Sink { cause, .. } => cause.domain(),
            TaskError::Panicked { .. } | TaskError::Disconnected(_) | TaskError::Cancelled => Domain::Internal,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            // A guest may fail on some runs only (a slow call, a fault
            // that depends on timing or processing time); which failures
            // repeat is the operator's business, so the restart strategy
            // decides, as Flink's does.
            // Past a budget of host memory it would pass it again (a
            // call_timeout, by contrast, may depend on the machine's load).
            TaskError::Guest { failure, .. } if failure.kind == FailureKind::OverBudget => RetryHint::NoRetry,
            TaskError::Guest { .. } => RetryHint::Restart,
            TaskError::State { cause, .. } => cause.retry(),
            TaskError::Source { cause, .. } | TaskError::Sink { cause, .. } => cause.retry(),
            // The same records reach the same edge after a restart.
            TaskError::MissingKey { .. } => RetryHint::NoRetry,
            // A module that cannot be instantiated never will be.
            TaskError::Wasm(_) => RetryHint::NoRetry,
            TaskError::Panicked { .. } | TaskError::Disconnected(_) | TaskError::Cancelled => RetryHint::Restart,
        }
    }
}

/// Why a subtask could not take the new module.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SwapError {
    /// The new module could not be instantiated.
    #[error(transparent)]
    Instantiate(#[from] WasmError),
    /// Its `open` failed (a trap, a refused state, a failed migration).
    #[error("the new module failed in open: {}", .0.message)]
    Open(GuestFailure),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(kind: FailureKind) -> TaskError {
        TaskError::Guest {
            uid: "op".into(),
            subtask: 0,
            parallelism: 1,
            what: "failed on input record 1".into(),
            failure: Box::new(GuestFailure { kind, message: "boom".into(), element: None, record: None }),
        }
    }

    #[test]
    fn errors_say_whose_fault_and_whether_a_restart_helps() {
        let io = || ConnectorError::Io { op: "read", path: "/in".into(), cause: std::io::Error::other("disk gone") };
        let cases: Vec<(TaskError, Domain, RetryHint)> = vec![
            (guest(FailureKind::Trap), Domain::User, RetryHint::Restart),
            (guest(FailureKind::Returned), Domain::User, RetryHint::Restart),
            (guest(FailureKind::OverBudget), Domain::User, RetryHint::NoRetry),
            (TaskError::Source { id: "in".into(), cause: io() }, Domain::External, RetryHint::Restart),
            (
                TaskError::Source {
                    id: "in".into(),
                    cause: ConnectorError::BadRecord("in.jsonl:3: invalid JSON".into()),
                },
                Domain::User,
                RetryHint::NoRetry,
            ),
            (TaskError::Sink { id: "out".into(), cause: io() }, Domain::External, RetryHint::Restart),
            (TaskError::MissingKey { from: "a".into(), to: "b".into() }, Domain::User, RetryHint::NoRetry),
            (
                TaskError::Panicked { task: TaskId { node: "op".into(), subtask: 1 }, message: "oops".into() },
                Domain::Internal,
                RetryHint::Restart,
            ),
            (
                TaskError::State { uid: "op".into(), subtask: 0, cause: Box::new(RestoreError::BadUri("x".into())) },
                Domain::User,
                RetryHint::NoRetry,
            ),
        ];
        for (e, domain, retry) in cases {
            assert_eq!((e.domain(), e.retry()), (domain, retry), "{e}");
        }
    }

    #[test]
    fn a_panic_names_its_task() {
        let e = TaskError::Panicked {
            task: TaskId { node: "counter".into(), subtask: 2 },
            message: "index out of bounds".into(),
        };
        assert_eq!(e.to_string(), "task counter#2 panicked (a bug in the host; please report it): index out of bounds");
    }
}
