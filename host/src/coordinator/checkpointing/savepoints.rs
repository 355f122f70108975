//! Savepoints and module swaps on the coordinator's side: a request becomes
//! the next checkpoint, whose barrier carries where its state goes, whether
//! the job stops after it, and which operator takes a new module; the
//! request is answered when the savepoint completes or fails. A swap
//! commits once every subtask of its operator opened the new module, and
//! rolls back if any could not.

use super::Attempt;
use super::pending::{PendingSavepoint, PendingSwap, SavepointReply, SwapReply};
use crate::api::{RequestError, SavepointDone, SavepointRequest, SwapDone};
use crate::checkpoint::metadata::CheckpointMetadata;
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::savepoint::new_savepoint_uri;
use crate::checkpoint::storage::{CheckpointStorage, IfMissing};
use crate::clock::now_ms;
use crate::config::StorageSettings;
use crate::config::units::human_bytes;
use crate::runtime::SwapError;
use crate::runtime::TaskId;
use crate::runtime::message::{BarrierKind, Control, SavepointEnd, SwapOrder};
use crate::wasm::OperatorModule;
use crate::wasm::module::Loaded;
use std::sync::Arc;
use std::time::Instant;

impl Attempt<'_> {
    /// Asks for a savepoint into `request.dir` (else `default_dir`), with
    /// the S3 options of `storage`; `reply` hears how it went.
    pub fn request_savepoint(
        &mut self,
        request: SavepointRequest,
        default_dir: Option<&str>,
        storage: &StorageSettings,
        reply: SavepointReply,
    ) {
        match self.plan_savepoint(request, default_dir, storage, None) {
            Err(why) => {
                let _ = reply.send(Err(why));
            }
            Ok(()) => {
                if let Some(p) = self.savepoint.as_mut() {
                    p.reply = Some(reply);
                }
            }
        }
    }

    /// Asks for a module swap of operator `uid` (with `subtasks` subtasks)
    /// to `module`, riding on a savepoint into `dir` (else `default_dir`).
    #[allow(clippy::too_many_arguments)]
    pub fn request_swap(
        &mut self,
        uid: &str,
        loaded: Loaded,
        subtasks: u32,
        dir: Option<String>,
        default_dir: Option<&str>,
        storage: &StorageSettings,
        reply: SwapReply,
    ) {
        if self.swap.is_some() {
            let _ = reply.send(Err(RequestError::SwapInProgress));
            return;
        }
        let swap = PendingSwap {
            order: SwapOrder { uid: uid.into(), module: loaded.module.clone() },
            loaded,
            subtasks,
            reply: reply.clone(),
            id: None,
            prepared: Vec::new(),
            done: None,
            pause_ms: None,
        };
        let request = SavepointRequest { dir, stop: false, drain: false };
        if let Err(why) = self.plan_savepoint(request, default_dir, storage, Some(swap)) {
            let _ = reply.send(Err(why));
        }
    }

    fn plan_savepoint(
        &mut self,
        request: SavepointRequest,
        default_dir: Option<&str>,
        storage: &StorageSettings,
        swap: Option<PendingSwap>,
    ) -> Result<(), RequestError> {
        if self.stopped {
            return Err(RequestError::Finishing);
        }
        if self.savepoint.is_some() {
            return Err(RequestError::SavepointInProgress);
        }
        let Some(dir) = request.dir.as_deref().or(default_dir) else {
            return Err(RequestError::NoSavepointDir);
        };
        let uri = new_savepoint_uri(dir, &self.cp.job, now_ms());
        let target = Arc::new(
            CheckpointStorage::open_savepoint(storage, &uri, IfMissing::Create)
                .map_err(|e| RequestError::Storage(e.to_string()))?,
        );
        tracing::info!(savepoint = %uri, stop = request.stop, drain = request.drain, swap = swap.is_some(), "savepoint requested");
        self.savepoint = Some(PendingSavepoint { request, reply: None, storage: target, id: None, swap });
        self.protocol.request_savepoint();
        Ok(())
    }

    /// Whether a savepoint (or swap) is asked for or under way.
    pub fn savepoint_pending(&self) -> bool {
        self.savepoint.is_some() || self.swap.is_some()
    }

    /// Whether the pending savepoint stops the job.
    pub fn stop_pending(&self) -> bool {
        self.savepoint.as_ref().is_some_and(|p| p.request.stop)
    }

    /// The barrier of savepoint `id`, just triggered: carries its target,
    /// whether the job stops, and the swap it brings.
    pub(super) fn savepoint_barrier(&mut self, id: CheckpointId) -> BarrierKind {
        let Some(p) = self.savepoint.as_mut() else {
            // Asked for, then abandoned before its trigger: an ordinary
            // checkpoint takes its turn.
            return BarrierKind::Checkpoint;
        };
        p.id = Some(id);
        let end = match (p.request.stop, p.request.drain) {
            (false, _) => SavepointEnd::Continue,
            (true, false) => SavepointEnd::Stop,
            (true, true) => SavepointEnd::Drain,
        };
        let target = p.storage.clone();
        let order = p.swap.take().map(|mut swap| {
            swap.id = Some(id);
            let order = swap.order.clone();
            self.swap = Some(swap);
            order
        });
        BarrierKind::Savepoint { target, end, swap: order }
    }

    /// The pending savepoint if `id` is it.
    pub(super) fn savepoint_of(&self, id: CheckpointId) -> Option<&PendingSavepoint> {
        self.savepoint.as_ref().filter(|p| p.id == Some(id))
    }

    /// Savepoint `id`'s `_metadata` was written into `storage`.
    pub(super) fn savepoint_complete(&mut self, id: CheckpointId, storage: &CheckpointStorage, m: &CheckpointMetadata) {
        let Some(p) = self.savepoint.take() else { return };
        let done = SavepointDone {
            id,
            location: storage.display().to_string(),
            size: m.state_size(),
            duration_ms: m.duration_ms,
            stopped: p.request.stop,
        };
        tracing::info!(
            savepoint = %done.location,
            size = %human_bytes(done.size),
            duration_ms = done.duration_ms,
            "savepoint complete"
        );
        if done.stopped {
            // Sources end on the completion notice: nothing is triggered
            // after the savepoint.
            self.stopped = true;
            self.stopped_with = Some(done.clone());
        }
        if let Some(reply) = p.reply {
            let _ = reply.send(Ok(done.clone()));
        }
        if let Some(swap) = self.swap.as_mut().filter(|s| s.id == Some(id)) {
            swap.done = Some(done);
            self.settle_swap();
        }
    }

    /// Answers the pending savepoint with `reason`; sources waiting on it
    /// to stop carry on.
    pub(super) fn fail_savepoint(&mut self, reason: String) {
        let Some(mut p) = self.savepoint.take() else { return };
        tracing::warn!(savepoint = %p.storage.display(), "savepoint failed: {reason}");
        if p.id.is_some() && p.request.stop {
            for tx in &self.sources {
                let _ = tx.send(Control::Resume);
            }
        }
        let swap = p.swap.take().or_else(|| self.swap.take_if(|s| s.id.is_some() && s.id == p.id));
        if let Some(swap) = swap {
            self.abort_swap(swap, format!("its savepoint failed: {reason}"));
        }
        if let Some(reply) = p.reply {
            let _ = reply.send(Err(RequestError::Failed(reason)));
        }
    }

    /// Swaps committed since the last call: (operator uid, new module).
    pub fn take_committed_swaps(&mut self) -> Vec<(String, OperatorModule)> {
        std::mem::take(&mut self.committed)
    }

    /// Subtask `task` prepared module swap `id` (or failed to).
    pub fn on_swap_prepared(&mut self, task: &TaskId, id: CheckpointId, result: Result<Instant, SwapError>) {
        let Some(swap) = self.swap.as_mut().filter(|s| s.id == Some(id)) else { return };
        if let Err(e) = &result {
            tracing::warn!(task = %task, "module swap failed: {e}");
        }
        swap.prepared.push((task.subtask, result));
        self.settle_swap();
    }

    /// Commits the swap once every subtask prepared; aborts it when any
    /// subtask failed; answers once the savepoint completed too.
    fn settle_swap(&mut self) {
        let Some(swap) = self.swap.as_mut() else { return };
        let id = swap.id.expect("triggered");
        if swap.pause_ms.is_none() {
            // Every subtask must be waiting before any is told: the others
            // may still be opening the new module.
            if swap.prepared.len() < swap.subtasks as usize {
                return;
            }
            let failed: Vec<String> = swap
                .prepared
                .iter()
                .filter_map(|(subtask, r)| r.as_ref().err().map(|e| format!("subtask {subtask}: {e}")))
                .collect();
            if !failed.is_empty() {
                let swap = self.swap.take().expect("checked");
                self.abort_swap(swap, format!("the new module was refused: {}", failed.join("; ")));
                return;
            }
            // The commit does not wait for the savepoint: a failed swap rolls
            // back to each subtask's frozen view, and the savepoint is the
            // user's way back later. The pause is the preparation only.
            crate::crash_point::crash_point("swap.prepared");
            self.send_all(Control::SwapCommit(id));
            let swap = self.swap.as_mut().expect("checked");
            let first =
                swap.prepared.iter().filter_map(|(_, r)| r.as_ref().ok()).min().copied().unwrap_or_else(Instant::now);
            let pause_ms = first.elapsed().as_secs_f64() * 1e3;
            swap.pause_ms = Some(pause_ms);
            tracing::info!(operator = %swap.order.uid, pause_ms, "module swapped");
            self.committed.push((swap.order.uid.to_string(), swap.order.module.clone()));
            let (uid, loaded) = (swap.order.uid.to_string(), swap.loaded.clone());
            self.cp.swapped_in(&uid, id, &loaded);
        }
        let swap = self.swap.as_ref().expect("checked");
        if let (Some(done), Some(pause_ms)) = (swap.done.clone(), swap.pause_ms) {
            let swap = self.swap.take().expect("checked");
            let _ = swap.reply.send(Ok(SwapDone { savepoint: done, pause_ms }));
        }
    }

    fn abort_swap(&mut self, swap: PendingSwap, reason: String) {
        if swap.pause_ms.is_some() {
            // Committed already: the new module runs; only the savepoint
            // of the state before it failed.
            let _ = swap.reply.send(Err(RequestError::Failed(format!(
                "'{}' now runs the new module, but the savepoint of the state before the swap failed: {reason}",
                swap.order.uid
            ))));
            return;
        }
        if let Some(id) = swap.id {
            self.send_all(Control::SwapAbort(id));
        }
        tracing::warn!(operator = %swap.order.uid, "module swap rolled back: {reason}");
        let _ = swap
            .reply
            .send(Err(RequestError::Failed(format!("{reason}; '{}' keeps running its old module", swap.order.uid))));
    }

    /// The savepoint the job stopped with, once it completed.
    pub fn stopped_with(&self) -> Option<&SavepointDone> {
        self.stopped_with.as_ref()
    }
}
