//! Savepoints: checkpoints taken on request (`host savepoint`), each in a
//! directory of its own, every state in the canonical per-key-group format
//! whatever the backend, with paths relative to that directory, so a
//! savepoint can be copied anywhere (another bucket, file:// to s3://) and
//! restored into either backend at any parallelism.
//!
//! A savepoint runs through the same protocol as a checkpoint (barriers,
//! acknowledgements, `_metadata` written last and create-only); only where
//! its state goes differs, and its barrier says where
//! (`runtime::message::BarrierKind::Savepoint`).

/// The directory of a new savepoint of job `job` under `dir`:
/// `<dir>/savepoint-<job>-<time>`, the time in milliseconds since the epoch,
/// so names sort by age and never repeat for one job.
pub fn new_savepoint_uri(dir: &str, job: &str, now_ms: i64) -> String {
    format!("{}/savepoint-{job}-{now_ms}", dir.trim_end_matches('/'))
}
