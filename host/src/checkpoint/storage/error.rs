//! Why checkpoint storage failed, and whether trying again can help: the
//! one error type of the storage layer, for the file system, S3 and host
//! memory alike.

use super::local::beneath::LocalError;
use crate::config::units::human_bytes;
use crate::fault::{Classify, Domain, RetryHint};
use thiserror::Error;

/// Why storage failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The directory setting cannot be used.
    #[error("state.checkpoints.dir = \"{dir}\": {message}")]
    BadDir {
        /// The setting.
        dir: String,
        /// What is wrong.
        message: String,
    },
    /// `_metadata` of this checkpoint exists already: another run (or host)
    /// committed it first.
    #[error("{location} already exists: another run of this job committed checkpoint {id} first")]
    AlreadyCommitted {
        /// The checkpoint.
        id: u64,
        /// Where.
        location: String,
    },
    /// Another run claimed this job's commit log (cluster mode: another
    /// member took the partition over): this run may commit nothing more.
    #[error("{location}: {why}; this run can no longer commit checkpoints (commit log entry {seq})")]
    Fenced {
        /// The entry or log.
        location: String,
        /// The entry this run could not write.
        seq: u64,
        /// Who holds it, or what went wrong.
        why: String,
    },
    /// A state is too large for in-memory storage.
    #[error(
        "{task}: state is {size} bytes, over the {limit}-byte limit of in-memory checkpoint storage (set state.checkpoints.dir to a file:// or s3:// directory, or raise state.checkpoints.memory_max_state_size)"
    )]
    TooLargeForMemory {
        /// The subtask.
        task: String,
        /// Its state's size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A read, write, list or delete failed.
    #[error("{op} {location}: {cause}")]
    Io {
        /// "writing", "reading", ...
        op: &'static str,
        /// Where.
        location: String,
        /// The store's error.
        cause: object_store::Error,
    },
    /// A stored file is larger than a setting lets a restore or `host
    /// inspect` read; it was not read.
    #[error(
        "{location}: _metadata gives it {size} bytes, over {setting} = {} ({limit} bytes), so it was not read; raise {setting} in the host settings if this checkpoint is trusted",
        human_bytes(*limit)
    )]
    TooLarge {
        /// Where.
        location: String,
        /// Its size, as `_metadata` states it.
        size: u64,
        /// The setting's value.
        limit: u64,
        /// The setting.
        setting: &'static str,
    },
    /// A state file does not match what `_metadata` says of it.
    #[error("{location} is corrupt: {message}")]
    Corrupt {
        /// Where.
        location: String,
        /// How.
        message: String,
    },
    /// The background runtime that drives the store could not start.
    #[error("cannot start the storage runtime: {0}")]
    Runtime(std::io::Error),
    /// A local directory holds what Weir does not use (a link, a FIFO or
    /// another non-regular file, a directory another user owns or others
    /// may write), or its file system failed.
    #[error(transparent)]
    Local(LocalError),
}

impl StorageError {
    /// Whether the file asked for does not exist (the one failure callers
    /// answer with "nothing there" rather than an error).
    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::Io { cause: object_store::Error::NotFound { .. }, .. })
    }
}

impl Classify for StorageError {
    fn domain(&self) -> Domain {
        match self {
            StorageError::BadDir { .. } | StorageError::TooLargeForMemory { .. } | StorageError::TooLarge { .. } => {
                Domain::User
            }
            StorageError::AlreadyCommitted { .. }
            | StorageError::Fenced { .. }
            | StorageError::Io { .. }
            | StorageError::Corrupt { .. } => Domain::External,
            StorageError::Runtime(_) => Domain::Internal,
            StorageError::Local(e) if e.is_refusal() => Domain::User,
            StorageError::Local(_) => Domain::External,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            // A store that was down may be up again; a lost race for one
            // checkpoint id does not repeat (the next attempt takes another).
            StorageError::Io { .. } | StorageError::AlreadyCommitted { .. } | StorageError::Runtime(_) => {
                RetryHint::Restart
            }
            // What lies in the directory stays until someone removes it.
            StorageError::Local(e) if e.is_refusal() => RetryHint::NoRetry,
            StorageError::Local(_) => RetryHint::Restart,
            // Fenced: another run owns the job now; a restart of this one
            // would only be fenced again.
            StorageError::BadDir { .. }
            | StorageError::TooLargeForMemory { .. }
            | StorageError::TooLarge { .. }
            | StorageError::Corrupt { .. }
            | StorageError::Fenced { .. } => RetryHint::NoRetry,
        }
    }
}
