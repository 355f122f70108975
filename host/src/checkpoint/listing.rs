//! `host checkpoints`: a job's checkpoints as they are in storage, each
//! with its metadata or the reason it cannot be used, so a damaged
//! checkpoint shows up in the list rather than hiding it.

use super::metadata::{CheckpointMetadata, MetadataError};
use super::storage::{CheckpointStorage, StorageError};
use thiserror::Error;

/// Why a listed checkpoint cannot be used.
#[derive(Debug, Error)]
pub enum Unusable {
    /// Its `_metadata` cannot be read.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Its `_metadata` is damaged.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
}

/// One checkpoint in storage.
#[derive(Debug)]
pub struct Listed {
    /// Its id.
    pub id: u64,
    /// What it holds, or why it cannot be used.
    pub metadata: Result<CheckpointMetadata, Unusable>,
}

/// Every checkpoint of the job in `storage`, oldest first.
pub fn list(storage: &CheckpointStorage) -> Result<Vec<Listed>, StorageError> {
    Ok(storage
        .list_checkpoints()?
        .into_iter()
        .map(|id| Listed {
            id,
            metadata: storage
                .read_metadata(id)
                .map_err(Unusable::from)
                .and_then(|b| Ok(CheckpointMetadata::decode(&b)?)),
        })
        .collect())
}
