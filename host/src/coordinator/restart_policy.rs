//! Whether a failed attempt is followed by another, decided from the
//! restart strategy, what the failure says of a retry and the restarts
//! made so far. Pure: the run ([`super::run`]) logs, waits and restarts.

use super::error::JobError;
use crate::config::RestartStrategy;
use crate::fault::{Classify, RetryHint};
use std::time::Duration;

/// What follows a failed attempt.
#[derive(Debug)]
pub enum Verdict {
    /// Restart as attempt `attempt` after `delay`, from the latest
    /// checkpoint; at most `attempts` restarts in all.
    Restart {
        /// The attempt that follows (the first restart is attempt 1).
        attempt: u32,
        /// Restarts the strategy allows.
        attempts: u32,
        /// How long to wait first.
        delay: Duration,
        /// Why.
        failure: JobError,
    },
    /// The job fails with `error`.
    Fail {
        /// The failure, or the strategy's giving up around it.
        error: JobError,
        /// The failure itself says a restart cannot help (a bad job file,
        /// a module that does not load), as opposed to restarts being off
        /// or used up.
        hopeless: bool,
    },
}

/// What follows `failure` of attempt `attempt` (0 for the first) under
/// `strategy`.
pub fn decide(strategy: &RestartStrategy, failure: JobError, attempt: u32) -> Verdict {
    let RestartStrategy::FixedDelay { attempts, delay } = *strategy else {
        return Verdict::Fail { error: failure, hopeless: false };
    };
    if failure.retry() == RetryHint::NoRetry {
        return Verdict::Fail { error: failure, hopeless: true };
    }
    if attempt >= attempts {
        let error = JobError::RestartsExhausted { cause: Box::new(failure), restarts: attempt, attempts };
        return Verdict::Fail { error, hopeless: false };
    }
    Verdict::Restart { attempt: attempt + 1, attempts, delay, failure }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::TaskError;

    const DELAY: Duration = Duration::from_millis(250);

    fn fixed(attempts: u32) -> RestartStrategy {
        RestartStrategy::FixedDelay { attempts, delay: DELAY }
    }

    /// A failure a restart may cure (a task lost its input channel).
    fn transient() -> JobError {
        JobError::Task(TaskError::Disconnected("counter".into()))
    }

    #[test]
    fn a_transient_failure_restarts_until_the_attempts_are_used_up() {
        for attempt in 0..3 {
            match decide(&fixed(3), transient(), attempt) {
                Verdict::Restart { attempt: next, attempts: 3, delay: DELAY, .. } => assert_eq!(next, attempt + 1),
                other => panic!("attempt {attempt}: {other:?}"),
            }
        }
        match decide(&fixed(3), transient(), 3) {
            Verdict::Fail {
                error: JobError::RestartsExhausted { restarts: 3, attempts: 3, cause },
                hopeless: false,
            } => {
                assert!(matches!(*cause, JobError::Task(TaskError::Disconnected(_))));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_strategy_fails_at_once_with_the_failure_itself() {
        assert!(matches!(
            decide(&RestartStrategy::None, transient(), 0),
            Verdict::Fail { error: JobError::Task(_), hopeless: false }
        ));
    }

    #[test]
    fn a_failure_no_restart_can_cure_is_not_retried_whatever_the_attempts_left() {
        assert_eq!(JobError::Engine("x".into()).retry(), RetryHint::NoRetry);
        assert!(matches!(
            decide(&fixed(10), JobError::Engine("x".into()), 0),
            Verdict::Fail { error: JobError::Engine(_), hopeless: true }
        ));
    }
}
