//! What travels to a task: data-channel messages between tasks (batches,
//! watermarks, barriers, end of input) and the coordinator's orders
//! ([`Control`]).
//!
//! A checkpoint barrier carries everything a task must do at it, as Flink's
//! `CheckpointBarrier` carries its `CheckpointOptions`: whether it is a
//! savepoint and where its state goes, whether the job stops after it,
//! which operator swaps its module, which operator changes its parallelism
//! (with the channels of its new subtasks), and which operator forks a
//! shadow of itself. No task consults a
//! table the coordinator writes: orders travel as messages only.

use super::task_id::TaskId;
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::storage::{CheckpointStorage, LogPosition};
use crate::record::Batch;
use crate::wasm::OperatorModule;
use crossbeam_channel::{Receiver, Sender};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A message on a data channel.
#[derive(Debug)]
pub enum Message {
    /// Records.
    Data(Batch),
    /// Event time on this channel has reached this value: no record with a
    /// smaller timestamp follows (except late ones). `i64::MAX` at the end.
    Watermark(i64),
    /// Checkpoint barrier: every record before it belongs to the checkpoint,
    /// every record after it to the next.
    Barrier(Arc<Barrier>),
    /// The sending subtask will send nothing more.
    EndOfInput,
}

/// A checkpoint barrier and the orders it carries.
#[derive(Debug)]
pub struct Barrier {
    /// The checkpoint.
    pub id: CheckpointId,
    /// What kind of snapshot, and what else happens at it.
    pub kind: BarrierKind,
    /// An operator's change of parallelism taken at this barrier.
    pub rescale: Option<Arc<RescaleOrder>>,
    /// A shadow run forked at this barrier.
    pub shadow: Option<Arc<ShadowOrder>>,
}

/// Operator `uid`'s subtasks each fork a shadow of themselves at this
/// barrier (`host shadow`): `module` over a copy of the state, fed the same
/// input from then on, its output only compared with the live one.
#[derive(Clone)]
pub struct ShadowOrder {
    /// The shadow's number in the run.
    pub id: u64,
    /// The operator.
    pub uid: Arc<str>,
    /// The module the shadow runs, compiled and pre-linked.
    pub module: OperatorModule,
    /// Input batches a shadow subtask may fall behind before it is dropped.
    pub max_lag: u32,
}

impl fmt::Debug for ShadowOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShadowOrder").field("id", &self.id).field("uid", &self.uid).finish_non_exhaustive()
    }
}

/// Operator `uid` goes from its subtasks to `parallelism` new ones at this
/// barrier (`host rescale`). The new subtasks already run and wait for the
/// state; the barrier carries the ends of their channels to the tasks
/// around them, so that each switches exactly at the barrier:
/// - an upstream subtask sends the barrier on its old channels, then sends
///   everything after it on `senders[its id]`;
/// - a downstream subtask, once the barrier is aligned, stops reading the
///   old subtasks' channels and reads `receivers[its id]` instead;
/// - each old subtask snapshots its state after the barrier and sends it to
///   every new subtask through `handover`, then ends.
///
/// Records of one key before the barrier were processed by its old
/// subtask, after it by its new one: nothing is lost, duplicated or
/// reordered per key.
pub struct RescaleOrder {
    /// The operator.
    pub uid: Arc<str>,
    /// Its subtasks before.
    pub from: u32,
    /// Its subtasks after.
    pub parallelism: u32,
    /// Per upstream subtask: its new channels to the operator, in new
    /// subtask order.
    pub senders: HashMap<TaskId, Vec<Sender<Message>>>,
    /// Per downstream subtask: its new channels from the operator (with
    /// whether the edge is a broadcast one).
    pub receivers: HashMap<TaskId, Vec<(Receiver<Message>, bool)>>,
    /// Per new subtask: where the old subtasks send their state.
    pub handover: Vec<Sender<Handover>>,
    /// Disconnected once every new subtask has taken its state over and
    /// opened its module (each holds a sender until then).
    pub taken: Receiver<()>,
}

/// One old subtask's state, handed to a new subtask at a rescale.
pub struct Handover {
    /// The old subtask.
    pub from: u32,
    /// Its state at the barrier, as a canonical snapshot (shared by every
    /// new subtask): all of it, or, beside `keyed`, its descriptors and
    /// operator and broadcast state.
    pub snapshot: Arc<Vec<u8>>,
    /// Its key groups and timers without a snapshot, where its backend
    /// hands them off so: each new subtask takes its own groups.
    pub keyed: Option<Arc<crate::state::HandOff>>,
    /// When its barrier was aligned.
    pub barrier_at: std::time::Instant,
    /// The barrier's checkpoint.
    pub barrier: u64,
}

impl fmt::Debug for RescaleOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RescaleOrder")
            .field("uid", &self.uid)
            .field("from", &self.from)
            .field("parallelism", &self.parallelism)
            .finish_non_exhaustive()
    }
}

/// What a barrier asks for.
pub enum BarrierKind {
    /// A periodic checkpoint into the job's checkpoint storage.
    Checkpoint,
    /// A savepoint: every operator writes its state canonically into
    /// `target`, the savepoint's own directory.
    Savepoint {
        /// Where the savepoint's state goes.
        target: Arc<CheckpointStorage>,
        /// Whether the job goes on after it.
        end: SavepointEnd,
        /// A module swap taken at this barrier.
        swap: Option<SwapOrder>,
    },
}

/// What happens to the job after a savepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavepointEnd {
    /// It goes on.
    Continue,
    /// Its sources stop once the savepoint completed (`host savepoint --stop`).
    Stop,
    /// As `Stop`, after event time was advanced to the end so every
    /// event-time timer fired before the savepoint (`--stop --drain`).
    Drain,
}

/// Replace operator `uid`'s module by `module` at this barrier.
#[derive(Clone)]
pub struct SwapOrder {
    /// The operator.
    pub uid: Arc<str>,
    /// The new module, compiled and pre-linked.
    pub module: OperatorModule,
}

impl fmt::Debug for BarrierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BarrierKind::Checkpoint => f.write_str("Checkpoint"),
            BarrierKind::Savepoint { target, end, swap } => f
                .debug_struct("Savepoint")
                .field("target", &target.display())
                .field("end", end)
                .field("swap", &swap.as_ref().map(|s| &s.uid))
                .finish(),
        }
    }
}

impl Barrier {
    /// A periodic checkpoint's barrier.
    pub fn checkpoint(id: CheckpointId) -> Arc<Self> {
        Arc::new(Barrier { id, kind: BarrierKind::Checkpoint, rescale: None, shadow: None })
    }

    /// The shadow this barrier forks for operator `uid`, if any.
    pub fn shadow_of(&self, uid: &str) -> Option<&Arc<ShadowOrder>> {
        self.shadow.as_ref().filter(|s| &*s.uid == uid)
    }

    /// The rescale this barrier orders for operator `uid`, if any.
    pub fn rescale_of(&self, uid: &str) -> Option<&Arc<RescaleOrder>> {
        self.rescale.as_ref().filter(|r| &*r.uid == uid)
    }

    /// Where a savepoint's state goes (none for a checkpoint).
    pub fn savepoint_target(&self) -> Option<&Arc<CheckpointStorage>> {
        match &self.kind {
            BarrierKind::Savepoint { target, .. } => Some(target),
            BarrierKind::Checkpoint => None,
        }
    }

    /// Whether the sources stop after this barrier, and whether they drain
    /// event time first: `None` when the job goes on.
    pub fn stop(&self) -> Option<SavepointEnd> {
        match &self.kind {
            BarrierKind::Savepoint { end: end @ (SavepointEnd::Stop | SavepointEnd::Drain), .. } => Some(*end),
            _ => None,
        }
    }

    /// The module swap this barrier orders for operator `uid`, if any.
    pub fn swap_for(&self, uid: &str) -> Option<&SwapOrder> {
        match &self.kind {
            BarrierKind::Savepoint { swap: Some(s), .. } if &*s.uid == uid => Some(s),
            _ => None,
        }
    }
}

/// Coordinator to task.
#[derive(Debug, Clone)]
pub enum Control {
    /// Stop now; the job is failing or cancelled.
    Cancel,
    /// Sources: record your position and send this barrier downstream (for
    /// a stop, see [`Barrier::stop`]: then wait for `Complete` or `Resume`).
    Trigger(Arc<Barrier>),
    /// Checkpoint `id` is complete, and with it every lower id: sinks
    /// publish what they prepared up to it. In cluster mode `log` is where
    /// the run stands in the commit log after committing it: a sink looks
    /// at the log from there before it publishes.
    Complete {
        /// The checkpoint.
        id: CheckpointId,
        /// The run's position in the commit log; `None` without one.
        log: Option<LogPosition>,
    },
    /// Sources: the savepoint they stopped at failed; carry on.
    Resume,
    /// Sinks: the job stopped with a savepoint; end without publishing what
    /// came after it (a restore from the savepoint produces it again).
    EndStopped,
    /// Operator subtasks that prepared module swap `id`: go on with the new
    /// module.
    SwapCommit(CheckpointId),
    /// Operator subtasks that prepared module swap `id`: go back to the old
    /// module, with the state as of the swap's barrier.
    SwapAbort(CheckpointId),
    /// New subtasks of a rescale whose barrier was never sent (the input
    /// ended first): end without having started.
    RescaleAbandoned,
    /// Operator subtasks running shadow `id`: end it.
    ShadowStop(u64),
}

/// What a new subtask of a rescaled operator starts from.
pub struct TakeOver {
    /// The operator's subtasks before: one handover from each.
    pub from: u32,
    /// Where they arrive.
    pub handover: Receiver<Handover>,
    /// Dropped once this subtask has taken its state over and opened its
    /// module: the old subtasks' uploads wait for every new subtask's
    /// ([`RescaleOrder::taken`]).
    pub taken: crossbeam_channel::Sender<()>,
}
