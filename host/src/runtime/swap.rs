//! Live module swap (`host swap`), the subtask's side: one operator's
//! module is replaced while the job runs, its state carried over.
//!
//! The swap rides on a savepoint whose barrier carries the order (the
//! operator's uid and the new module). Each subtask of the operator, at
//! that barrier: takes its snapshot for the savepoint (the state before the
//! swap), forwards the barrier, takes a second frozen view for its own
//! rollback, moves its state backend into an instance of the new module and
//! calls `open` (which registers the states, so a changed kind is refused,
//! and migrates values whose version changed), and reports `SwapPrepared`.
//! It then waits. Once every subtask prepared, the coordinator sends
//! `SwapCommit` and the subtasks go on with the new module; if any failed,
//! `SwapAbort`, and each subtask rebuilds the old module over its rollback
//! view. Either way every subtask runs the same module.

use super::error::{SwapError, TaskError};
use super::events::TaskEvent;
use super::message::{Control, SwapOrder};
use super::operator::OperatorTask;
use crate::state::snapshot::{OperatorShare, restore_snapshot, write_snapshot};
use crate::wasm::OperatorInstance;
use std::time::Instant;

impl OperatorTask {
    /// Module swap `order` at the barrier of savepoint `id`: opens the new
    /// module over this subtask's state, reports, and waits for the
    /// coordinator's verdict. Returns the instance to go on with: the new
    /// one on `SwapCommit`, the old module rebuilt over the state as it was
    /// at the barrier on `SwapAbort` (the new module's `open` may have
    /// migrated values).
    pub(super) fn swap(
        &mut self,
        mut instance: OperatorInstance,
        id: u64,
        order: SwapOrder,
    ) -> Result<OperatorInstance, TaskError> {
        let barrier_at = Instant::now();
        let mut rollback = instance.freeze_state();
        self.guest.retire(&instance);
        let backend = instance.into_backend();
        let prepared = self.instantiate(&order.module, backend).map_err(SwapError::from).and_then(|mut new| match new
            .open(&self.info())
        {
            Ok(()) => Ok(new),
            Err(f) => Err(SwapError::Open(f)),
        });
        let (result, prepared) = match prepared {
            Ok(new) => (Ok(barrier_at), Some(new)),
            Err(e) => (Err(e), None),
        };
        self.reporter.send(TaskEvent::SwapPrepared { task: self.id.clone(), id, result });
        loop {
            match self.inputs.next_control() {
                Control::SwapCommit(c) if c == id => {
                    // The coordinator commits only when every subtask
                    // prepared; a subtask without the new module means the
                    // protocol broke, which only a restart can mend.
                    let Some(mut new) = prepared else {
                        return Err(TaskError::Panicked {
                            task: self.id.clone(),
                            message: format!("told to commit module swap {id}, which failed here"),
                        });
                    };
                    self.module = order.module;
                    self.forward(&mut new)?;
                    tracing::debug!(task = %self.id, "module swapped");
                    return Ok(new);
                }
                Control::SwapAbort(c) if c == id => {
                    drop(prepared);
                    let state_error = |source| TaskError::State {
                        uid: self.id.node.clone(),
                        subtask: self.id.subtask,
                        cause: Box::new(source),
                    };
                    let mut opened = self.open_state(None).map_err(state_error)?;
                    let bytes = write_snapshot(rollback.as_mut(), self.max_parallelism)
                        .map_err(|e| state_error(snapshot_error(e)))?;
                    drop(rollback);
                    restore_snapshot(
                        &bytes,
                        opened.backend.as_mut(),
                        self.range,
                        self.max_parallelism,
                        OperatorShare::All,
                    )
                    .map_err(|e| state_error(snapshot_error(e)))?;
                    crate::crash_point::crash_point("swap.rolling-back");
                    // A new RocksDB numbers its files from the start again:
                    // nothing it writes may pass for a file already stored.
                    self.reset_uploads(&[]);
                    let mut old = self.instantiate(&self.module.clone(), opened.backend)?;
                    old.open(&self.info()).map_err(|f| {
                        self.guest_error("failed in open after a module swap was rolled back".into(), f)
                    })?;
                    self.forward(&mut old)?;
                    tracing::debug!(task = %self.id, "module swap rolled back");
                    return Ok(old);
                }
                Control::Cancel => return Err(TaskError::Cancelled),
                _ => {}
            }
        }
    }
}

fn snapshot_error(source: crate::state::snapshot::SnapshotError) -> crate::checkpoint::restore::RestoreError {
    crate::checkpoint::restore::RestoreError::Snapshot {
        location: "the state at the swap's barrier".into(),
        cause: source,
    }
}
