//! Checkpoints: the coordinator's protocol (when to trigger, what to do with
//! acknowledgements, declines, timeouts and storage results), kept as pure
//! decisions with no I/O so it is tested without storage or threads.
//!
//! Not wired into the runtime yet: barriers, snapshots and storage come
//! next (see `docs/architecture.md`, "Not built yet").

pub mod protocol;
