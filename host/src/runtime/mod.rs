//! The runtime: builds the job graph into tasks (one thread per source,
//! operator subtask and sink), wires them with bounded channels, and runs
//! them under the coordinator.
//!
//! Architecture invariant: the coordinator and the tasks talk only through
//! messages ([`events::TaskEvent`] up, [`events::Control`] down), with one
//! exception: what a savepoint or a module swap asks of the subtasks at its
//! barrier (where its state goes, which module comes in) is registered in
//! a shared table before the trigger and only read after the barrier.

pub mod batch;
pub mod checkpoints;
pub mod coordinator;
pub mod events;
pub mod inputs;
pub mod progress;
pub mod router;
pub mod swap;
pub mod task;

pub use coordinator::{JobError, JobReport, NodeReport, StartFrom, run_job};
pub use events::TaskError;
