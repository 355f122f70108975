//! Whose fault an error is and whether trying again can help: the two
//! questions every error type of the crate answers, so the restart strategy
//! can stop at once when a restart cannot help (a missing module, a wrong
//! job file) and restart when it can (a trap on one odd record, storage
//! that was down). A leaf module.

/// Who has to act for the error to go away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// The user: the job file, the operator's code, the input data.
    User,
    /// Something outside the host: storage, the network, the disk.
    External,
    /// A bug in the host.
    Internal,
}

/// Whether running the job again (from its latest checkpoint) can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryHint {
    /// The same thing would fail the same way: stop and say why.
    NoRetry,
    /// A restart may get past it (a transient outage, a guest that fails
    /// on some runs only): let the restart strategy decide.
    Restart,
}

/// An error that says whose fault it is and whether to retry.
pub trait Classify {
    /// Whose fault.
    fn domain(&self) -> Domain;
    /// Whether a restart can help.
    fn retry(&self) -> RetryHint;
}
