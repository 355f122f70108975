//! The budgets of host memory a guest can fill through its imports rather
//! than its own linear memory: state held by a subtask on a backend that
//! keeps it in memory (`wasm.max_state_bytes`), state written per call
//! (`wasm.max_state_write_bytes`) and pending timers
//! (`wasm.max_timers`). Each check is a counter add or a comparison; the
//! state's size is the backend's own counter
//! ([`Accounting::memory_bytes`](crate::state::Accounting::memory_bytes)).
//! Past a budget the import returns [`BudgetExceeded`] as a trap: the call
//! fails, and with it the job, which does not restart (the same input would
//! pass the budget again). The log budgets live with the log
//! ([`crate::wasm::log_stream`]), where lines past them are dropped instead.

use crate::config::GuestBudgets;
use crate::config::units::human_bytes;
use crate::fault::{Classify, Domain, RetryHint};

/// A guest passed one of its budgets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetExceeded {
    /// The subtask's state outgrew `wasm.max_state_bytes`.
    #[error(
        "its state grew to {} ({held} bytes), past wasm.max_state_bytes ({}): raise wasm.max_state_bytes in the job file's [wasm] section, or use the RocksDB backend (state.backend = \"rocksdb\")",
        human_bytes(*held),
        human_bytes(*limit)
    )]
    State {
        /// Bytes the backend held after the write.
        held: u64,
        /// The budget.
        limit: u64,
    },
    /// One call wrote more than `wasm.max_state_write_bytes` to state.
    #[error(
        "wrote more than wasm.max_state_write_bytes ({}) to state in one call: raise wasm.max_state_write_bytes in the job file's [wasm] section",
        human_bytes(*limit)
    )]
    Writes {
        /// The budget.
        limit: u64,
    },
    /// The subtask has more timers pending than `wasm.max_timers`.
    #[error(
        "has {count} timers pending, past wasm.max_timers ({limit}): raise wasm.max_timers in the job file's [wasm] section"
    )]
    Timers {
        /// Timers pending after the registration.
        count: u64,
        /// The budget.
        limit: u64,
    },
}

impl Classify for BudgetExceeded {
    fn domain(&self) -> Domain {
        Domain::User
    }

    fn retry(&self) -> RetryHint {
        // A restart replays the same input over the same state.
        RetryHint::NoRetry
    }
}

/// A subtask's budgets, and what the current call has written so far.
#[derive(Debug, Clone)]
pub struct StateBudget {
    budgets: GuestBudgets,
    /// Bytes the current call wrote to state (values and user keys);
    /// at most `budgets.max_state_write_bytes`.
    written: u64,
}

impl StateBudget {
    /// The whole of `budgets`.
    pub fn new(budgets: GuestBudgets) -> Self {
        StateBudget { budgets, written: 0 }
    }

    /// A new call starts with its whole write budget.
    pub fn reset(&mut self) {
        self.written = 0;
    }

    /// Takes `bytes` about to be written to state, or says the call would
    /// pass its write budget (taking nothing, writing nothing).
    #[inline]
    pub fn write(&mut self, bytes: u64) -> Result<(), BudgetExceeded> {
        let written = self.written.saturating_add(bytes);
        if written > self.budgets.max_state_write_bytes {
            return Err(BudgetExceeded::Writes { limit: self.budgets.max_state_write_bytes });
        }
        self.written = written;
        Ok(())
    }

    /// After a write: whether the state the backend holds in memory
    /// (`None`: it holds it on disk) is within budget.
    #[inline]
    pub fn held(&self, held: Option<u64>) -> Result<(), BudgetExceeded> {
        match held {
            Some(held) if held > self.budgets.max_state_bytes => {
                Err(BudgetExceeded::State { held, limit: self.budgets.max_state_bytes })
            }
            _ => Ok(()),
        }
    }

    /// After a timer registration: whether `count` pending timers are
    /// within budget.
    #[inline]
    pub fn timers(&self, count: usize) -> Result<(), BudgetExceeded> {
        let count = count as u64;
        if count > self.budgets.max_timers {
            return Err(BudgetExceeded::Timers { count, limit: self.budgets.max_timers });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> StateBudget {
        StateBudget::new(GuestBudgets {
            max_state_bytes: 1000,
            max_state_write_bytes: 100,
            max_timers: 2,
            ..GuestBudgets::default()
        })
    }

    #[test]
    fn each_budget_holds_to_its_limit_and_names_its_setting() {
        let mut b = budget();
        b.write(60).unwrap();
        let e = b.write(41).unwrap_err();
        assert_eq!(e, BudgetExceeded::Writes { limit: 100 });
        assert!(e.to_string().contains("wasm.max_state_write_bytes (100 B)"), "{e}");
        b.write(40).unwrap();
        b.reset();
        b.write(100).unwrap();
        assert!(b.write(u64::MAX).is_err(), "no overflow");

        b.held(Some(1000)).unwrap();
        b.held(None).unwrap();
        let e = b.held(Some(1001)).unwrap_err();
        assert!(e.to_string().contains("past wasm.max_state_bytes (1000 B)"), "{e}");
        assert!(e.to_string().contains("state.backend = \"rocksdb\""), "{e}");

        b.timers(2).unwrap();
        let e = b.timers(3).unwrap_err();
        assert!(e.to_string().contains("3 timers pending, past wasm.max_timers (2)"), "{e}");
        assert_eq!((e.domain(), e.retry()), (Domain::User, RetryHint::NoRetry));
    }
}
