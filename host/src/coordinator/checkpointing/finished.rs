//! Checkpoints after tasks finish, as Flink's FLIP-147: a source that read
//! its input to the end still takes part. The coordinator acknowledges
//! every checkpoint for it from then on with its end position, and
//! `_metadata` records it as finished (`finished_sources`), so a restore
//! starts it finished and it reads nothing again. Its channels downstream
//! ended, which counts as aligned there (`runtime::inputs`), so
//! checkpoints go on while any source runs.
//!
//! An operator or a sink that finished cannot take part: its state after
//! its end of input is in no snapshot. Once one ends, nothing more is
//! triggered, as once every source finished; the job's final checkpoint
//! covers the rest.

use super::{Attempt, CheckpointingError};
use crate::checkpoint::metadata::SourcePosition;
use crate::checkpoint::protocol::CheckpointId;
use crate::runtime::TaskId;
use crate::runtime::events::TaskSnapshot;
use std::collections::{BTreeMap, BTreeSet};

impl Attempt<'_> {
    /// Source subtask `task` read its input to the end and ended its
    /// stream at `position`: it acknowledges the checkpoint in flight, if
    /// its barrier never went out, and every later one.
    pub fn on_source_ended(&mut self, task: &TaskId, position: SourcePosition) -> Result<(), CheckpointingError> {
        tracing::debug!(task = %task, %position, "source finished; it acknowledges checkpoints as finished");
        let commands = self.protocol.task_finished(&task.to_string(), TaskSnapshot::Source(position));
        self.execute(commands)
    }

    /// Every source finished (or stopped): nothing more is triggered, and
    /// a savepoint asked for and not triggered cannot be taken.
    pub fn on_sources_done(&mut self) {
        self.stopped = true;
        let in_flight = self.protocol.in_flight();
        if self.savepoint.as_ref().is_some_and(|p| p.id.is_none() || p.id != in_flight) {
            self.fail_savepoint("the job's input ended before the savepoint was taken".into());
        }
    }

    /// Task `task`, not a source, finished its work (an operator after its
    /// end of input, a sink waiting for the final checkpoint): nothing more
    /// is triggered, and a checkpoint it had not acknowledged cannot
    /// complete.
    pub fn on_task_ended(&mut self, task: &TaskId) {
        if !self.stopped && self.protocol.finished_count() < self.sources.len() {
            tracing::info!(task = %task, "no more checkpoints: a task other than a source finished before the job's end");
        }
        self.stopped = true;
        if self.protocol.awaits(&task.to_string()) {
            let now = self.now_ms();
            if let Some(id) = self.protocol.cancel_in_flight(now) {
                let reason = format!("abandoned: {task} finished before its barrier");
                tracing::debug!(checkpoint = id, "{reason}");
                self.discard(id, &reason);
                if self.savepoint_of(id).is_some() {
                    self.fail_savepoint("the job's input ended before the savepoint was taken".into());
                }
            }
        }
    }

    /// The sources every subtask of which checkpoint `id` holds as
    /// finished, for its `_metadata`.
    pub(super) fn finished_sources(&self, id: CheckpointId) -> BTreeSet<String> {
        let mut ended: BTreeMap<&str, u32> = BTreeMap::new();
        for task in self.protocol.finished_in(id).filter_map(|name| self.tasks.get(name)) {
            *ended.entry(&task.node).or_default() += 1;
        }
        ended
            .into_iter()
            .filter(|(node, n)| self.parallelism.get(*node).is_some_and(|p| n >= p))
            .map(|(node, _)| node.to_string())
            .collect()
    }
}
