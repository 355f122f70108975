//! Live rescale's hand-off of keyed state between backends of one process,
//! whatever the backend: what an old subtask sends ([`hand_off_state`]) and
//! how a new subtask takes it in ([`take_over_state`]).
//!
//! Keyed state goes without being encoded where the backend allows it: a
//! hashmap backend's tables by pointer ([`KeyGroupHandOff`]), a RocksDB
//! backend's databases as hard-linked copies of their files
//! ([`crate::state::rocksdb::DatabaseHandOff`]), and open, once the old
//! subtask gave them up ([`Snapshots::give_up_into`](super::Snapshots::give_up_into)),
//! for a new subtask that takes one whole. Beside either goes a small
//! canonical snapshot of the descriptors and operator and broadcast state,
//! which a new subtask deals out as a restore at another parallelism does.
//! A backend with no hand-off sends one canonical snapshot of everything;
//! a backend that cannot adopt a hand-off restores it through a snapshot.

use super::key_group::KeyGroupRange;
use super::snapshot::{OperatorShare, RestoreSummary, SnapshotError, restore_snapshot_stream, write_snapshot};
use super::{FrozenState, KeyGroupHandOff, Restore, SnapshotEntry, StateDescriptor, StateError};

/// An old subtask's keyed state, handed to the new subtasks of a live
/// rescale without a snapshot; shared by all of them.
#[derive(Debug)]
pub enum HandOff {
    /// A hashmap backend's tables and timers, by pointer.
    Tables(KeyGroupHandOff),
    /// A RocksDB backend's databases, as files.
    #[cfg(feature = "rocksdb")]
    Databases(super::rocksdb::DatabaseHandOff),
}

impl HandOff {
    /// The old subtask's key groups.
    pub fn range(&self) -> KeyGroupRange {
        match self {
            HandOff::Tables(h) => h.range(),
            #[cfg(feature = "rocksdb")]
            HandOff::Databases(h) => h.range(),
        }
    }

    /// Its states, as registered.
    pub fn descriptors(&self) -> &[StateDescriptor] {
        match self {
            HandOff::Tables(h) => h.descriptors(),
            #[cfg(feature = "rocksdb")]
            HandOff::Databases(h) => h.descriptors(),
        }
    }

    /// The same hand-off under `descriptors`: the TTL layer's, which carry
    /// the TTL its inner backend never sees. Ignored unless they name the
    /// same states of the same kinds, in the same order.
    pub fn with_descriptors(self, descriptors: Vec<StateDescriptor>) -> Self {
        match self {
            HandOff::Tables(h) => HandOff::Tables(h.with_descriptors(descriptors)),
            #[cfg(feature = "rocksdb")]
            HandOff::Databases(h) => HandOff::Databases(h.with_descriptors(descriptors)),
        }
    }

    /// Whether the frozen state it came from still holds every key group,
    /// so that a checkpoint can still be written from it. A hashmap
    /// hand-off moves the tables out; a RocksDB one copies files.
    pub fn leaves_frozen_whole(&self) -> bool {
        match self {
            HandOff::Tables(_) => false,
            #[cfg(feature = "rocksdb")]
            HandOff::Databases(_) => true,
        }
    }

    /// The key groups of `range` as frozen states, for a backend that
    /// cannot adopt this hand-off: written as snapshots, they restore the
    /// ordinary way.
    fn views(&self, range: KeyGroupRange) -> Result<Vec<Box<dyn FrozenState + '_>>, StateError> {
        match self {
            HandOff::Tables(h) => Ok(vec![Box::new(h.view(range))]),
            #[cfg(feature = "rocksdb")]
            HandOff::Databases(h) => Ok(h.views(range)?.into_iter().map(|v| v as Box<dyn FrozenState + '_>).collect()),
        }
    }
}

/// What an old subtask hands every new subtask at a live rescale.
pub struct HandedState {
    /// A canonical snapshot: the whole state, or, beside a hand-off, the
    /// descriptors and operator and broadcast state only.
    pub snapshot: Vec<u8>,
    /// The keyed state and timers, if the backend can hand them off.
    pub keyed: Option<HandOff>,
}

/// An old subtask's side: its frozen state as a hand-off (where the backend
/// has one) plus a snapshot of the rest, or as one whole snapshot.
pub fn hand_off_state(frozen: &mut dyn FrozenState, max_parallelism: u32) -> Result<HandedState, SnapshotError> {
    let keyed = frozen.hand_off();
    let snapshot = match keyed {
        Some(_) => write_snapshot(&mut WithoutKeyGroups(frozen), max_parallelism)?,
        None => write_snapshot(frozen, max_parallelism)?,
    };
    Ok(HandedState { snapshot, keyed })
}

/// One old subtask's [`HandedState`], as a new subtask takes it.
pub struct Handed<'a> {
    /// Its [`HandedState::snapshot`].
    pub snapshot: &'a [u8],
    /// Its [`HandedState::keyed`].
    pub keyed: Option<&'a HandOff>,
    /// Its share of the old subtask's operator state.
    pub share: OperatorShare,
}

/// A new subtask's side, for every old subtask's [`HandedState`]: restores
/// each snapshot into `backend` (which owns `range`) as a restore at
/// another parallelism does, taking its share of operator state, then
/// adopts the key groups of `range` from the hand-offs, all at once, or
/// restores them from each through a snapshot if the backend cannot adopt.
pub fn take_over_state(
    backend: &mut dyn Restore,
    handed: &[Handed<'_>],
    range: KeyGroupRange,
    max_parallelism: u32,
) -> Result<RestoreSummary, SnapshotError> {
    let mut summary = RestoreSummary::default();
    for h in handed {
        let more = restore_snapshot_stream(&mut &h.snapshot[..], backend, range, max_parallelism, h.share)?;
        summary.entries += more.entries;
        summary.key_groups += more.key_groups;
        summary.skipped_key_groups += more.skipped_key_groups;
    }
    let keyed: Vec<&HandOff> = handed.iter().filter_map(|h| h.keyed).collect();
    if keyed.is_empty() {
        return Ok(summary);
    }
    match backend.adopt_key_groups(&keyed) {
        Some(taken) => {
            summary.entries += taken?;
            summary.key_groups += keyed.iter().map(|k| k.range().intersect(range).len() as u32).sum::<u32>();
        }
        None => {
            for view in keyed.iter().map(|k| k.views(range)) {
                for mut view in view? {
                    let bytes = write_snapshot(view.as_mut(), max_parallelism)?;
                    let more = restore_snapshot_stream(
                        &mut &bytes[..],
                        backend,
                        range,
                        max_parallelism,
                        OperatorShare::Nothing,
                    )?;
                    summary.entries += more.entries;
                    summary.key_groups += more.key_groups;
                }
            }
        }
    }
    Ok(summary)
}

/// A frozen state with its key groups left out: what goes beside a
/// hand-off, which carries them.
struct WithoutKeyGroups<'a>(&'a mut dyn FrozenState);

impl FrozenState for WithoutKeyGroups<'_> {
    fn descriptors(&self) -> &[StateDescriptor] {
        self.0.descriptors()
    }

    fn range(&self) -> KeyGroupRange {
        self.0.range()
    }

    fn key_group(&mut self, _: u16, _: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        Ok(())
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        self.0.operator_state(visit)
    }
}
