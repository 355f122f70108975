//! The Weir host: runs stateful stream operators compiled to WebAssembly
//! components. `host run job.toml` is the user's entry point
//! (`src/main.rs`); this library is everything behind it.
//!
//! Map of the crate (see `docs/architecture.md` for the full picture):
//! - [`checkpoint`]: the checkpoint coordinator's protocol (pure decisions);
//! - [`config`]: host and job files, merged and validated;
//! - [`wasm`]: wasmtime engine, component loading and caching, the host side
//!   of the WIT contract;
//! - [`state`]: the state backend trait, key groups, the hashmap backend;
//! - [`runtime`]: the task graph, channels, the coordinator;
//! - [`connectors`]: sources and sinks.

pub mod checkpoint;
pub mod config;
pub mod connectors;
pub mod control;
pub mod crash_point;
pub mod runtime;
pub mod state;
pub mod wasm;
