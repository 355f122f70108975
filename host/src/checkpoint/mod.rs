//! Checkpoints, as Flink's asynchronous barrier snapshots: the coordinator's
//! protocol as pure decisions ([`protocol`]), what a checkpoint records
//! ([`metadata`]), where it is stored ([`storage`]: the only object-store
//! I/O), a subtask's background upload ([`upload`]), savepoints
//! ([`savepoint`]), reading a checkpoint or savepoint back and opening a
//! subtask's state backend from it ([`restore`]), showing what one holds
//! ([`inspect`]), listing a job's checkpoints ([`listing`]), what earlier
//! runs left in the job's directory ([`leftovers`]), the operator input
//! recorded beside them for replay ([`recording`]), and the modules its
//! checkpoints name, kept beside them by content ([`modules`]).
//!
//! This module knows state and storage, never tasks or guests: the
//! coordinator and the tasks drive it. The format is specified in
//! `docs/checkpoint-format.md` and `docs/savepoint-format.md`.

pub mod inspect;
pub mod leftovers;
pub mod listing;
pub mod metadata;
pub mod modules;
pub mod protocol;
pub mod recording;
pub mod restore;
pub mod savepoint;
pub mod storage;
pub mod upload;
