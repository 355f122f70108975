//! Processing time: the one wall clock the host reads for guests (timers,
//! `current-processing-time`), for state TTL and for checkpoint times.
//!
//! A leaf module: it depends on nothing in the crate. Code that must be
//! testable without waiting takes a [`Clock`] instead of calling [`now_ms`].

use std::sync::Arc;

/// A source of processing time in milliseconds since the epoch; tests
/// inject a fake one.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock in milliseconds since the epoch (0 if the system clock is
/// set before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The wall clock in microseconds since the epoch (0 before 1970): for
/// latency measurements, which milliseconds are too coarse for.
pub fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// The wall clock as a [`Clock`].
pub fn system() -> Clock {
    Arc::new(now_ms)
}

/// Processing time held at one reading, for a subtask whose input is
/// recorded (or replayed): every call of one step, and state TTL, read the
/// time the step was recorded with, so a replay sees the same times.
/// Unset, it reads the wall clock.
#[derive(Debug, Clone)]
pub struct Pinned(Arc<std::sync::atomic::AtomicI64>);

impl Default for Pinned {
    fn default() -> Self {
        Pinned(Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)))
    }
}

impl Pinned {
    /// Holds the time at `ms`.
    pub fn set(&self, ms: i64) {
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The time held, if any.
    pub fn get(&self) -> Option<i64> {
        let ms = self.0.load(std::sync::atomic::Ordering::Relaxed);
        (ms != i64::MIN).then_some(ms)
    }

    /// The held time as a [`Clock`], the wall clock while none is held.
    pub fn clock(&self) -> Clock {
        let pinned = self.clone();
        Arc::new(move || pinned.get().unwrap_or_else(now_ms))
    }
}
