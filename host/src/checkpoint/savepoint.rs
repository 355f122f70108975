//! Savepoints: checkpoints taken on request (`host savepoint`), each in a
//! directory of its own, every state in the canonical per-key-group format
//! whatever the backend, with paths relative to that directory, so a
//! savepoint can be copied anywhere (another bucket, file:// to s3://) and
//! restored into either backend at any parallelism.
//!
//! A savepoint runs through the same protocol as a checkpoint (barriers,
//! acknowledgements, `_metadata` written last and create-only); only where
//! its state goes differs. The coordinator registers that place here before
//! it triggers the savepoint, and each subtask's uploader looks up the id
//! of every barrier it snapshots.

use super::protocol::CheckpointId;
use super::storage::CheckpointStorage;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Savepoints in flight, by id: where their state goes.
#[derive(Debug, Default)]
pub struct SavepointTargets(Mutex<HashMap<CheckpointId, Arc<CheckpointStorage>>>);

impl SavepointTargets {
    /// Sends the state of checkpoint `id` to `storage`, as a savepoint.
    pub fn insert(&self, id: CheckpointId, storage: Arc<CheckpointStorage>) {
        self.0.lock().expect("not poisoned").insert(id, storage);
    }

    /// Where the state of checkpoint `id` goes, if it is a savepoint.
    pub fn get(&self, id: CheckpointId) -> Option<Arc<CheckpointStorage>> {
        self.0.lock().expect("not poisoned").get(&id).cloned()
    }

    /// Forgets savepoint `id` (done or abandoned).
    pub fn remove(&self, id: CheckpointId) {
        self.0.lock().expect("not poisoned").remove(&id);
    }
}

/// The directory of a new savepoint of job `job` under `dir`:
/// `<dir>/savepoint-<job>-<time>`, the time in milliseconds since the epoch,
/// so names sort by age and never repeat for one job.
pub fn new_savepoint_uri(dir: &str, job: &str, now_ms: i64) -> String {
    format!("{}/savepoint-{job}-{now_ms}", dir.trim_end_matches('/'))
}
