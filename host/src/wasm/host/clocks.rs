//! The clocks a guest sees, and sleeping under the call's deadline.
//!
//! A guest's time is processing time as the host took it when the current
//! call began: `current-processing-time`, WASI's wall clock and WASI's
//! monotonic clock all read that instant, so a call sees one time and a
//! replay of the same calls sees the same times.
//!
//! WASI's `subscribe-duration` and `subscribe-instant` are replaced (the
//! linker shadows wasmtime-wasi's) by sleeps that end no later than the
//! call's deadline: a guest that sleeps past `wasm.call_timeout` wakes at
//! the deadline, and its call fails as having run past it whatever the
//! guest does next (a later sleep is over at once, and the epoch deadline
//! traps its next loop or call). Without this, a sleep blocks inside host
//! code where the epoch deadline cannot fire.

use super::OperatorHost;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wasmtime::component::{HasSelf, Linker, Resource};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// The time a call began, shared by an instance and its WASI clocks.
#[derive(Debug, Default)]
pub struct CallTime {
    /// Wall clock, nanoseconds since the epoch.
    wall_ns: AtomicU64,
    /// Monotonic clock, nanoseconds since the instance was created.
    mono_ns: AtomicU64,
    /// The recorded (or replayed) subtask's held time: calls read it
    /// rather than the clocks.
    pinned: std::sync::OnceLock<crate::clock::Pinned>,
}

impl CallTime {
    /// Takes the time now, as the call about to start will see it. A held
    /// time is both clocks' reading: the monotonic clock then counts from
    /// the epoch, the same in a recording and its replay.
    pub fn start_call(&self, created: Instant) {
        if let Some(ms) = self.pinned.get().and_then(|p| p.get()) {
            // A recorded time comes from a file: no overflow whatever it says.
            let ns = (ms.max(0) as u64).saturating_mul(1_000_000);
            self.wall_ns.store(ns, Ordering::Relaxed);
            self.mono_ns.store(ns, Ordering::Relaxed);
            return;
        }
        let wall = crate::clock::now_ms().max(0) as u64 * 1_000_000;
        self.wall_ns.store(wall, Ordering::Relaxed);
        self.mono_ns.store(created.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// From now on calls read `pinned` while it holds a time.
    pub fn pin(&self, pinned: crate::clock::Pinned) {
        let _ = self.pinned.set(pinned);
    }

    /// The call's processing time, in milliseconds since the epoch.
    pub fn wall_ms(&self) -> i64 {
        (self.wall_ns.load(Ordering::Relaxed) / 1_000_000) as i64
    }

    fn mono_ns(&self) -> u64 {
        self.mono_ns.load(Ordering::Relaxed)
    }
}

/// WASI's wall clock: the call's processing time.
pub struct CallWallClock(pub Arc<CallTime>);

impl HostWallClock for CallWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.wall_ns.load(Ordering::Relaxed))
    }
}

/// WASI's monotonic clock: the call's start, since the instance began.
pub struct CallMonotonicClock(pub Arc<CallTime>);

impl HostMonotonicClock for CallMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.mono_ns()
    }
}

/// Replaces wasmtime-wasi's `wasi:clocks/monotonic-clock` in `linker` with
/// [`OperatorHost`]'s, whose sleeps end by the call's deadline.
pub fn add_to_linker(linker: &mut Linker<OperatorHost>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = monotonic_clock::add_to_linker::<_, HasSelf<_>>(linker, |h| h);
    linker.allow_shadowing(false);
    added
}

/// The guest's randomness when seeded (`wasm.random_seed`, or a recorded
/// subtask): a stream from the seed that starts over, from the seed and a
/// segment number, whenever [`Reseed`] moves on, so a replay that begins at
/// a recorded segment draws what the recording drew.
pub struct SegmentRng {
    seed: u64,
    at: u64,
    reseed: Arc<AtomicU64>,
    rng: rand::rngs::StdRng,
}

/// Starts the [`SegmentRng`]s sharing it over at segment `n` (0: the stream
/// from the seed alone).
#[derive(Debug, Clone, Default)]
pub struct Reseed(pub Arc<AtomicU64>);

impl SegmentRng {
    /// A stream from `seed`, restarted as `reseed` says.
    pub fn new(seed: u64, reseed: &Reseed) -> Self {
        use rand::SeedableRng;
        SegmentRng { seed, at: 0, reseed: reseed.0.clone(), rng: rand::rngs::StdRng::seed_from_u64(seed) }
    }

    fn rng(&mut self) -> &mut rand::rngs::StdRng {
        use rand::SeedableRng;
        let at = self.reseed.load(Ordering::Relaxed);
        if at != self.at {
            self.at = at;
            let mixed = self.seed ^ crate::state::key_group::key_hash(&at.to_le_bytes());
            self.rng = rand::rngs::StdRng::seed_from_u64(mixed);
        }
        &mut self.rng
    }
}

impl rand::TryRng for SegmentRng {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        self.rng().try_next_u32()
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.rng().try_next_u64()
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.rng().try_fill_bytes(dst)
    }
}

/// A sleep that ends at its instant.
struct Sleep(tokio::time::Instant);

#[async_trait::async_trait]
impl Pollable for Sleep {
    async fn ready(&mut self) {
        tokio::time::sleep_until(self.0).await;
    }
}

impl OperatorHost {
    /// A pollable ready after `duration`, or at the call's deadline if that
    /// comes first, in which case the call is marked as overslept.
    fn sleep(&mut self, duration: Duration) -> wasmtime::Result<Resource<DynPollable>> {
        let now = Instant::now();
        let mut until = now.checked_add(duration).unwrap_or(now + Duration::from_secs(366 * 24 * 3600));
        if let Some(deadline) = self.deadline
            && until > deadline
        {
            until = deadline;
            self.overslept = true;
        }
        let sleep = self.table.push(Sleep(tokio::time::Instant::from_std(until)))?;
        subscribe(&mut self.table, sleep)
    }
}

impl monotonic_clock::Host for OperatorHost {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(self.time.mono_ns())
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(1)
    }

    fn subscribe_instant(&mut self, when: monotonic_clock::Instant) -> wasmtime::Result<Resource<DynPollable>> {
        self.sleep(Duration::from_nanos(when.saturating_sub(self.time.mono_ns())))
    }

    fn subscribe_duration(&mut self, duration: monotonic_clock::Duration) -> wasmtime::Result<Resource<DynPollable>> {
        self.sleep(Duration::from_nanos(duration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn draw(rng: &mut SegmentRng) -> Vec<u64> {
        (0..8).map(|_| rng.next_u64()).collect()
    }

    #[test]
    fn a_segment_draws_the_same_numbers_whatever_came_before_it() {
        let (live, replay) = (Reseed::default(), Reseed::default());
        let (mut a, mut b) = (SegmentRng::new(42, &live), SegmentRng::new(42, &replay));
        // Before any segment: the stream from the seed alone, as a seeded
        // run without recording has always drawn.
        let mut plain = rand::rngs::StdRng::seed_from_u64(42);
        assert_eq!(draw(&mut a), (0..8).map(|_| plain.next_u64()).collect::<Vec<_>>());
        // The live run drew much before segment 7; the replay nothing.
        for _ in 0..1000 {
            a.next_u32();
        }
        live.0.store(7, Ordering::Relaxed);
        replay.0.store(7, Ordering::Relaxed);
        let seven = draw(&mut a);
        assert_eq!(seven, draw(&mut b));
        // Another segment, or another seed, draws otherwise.
        replay.0.store(8, Ordering::Relaxed);
        assert_ne!(draw(&mut b), seven);
        let other = Reseed::default();
        other.0.store(7, Ordering::Relaxed);
        assert_ne!(draw(&mut SegmentRng::new(43, &other)), seven);
    }
}
