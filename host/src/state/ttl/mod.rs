//! State time-to-live, as a layer over any [`StateBackend`].
//!
//! A state registered with a TTL stores each value (each list element, each
//! map value) behind an 8-byte prefix: the processing time, in milliseconds,
//! at which it expires (little-endian `i64`). Reads check it: an expired
//! value is never returned (unless the state allows it until clean-up) and
//! is removed on the spot; `OnReadAndWrite` states push the expiry forward on
//! every read. Values nobody touches again are removed incrementally: every
//! access to a TTL state also checks the next few keys of a scan cursor, so
//! clean-up costs a little per access and never stops the world.
//!
//! The layer is backend-agnostic, like Flink's TTL wrappers: the inner
//! backend stores the prefixed bytes as opaque values. It implements the
//! keyed shapes (`keyed.rs`: reads that check and renew the expiry, writes
//! that stamp it, the incremental clean-up), registration (the TTL is the
//! layer's, the inner backend never sees it) and the descriptors of
//! snapshots and hand-offs; every other capability passes through to the
//! inner backend unchanged ([`PassThrough`]).

mod keyed;
#[cfg(test)]
mod tests;

pub use crate::clock::Clock;
use crate::state::key_group::KeyGroupRange;
use crate::state::{
    FrozenState, HandOff, NativeCheckpoint, PassThrough, Registry, Restore, SnapshotEntry, Snapshots, StateBackend,
    StateDescriptor, StateError, StateId, TtlConfig,
};

const PREFIX: usize = 8;

fn wrap(expires_at: i64, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(PREFIX + value.len());
    v.extend_from_slice(&expires_at.to_le_bytes());
    v.extend_from_slice(value);
    v
}

/// Splits a stored value into (expiry, user bytes). A value shorter than the
/// prefix cannot have been written by this layer: it is treated as expired.
fn unwrap(stored: &[u8]) -> (i64, &[u8]) {
    match stored.split_first_chunk::<PREFIX>() {
        Some((head, rest)) => (i64::from_le_bytes(*head), rest),
        None => (i64::MIN, &[]),
    }
}

/// The expiry of a value stored by this layer (what a backend cleaning up
/// on its own compares with the clock); `i64::MIN` for bytes too short to
/// carry one.
pub fn expires_at(stored: &[u8]) -> i64 {
    unwrap(stored).0
}

/// A state backend with TTL for the states that ask for it.
pub struct TtlBackend<B> {
    inner: B,
    clock: Clock,
    max_parallelism: u32,
    /// Full descriptors (with TTL), by id; the inner backend gets them
    /// without TTL.
    descriptors: Vec<StateDescriptor>,
    /// Where incremental clean-up continues, per state.
    cursors: Vec<u64>,
    /// Per state: whether the inner backend drops expired values itself,
    /// so accesses need not scan for them.
    in_background: Vec<bool>,
}

impl<B: StateBackend> TtlBackend<B> {
    /// Wraps `inner`; `clock` gives processing time, `max_parallelism` the
    /// job's key groups (for keys found by clean-up scans).
    pub fn new(inner: B, clock: Clock, max_parallelism: u32) -> Self {
        TtlBackend {
            inner,
            clock,
            max_parallelism,
            descriptors: Vec::new(),
            cursors: Vec::new(),
            in_background: Vec::new(),
        }
    }

    /// The wrapped backend.
    #[cfg(test)]
    pub fn inner(&mut self) -> &mut B {
        &mut self.inner
    }

    fn ttl(&self, s: StateId) -> Option<TtlConfig> {
        self.descriptors.get(s as usize).and_then(|d| d.ttl)
    }

    fn expiry(&self, t: &TtlConfig) -> i64 {
        (self.clock)().saturating_add(t.ttl_ms.min(i64::MAX as u64) as i64)
    }
}

impl<B: StateBackend> Registry for TtlBackend<B> {
    fn register(&mut self, d: StateDescriptor) -> Result<StateId, StateError> {
        if let Some(i) = self.descriptors.iter().position(|e| e.name == d.name)
            && self.descriptors[i].kind == d.kind
            && self.descriptors[i].ttl != d.ttl
        {
            return Err(StateError::KindMismatch {
                name: d.name,
                existing: "a state with another TTL",
                requested: "the same state with this TTL",
            });
        }
        let id = self.inner.register(StateDescriptor { ttl: None, ..d.clone() })?;
        if let Some(existing) = self.descriptors.get_mut(id as usize) {
            existing.version = d.version;
        }
        if id as usize == self.descriptors.len() {
            let background = d.ttl.is_some() && self.inner.expire_in_background(id, &self.clock);
            self.descriptors.push(d);
            self.cursors.push(0);
            self.in_background.push(background);
        }
        Ok(id)
    }

    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }
}

impl<B: StateBackend> Snapshots for TtlBackend<B> {
    fn freeze(&mut self) -> Box<dyn FrozenState> {
        // Stored bytes keep their expiry prefix: a restore puts them back as
        // they were, and they expire when they would have. The descriptors
        // are this layer's, with their TTL.
        Box::new(WithDescriptors { inner: self.inner.freeze(), descriptors: self.descriptors.clone() })
    }

    fn give_up_into(&mut self, hand_off: &mut HandOff) {
        self.inner.give_up_into(hand_off);
    }
}

impl<B: StateBackend> Restore for TtlBackend<B> {
    fn reserve_keys(&mut self, key_group: u16, s: StateId, keys: usize) {
        self.inner.reserve_keys(key_group, s, keys)
    }

    fn restore_entry(&mut self, kg: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError> {
        self.inner.restore_entry(kg, entry)
    }

    fn adopt_key_groups(&mut self, hand_offs: &[&HandOff]) -> Option<Result<u64, StateError>> {
        // Handed values keep their expiry prefix, as restored entries do;
        // they only must belong to states with the same TTL here.
        for d in hand_offs.iter().flat_map(|h| h.descriptors()) {
            if let Some(own) = self.descriptors.iter().find(|own| own.name == d.name)
                && own.ttl != d.ttl
            {
                return Some(Err(StateError::KindMismatch {
                    name: d.name.clone(),
                    existing: "a state with another TTL",
                    requested: "the same state with this TTL",
                }));
            }
        }
        self.inner.adopt_key_groups(hand_offs)
    }
}

/// What TTL does not change passes through to the inner backend: operator
/// and broadcast state and timers (no expiry), key scans and sizes (of the
/// stored, prefixed bytes). The capabilities that can pass through are the
/// ones `pass_through` implements for any `PassThrough`; the keyed shapes,
/// registration, snapshots and restores are this layer's own, above.
impl<B: StateBackend, C: ?Sized> PassThrough<C> for TtlBackend<B> {
    type Part = B;

    fn part(&self) -> &B {
        &self.inner
    }

    fn part_mut(&mut self) -> &mut B {
        &mut self.inner
    }
}

/// A frozen inner backend under this layer's descriptors.
struct WithDescriptors {
    inner: Box<dyn FrozenState>,
    descriptors: Vec<StateDescriptor>,
}

impl FrozenState for WithDescriptors {
    fn descriptors(&self) -> &[StateDescriptor] {
        &self.descriptors
    }

    fn range(&self) -> KeyGroupRange {
        self.inner.range()
    }

    fn key_group(&mut self, kg: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        self.inner.key_group(kg, visit)
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        self.inner.operator_state(visit)
    }

    fn native_checkpoint(&mut self) -> Option<Result<NativeCheckpoint, StateError>> {
        self.inner.native_checkpoint()
    }

    fn hand_off(&mut self) -> Option<HandOff> {
        // Under this layer's descriptors, which carry the TTL.
        self.inner.hand_off().map(|h| h.with_descriptors(self.descriptors.clone()))
    }
}
