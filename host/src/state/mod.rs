//! State: the backend trait every state backend implements, the descriptors
//! states are registered with, and key groups.
//!
//! Architecture invariant: this module never imports wasmtime. The WASM layer
//! translates guest calls into these calls; backends know nothing of guests.

pub mod handoff;
pub mod hashmap;
pub mod key_group;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod snapshot;
pub mod ttl;

#[cfg(test)]
mod conformance;

pub use handoff::HandOff;
pub use hashmap::KeyGroupHandOff;

use crate::fault::{Classify, Domain, RetryHint};
use thiserror::Error;

/// Index of a registered state within one backend, in registration order.
pub type StateId = u32;

/// What kind of state a name was registered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateKind {
    /// Keyed value.
    Value,
    /// Keyed list.
    List,
    /// Keyed map.
    Map,
    /// Keyed reducing accumulator.
    Reducing,
    /// Keyed aggregating accumulator.
    Aggregating,
    /// Per-subtask list.
    OperatorList,
    /// Replicated map.
    BroadcastMap,
}

impl StateKind {
    /// The name used in messages and formats.
    pub fn name(self) -> &'static str {
        match self {
            StateKind::Value => "value",
            StateKind::List => "list",
            StateKind::Map => "map",
            StateKind::Reducing => "reducing",
            StateKind::Aggregating => "aggregating",
            StateKind::OperatorList => "operator-list",
            StateKind::BroadcastMap => "broadcast-map",
        }
    }

    /// Whether the state is scoped to keys.
    pub fn is_keyed(self) -> bool {
        !matches!(self, StateKind::OperatorList | StateKind::BroadcastMap)
    }

    /// The storage shape: value-like kinds share one.
    pub fn shape(self) -> Shape {
        match self {
            StateKind::Value | StateKind::Reducing | StateKind::Aggregating => Shape::Value,
            StateKind::List => Shape::List,
            StateKind::Map => Shape::Map,
            StateKind::OperatorList => Shape::OperatorList,
            StateKind::BroadcastMap => Shape::BroadcastMap,
        }
    }
}

impl StateKind {
    /// Convenience for tests and callers building descriptors.
    pub fn descriptor(self, name: &str) -> StateDescriptor {
        StateDescriptor {
            name: name.to_string(),
            kind: self,
            version: 1,
            encoding: "raw".to_string(),
            ttl: None,
            redistribution: (self == StateKind::OperatorList).then_some(Redistribution::EvenSplit),
        }
    }
}

/// How a kind is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One byte string per key.
    Value,
    /// A list of byte strings per key.
    List,
    /// An ordered map of byte strings per key.
    Map,
    /// A list per subtask.
    OperatorList,
    /// A map per subtask (identical on all).
    BroadcastMap,
}

/// The clock a timer fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeDomain {
    /// The operator's watermark.
    EventTime,
    /// The host's wall clock.
    ProcessingTime,
}

/// How operator list state is split on rescale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redistribution {
    /// Concatenate and deal out contiguous parts.
    EvenSplit,
    /// Every subtask gets everything.
    Union,
}

/// Time-to-live settings of a keyed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlConfig {
    /// Lifetime after the last renewal, in milliseconds.
    pub ttl_ms: u64,
    /// Whether reads renew.
    pub renew_on_read: bool,
    /// Whether an expired, not yet cleaned entry may be returned.
    pub return_expired: bool,
}

/// A state as registered: recorded with its data so restores and swaps can
/// check compatibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDescriptor {
    /// Name, unique per operator.
    pub name: String,
    /// Kind.
    pub kind: StateKind,
    /// Value-format version declared by the guest.
    pub version: u32,
    /// Value encoding name declared by the guest (e.g. "postcard").
    pub encoding: String,
    /// Time-to-live, for keyed kinds.
    pub ttl: Option<TtlConfig>,
    /// Rescale mode, for operator list state.
    pub redistribution: Option<Redistribution>,
}

/// The key a keyed call acts on, with its hash and key group computed once
/// per element by the caller.
#[derive(Debug, Clone, Copy)]
pub struct KeyRef<'a> {
    /// The key bytes.
    pub key: &'a [u8],
    /// `key_group::key_hash(key)`.
    pub hash: u64,
    /// The key's group; must be in the backend's range.
    pub key_group: u16,
}

/// A state backend failure. Registration errors are the guest's fault (bad
/// name, kind mismatch); storage errors are the host's or the disk's.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// The name was registered before as another kind or with other settings.
    #[error("state '{name}' is already registered as {existing}, not {requested}")]
    KindMismatch {
        /// State name.
        name: String,
        /// Kind it has.
        existing: &'static str,
        /// Kind asked for.
        requested: &'static str,
    },
    /// The name is not acceptable.
    #[error("state name {0:?} is invalid: use 1-128 letters, digits, '-', '_' or '.'")]
    InvalidName(String),
    /// An option is not supported by this backend.
    #[error("state '{name}': {what} is not supported by this version of Weir yet")]
    Unsupported {
        /// State name.
        name: String,
        /// The option.
        what: &'static str,
    },
    /// The backend's storage failed (RocksDB, the local disk).
    #[error("state storage failed: {0}")]
    Storage(String),
    /// A live rescale's in-memory hand-off does not fit the backend that
    /// adopts it (a state it names is missing or of another kind): an
    /// internal bug, never the guest's doing.
    #[error("the state handed over at a rescale does not fit: {0}")]
    HandOff(String),
    /// A key outside this subtask's key groups reached the backend: an
    /// internal routing bug, never the guest's doing.
    #[error("key group {key_group} is outside this subtask's range {start}..{end}")]
    KeyGroupOutOfRange {
        /// Offending group.
        key_group: u16,
        /// Range start.
        start: u16,
        /// Range end.
        end: u16,
    },
}

impl Classify for StateError {
    fn domain(&self) -> Domain {
        match self {
            StateError::KindMismatch { .. } | StateError::InvalidName(_) | StateError::Unsupported { .. } => {
                Domain::User
            }
            StateError::Storage(_) => Domain::External,
            StateError::KeyGroupOutOfRange { .. } | StateError::HandOff(_) => Domain::Internal,
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            StateError::Storage(_) | StateError::KeyGroupOutOfRange { .. } | StateError::HandOff(_) => {
                RetryHint::Restart
            }
            _ => RetryHint::NoRetry,
        }
    }
}

/// One piece of state as snapshots carry it, independent of any backend.
/// Keyed entries belong to the key group the snapshot call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotEntry<'a> {
    /// A value-shaped state's value for `key`.
    Value {
        /// The state.
        state: StateId,
        /// The key.
        key: &'a [u8],
        /// The stored bytes.
        value: &'a [u8],
    },
    /// One element of a list, in list order.
    ListItem {
        /// The state.
        state: StateId,
        /// The key.
        key: &'a [u8],
        /// The element.
        value: &'a [u8],
    },
    /// One entry of a map.
    MapItem {
        /// The state.
        state: StateId,
        /// The key.
        key: &'a [u8],
        /// The user key.
        user_key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// A pending timer.
    Timer {
        /// Its clock.
        domain: TimeDomain,
        /// When it fires.
        time: i64,
        /// Its key.
        key: &'a [u8],
    },
    /// One element of an operator list state, in order.
    OperatorItem {
        /// The state.
        state: StateId,
        /// The element.
        value: &'a [u8],
    },
    /// One entry of a broadcast map.
    BroadcastItem {
        /// The state.
        state: StateId,
        /// The user key.
        user_key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
}

/// One entry of a map page: user key and value.
pub type MapEntry = (Vec<u8>, Vec<u8>);

/// A state backend for one operator subtask: registration plus the
/// operations of every state shape. Implemented by the hashmap backend (and
/// later RocksDB); every implementation must pass `state::conformance`.
///
/// Calls take a [`StateId`] from [`StateBackend::register`]; a `StateId` of
/// another shape is an internal error the backend may panic on.
pub trait StateBackend: Send {
    /// Registers a state, or returns the id of the same state registered
    /// before. Fails if the name exists with another kind or settings.
    fn register(&mut self, descriptor: StateDescriptor) -> Result<StateId, StateError>;

    /// Every registered state, indexed by id.
    fn descriptors(&self) -> &[StateDescriptor];

    /// Value shape: the current value.
    fn value_get(&mut self, state: StateId, key: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError>;
    /// Value shape: appends the current value to `out` and returns whether
    /// there was one (the batch read path: no allocation per value).
    fn value_get_into(&mut self, state: StateId, key: KeyRef<'_>, out: &mut Vec<u8>) -> Result<bool, StateError> {
        Ok(match self.value_get(state, key)? {
            Some(v) => {
                out.extend_from_slice(&v);
                true
            }
            None => false,
        })
    }
    /// Value shape: appends the values of `keys` to `out`, one `(start, len,
    /// present)` per key in `spans` (the batch read path; one call lets the
    /// backend overlap the lookups' cache misses).
    fn value_get_many(
        &mut self,
        state: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        for &k in keys {
            let start = out.len();
            let present = self.value_get_into(state, k, out)?;
            spans.push((start as u32, (out.len() - start) as u32, present));
        }
        Ok(())
    }
    /// Value shape: sets (`Some`) or clears (`None`) the values of `keys`, in
    /// order (the batch write path).
    fn value_set_many(
        &mut self,
        state: StateId,
        keys: &[KeyRef<'_>],
        values: &[Option<&[u8]>],
    ) -> Result<(), StateError> {
        for (&k, v) in keys.iter().zip(values) {
            match v {
                Some(v) => self.value_set(state, k, v)?,
                None => self.value_clear(state, k)?,
            }
        }
        Ok(())
    }
    /// Value shape: replace.
    fn value_set(&mut self, state: StateId, key: KeyRef<'_>, value: &[u8]) -> Result<(), StateError>;
    /// Value shape: remove.
    fn value_clear(&mut self, state: StateId, key: KeyRef<'_>) -> Result<(), StateError>;

    /// List shape: append values.
    fn list_add(&mut self, state: StateId, key: KeyRef<'_>, values: &[&[u8]]) -> Result<(), StateError>;
    /// List shape: replace the list (empty removes it).
    fn list_update(&mut self, state: StateId, key: KeyRef<'_>, values: Vec<Vec<u8>>) -> Result<(), StateError>;
    /// List shape: up to `max` values from index `start`.
    fn list_read(&mut self, state: StateId, key: KeyRef<'_>, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError>;
    /// List shape: length.
    fn list_len(&mut self, state: StateId, key: KeyRef<'_>) -> Result<u32, StateError>;
    /// List shape: remove.
    fn list_clear(&mut self, state: StateId, key: KeyRef<'_>) -> Result<(), StateError>;

    /// Map shape: value under a user key.
    fn map_get(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8]) -> Result<Option<Vec<u8>>, StateError>;
    /// Map shape: set a user key.
    fn map_put(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8], value: &[u8]) -> Result<(), StateError>;
    /// Map shape: remove a user key.
    fn map_remove(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8]) -> Result<(), StateError>;
    /// Map shape: whether a user key is present.
    fn map_contains(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8]) -> Result<bool, StateError>;
    /// Map shape: whether the key's map is empty.
    fn map_is_empty(&mut self, state: StateId, key: KeyRef<'_>) -> Result<bool, StateError>;
    /// Map shape: up to `max` entries with user key after `after`, in
    /// user-key byte order.
    fn map_entries(
        &mut self,
        state: StateId,
        key: KeyRef<'_>,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError>;
    /// Map shape: remove every entry of the key.
    fn map_clear(&mut self, state: StateId, key: KeyRef<'_>) -> Result<(), StateError>;

    /// Operator list: append.
    fn operator_list_add(&mut self, state: StateId, values: &[&[u8]]) -> Result<(), StateError>;
    /// Operator list: replace.
    fn operator_list_update(&mut self, state: StateId, values: Vec<Vec<u8>>) -> Result<(), StateError>;
    /// Operator list: page from `start`.
    fn operator_list_read(&mut self, state: StateId, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError>;
    /// Operator list: length.
    fn operator_list_len(&mut self, state: StateId) -> Result<u32, StateError>;

    /// Broadcast map: value under a user key.
    fn broadcast_get(&mut self, state: StateId, user_key: &[u8]) -> Result<Option<Vec<u8>>, StateError>;
    /// Broadcast map: set a user key.
    fn broadcast_put(&mut self, state: StateId, user_key: &[u8], value: &[u8]) -> Result<(), StateError>;
    /// Broadcast map: remove a user key.
    fn broadcast_remove(&mut self, state: StateId, user_key: &[u8]) -> Result<(), StateError>;
    /// Broadcast map: up to `max` entries after `after`, in user-key order.
    fn broadcast_entries(
        &mut self,
        state: StateId,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError>;
    /// Broadcast map: number of entries.
    fn broadcast_len(&mut self, state: StateId) -> Result<usize, StateError>;
    /// Broadcast map: remove everything.
    fn broadcast_clear(&mut self, state: StateId) -> Result<(), StateError>;

    /// Timers: registers a timer for `key` at `time` (registering the same
    /// (domain, key, time) twice leaves one).
    fn timer_register(&mut self, domain: TimeDomain, key: KeyRef<'_>, time: i64) -> Result<(), StateError>;
    /// Timers: deletes `key`'s timer at `time`, if any.
    fn timer_delete(&mut self, domain: TimeDomain, key: KeyRef<'_>, time: i64) -> Result<(), StateError>;
    /// Timers: removes and returns the earliest timer at or before `up_to`
    /// (ties in key group, then key byte order).
    fn timer_pop_due(&mut self, domain: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)>;
    /// Timers: the earliest pending time.
    fn timer_next(&self, domain: TimeDomain) -> Option<i64>;
    /// Timers: how many are pending.
    fn timer_count(&self, domain: TimeDomain) -> usize;

    /// A hint that `keys` are about to be accessed, in order. Backends may
    /// warm caches; the hashmap backend resolves every key's table slot in
    /// one tight loop, where the CPU overlaps the cache misses that the
    /// guest's one-call-per-record accesses would take one at a time.
    fn prefetch(&mut self, keys: &[KeyRef<'_>]) {
        let _ = keys;
    }

    /// A hint before a restore: about `keys` keys of keyed state `state`
    /// are coming for `key_group`. The hashmap backend sizes that group's
    /// table once, rather than growing it (and rehashing every entry) a
    /// dozen times as they arrive.
    fn reserve_keys(&mut self, key_group: u16, state: StateId, keys: usize) {
        let _ = (key_group, state, keys);
    }

    /// Asks the backend to drop the expired values of the TTL state `state`
    /// by itself, in the background, reading the TTL layer's expiry prefix
    /// against `clock`. True if it will: the TTL layer then skips its
    /// per-access clean-up for that state. The RocksDB backend does it in
    /// compaction; the hashmap backend cannot (false).
    fn expire_in_background(&mut self, state: StateId, clock: &crate::clock::Clock) -> bool {
        let _ = (state, clock);
        false
    }

    /// Keyed states: up to `max` keys of `state` from position `cursor` (0
    /// is the start), with their key groups, and the position to continue
    /// from (none at the end). Keys written between calls may be missed or
    /// seen twice: this serves incremental clean-up, not snapshots.
    fn scan_keys(&mut self, state: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>);

    /// The synchronous part of a snapshot: a frozen view of every state,
    /// which [`snapshot::write_snapshot`] writes out later, on another
    /// thread, while this backend goes on changing. Its cost must not grow
    /// with the state's size (the hashmap backend shares its tables
    /// copy-on-write).
    fn freeze(&mut self) -> Box<dyn FrozenState>;
    /// Restores one entry (of `key_group`, for keyed entries) written by a
    /// snapshot; the states must be registered already. By default through
    /// the ordinary operations; a layer that transforms values (TTL) passes
    /// entries through untouched instead.
    fn restore_entry(&mut self, key_group: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError> {
        let at = |key| KeyRef { key, hash: key_group::key_hash(key), key_group };
        match entry {
            SnapshotEntry::Value { state, key, value } => self.value_set(state, at(key), value),
            SnapshotEntry::ListItem { state, key, value } => self.list_add(state, at(key), &[value]),
            SnapshotEntry::MapItem { state, key, user_key, value } => self.map_put(state, at(key), user_key, value),
            SnapshotEntry::Timer { domain, time, key } => self.timer_register(domain, at(key), time),
            SnapshotEntry::OperatorItem { state, value } => self.operator_list_add(state, &[value]),
            SnapshotEntry::BroadcastItem { state, user_key, value } => self.broadcast_put(state, user_key, value),
        }
    }

    /// Live rescale: takes the key groups of this backend's range, with
    /// their timers, out of `hand_offs` (the old subtasks'
    /// [`FrozenState::hand_off`]s) without a snapshot: tables by pointer
    /// (hashmap), databases as files (RocksDB). All at once, so that a
    /// backend can take them side by side. The states must be registered
    /// already (the hand-offs' snapshots of descriptors and operator state
    /// are restored first). Returns about how many keys and timers were
    /// taken. `None`: this backend cannot adopt these hand-offs (the caller
    /// restores them through snapshots instead).
    fn adopt_key_groups(&mut self, hand_offs: &[&HandOff]) -> Option<Result<u64, StateError>> {
        let _ = hand_offs;
        None
    }

    /// Live rescale, an old subtask's side, once `hand_off` was made from
    /// this backend's frozen state: moves into it what of the live state
    /// can go as it is, for a new subtask that takes it whole (RocksDB: the
    /// open databases, so that subtask opens none). The backend is not used
    /// after this. By default nothing moves.
    fn give_up_into(&mut self, hand_off: &mut HandOff) {
        let _ = hand_off;
    }

    /// Number of keys that hold a value in a keyed state (for tests and
    /// inspection).
    fn key_count(&self, state: StateId) -> usize;

    /// Bytes of state (timers included) this backend holds in the host's
    /// memory, as it counts them on every write: keys and values with an
    /// estimate of each entry's overhead. A counter, so reading it after
    /// every write costs nothing. `None`: the backend keeps its state on
    /// disk, and its own settings bound its memory (RocksDB).
    fn memory_bytes(&self) -> Option<u64> {
        None
    }
}

/// A backend's state at the instant of [`StateBackend::freeze`].
pub trait FrozenState: Send {
    /// Every registered state, indexed by id.
    fn descriptors(&self) -> &[StateDescriptor];
    /// The key groups it holds.
    fn range(&self) -> key_group::KeyGroupRange;
    /// Hands every keyed entry and timer of `key_group` to `visit` (stored
    /// bytes, as the backend holds them), then lets go of that group: each
    /// group is visited once.
    fn key_group(&mut self, key_group: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError>;
    /// Hands every operator list item and broadcast entry to `visit`.
    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError>;
    /// The state as a RocksDB checkpoint's files, for backends that can
    /// store their own files (incremental checkpoints); waits until every
    /// file is written.
    fn native_checkpoint(&mut self) -> Option<Result<NativeCheckpoint, StateError>> {
        None
    }
    /// Live rescale: every key group's keyed state and timers as a hand-off
    /// that new subtasks adopt without a snapshot
    /// ([`StateBackend::adopt_key_groups`]). A hashmap view moves its tables
    /// out (keeping descriptors and operator state); a RocksDB view stays
    /// whole ([`HandOff::leaves_frozen_whole`]). `None` (the view
    /// unchanged): this backend has no such hand-off, or making it failed,
    /// and its state goes as a snapshot.
    fn hand_off(&mut self) -> Option<HandOff> {
        None
    }
}

/// A frozen state as files of its database, to be stored as they are.
pub struct NativeCheckpoint {
    /// A RocksDB checkpoint directory.
    pub dir: std::path::PathBuf,
    /// Files to store beside the directory's, by the name they must have
    /// there: the layers the database had not taken in, which whoever
    /// opens the checkpoint ingests in the order of their names.
    pub layers: Vec<(String, std::path::PathBuf)>,
}

/// Appends one value of a batch read to `out`, and its `(start, len,
/// present)` to `spans`: the shape `value_get_many` answers in.
#[inline]
pub fn push_value(out: &mut Vec<u8>, spans: &mut Vec<(u32, u32, bool)>, value: Option<&[u8]>) {
    let start = out.len();
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
    spans.push((start as u32, (out.len() - start) as u32, value.is_some()));
}

/// The registration rules every backend shares: the name must be valid; a
/// name registered before must come with the same kind and redistribution
/// (then its id is returned); TTL is the TTL layer's, never a backend's.
/// `Ok(None)`: a new state.
pub fn check_registration(existing: &[StateDescriptor], d: &StateDescriptor) -> Result<Option<StateId>, StateError> {
    check_name(&d.name)?;
    if let Some(i) = existing.iter().position(|e| e.name == d.name) {
        let e = &existing[i];
        if e.kind != d.kind {
            return Err(StateError::KindMismatch {
                name: d.name.clone(),
                existing: e.kind.name(),
                requested: d.kind.name(),
            });
        }
        if e.redistribution != d.redistribution {
            return Err(StateError::KindMismatch {
                name: d.name.clone(),
                existing: "operator-list with another redistribution mode",
                requested: "operator-list",
            });
        }
        return Ok(Some(i as StateId));
    }
    if d.ttl.is_some() {
        return Err(StateError::Unsupported { name: d.name.clone(), what: "state TTL" });
    }
    Ok(None)
}

/// Checks a state name: 1-128 letters, digits, `-`, `_`, `.`.
pub fn check_name(name: &str) -> Result<(), StateError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(()) } else { Err(StateError::InvalidName(name.to_string())) }
}
