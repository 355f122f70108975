//! What a checkpoint's `_metadata` says: each task's handle gathered by
//! operator, source and sink, with the finished sources, the swaps that
//! took effect and the recordings; and the final checkpoint, which records
//! the job's end with the sinks' last state.

use super::{Attempt, CheckpointingError};
use crate::checkpoint::metadata::{CheckpointMetadata, OperatorState, SinkState, SourcePosition, StateHandle};
use crate::checkpoint::protocol::CheckpointId;
use crate::clock::now_ms;
use crate::runtime::events::TaskSnapshot;
use crate::runtime::message::Control;
use std::collections::BTreeMap;
use std::time::Instant;

impl Attempt<'_> {
    pub(super) fn metadata(
        &self,
        id: CheckpointId,
        handles: BTreeMap<String, TaskSnapshot>,
        finished: bool,
    ) -> CheckpointMetadata {
        let (at, at_ms) = self.triggered.get(&id).copied().unwrap_or_else(|| (Instant::now(), now_ms()));
        let mut operators: BTreeMap<String, Vec<(u32, StateHandle)>> = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut sinks = BTreeMap::new();
        for (name, snapshot) in handles {
            let Some(task) = self.tasks.get(&name) else { continue };
            match snapshot {
                TaskSnapshot::Operator(h) => {
                    operators.entry(task.node.to_string()).or_default().push((task.subtask, h))
                }
                TaskSnapshot::Source(position) => {
                    // A partitioned source's subtasks own disjoint
                    // partitions: their positions add up.
                    let merged: &mut SourcePosition = sources.entry(task.node.to_string()).or_default();
                    merged.merge(position);
                }
                TaskSnapshot::Sink(Some(state)) => {
                    sinks.insert(task.node.to_string(), state);
                }
                TaskSnapshot::Sink(None) => {}
            }
        }
        let operators = operators
            .into_iter()
            .map(|(uid, mut subtasks)| {
                subtasks.sort_by_key(|(i, _)| *i);
                let parallelism = self.parallelism_in(&uid, id).unwrap_or(subtasks.len() as u32);
                (uid, OperatorState { parallelism, subtasks: subtasks.into_iter().map(|(_, h)| h).collect() })
            })
            .collect();
        CheckpointMetadata {
            job: self.cp.job.clone(),
            id,
            triggered_at_ms: at_ms,
            duration_ms: at.elapsed().as_millis() as u64,
            finished,
            savepoint: false,
            max_parallelism: self.cp.max_parallelism,
            operators,
            sources,
            finished_sources: self.finished_sources(id),
            sinks,
            // Swaps that took effect at an earlier barrier: this state is
            // the swapped module's.
            swapped: self
                .cp
                .swapped
                .iter()
                .filter(|(_, (since, _))| *since < id)
                .map(|(uid, (_, m))| (uid.clone(), m.clone()))
                .collect(),
            recorded: self.cp.recorded.clone(),
        }
    }

    /// The job's input is fully processed and every sink is waiting with
    /// `sinks`: records the end as a final checkpoint, so a crash from here
    /// on only publishes what the sinks hold. The store retries as its own
    /// retry policy says; a write that still fails fails the attempt.
    pub fn finish(&mut self, sinks: BTreeMap<String, SinkState>) -> Result<CheckpointId, CheckpointingError> {
        let id = self.protocol.next_id().max(self.cp.highest_id + 1);
        self.cp.highest_id = id;
        let metadata = CheckpointMetadata { sinks, ..self.metadata(id, BTreeMap::new(), true) };
        crate::crash_point::crash_point("checkpoint.final");
        self.cp
            .storage
            .write_metadata(id, metadata.encode(), self.cp.log.as_mut())
            .map_err(|cause| CheckpointingError::FinalCheckpoint { id, cause })?;
        tracing::info!(checkpoint = id, "final checkpoint complete");
        self.cp.history.finished(id, self.cp.storage.checkpoint_location(id));
        self.cp.created.push_back((id, Vec::new()));
        self.cp.stats.latest = Some(id);
        self.send_all(Control::Complete { id, log: self.cp.log });
        self.cp.retain();
        Ok(id)
    }
}
