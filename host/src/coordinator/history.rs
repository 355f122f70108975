//! The run's checkpoint statistics, as Flink's checkpoint tab shows them:
//! counts, the latest completed, failed, savepoint and restore, and the
//! last [`HISTORY`] checkpoints and savepoints with each subtask's part
//! (when its barrier arrived, alignment, synchronous and asynchronous
//! time, bytes). Fed by the checkpoint edge ([`super::checkpointing`]);
//! read by the control API.

use crate::api::{
    CheckpointCounts, CheckpointDetails, CheckpointOverview, CheckpointSummary, RestoredCheckpoint, SubtaskCheckpoint,
};
use crate::checkpoint::protocol::CheckpointId;
use crate::clock::now_ms;
use crate::runtime::TaskId;
use crate::runtime::events::{AckTiming, TaskSnapshot};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Instant;

/// Checkpoints and savepoints kept in the history.
pub const HISTORY: usize = 100;

/// One checkpoint or savepoint, as it goes.
#[derive(Debug)]
struct Entry {
    summary: CheckpointSummary,
    triggered: Instant,
    tasks: Vec<SubtaskCheckpoint>,
    /// The stored files its subtasks' state uses.
    files: Vec<String>,
}

/// The statistics of one run (across its attempts).
#[derive(Debug, Default)]
pub struct History {
    entries: VecDeque<Entry>,
    counts: CheckpointCounts,
    latest_completed: Option<CheckpointSummary>,
    latest_savepoint: Option<CheckpointSummary>,
    latest_failed: Option<CheckpointSummary>,
    latest_restored: Option<RestoredCheckpoint>,
    /// When the latest restore began, until a checkpoint completes after
    /// it: the time a restart (or a cluster takeover) takes to store, and
    /// so to publish, anything new.
    restore_began: Option<Instant>,
    /// The stored files the latest completed checkpoint (or the restored
    /// one) uses: what the next checkpoint reuses is not new.
    known: HashSet<String>,
}

impl History {
    /// A history whose first checkpoint reuses `known` files (those of the
    /// checkpoint the run restored).
    pub fn new(known: HashSet<String>) -> Self {
        History { known, ..History::default() }
    }

    /// Checkpoint `id` was triggered; `subtasks` must acknowledge it.
    pub fn triggered(&mut self, id: CheckpointId, savepoint: bool, subtasks: u32) {
        if self.entries.len() >= HISTORY {
            self.entries.pop_front();
        }
        self.counts.in_progress += 1;
        self.entries.push_back(Entry {
            summary: CheckpointSummary {
                id,
                status: "in-progress".into(),
                savepoint,
                trigger_time_ms: now_ms().max(0) as u64,
                duration_ms: 0,
                size: 0,
                incremental_size: 0,
                acknowledged: 0,
                subtasks,
                location: None,
                failure: None,
            },
            triggered: Instant::now(),
            tasks: Vec::new(),
            files: Vec::new(),
        });
    }

    fn in_progress(&mut self, id: CheckpointId) -> Option<&mut Entry> {
        self.entries.iter_mut().rev().find(|e| e.summary.id == id && e.summary.status == "in-progress")
    }

    /// `task` acknowledged checkpoint `id` with `snapshot`, taken as
    /// `timing` says.
    pub fn acknowledged(&mut self, id: CheckpointId, task: &TaskId, snapshot: &TaskSnapshot, timing: AckTiming) {
        let now = Instant::now();
        let known = std::mem::take(&mut self.known);
        if let Some(e) = self.in_progress(id) {
            let (size, new, files) = match snapshot {
                TaskSnapshot::Operator(handle) => {
                    let files: Vec<String> = handle.paths().iter().map(|p| p.to_string()).collect();
                    let new = match handle {
                        crate::checkpoint::metadata::StateHandle::Rocksdb { files: db } => {
                            db.iter().filter(|f| !known.contains(&f.path)).map(|f| f.size).sum()
                        }
                        other => other.size(),
                    };
                    (handle.size(), new, files)
                }
                TaskSnapshot::Source(_) | TaskSnapshot::Sink(_) => (0, 0, Vec::new()),
            };
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            let since_trigger = timing.aligned_at.saturating_duration_since(e.triggered);
            let asynchronous = now.saturating_duration_since(timing.aligned_at).saturating_sub(timing.sync);
            e.tasks.push(SubtaskCheckpoint {
                node: task.node.to_string(),
                subtask: task.subtask,
                ack_ms: now.saturating_duration_since(e.triggered).as_millis() as u64,
                start_delay_ms: since_trigger.as_millis() as u64,
                alignment_ms: ms(timing.alignment),
                sync_ms: ms(timing.sync),
                async_ms: ms(asynchronous),
                size,
                incremental_size: new,
            });
            e.files.extend(files);
            e.summary.acknowledged += 1;
            e.summary.size += size;
            e.summary.incremental_size += new;
        }
        self.known = known;
    }

    /// Checkpoint `id` completed at `location`.
    pub fn completed(&mut self, id: CheckpointId, location: String) {
        let Some(e) = self.in_progress(id) else { return };
        e.summary.status = "completed".into();
        e.summary.duration_ms = e.triggered.elapsed().as_millis() as u64;
        e.summary.location = Some(location);
        let (summary, files) = (e.summary.clone(), std::mem::take(&mut e.files));
        e.tasks.sort_by(|a, b| (&a.node, a.subtask).cmp(&(&b.node, b.subtask)));
        self.counts.in_progress -= 1;
        self.counts.completed += 1;
        if summary.savepoint {
            self.latest_savepoint = Some(summary);
        } else {
            // A savepoint stands alone; a checkpoint's files are what the
            // next one may reuse.
            self.known = files.into_iter().collect();
            if let Some(began) = self.restore_began.take() {
                let since_restore_ms = began.elapsed().as_millis() as u64;
                tracing::info!(checkpoint = id, since_restore_ms, "first checkpoint since the restore");
            }
            self.latest_completed = Some(summary);
        }
    }

    /// The final checkpoint, which records the end and holds no state,
    /// was written at `location`.
    pub fn finished(&mut self, id: CheckpointId, location: String) {
        self.triggered(id, false, 0);
        self.completed(id, location);
    }

    /// Checkpoint `id` failed or was abandoned, for `reason`.
    pub fn failed(&mut self, id: CheckpointId, reason: &str) {
        let Some(e) = self.in_progress(id) else { return };
        e.summary.status = "failed".into();
        e.summary.duration_ms = e.triggered.elapsed().as_millis() as u64;
        e.summary.failure = Some(reason.to_string());
        let summary = e.summary.clone();
        self.counts.in_progress -= 1;
        self.counts.failed += 1;
        self.latest_failed = Some(summary);
    }

    /// Every checkpoint still in progress failed: the attempt that took
    /// them ended.
    pub fn attempt_ended(&mut self) {
        let open: Vec<CheckpointId> =
            self.entries.iter().filter(|e| e.summary.status == "in-progress").map(|e| e.summary.id).collect();
        for id in open {
            self.failed(id, "the job failed or restarted while it was taken");
        }
    }

    /// The run restored `restored`.
    pub fn restored(&mut self, restored: RestoredCheckpoint) {
        self.counts.restored += 1;
        self.latest_restored = Some(restored);
        self.restore_began = Some(Instant::now());
    }

    /// When the run last restored a checkpoint.
    pub fn last_restore_time_ms(&self) -> Option<u64> {
        self.latest_restored.as_ref().map(|r| r.restore_time_ms)
    }

    /// Each subtask's bytes of state in the latest completed checkpoint, by
    /// (node, subtask).
    pub fn latest_task_sizes(&self) -> BTreeMap<(String, u32), u64> {
        let Some(id) = self.latest_completed.as_ref().map(|s| s.id) else { return BTreeMap::new() };
        let Some(e) = self.entries.iter().rev().find(|e| e.summary.id == id) else { return BTreeMap::new() };
        e.tasks.iter().map(|t| ((t.node.clone(), t.subtask), t.size)).collect()
    }

    /// Bytes the latest completed checkpoint stored anew.
    pub fn last_incremental_size(&self) -> Option<u64> {
        self.latest_completed.as_ref().map(|s| s.incremental_size)
    }

    /// Counts, latest and history, newest first; durations of checkpoints
    /// in progress so far.
    pub fn overview(&self) -> CheckpointOverview {
        let history = self
            .entries
            .iter()
            .rev()
            .map(|e| {
                let mut s = e.summary.clone();
                if s.status == "in-progress" {
                    s.duration_ms = e.triggered.elapsed().as_millis() as u64;
                }
                s
            })
            .collect();
        CheckpointOverview {
            counts: self.counts,
            latest_completed: self.latest_completed.clone(),
            latest_savepoint: self.latest_savepoint.clone(),
            latest_failed: self.latest_failed.clone(),
            latest_restored: self.latest_restored.clone(),
            history,
        }
    }

    /// Checkpoint `id` with each subtask's part, if still in the history.
    pub fn details(&self, id: CheckpointId) -> Option<CheckpointDetails> {
        let e = self.entries.iter().rev().find(|e| e.summary.id == id)?;
        let mut summary = e.summary.clone();
        if summary.status == "in-progress" {
            summary.duration_ms = e.triggered.elapsed().as_millis() as u64;
        }
        Some(CheckpointDetails { summary, tasks: e.tasks.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::metadata::{DbFile, StateHandle};
    use std::time::Duration;

    fn db(files: &[(&str, u64)]) -> TaskSnapshot {
        TaskSnapshot::Operator(StateHandle::Rocksdb {
            files: files
                .iter()
                .map(|(p, size)| DbFile { name: p.to_string(), path: p.to_string(), size: *size, crc32: 0 })
                .collect(),
        })
    }

    fn task(i: u32) -> TaskId {
        TaskId { node: "op".into(), subtask: i }
    }

    fn timing() -> AckTiming {
        AckTiming { aligned_at: Instant::now(), alignment: Duration::from_millis(2), sync: Duration::from_millis(1) }
    }

    #[test]
    fn incremental_size_counts_only_files_the_last_checkpoint_did_not_have() {
        let mut h = History::new(["shared/a".to_string()].into());
        h.triggered(1, false, 2);
        h.acknowledged(1, &task(0), &db(&[("shared/a", 100), ("shared/b", 10), ("chk-1/m", 1)]), timing());
        h.acknowledged(
            1,
            &task(1),
            &TaskSnapshot::Source(crate::checkpoint::metadata::SourcePosition::Offset(7)),
            timing(),
        );
        h.completed(1, "file:///ck/chk-1".into());
        let o = h.overview();
        let s = o.latest_completed.unwrap();
        assert_eq!((s.size, s.incremental_size, s.acknowledged, s.subtasks), (111, 11, 2, 2));
        h.triggered(2, false, 1);
        h.acknowledged(2, &task(0), &db(&[("shared/a", 100), ("shared/b", 10), ("chk-2/m", 1)]), timing());
        h.completed(2, "file:///ck/chk-2".into());
        assert_eq!(h.last_incremental_size(), Some(1));
        let d = h.details(2).unwrap();
        assert_eq!(d.tasks.len(), 1);
        assert_eq!((d.tasks[0].size, d.tasks[0].incremental_size), (111, 1));
        assert!((d.tasks[0].alignment_ms - 2.0).abs() < 1e-9);
    }

    #[test]
    fn counts_and_latest_follow_each_outcome() {
        let mut h = History::new(HashSet::new());
        h.triggered(1, false, 1);
        h.failed(1, "declined");
        h.triggered(2, true, 1);
        h.completed(2, "file:///sp".into());
        h.triggered(3, false, 1);
        assert_eq!(h.overview().counts.in_progress, 1);
        h.attempt_ended();
        let o = h.overview();
        assert_eq!((o.counts.completed, o.counts.failed, o.counts.in_progress), (1, 2, 0));
        assert_eq!(o.latest_savepoint.unwrap().id, 2);
        assert_eq!(o.latest_failed.unwrap().id, 3);
        assert!(o.latest_completed.is_none());
        let ids: Vec<u64> = o.history.iter().map(|s| s.id).collect();
        assert_eq!(ids, [3, 2, 1]);
    }

    #[test]
    fn the_history_keeps_the_last_entries() {
        let mut h = History::new(HashSet::new());
        for id in 1..=(HISTORY as u64 + 5) {
            h.triggered(id, false, 0);
            h.completed(id, String::new());
        }
        let o = h.overview();
        assert_eq!(o.history.len(), HISTORY);
        assert_eq!(o.history[0].id, HISTORY as u64 + 5);
        assert_eq!(o.counts.completed, HISTORY as u64 + 5);
    }
}
