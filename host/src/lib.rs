//! The Weir host: runs stateful stream operators compiled to WebAssembly
//! components. `host run job.toml` is the user's entry point
//! (`src/main.rs`); this library is everything behind it.
//!
//! Modules, lowest first; each depends only on modules above it in this
//! list, and inside each the files depend one way too (`tidy/tests/tidy.rs`
//! checks both), and `docs/architecture.md` says what each owns:
//! - leaves: [`fault`] (error classification), [`paths`] (names made
//!   safe for the file system), [`durable`] (fsync before publishing),
//!   [`clock`], [`record`]
//!   (records and batches), [`crash_point`], [`config`] (host and job
//!   files), [`api`] (the types the control API, the commands and the
//!   engine share);
//! - [`state`]: the state backend trait, key groups, the hashmap and RocksDB
//!   backends, the snapshot format;
//! - [`wasm`]: the wasmtime engine, component loading and caching, the host
//!   side of the WIT contract;
//! - [`checkpoint`]: the checkpoint protocol (pure decisions), metadata,
//!   storage, uploads, restore, inspect;
//! - [`runtime`]: the task side: operator subtasks, sources and sinks as
//!   traits, inputs, routing, barriers;
//! - [`connectors`]: the sources and sinks a job file can name;
//! - [`control`]: the control API's HTTP server, its client and the
//!   dashboard;
//! - [`coordinator`]: the job side: wiring plan, tasks, job states,
//!   checkpoints and savepoints, restarts, reports;
//! - [`cluster`]: cluster mode, many processes sharing a job through a
//!   Kafka consumer group;
//! - `fuzzing`: entry points for the fuzz targets (`fuzz/`).

pub mod api;
pub mod checkpoint;
pub mod clock;
#[cfg(feature = "kafka")]
pub mod cluster;
pub mod config;
pub mod connectors;
pub mod control;
pub mod coordinator;
pub mod crash_point;
pub mod durable;
pub mod fault;
#[doc(hidden)]
pub mod fuzzing;
pub mod paths;
pub mod record;
pub mod runtime;
pub mod state;
pub mod wasm;
