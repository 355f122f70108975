//! A job's life as one enum with its allowed transitions: every change of
//! state goes through [`JobState::to`], which refuses moves that make no
//! sense (a finished job that starts savepointing, a cancelled one that
//! restarts), so the coordinator's loose ends cannot pile up in flags.

use std::fmt;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Tasks are being built and started.
    Starting,
    /// Processing; checkpoints are taken on schedule.
    Running,
    /// Processing, with a savepoint (or a module swap) under way.
    Savepointing,
    /// A stop with savepoint is under way: the sources wait at its barrier.
    Stopping,
    /// The input is exhausted: the last records drain, the final checkpoint
    /// is written, the sinks publish.
    Finishing,
    /// A task or the checkpoints failed: every task is told to stop.
    Failing,
    /// Waiting to run again from the latest checkpoint.
    Restarting,
    /// Cancelled on request: every task is told to stop.
    Cancelling,
    /// Done: the input was processed, or the job stopped with a savepoint.
    Finished,
    /// Failed for good.
    Failed,
    /// Cancelled for good.
    Cancelled,
}

/// A transition the job's life does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a job cannot go from {from} to {to}")]
pub struct IllegalTransition {
    /// The state it was in.
    pub from: JobState,
    /// The state asked for.
    pub to: JobState,
}

impl JobState {
    /// Whether the job is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Finished | JobState::Failed | JobState::Cancelled)
    }

    /// Whether the job is being torn down (tasks are told to stop).
    pub fn is_stopping_tasks(self) -> bool {
        matches!(self, JobState::Failing | JobState::Cancelling)
    }

    /// Whether `self` may become `to`.
    pub fn allows(self, to: JobState) -> bool {
        use JobState::*;
        match (self, to) {
            (Starting, Running | Failing | Cancelling) => true,
            (Running, Savepointing | Stopping | Finishing | Failing | Cancelling) => true,
            // A savepoint ends (back to running), or the input ends under it.
            (Savepointing, Running | Finishing | Failing | Cancelling) => true,
            // A stop's savepoint fails (running again), completes (the
            // sources end and the job is done), or the input ends first.
            (Stopping, Running | Finishing | Finished | Failing | Cancelling) => true,
            (Finishing, Finished | Failing | Cancelling) => true,
            // A cancel wins over a restart still to come.
            (Failing, Restarting | Failed | Cancelling) => true,
            (Restarting, Starting | Cancelled | Failed) => true,
            (Cancelling, Cancelled) => true,
            _ => false,
        }
    }

    /// Moves to `to`, or says why it cannot.
    pub fn to(&mut self, to: JobState) -> Result<(), IllegalTransition> {
        if !self.allows(to) {
            return Err(IllegalTransition { from: *self, to });
        }
        tracing::debug!(from = %self, to = %to, "job state");
        *self = to;
        Ok(())
    }

    /// The state's name, as `host status` shows it.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Starting => "starting",
            JobState::Running => "running",
            JobState::Savepointing => "savepointing",
            JobState::Stopping => "stopping",
            JobState::Finishing => "finishing",
            JobState::Failing => "failing",
            JobState::Restarting => "restarting",
            JobState::Cancelling => "cancelling",
            JobState::Finished => "finished",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::JobState::*;
    use super::*;

    const ALL: [JobState; 11] = [
        Starting,
        Running,
        Savepointing,
        Stopping,
        Finishing,
        Failing,
        Restarting,
        Cancelling,
        Finished,
        Failed,
        Cancelled,
    ];

    #[test]
    fn the_usual_lives_are_allowed() {
        let lives: [&[JobState]; 6] = [
            &[Starting, Running, Finishing, Finished],
            &[Starting, Running, Savepointing, Running, Finishing, Finished],
            &[Starting, Running, Stopping, Finished],
            &[Starting, Running, Stopping, Running, Savepointing, Finishing, Finished],
            &[Starting, Running, Failing, Restarting, Starting, Running, Finishing, Finished],
            &[Starting, Running, Failing, Restarting, Starting, Failing, Failed],
        ];
        for life in lives {
            let mut s = life[0];
            for &next in &life[1..] {
                s.to(next).unwrap_or_else(|e| panic!("{life:?}: {e}"));
            }
            assert!(s.is_terminal());
        }
        let mut s = Running;
        for next in [Cancelling, Cancelled] {
            s.to(next).unwrap();
        }
        let mut s = Failing;
        for next in [Cancelling, Cancelled] {
            s.to(next).unwrap();
        }
    }

    #[test]
    fn illegal_moves_are_refused_and_change_nothing() {
        let illegal = [
            (Finished, Running),
            (Finished, Savepointing),
            (Cancelled, Restarting),
            (Failed, Starting),
            (Finishing, Savepointing),
            (Finishing, Stopping),
            (Savepointing, Stopping),
            (Savepointing, Savepointing),
            (Cancelling, Restarting),
            (Cancelling, Running),
            (Restarting, Running),
            (Starting, Finished),
            (Running, Finished),
        ];
        for (from, to) in illegal {
            let mut s = from;
            assert_eq!(s.to(to), Err(IllegalTransition { from, to }));
            assert_eq!(s, from, "{from} -> {to} changed the state");
        }
    }

    #[test]
    fn terminal_states_go_nowhere() {
        for from in [Finished, Failed, Cancelled] {
            for to in ALL {
                assert!(!from.allows(to), "{from} -> {to}");
            }
        }
    }
}
