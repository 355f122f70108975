//! WebAssembly: the engine, loading and caching components, the host side of
//! the WIT contract, and running one operator instance.
//!
//! Architecture invariant: only this module touches wasmtime. The runtime
//! drives instances through [`OperatorInstance`] and never sees a `Store`.

mod bindings;
mod cache;
pub mod engine;
mod flat;
pub mod host;
pub mod instance;
pub mod log_stream;
pub mod module;

pub use bindings::weir::operator::types::OperatorInfo;
pub use instance::{FailureKind, GuestFailure, OperatorInstance};
pub use module::{ModuleLoader, WasmError};

/// The version of the operator contract (`wit/world.wit`) this host runs.
pub const CONTRACT_VERSION: &str = "0.2.0";

/// The export interface every operator must provide, as the component model
/// names it.
pub const HANDLER_INTERFACE: &str = "weir:operator/handler@0.2.0";

/// The functions of [`HANDLER_INTERFACE`].
pub const HANDLER_FUNCTIONS: &[&str] =
    &["open", "process", "process-batch", "process-broadcast", "on-timer", "end-of-input", "migrate-value"];

/// A compiled, pre-linked operator component, ready to instantiate once per
/// subtask.
pub type OperatorModule = bindings::OperatorPre<host::OperatorHost>;

pub use instance::Limits;
