//! The backend of several databases frozen (each database's checkpoint
//! taken side by side, read as one state under home's state ids), and
//! given up at a live rescale.

use super::RocksDbBackend;
use crate::state::key_group::KeyGroupRange;
use crate::state::rocksdb::frozen::FrozenRocksDb;
use crate::state::rocksdb::handoff::DatabaseHandOff;
use crate::state::{FrozenState, HandOff, SnapshotEntry, Snapshots, StateDescriptor, StateError, StateId};

impl RocksDbBackend {
    /// Whether the adopted databases hold every key group: home then holds
    /// none, and a hand-off of the adopted ones is the whole keyed state.
    fn all_adopted(&self) -> bool {
        let mut ranges: Vec<KeyGroupRange> = self.adopted.iter().map(|a| a.db.range).collect();
        ranges.sort_by_key(|r| r.start);
        let mut next = self.range.start;
        for r in ranges {
            if r.start != next {
                return false;
            }
            next = r.end;
        }
        next == self.range.end
    }
}

impl Snapshots for RocksDbBackend {
    fn freeze(&mut self) -> Box<dyn FrozenState> {
        if self.adopted.is_empty() {
            return self.home.freeze();
        }
        let all_adopted = self.all_adopted();
        // Side by side: a freeze mostly waits for RocksDB's checkpoint (a
        // flush and fsyncs), and this is the pause of every checkpoint and
        // of a rescale's barrier.
        let (home, adopted) = (&mut self.home, &mut self.adopted);
        let (home, parts) = std::thread::scope(|s| {
            let parts: Vec<_> = adopted.iter_mut().map(|a| (s.spawn(|| a.db.freeze_db()), home_ids(&a.ids))).collect();
            let home = home.freeze_db();
            let parts: Vec<_> = parts
                .into_iter()
                .map(|(t, ids)| (t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), ids))
                .collect();
            (home, parts)
        });
        Box::new(FrozenParts { range: self.range, home, parts, all_adopted })
    }

    fn give_up_into(&mut self, hand_off: &mut HandOff) {
        let HandOff::Databases(d) = hand_off else { return };
        let handed = d.databases_mut();
        // The hand-off was made from this backend's freeze: home alone, or
        // the adopted databases (home then holds no key group).
        if self.adopted.is_empty() {
            if let [one] = handed
                && one.range == self.home.range
            {
                one.give(self.home.give_up());
            }
            return;
        }
        for a in std::mem::take(&mut self.adopted) {
            if let Some(h) = handed.iter_mut().find(|h| h.range == a.db.range) {
                h.give(a.db);
            }
        }
    }
}

/// Home's id of each of a database's states, by the database's id.
fn home_ids(ids: &[StateId]) -> Vec<StateId> {
    let mut back = vec![StateId::MAX; ids.iter().map(|&i| i as usize + 1).max().unwrap_or(0)];
    for (home, &own) in ids.iter().enumerate() {
        back[own as usize] = home as StateId;
    }
    back
}

/// A backend of several databases, frozen: each key group read from the
/// database that holds it, under home's state ids.
struct FrozenParts {
    range: KeyGroupRange,
    home: FrozenRocksDb,
    /// Each adopted database, frozen, with home's id of each of its states.
    parts: Vec<(FrozenRocksDb, Vec<StateId>)>,
    all_adopted: bool,
}

impl FrozenState for FrozenParts {
    fn descriptors(&self) -> &[StateDescriptor] {
        self.home.descriptors()
    }

    fn range(&self) -> KeyGroupRange {
        self.range
    }

    fn key_group(&mut self, kg: u16, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        let Some((part, ids)) = self.parts.iter_mut().find(|(p, _)| p.range().contains(kg)) else {
            return self.home.key_group(kg, visit);
        };
        let home_id = |s: StateId| ids.get(s as usize).copied().unwrap_or(s);
        part.key_group(kg, &mut |e| {
            visit(match e {
                SnapshotEntry::Value { state, key, value } => {
                    SnapshotEntry::Value { state: home_id(state), key, value }
                }
                SnapshotEntry::ListItem { state, key, value } => {
                    SnapshotEntry::ListItem { state: home_id(state), key, value }
                }
                SnapshotEntry::MapItem { state, key, user_key, value } => {
                    SnapshotEntry::MapItem { state: home_id(state), key, user_key, value }
                }
                other => other,
            })
        })
    }

    fn operator_state(&mut self, visit: &mut dyn FnMut(SnapshotEntry<'_>)) -> Result<(), StateError> {
        self.home.operator_state(visit)
    }

    fn hand_off(&mut self) -> Option<HandOff> {
        if !self.all_adopted {
            // Home holds key groups too: the state goes as a snapshot.
            return None;
        }
        let mut databases = Vec::with_capacity(self.parts.len());
        for (part, _) in &self.parts {
            match part.handed() {
                Ok(db) => databases.push(db),
                Err(e) => {
                    tracing::warn!(error = %e, "handing the databases over failed; sending a snapshot");
                    return None;
                }
            }
        }
        let descriptors = self.home.descriptors().to_vec();
        Some(HandOff::Databases(DatabaseHandOff::new(self.range, descriptors, databases)))
    }
}
