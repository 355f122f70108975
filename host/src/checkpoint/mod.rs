//! Checkpoints, as Flink's asynchronous barrier snapshots: the coordinator's
//! protocol as pure decisions ([`protocol`]), what a checkpoint records
//! ([`metadata`]), where it is stored ([`storage`]: the only object-store
//! I/O), the task side's background upload ([`uploader`]), savepoints
//! ([`savepoint`]: checkpoints taken on request, stored canonically in a
//! directory of their own), and finding and reading a checkpoint or
//! savepoint to restore ([`restore`]), or to show ([`inspect`]). The runtime's coordinator
//! drives these; the format is specified in `docs/checkpoint-format.md`.

pub mod inspect;
pub mod metadata;
pub mod protocol;
pub mod restore;
pub mod savepoint;
pub mod storage;
pub mod uploader;
