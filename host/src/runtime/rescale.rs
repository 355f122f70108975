//! Live rescale (`host rescale`), the operator subtasks' side: an
//! operator's key groups move from its old subtasks to new ones at a
//! barrier, in memory, while the job runs.
//!
//! The coordinator starts the new subtasks first; each opens its state
//! backend, says so, and waits for the state ([`TakeOver`]); the barrier
//! goes out once all are ready. The barrier that carries the
//! [`RescaleOrder`] reaches every old subtask, which freezes its state for
//! its part of the checkpoint, forwards the barrier, then hands its state
//! to every new subtask, starts the checkpoint's upload and ends. A new
//! subtask takes, from each old subtask's state, the key groups of its own
//! range and its share of operator and broadcast state (as a restore at
//! another parallelism deals them), opens the module, and reads the
//! channels the operator's upstream subtasks switched to right after the
//! barrier.
//!
//! Keyed state goes without being encoded ([`crate::state::HandOff`]): a
//! hashmap backend hands its key groups' tables and timers over by
//! pointer, a RocksDB backend its databases as hard-linked copies of their
//! files, which each new subtask opens, keeping its own key groups (and,
//! once the barrier's checkpoint is frozen, the databases themselves,
//! open, for a new subtask that takes one whole). Beside
//! either goes a small snapshot of the descriptors and operator state, so
//! the pause does not grow with the keys. A backend without a hand-off
//! writes its whole state as one canonical snapshot, which each new subtask
//! decodes. All are read by the same [`take_over_state`], once every old
//! subtask's has come.

use super::error::TaskError;
use super::events::{Counters, TaskEvent};
use super::message::{Control, Handover, RescaleOrder, TakeOver};
use super::operator::{BarrierUpload, OperatorTask, Waited};
use crate::checkpoint::restore::RestoreError;
use crate::state::handoff::{Handed, hand_off_state, take_over_state};
use crate::state::snapshot::{OperatorShare, SnapshotError};
use crate::wasm::OperatorInstance;
use std::sync::Arc;
use std::time::Instant;

impl OperatorTask {
    /// An old subtask at the rescale's barrier (its state frozen for the
    /// barrier's checkpoint in `upload`, the barrier forwarded): hands its
    /// state to every new subtask, and starts the checkpoint's upload. The
    /// subtask ends after this.
    ///
    /// Where no hand-off goes, the hand-over's snapshot is the whole frozen
    /// state, in the format a checkpoint that is not incremental stores: it
    /// is written once, for both. (Written twice, by the upload's thread and
    /// for the hand-over, the two shared the cores during the pause.)
    pub(super) fn hand_over(
        &mut self,
        instance: &mut OperatorInstance,
        order: &RescaleOrder,
        (barrier_at, barrier): (Instant, u64),
        upload: Option<BarrierUpload>,
        counters: Counters,
    ) -> Result<(), TaskError> {
        let (mut frozen, upload) = match upload {
            Some(u) => {
                let BarrierUpload { id, savepoint, frozen, recording, done } = u;
                (frozen, Some((id, savepoint, recording, done)))
            }
            None => (instance.freeze_state(), None),
        };
        let handed = hand_off_state(frozen.as_mut(), self.max_parallelism).map(|h| (Arc::new(h.snapshot), h.keyed));
        // A hand-off of files leaves the frozen state whole: the checkpoint
        // is stored from it.
        let whole = matches!(&handed, Ok((_, Some(h))) if h.leaves_frozen_whole());
        let frozen = whole.then_some(frozen);
        if let Some((id, savepoint, recording, done)) = upload {
            self.uploader.start_after(order.taken.clone());
            match (&handed, frozen) {
                (Ok((snapshot, None)), _) if savepoint.is_none() && self.uploader.writes_snapshots() => {
                    self.uploader.upload_written(id, snapshot.clone(), recording, done);
                }
                (_, Some(frozen)) => self.uploader.upload(id, savepoint, frozen, recording, done),
                // Tables handed by pointer, incremental, a savepoint, or a
                // hand-over that failed: the checkpoint is stored from the
                // state as usual, frozen again. Nothing ran since the
                // barrier (a swap never comes with a rescale: the
                // coordinator runs one at a time), so it is the state the
                // barrier froze.
                _ => self.uploader.upload(id, savepoint, instance.freeze_state(), recording, done),
            }
        }
        let (snapshot, mut keyed) =
            handed.map_err(|e| self.state_error(snapshot_error("the state handed over at a rescale", e)))?;
        // The checkpoint's state is frozen and its upload started: the live
        // state can go too, for a new subtask that takes it whole.
        if let Some(k) = keyed.as_mut() {
            instance.give_up_state_into(k);
        }
        // Before the state leaves: the coordinator hears that this
        // subtask retires before any new subtask can have run.
        self.reporter.send(TaskEvent::HandedOver(self.id.clone(), counters));
        let keyed = keyed.map(Arc::new);
        for tx in &order.handover {
            let _ = tx.send(Handover {
                from: self.id.subtask,
                snapshot: snapshot.clone(),
                keyed: keyed.clone(),
                barrier_at,
                barrier,
            });
        }
        tracing::debug!(
            task = %self.id,
            bytes = snapshot.len(),
            by_pointer = keyed.is_some(),
            since_barrier_ms = barrier_at.elapsed().as_secs_f64() * 1e3,
            "state handed over at a rescale"
        );
        Ok(())
    }

    /// A new subtask: waits for every old subtask's state and restores its
    /// share into a new backend, taking all of it at once (a RocksDB
    /// backend opens the handed databases side by side).
    pub(super) fn wait_for_state(&mut self, t: &TakeOver) -> Result<Waited, TaskError> {
        let mut opened = self.open_state(None).map_err(|e| self.state_error(e))?;
        // Opening a backend (a RocksDB database is created on disk) takes
        // tens of milliseconds: done before the barrier, it is not part of
        // the pause.
        self.reporter.send(TaskEvent::ReadyToTakeOver(self.id.clone()));
        let mut arrived: Vec<Option<Handover>> = (0..t.from).map(|_| None).collect();
        while arrived.iter().any(Option::is_none) {
            let h = match self.inputs.recv_or_control(&t.handover) {
                Ok(h) => h,
                Err(Control::RescaleAbandoned) => return Ok(Waited::Abandoned),
                Err(Control::Cancel) => return Err(TaskError::Cancelled),
                Err(_) => continue,
            };
            let Some(slot) = arrived.get_mut(h.from as usize).filter(|s| s.is_none()) else {
                return Err(TaskError::Panicked {
                    task: self.id.clone(),
                    message: format!("a rescale handed over the state of subtask {} twice or out of range", h.from),
                });
            };
            *slot = Some(h);
        }
        let arrived: Vec<Handover> = arrived.into_iter().flatten().collect();
        let first_barrier = arrived.iter().map(|h| h.barrier_at).min().unwrap_or_else(Instant::now);
        let barrier = arrived.last().map_or(0, |h| h.barrier);
        let handed: Vec<Handed<'_>> = arrived
            .iter()
            .map(|h| Handed {
                snapshot: &h.snapshot,
                keyed: h.keyed.as_deref(),
                share: OperatorShare::Rescaled { from: h.from, to: self.id.subtask, parallelism: self.parallelism },
            })
            .collect();
        // The bytes were written by this process a moment ago: the checks
        // a file from elsewhere needs are not repeated.
        let arrived_ms = first_barrier.elapsed().as_secs_f64() * 1e3;
        let summary = take_over_state(opened.backend.as_mut(), &handed, self.range, self.max_parallelism)
            .map_err(|e| self.state_error(snapshot_error("the state handed over at a rescale", e)))?;
        // Where a pause goes: the old subtasks' freezes and hand-offs until
        // the last arrived, then taking them in.
        tracing::debug!(
            task = %self.id,
            arrived_ms,
            taken_ms = first_barrier.elapsed().as_secs_f64() * 1e3 - arrived_ms,
            "state taken over at a rescale"
        );
        opened.restored.entries += summary.entries;
        opened.restored.bytes += arrived.iter().map(|h| h.snapshot.len() as u64).sum::<u64>();
        Ok(Waited::Restored(opened, first_barrier, barrier))
    }

    /// A state error of this subtask.
    pub(super) fn state_error(&self, cause: RestoreError) -> TaskError {
        TaskError::State { uid: self.id.node.clone(), subtask: self.id.subtask, cause: Box::new(cause) }
    }
}

/// A snapshot error as a restore error of `what`.
pub(super) fn snapshot_error(what: &str, cause: SnapshotError) -> RestoreError {
    RestoreError::Snapshot { location: what.into(), cause }
}
