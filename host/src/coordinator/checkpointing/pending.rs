//! What a savepoint or module swap under way holds between its request
//! and its answer: the request, who waits for it, and how far it got.

use crate::api::{RequestError, SavepointDone, SavepointRequest, SwapDone};
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::storage::CheckpointStorage;
use crate::runtime::SwapError;
use crate::runtime::message::SwapOrder;
use crate::wasm::module::Loaded;
use crossbeam_channel::Sender;
use std::sync::Arc;
use std::time::Instant;

/// Who is waiting for a savepoint's outcome.
pub type SavepointReply = Sender<Result<SavepointDone, RequestError>>;

/// Who is waiting for a module swap's outcome.
pub type SwapReply = Sender<Result<SwapDone, RequestError>>;

/// A savepoint asked for and not finished yet.
pub struct PendingSavepoint {
    pub(super) request: SavepointRequest,
    /// None for a swap's savepoint (the swap answers).
    pub(super) reply: Option<SavepointReply>,
    /// Its directory.
    pub(super) storage: Arc<CheckpointStorage>,
    /// Set once triggered.
    pub(super) id: Option<CheckpointId>,
    /// The module swap it carries, until triggered.
    pub(super) swap: Option<PendingSwap>,
}

/// A module swap: its savepoint, then every subtask's preparation.
pub struct PendingSwap {
    pub(super) order: SwapOrder,
    /// The new module's file and hash, for the checkpoints after it.
    pub(super) loaded: Loaded,
    pub(super) subtasks: u32,
    pub(super) reply: SwapReply,
    /// Set once triggered.
    pub(super) id: Option<CheckpointId>,
    /// Per subtask that reported: when its barrier came, or why it failed.
    pub(super) prepared: Vec<(u32, Result<Instant, SwapError>)>,
    /// The savepoint, once complete.
    pub(super) done: Option<SavepointDone>,
    /// Set once committed: the pause it caused.
    pub(super) pause_ms: Option<f64>,
}
