//! The checkpoint coordinator's protocol, as Flink's asynchronous barrier
//! snapshots run it, as pure decisions.
//!
//! [`Protocol`] is fed events (time passing, a task's acknowledgement or
//! decline, the result of writing `_metadata`) and answers with
//! [`Command`]s for the edge to carry out (send barrier *n* into the
//! sources, write the metadata, tell sinks *n* completed, fail the job). It
//! never reads a clock or touches storage: time is an argument, in
//! milliseconds.
//!
//! Rules it keeps:
//! - ids only grow, and continue after the checkpoint a job restored from;
//! - at most one checkpoint is in flight; the next is triggered `interval`
//!   after the previous trigger and no sooner than `min_pause` after the
//!   previous one ended;
//! - a checkpoint completes only when every task acknowledged it *and* its
//!   metadata was written; only then are sinks told (completing *n* subsumes
//!   every lower id, so a sink that missed a notice commits on the next);
//! - a checkpoint that is declined, times out or cannot be stored is
//!   aborted; more than `tolerable_failures` in a row fail the job;
//! - a savepoint asked for is the next checkpoint triggered, as soon as
//!   none is in flight, whatever the interval; one that fails is reported
//!   to whoever asked and never counts toward failing the job;
//! - a task that finished (a source that read its input to the end, as
//!   Flink's FLIP-147) still takes part: it acknowledges every checkpoint
//!   from then on with the handle it finished with, the one in flight too
//!   if it had not acknowledged it yet.

use std::collections::{BTreeMap, BTreeSet};

/// A checkpoint's number.
pub type CheckpointId = u64;

/// Checkpointing settings, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolConfig {
    /// Time between triggers; none: only savepoints, when asked for (a job
    /// without `[checkpointing]`).
    pub interval_ms: Option<u64>,
    /// Least time between the end of one checkpoint and the next trigger.
    pub min_pause_ms: u64,
    /// How long a checkpoint may take before it is aborted.
    pub timeout_ms: u64,
    /// Consecutive failed checkpoints tolerated before the job fails.
    pub tolerable_failures: u32,
}

/// What the edge must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<H> {
    /// Record source offsets and send barrier `id` into every source.
    Trigger {
        /// The checkpoint.
        id: CheckpointId,
        /// It is a savepoint: stored canonically, where the request said.
        savepoint: bool,
    },
    /// Every task acknowledged: write `_metadata` for `id` (last, create-only)
    /// listing these state handles, then report with
    /// [`Protocol::on_metadata_written`].
    WriteMetadata {
        /// The checkpoint.
        id: CheckpointId,
        /// Each task's handles, by task.
        handles: BTreeMap<String, H>,
    },
    /// `id` is complete: sinks commit everything up to it.
    NotifyComplete {
        /// The checkpoint.
        id: CheckpointId,
    },
    /// `id` is abandoned: tasks drop what they prepared for it.
    Abort {
        /// The checkpoint.
        id: CheckpointId,
        /// Why.
        reason: String,
    },
    /// Too many checkpoints failed in a row.
    FailJob {
        /// Why, with the last failure.
        reason: String,
    },
}

/// A task that finished: what it acknowledges with from checkpoint `since` on.
#[derive(Debug)]
struct Finished<H> {
    handle: H,
    since: CheckpointId,
}

#[derive(Debug)]
struct InFlight<H> {
    id: CheckpointId,
    triggered_at: u64,
    awaiting: BTreeSet<String>,
    handles: BTreeMap<String, H>,
    /// Acknowledged by everyone; waiting for the metadata write.
    storing: bool,
    savepoint: bool,
}

/// The coordinator's checkpoint protocol for one job.
#[derive(Debug)]
pub struct Protocol<H> {
    config: ProtocolConfig,
    tasks: BTreeSet<String>,
    next_id: CheckpointId,
    in_flight: Option<InFlight<H>>,
    last_trigger: Option<u64>,
    last_end: Option<u64>,
    latest_completed: Option<CheckpointId>,
    failures_in_a_row: u32,
    /// A savepoint was asked for and not triggered yet.
    savepoint_requested: bool,
    /// A checkpoint was asked for (to carry an order) and not triggered yet.
    checkpoint_requested: bool,
    /// Tasks that finished, with the handle each acknowledges with and the
    /// first checkpoint it acknowledges with that handle (an earlier one
    /// has the handle its barrier went out with).
    finished: BTreeMap<String, Finished<H>>,
}

impl<H: Clone> Protocol<H> {
    /// A protocol for a job whose tasks are `tasks` (each must acknowledge
    /// every checkpoint), continuing after `restored_from` if the job was
    /// restored.
    pub fn new(
        config: ProtocolConfig,
        tasks: impl IntoIterator<Item = String>,
        restored_from: Option<CheckpointId>,
    ) -> Self {
        Protocol {
            config,
            tasks: tasks.into_iter().collect(),
            next_id: restored_from.map_or(1, |id| id + 1),
            in_flight: None,
            last_trigger: None,
            last_end: None,
            latest_completed: restored_from,
            failures_in_a_row: 0,
            savepoint_requested: false,
            checkpoint_requested: false,
            finished: BTreeMap::new(),
        }
    }

    /// Task `task` finished: it acknowledges the checkpoint in flight (if
    /// it had not) and every later one with `handle`, which says so.
    pub fn task_finished(&mut self, task: &str, handle: H) -> Vec<Command<H>> {
        let since = match self.in_flight.as_ref() {
            Some(f) if !f.storing && f.awaiting.contains(task) => f.id,
            _ => self.next_id,
        };
        self.finished.insert(task.to_string(), Finished { handle: handle.clone(), since });
        match self.in_flight.as_ref() {
            Some(f) if !f.storing && f.awaiting.contains(task) => {
                let id = f.id;
                self.on_ack(id, task, handle)
            }
            _ => Vec::new(),
        }
    }

    /// Whether task `task` finished.
    pub fn has_finished(&self, task: &str) -> bool {
        self.finished.contains_key(task)
    }

    /// How many tasks finished.
    pub fn finished_count(&self) -> usize {
        self.finished.len()
    }

    /// The tasks that checkpoint `id` holds as finished: those that
    /// acknowledged it with the handle they finished with. (One that
    /// acknowledged it before it finished is at its barrier's position
    /// there, and starts from it on a restore.)
    pub fn finished_in(&self, id: CheckpointId) -> impl Iterator<Item = &str> {
        self.finished.iter().filter(move |(_, f)| f.since <= id).map(|(t, _)| t.as_str())
    }

    /// The latest completed checkpoint.
    pub fn latest_completed(&self) -> Option<CheckpointId> {
        self.latest_completed
    }

    /// The checkpoint in flight, if any.
    pub fn in_flight(&self) -> Option<CheckpointId> {
        self.in_flight.as_ref().map(|f| f.id)
    }

    /// Gives up the checkpoint in flight without counting a failure: it can
    /// no longer complete because the job is ending (a source finished
    /// before it sent the barrier).
    pub fn cancel_in_flight(&mut self, now: u64) -> Option<CheckpointId> {
        let f = self.in_flight.take()?;
        self.last_end = Some(now);
        Some(f.id)
    }

    /// Whether `task` still owes an acknowledgement of the checkpoint in
    /// flight.
    pub fn awaits(&self, task: &str) -> bool {
        self.in_flight.as_ref().is_some_and(|f| !f.storing && f.awaiting.contains(task))
    }

    /// Whether the checkpoint in flight has run past the timeout at `now`.
    pub fn timed_out(&self, now: u64) -> bool {
        self.in_flight.as_ref().is_some_and(|f| now.saturating_sub(f.triggered_at) >= self.config.timeout_ms)
    }

    /// Makes the first periodic checkpoint wait one interval from `now`
    /// instead of coming at once: a job restored from a checkpoint has all
    /// of its state stored already, and a checkpoint of it before it read
    /// anything would store it again and hold up the one that carries its
    /// first output (published only once a checkpoint covers it).
    pub fn first_after_interval(&mut self, now: u64) {
        self.last_trigger = Some(now);
    }

    /// Asks for a savepoint: the next trigger, as soon as no checkpoint is
    /// in flight.
    pub fn request_savepoint(&mut self) {
        self.savepoint_requested = true;
    }

    /// Asks for a checkpoint as soon as none is in flight, whatever the
    /// interval (a rescale rides on it).
    pub fn request_checkpoint(&mut self) {
        self.checkpoint_requested = true;
    }

    /// The tasks that acknowledge the checkpoints triggered from now on
    /// (one in flight keeps waiting for those it was triggered with).
    pub fn set_tasks(&mut self, tasks: impl IntoIterator<Item = String>) {
        self.tasks = tasks.into_iter().collect();
    }

    /// How many tasks acknowledge each checkpoint.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// The tasks that acknowledge each checkpoint.
    pub fn tasks(&self) -> impl Iterator<Item = &String> {
        self.tasks.iter()
    }

    /// The id the next trigger will take.
    pub fn next_id(&self) -> CheckpointId {
        self.next_id
    }

    /// Time passed: trigger a checkpoint when due, abort one that timed out.
    pub fn tick(&mut self, now: u64) -> Vec<Command<H>> {
        let mut out = Vec::new();
        if let Some(f) = &self.in_flight {
            if now.saturating_sub(f.triggered_at) >= self.config.timeout_ms {
                let id = f.id;
                let reason = format!("checkpoint {id} timed out after {} ms", self.config.timeout_ms);
                out.extend(self.fail(id, reason, now));
            }
            return out;
        }
        let interval_due = self
            .config
            .interval_ms
            .is_some_and(|interval| self.last_trigger.is_none_or(|t| now >= t.saturating_add(interval)));
        let pause_done = self.last_end.is_none_or(|t| now >= t.saturating_add(self.config.min_pause_ms));
        let savepoint = std::mem::take(&mut self.savepoint_requested);
        let asked = std::mem::take(&mut self.checkpoint_requested);
        if savepoint || asked || (interval_due && pause_done) {
            let id = self.next_id;
            self.next_id += 1;
            self.last_trigger = Some(now);
            // Finished tasks acknowledge at once, with what they finished with.
            let (done, awaiting): (BTreeSet<String>, BTreeSet<String>) =
                self.tasks.iter().cloned().partition(|t| self.finished.contains_key(t));
            let handles = done.into_iter().map(|t| (t.clone(), self.finished[&t].handle.clone())).collect();
            let storing = awaiting.is_empty();
            self.in_flight = Some(InFlight { id, triggered_at: now, awaiting, handles, storing, savepoint });
            out.push(Command::Trigger { id, savepoint });
            if let Some(f) = self.in_flight.as_ref().filter(|f| f.storing) {
                out.push(Command::WriteMetadata { id, handles: f.handles.clone() });
            }
        }
        out
    }

    /// Task `task` took its snapshot for `id` and uploaded it as `handle`.
    /// Acknowledgements for a checkpoint no longer in flight are ignored.
    pub fn on_ack(&mut self, id: CheckpointId, task: &str, handle: H) -> Vec<Command<H>> {
        let Some(f) = self.in_flight.as_mut().filter(|f| f.id == id && !f.storing) else {
            return Vec::new();
        };
        if !f.awaiting.remove(task) {
            return Vec::new(); // unknown task or a repeated ack
        }
        f.handles.insert(task.to_string(), handle);
        if !f.awaiting.is_empty() {
            return Vec::new();
        }
        f.storing = true;
        vec![Command::WriteMetadata { id, handles: f.handles.clone() }]
    }

    /// Task `task` could not take checkpoint `id`.
    pub fn on_decline(&mut self, id: CheckpointId, task: &str, reason: &str, now: u64) -> Vec<Command<H>> {
        if self.in_flight.as_ref().is_none_or(|f| f.id != id) {
            return Vec::new();
        }
        self.fail(id, format!("checkpoint {id} declined by {task}: {reason}"), now)
    }

    /// The metadata of `id` was written (`Ok`) or could not be (`Err`, for
    /// example because another host committed the same id first).
    pub fn on_metadata_written<E: std::fmt::Display>(
        &mut self,
        id: CheckpointId,
        result: Result<(), E>,
        now: u64,
    ) -> Vec<Command<H>> {
        if self.in_flight.as_ref().is_none_or(|f| f.id != id || !f.storing) {
            return Vec::new();
        }
        match result {
            Ok(()) => {
                self.in_flight = None;
                self.last_end = Some(now);
                self.latest_completed = Some(id);
                self.failures_in_a_row = 0;
                vec![Command::NotifyComplete { id }]
            }
            Err(e) => self.fail(id, format!("checkpoint {id} could not be stored: {e}"), now),
        }
    }

    fn fail(&mut self, id: CheckpointId, reason: String, now: u64) -> Vec<Command<H>> {
        let savepoint = self.in_flight.take().is_some_and(|f| f.savepoint);
        self.last_end = Some(now);
        if savepoint {
            return vec![Command::Abort { id, reason }];
        }
        self.failures_in_a_row += 1;
        let mut out = vec![Command::Abort { id, reason: reason.clone() }];
        if self.failures_in_a_row > self.config.tolerable_failures {
            out.push(Command::FailJob {
                reason: format!(
                    "{} checkpoints failed in a row (tolerable_failures = {}); last: {reason}",
                    self.failures_in_a_row, self.config.tolerable_failures
                ),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ProtocolConfig {
        ProtocolConfig { interval_ms: Some(1000), min_pause_ms: 300, timeout_ms: 5000, tolerable_failures: 1 }
    }

    #[test]
    fn without_an_interval_only_a_savepoint_is_triggered() {
        let config = ProtocolConfig { interval_ms: None, ..config() };
        let mut p: Protocol<u32> = Protocol::new(config, ["src#0".to_string()], None);
        assert!(p.tick(0).is_empty());
        assert!(p.tick(1_000_000).is_empty());
        p.request_savepoint();
        let out = p.tick(1_000_001);
        assert!(matches!(out.as_slice(), [Command::Trigger { savepoint: true, .. }]), "{out:?}");
    }

    #[test]
    fn a_requested_checkpoint_is_triggered_at_once_and_new_tasks_count_from_the_next() {
        let mut p = protocol();
        assert!(matches!(p.tick(0).as_slice(), [Command::Trigger { id: 1, savepoint: false }]));
        ack_all(&mut p, 1);
        p.on_metadata_written(1, Ok::<(), String>(()), 10);
        // Well before the interval: asked for, it goes now.
        p.request_checkpoint();
        assert!(matches!(p.tick(400).as_slice(), [Command::Trigger { id: 2, savepoint: false }]));
        // A rescale: op#1 goes, op#2 and op#3 come, for checkpoint 3 on.
        p.set_tasks(["src#0", "op#0", "op#2", "op#3"].map(String::from));
        assert_eq!(p.task_count(), 4);
        assert!(p.on_ack(2, "src#0", 1).is_empty());
        assert!(p.on_ack(2, "op#0", 2).is_empty());
        let out = p.on_ack(2, "op#1", 3);
        assert!(matches!(out.as_slice(), [Command::WriteMetadata { id: 2, .. }]), "{out:?}");
        p.on_metadata_written(2, Ok::<(), String>(()), 420);
        assert!(matches!(p.tick(2000).as_slice(), [Command::Trigger { id: 3, .. }]));
        assert!(p.awaits("op#3") && !p.awaits("op#1"));
        assert!(!p.timed_out(2000 + 4999) && p.timed_out(2000 + 5000));
    }

    fn protocol() -> Protocol<u32> {
        Protocol::new(config(), ["src#0".to_string(), "op#0".to_string(), "op#1".to_string()], None)
    }

    fn ack_all(p: &mut Protocol<u32>, id: CheckpointId) -> Vec<Command<u32>> {
        let mut out = p.on_ack(id, "src#0", 1);
        out.extend(p.on_ack(id, "op#0", 2));
        out.extend(p.on_ack(id, "op#1", 3));
        out
    }

    #[test]
    fn a_checkpoint_completes_only_after_every_ack_and_the_metadata() {
        let mut p = protocol();
        assert_eq!(p.tick(0), vec![Command::Trigger { id: 1, savepoint: false }]);
        assert!(p.on_ack(1, "src#0", 1).is_empty());
        assert!(p.on_ack(1, "src#0", 1).is_empty(), "a repeated ack changes nothing");
        assert!(p.on_ack(1, "op#0", 2).is_empty());
        let write = p.on_ack(1, "op#1", 3);
        let handles: BTreeMap<String, u32> =
            [("op#0".to_string(), 2), ("op#1".to_string(), 3), ("src#0".to_string(), 1)].into();
        assert_eq!(write, vec![Command::WriteMetadata { id: 1, handles }]);
        assert_eq!(p.latest_completed(), None, "not complete before the metadata is written");
        assert_eq!(p.on_metadata_written(1, Ok::<_, String>(()), 50), vec![Command::NotifyComplete { id: 1 }]);
        assert_eq!(p.latest_completed(), Some(1));
        assert_eq!(p.in_flight(), None);
    }

    #[test]
    fn triggers_respect_interval_min_pause_and_one_in_flight() {
        let mut p = protocol();
        assert_eq!(p.tick(0), vec![Command::Trigger { id: 1, savepoint: false }]);
        assert!(p.tick(2000).is_empty(), "one in flight at a time");
        ack_all(&mut p, 1);
        p.on_metadata_written(1, Ok::<_, String>(()), 2100);
        assert!(p.tick(2200).is_empty(), "min_pause after the end");
        assert_eq!(p.tick(2400), vec![Command::Trigger { id: 2, savepoint: false }]);
        ack_all(&mut p, 2);
        p.on_metadata_written(2, Ok::<_, String>(()), 2500);
        assert!(p.tick(3000).is_empty(), "interval after the previous trigger");
        assert_eq!(p.tick(3400), vec![Command::Trigger { id: 3, savepoint: false }]);
    }

    #[test]
    fn declines_timeouts_and_storage_failures_abort_and_count() {
        let mut p = protocol();
        p.tick(0);
        let out = p.on_decline(1, "op#1", "barrier alignment failed", 10);
        assert!(matches!(&out[..], [Command::Abort { id: 1, .. }]), "{out:?}");
        assert!(p.on_ack(1, "op#0", 2).is_empty(), "acks of an aborted checkpoint are ignored");
        assert_eq!(p.tick(1000), vec![Command::Trigger { id: 2, savepoint: false }], "ids never repeat");
        // A second failure in a row exceeds tolerable_failures = 1.
        let out = p.tick(7000);
        assert!(matches!(&out[0], Command::Abort { id: 2, reason } if reason.contains("timed out")), "{out:?}");
        assert!(matches!(&out[1], Command::FailJob { reason } if reason.contains("2 checkpoints failed in a row")));
    }

    #[test]
    fn a_success_resets_the_failure_count() {
        let mut p = protocol();
        p.tick(0);
        p.on_decline(1, "op#0", "x", 0);
        p.tick(1000);
        ack_all(&mut p, 2);
        assert_eq!(p.on_metadata_written(2, Ok::<_, String>(()), 1100), vec![Command::NotifyComplete { id: 2 }]);
        p.tick(2000);
        ack_all(&mut p, 3);
        let out = p.on_metadata_written(3, Err::<(), _>("already exists"), 2100);
        assert!(matches!(&out[..], [Command::Abort { id: 3, reason }] if reason.contains("already exists")), "{out:?}");
        assert_eq!(p.latest_completed(), Some(2), "a checkpoint that was not stored never completes");
    }

    #[test]
    fn numbering_continues_after_a_restore() {
        let mut p: Protocol<u32> = Protocol::new(config(), ["a#0".to_string()], Some(41));
        assert_eq!(p.latest_completed(), Some(41));
        assert_eq!(p.tick(0), vec![Command::Trigger { id: 42, savepoint: false }]);
    }

    #[test]
    fn a_restored_job_checkpoints_one_interval_after_it_started() {
        let mut p: Protocol<u32> = Protocol::new(config(), ["a#0".to_string()], Some(41));
        p.first_after_interval(0);
        assert_eq!(p.tick(0), vec![], "its state is stored already");
        assert_eq!(p.tick(999), vec![]);
        assert_eq!(p.tick(1000), vec![Command::Trigger { id: 42, savepoint: false }]);
        // What a rescale, a swap or a hand-over asks for does not wait.
        let mut p: Protocol<u32> = Protocol::new(config(), ["a#0".to_string()], Some(41));
        p.first_after_interval(0);
        p.request_checkpoint();
        assert_eq!(p.tick(5), vec![Command::Trigger { id: 42, savepoint: false }]);
    }

    #[test]
    fn a_finished_task_acknowledges_the_checkpoint_in_flight_and_every_later_one() {
        let mut p = protocol();
        assert_eq!(p.tick(0), vec![Command::Trigger { id: 1, savepoint: false }]);
        assert!(p.on_ack(1, "op#0", 2).is_empty());
        assert!(p.on_ack(1, "op#1", 3).is_empty());
        // The source ends before its barrier: it acknowledges as finished (9).
        let out = p.task_finished("src#0", 9);
        let handles: BTreeMap<String, u32> =
            [("op#0".to_string(), 2), ("op#1".to_string(), 3), ("src#0".to_string(), 9)].into();
        assert_eq!(out, vec![Command::WriteMetadata { id: 1, handles }]);
        assert_eq!(p.on_metadata_written(1, Ok::<_, String>(()), 10), vec![Command::NotifyComplete { id: 1 }]);
        // Checkpoints go on: the others acknowledge, the finished one is in already.
        assert_eq!(p.tick(1000), vec![Command::Trigger { id: 2, savepoint: false }]);
        assert!(!p.awaits("src#0") && p.awaits("op#0"));
        assert!(p.on_ack(2, "op#0", 4).is_empty());
        let out = p.on_ack(2, "op#1", 5);
        assert!(matches!(&out[..], [Command::WriteMetadata { id: 2, handles }] if handles["src#0"] == 9), "{out:?}");
        assert_eq!(p.finished_in(1).collect::<Vec<_>>(), ["src#0"]);
    }

    #[test]
    fn a_task_that_acknowledged_before_it_finished_keeps_its_acknowledgement() {
        let mut p = protocol();
        p.tick(0);
        assert!(p.on_ack(1, "src#0", 1).is_empty());
        assert!(p.task_finished("src#0", 9).is_empty(), "its barrier went out: its position stands");
        assert_eq!(p.finished_in(1).count(), 0, "checkpoint 1 has it where its barrier was");
        assert_eq!(p.finished_in(2).collect::<Vec<_>>(), ["src#0"]);
        p.on_ack(1, "op#0", 2);
        let out = p.on_ack(1, "op#1", 3);
        assert!(matches!(&out[..], [Command::WriteMetadata { id: 1, handles }] if handles["src#0"] == 1), "{out:?}");
        // A savepoint when every task finished needs no acknowledgement.
        let mut p: Protocol<u32> = Protocol::new(config(), ["a#0".to_string()], None);
        p.task_finished("a#0", 7);
        p.request_savepoint();
        let out = p.tick(0);
        assert!(matches!(
            &out[..],
            [Command::Trigger { id: 1, savepoint: true }, Command::WriteMetadata { id: 1, .. }]
        ));
    }

    #[test]
    fn a_savepoint_goes_next_and_its_failure_does_not_count() {
        let mut p = protocol();
        assert_eq!(p.tick(0), vec![Command::Trigger { id: 1, savepoint: false }]);
        p.request_savepoint();
        assert_eq!(p.tick(10), vec![], "one checkpoint at a time");
        ack_all(&mut p, 1);
        assert_eq!(p.on_metadata_written(1, Ok::<_, String>(()), 20), vec![Command::NotifyComplete { id: 1 }]);
        assert_eq!(p.tick(21), vec![Command::Trigger { id: 2, savepoint: true }], "before interval and pause");
        // tolerable_failures = 1: two failed savepoints do not fail the job.
        let abort = p.on_decline(2, "op#0", "disk full", 30);
        assert!(matches!(abort.as_slice(), [Command::Abort { id: 2, .. }]), "{abort:?}");
        p.request_savepoint();
        assert_eq!(p.tick(31), vec![Command::Trigger { id: 3, savepoint: true }]);
        let abort = p.on_decline(3, "op#0", "disk full", 40);
        assert!(matches!(abort.as_slice(), [Command::Abort { id: 3, .. }]), "{abort:?}");
        assert_eq!(p.tick(1100), vec![Command::Trigger { id: 4, savepoint: false }]);
    }
}
