//! What a state backend can do, one small trait per capability, as Flink
//! splits its keyed and operator state backends, its timer service and its
//! snapshot strategies: registration ([`Registry`]), the keyed shapes
//! ([`ValueState`], [`ListState`], [`MapState`]) and their keys
//! ([`KeyScan`]), operator list and broadcast state ([`OperatorState`]),
//! timers ([`TimerService`]), the old side of a snapshot or hand-off
//! ([`Snapshots`]), the new side ([`Restore`]) and sizes ([`Accounting`]).
//!
//! [`StateBackend`] is all of them: a subtask's backend, the one trait most
//! callers name. Code that needs one capability takes that trait alone (a
//! restore takes [`Restore`]), and a layer implements only what it changes,
//! passing the rest through ([`super::pass_through`]).
//!
//! Calls take a [`StateId`] from [`Registry::register`]; a `StateId` of
//! another shape is an internal error a backend may panic on. Every
//! implementation must pass `state::conformance`.

use super::key_group::{self, KeyGroupRange};
use super::{HandOff, KeyRef, MapEntry, SnapshotEntry, StateDescriptor, StateError, StateId, TimeDomain};

/// A state backend for one operator subtask: every capability together.
/// Implemented, through the blanket impl, by every type that has them all
/// (the hashmap and RocksDB backends, the TTL layer over either).
pub trait StateBackend:
    Registry
    + ValueState
    + ListState
    + MapState
    + KeyScan
    + OperatorState
    + TimerService
    + Snapshots
    + Restore
    + Accounting
    + Send
{
}

impl<T> StateBackend for T where
    T: Registry
        + ValueState
        + ListState
        + MapState
        + KeyScan
        + OperatorState
        + TimerService
        + Snapshots
        + Restore
        + Accounting
        + Send
{
}

/// Registration: the states a backend holds.
pub trait Registry {
    /// Registers a state, or returns the id of the same state registered
    /// before. Fails if the name exists with another kind or settings.
    fn register(&mut self, descriptor: StateDescriptor) -> Result<StateId, StateError>;

    /// Every registered state, indexed by id.
    fn descriptors(&self) -> &[StateDescriptor];

    /// Asks the backend to drop the expired values of the TTL state `state`
    /// by itself, in the background, reading the TTL layer's expiry prefix
    /// against `clock`. True if it will: the TTL layer then skips its
    /// per-access clean-up for that state. The RocksDB backend does it in
    /// compaction; the hashmap backend cannot (false).
    fn expire_in_background(&mut self, state: StateId, clock: &crate::clock::Clock) -> bool {
        let _ = (state, clock);
        false
    }
}

/// Keyed value-shaped state (value, reducing, aggregating): one byte string
/// per key.
pub trait ValueState {
    /// The current value.
    fn value_get(&mut self, state: StateId, key: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError>;
    /// Appends the current value to `out` and returns whether there was one
    /// (the batch read path: no allocation per value).
    fn value_get_into(&mut self, state: StateId, key: KeyRef<'_>, out: &mut Vec<u8>) -> Result<bool, StateError> {
        Ok(match self.value_get(state, key)? {
            Some(v) => {
                out.extend_from_slice(&v);
                true
            }
            None => false,
        })
    }
    /// Appends the values of `keys` to `out`, one `(start, len, present)`
    /// per key in `spans` (the batch read path; one call lets the backend
    /// overlap the lookups' cache misses).
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
    /// Sets (`Some`) or clears (`None`) the values of `keys`, in order (the
    /// batch write path).
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
    /// Replaces the value.
    fn value_set(&mut self, state: StateId, key: KeyRef<'_>, value: &[u8]) -> Result<(), StateError>;
    /// Removes the value.
    fn value_clear(&mut self, state: StateId, key: KeyRef<'_>) -> Result<(), StateError>;
}

/// Keyed list state: a list of byte strings per key.
pub trait ListState {
    /// Appends values.
    fn list_add(&mut self, state: StateId, key: KeyRef<'_>, values: &[&[u8]]) -> Result<(), StateError>;
    /// Replaces the list (empty removes it).
    fn list_update(&mut self, state: StateId, key: KeyRef<'_>, values: Vec<Vec<u8>>) -> Result<(), StateError>;
    /// Up to `max` values from index `start`.
    fn list_read(&mut self, state: StateId, key: KeyRef<'_>, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError>;
    /// The length.
    fn list_len(&mut self, state: StateId, key: KeyRef<'_>) -> Result<u32, StateError>;
    /// Removes the list.
    fn list_clear(&mut self, state: StateId, key: KeyRef<'_>) -> Result<(), StateError>;
}

/// Keyed map state: an ordered map of byte strings per key.
pub trait MapState {
    /// The value under a user key.
    fn map_get(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8]) -> Result<Option<Vec<u8>>, StateError>;
    /// Sets a user key.
    fn map_put(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8], value: &[u8]) -> Result<(), StateError>;
    /// Removes a user key.
    fn map_remove(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8]) -> Result<(), StateError>;
    /// Whether a user key is present.
    fn map_contains(&mut self, state: StateId, key: KeyRef<'_>, user_key: &[u8]) -> Result<bool, StateError>;
    /// Whether the key's map is empty.
    fn map_is_empty(&mut self, state: StateId, key: KeyRef<'_>) -> Result<bool, StateError>;
    /// Up to `max` entries with user key after `after`, in user-key byte
    /// order.
    fn map_entries(
        &mut self,
        state: StateId,
        key: KeyRef<'_>,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError>;
    /// Removes every entry of the key.
    fn map_clear(&mut self, state: StateId, key: KeyRef<'_>) -> Result<(), StateError>;
}

/// The keys of keyed state, apart from their values.
pub trait KeyScan {
    /// A hint that `keys` are about to be accessed, in order. Backends may
    /// warm caches; the hashmap backend resolves every key's table slot in
    /// one tight loop, where the CPU overlaps the cache misses that the
    /// guest's one-call-per-record accesses would take one at a time.
    fn prefetch(&mut self, keys: &[KeyRef<'_>]) {
        let _ = keys;
    }

    /// Up to `max` keys of `state` from position `cursor` (0 is the
    /// start), with their key groups, and the position to continue from
    /// (none at the end). Keys written between calls may be missed or seen
    /// twice: this serves incremental clean-up and migrations, not
    /// snapshots.
    fn scan_keys(&mut self, state: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>);
}

/// Operator state: a list per subtask, and broadcast maps (the same on
/// every subtask).
pub trait OperatorState {
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
}

/// Timers, per key, on two clocks.
pub trait TimerService {
    /// Registers a timer for `key` at `time` (registering the same (domain,
    /// key, time) twice leaves one).
    fn timer_register(&mut self, domain: TimeDomain, key: KeyRef<'_>, time: i64) -> Result<(), StateError>;
    /// Deletes `key`'s timer at `time`, if any.
    fn timer_delete(&mut self, domain: TimeDomain, key: KeyRef<'_>, time: i64) -> Result<(), StateError>;
    /// Removes and returns the earliest timer at or before `up_to` (ties in
    /// key group, then key byte order).
    fn timer_pop_due(&mut self, domain: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)>;
    /// The earliest pending time.
    fn timer_next(&self, domain: TimeDomain) -> Option<i64>;
    /// How many are pending.
    fn timer_count(&self, domain: TimeDomain) -> usize;
}

/// The old side of a snapshot or a live rescale: the state frozen, or
/// given up.
pub trait Snapshots {
    /// The synchronous part of a snapshot: a frozen view of every state,
    /// which [`super::snapshot::write_snapshot`] writes out later, on
    /// another thread, while this backend goes on changing. Its cost must
    /// not grow with the state's size (the hashmap backend shares its
    /// tables copy-on-write).
    fn freeze(&mut self) -> Box<dyn FrozenState>;

    /// Live rescale, an old subtask's side, once `hand_off` was made from
    /// this backend's frozen state: moves into it what of the live state
    /// can go as it is, for a new subtask that takes it whole (RocksDB: the
    /// open databases, so that subtask opens none). The backend is not used
    /// after this. By default nothing moves.
    fn give_up_into(&mut self, hand_off: &mut HandOff) {
        let _ = hand_off;
    }
}

/// The new side of a restore or a live rescale: state loaded from a
/// snapshot, or adopted from a hand-off. The states must be registered
/// first, hence [`Registry`].
pub trait Restore: Registry {
    /// Restores one entry (of `key_group`, for keyed entries) written by a
    /// snapshot. Backends do it through their ordinary operations
    /// ([`restore_by_calls`]); a layer that transforms values (TTL) passes
    /// entries through untouched instead.
    fn restore_entry(&mut self, key_group: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError>;

    /// A hint before a restore: about `keys` keys of keyed state `state`
    /// are coming for `key_group`. The hashmap backend sizes that group's
    /// table once, rather than growing it (and rehashing every entry) a
    /// dozen times as they arrive.
    fn reserve_keys(&mut self, key_group: u16, state: StateId, keys: usize) {
        let _ = (key_group, state, keys);
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
}

/// Restores `entry` (of `key_group`, for keyed entries) into `backend`
/// through its ordinary operations: how a backend that stores entries as
/// it is given them implements [`Restore::restore_entry`].
pub fn restore_by_calls<B>(backend: &mut B, key_group: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError>
where
    B: ValueState + ListState + MapState + TimerService + OperatorState + ?Sized,
{
    let at = |key| KeyRef { key, hash: key_group::key_hash(key), key_group };
    match entry {
        SnapshotEntry::Value { state, key, value } => backend.value_set(state, at(key), value),
        SnapshotEntry::ListItem { state, key, value } => backend.list_add(state, at(key), &[value]),
        SnapshotEntry::MapItem { state, key, user_key, value } => backend.map_put(state, at(key), user_key, value),
        SnapshotEntry::Timer { domain, time, key } => backend.timer_register(domain, at(key), time),
        SnapshotEntry::OperatorItem { state, value } => backend.operator_list_add(state, &[value]),
        SnapshotEntry::BroadcastItem { state, user_key, value } => backend.broadcast_put(state, user_key, value),
    }
}

/// Sizes, for budgets, metrics and tests.
pub trait Accounting {
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

/// A backend's state at the instant of [`Snapshots::freeze`].
pub trait FrozenState: Send {
    /// Every registered state, indexed by id.
    fn descriptors(&self) -> &[StateDescriptor];
    /// The key groups it holds.
    fn range(&self) -> KeyGroupRange;
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
    /// ([`Restore::adopt_key_groups`]). A hashmap view moves its tables
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
