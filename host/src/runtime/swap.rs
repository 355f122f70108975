//! Live module swap (`host swap`): one operator's module is replaced while
//! the job runs, its state carried over.
//!
//! The swap rides on a savepoint. The coordinator registers the new module
//! under the savepoint's id here before triggering it. Each subtask of the
//! operator, at that barrier: takes its snapshot for the savepoint (the
//! state before the swap, kept for rollback), forwards the barrier, takes a
//! second frozen view for its own rollback, moves its state backend into an
//! instance of the new module and calls `open` (which registers the states,
//! so a changed kind is refused, and migrates values whose version
//! changed), and reports `SwapPrepared`. It then waits. Once the savepoint
//! completed and every subtask prepared, the coordinator sends `SwapCommit`
//! and the subtasks go on with the new module; if any failed (or the
//! savepoint did), `SwapAbort`, and each subtask rebuilds the old module
//! over its rollback view. Either way every subtask runs the same module.

use crate::checkpoint::protocol::CheckpointId;
use crate::wasm::OperatorModule;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A swap in flight: the operator and its new module.
#[derive(Clone)]
pub struct SwapTarget {
    /// The operator's uid.
    pub uid: Arc<str>,
    /// The new module, compiled.
    pub module: OperatorModule,
}

/// Swaps in flight, by savepoint id. Like savepoint targets, written by the
/// coordinator before it triggers the savepoint and read by the operator's
/// subtasks when its barrier reaches them.
#[derive(Default)]
pub struct SwapTargets(Mutex<HashMap<CheckpointId, SwapTarget>>);

impl SwapTargets {
    /// Registers swap `target` for savepoint `id`.
    pub fn insert(&self, id: CheckpointId, target: SwapTarget) {
        self.0.lock().expect("not poisoned").insert(id, target);
    }

    /// The swap of savepoint `id` if it concerns operator `uid`.
    pub fn get(&self, id: CheckpointId, uid: &str) -> Option<SwapTarget> {
        self.0.lock().expect("not poisoned").get(&id).filter(|t| &*t.uid == uid).cloned()
    }

    /// Forgets swap `id`.
    pub fn remove(&self, id: CheckpointId) {
        self.0.lock().expect("not poisoned").remove(&id);
    }
}
