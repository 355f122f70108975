//! The asynchronous part of a subtask's snapshot: a background thread
//! writes the frozen state in the snapshot format, stores it, and
//! acknowledges the checkpoint to the coordinator with the state's handle
//! (or declines it with the reason). The task thread goes on processing
//! as soon as it has frozen its state and forwarded the barrier.

use super::metadata::TaskSnapshot;
use super::protocol::CheckpointId;
use super::storage::CheckpointStorage;
use crate::runtime::events::{TaskEvent, TaskId};
use crate::state::FrozenState;
use crate::state::snapshot::write_snapshot_sized;
use crossbeam_channel::Sender;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Stores one subtask's snapshots.
pub struct Uploader {
    task: TaskId,
    storage: Arc<CheckpointStorage>,
    events: Sender<TaskEvent>,
    max_parallelism: u32,
    /// The size of the last snapshot, to size the next one's buffer.
    last_size: Arc<AtomicUsize>,
}

impl Uploader {
    /// An uploader for subtask `task`.
    pub fn new(task: TaskId, storage: Arc<CheckpointStorage>, events: Sender<TaskEvent>, max_parallelism: u32) -> Self {
        Uploader { task, storage, events, max_parallelism, last_size: Arc::new(AtomicUsize::new(0)) }
    }

    /// Writes and stores `frozen` for checkpoint `id` on a background
    /// thread; `sync` is the pause the task took for it.
    pub fn upload(&self, id: CheckpointId, mut frozen: Box<dyn FrozenState>, sync: Duration) {
        let task = self.task.clone();
        let storage = self.storage.clone();
        let events = self.events.clone();
        let max_parallelism = self.max_parallelism;
        let last_size = self.last_size.clone();
        let spawned = std::thread::Builder::new().name(format!("weir-snap-{task}")).spawn(move || {
            let name = format!("{}-{}.snap", task.node, task.subtask);
            let hint = last_size.load(Ordering::Relaxed);
            let result = write_snapshot_sized(frozen.as_mut(), max_parallelism, hint + hint / 8)
                .map_err(|e| format!("cannot write its snapshot: {e}"))
                .and_then(|bytes| {
                    last_size.store(bytes.len(), Ordering::Relaxed);
                    storage.put_state(id, &task.to_string(), &name, bytes).map_err(|e| format!("cannot store it: {e}"))
                });
            drop(frozen);
            let event = match result {
                Ok(handle) => TaskEvent::Acknowledged { task, id, snapshot: TaskSnapshot::Operator(handle), sync },
                Err(reason) => TaskEvent::Declined { task, id, reason },
            };
            let _ = events.send(event);
        });
        if let Err(e) = spawned {
            let reason = format!("cannot start a snapshot thread: {e}");
            let _ = self.events.send(TaskEvent::Declined { task: self.task.clone(), id, reason });
        }
    }
}
