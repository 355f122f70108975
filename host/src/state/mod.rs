//! State: the capability traits every state backend implements
//! ([`backend`]), the descriptors states are registered with, the entries
//! snapshots carry, and key groups.
//!
//! Architecture invariant: this module never imports wasmtime. The WASM layer
//! translates guest calls into these calls; backends know nothing of guests.

pub mod backend;
pub mod handoff;
pub mod hashmap;
pub mod key_group;
pub mod pass_through;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod snapshot;
pub mod ttl;

#[cfg(test)]
mod conformance;

pub use backend::{
    Accounting, FrozenState, KeyScan, ListState, MapState, NativeCheckpoint, OperatorState, Registry, Restore,
    Snapshots, StateBackend, TimerService, ValueState, restore_by_calls,
};
pub use handoff::HandOff;
pub use hashmap::KeyGroupHandOff;
pub use pass_through::PassThrough;

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
