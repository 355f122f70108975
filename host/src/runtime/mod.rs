//! The runtime: builds the job graph into tasks (one thread per source,
//! operator subtask and sink), wires them with bounded channels, and runs
//! them under the coordinator.
//!
//! Architecture invariant: the coordinator and the tasks talk only through
//! messages ([`events::TaskEvent`] up, [`events::Control`] down), never
//! through shared state, so they can later run in different processes.

pub mod batch;
pub mod checkpoints;
pub mod coordinator;
pub mod events;
pub mod inputs;
pub mod progress;
pub mod router;
pub mod task;

pub use coordinator::{JobError, JobReport, NodeReport, StartFrom, run_job};
pub use events::TaskError;
