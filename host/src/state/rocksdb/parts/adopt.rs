//! A live rescale, a new subtask's side: the databases of old subtasks
//! taken over, whole and open where one was given up whole, else as
//! copies of their files cut to this subtask's key groups; and restores.

use super::{Adopted, RocksDbBackend};
use crate::state::key_group::KeyGroupRange;
use crate::state::rocksdb::Database;
use crate::state::rocksdb::handoff::{DatabaseHandOff, HandedDb};
use crate::state::rocksdb::options::ExpiryClock;
use crate::state::{HandOff, Registry, Restore, SnapshotEntry, StateError, StateId, restore_by_calls};
use ::rocksdb::Options;
use std::path::Path;

impl RocksDbBackend {
    /// Takes the databases of `hand_offs` that hold key groups of this
    /// range: a database given up whole and all of whose groups are this
    /// range's as it is, open; the others by opening a copy of their files,
    /// each on a thread of its own. An open takes 10-50 ms (reading the
    /// manifest and the tables' index blocks, writing a new manifest and
    /// `OPTIONS` file), and a new subtask that takes several would
    /// otherwise add them up in the pause.
    fn adopt_databases(&mut self, hand_offs: &[&DatabaseHandOff]) -> Result<u64, StateError> {
        let mut plans: Vec<Plan<'_>> = Vec::new();
        for handed in hand_offs.iter().flat_map(|h| h.databases()) {
            let mine = handed.range.intersect(self.range);
            if mine.is_empty() {
                continue;
            }
            let mut held = self.adopted.iter().map(|a| a.db.range).chain(plans.iter().map(|p| p.range));
            if let Some(other) = held.find(|r| !r.intersect(mine).is_empty()) {
                return Err(StateError::HandOff(format!(
                    "key groups {}..{} were handed over twice (also {}..{})",
                    mine.start, mine.end, other.start, other.end
                )));
            }
            plans.push(self.plan(handed, mine)?);
        }
        let (localdir, name, options) = (&self.localdir, &self.name, &self.home.options);
        let opened: Vec<Result<Database, StateError>> = match plans.as_slice() {
            [one] => vec![one.open(localdir, name, options)],
            _ => std::thread::scope(|s| {
                let threads: Vec<_> = plans.iter().map(|p| s.spawn(move || p.open(localdir, name, options))).collect();
                threads
                    .into_iter()
                    .map(|t| {
                        t.join()
                            .unwrap_or_else(|_| Err(StateError::Storage("opening a handed database panicked".into())))
                    })
                    .collect()
            }),
        };
        // Every database opened is kept (its working directory removed
        // with it) or dropped here, on an error too.
        let opened: Vec<Database> = opened.into_iter().collect::<Result<_, _>>()?;
        let mut taken = 0u64;
        for (mut db, plan) in opened.into_iter().zip(plans) {
            // States home has and the handed database lacks.
            let mut resolved = Vec::with_capacity(plan.ids.len());
            for (d, id) in self.home.descriptors.clone().into_iter().zip(plan.ids) {
                resolved.push(match id {
                    Some(id) => id,
                    None => db.register(d)?,
                });
            }
            taken += db.estimated_entries() * plan.range.len() as u64 / plan.handed.range.len().max(1) as u64;
            self.adopted.push(Adopted { db, ids: resolved });
        }
        Ok(taken)
    }

    /// How `handed` is taken for its key groups `mine`: its id of each of
    /// home's states, and the TTL clocks its states expire by.
    fn plan<'h>(&self, handed: &'h HandedDb, mine: KeyGroupRange) -> Result<Plan<'h>, StateError> {
        // Matched by name: old subtasks may have registered their states
        // in other orders.
        let mut ids: Vec<Option<StateId>> = Vec::with_capacity(self.home.descriptors.len());
        for d in &self.home.descriptors {
            let j = handed.descriptors.iter().position(|h| h.name == d.name);
            if let Some(j) = j
                && handed.descriptors[j].kind != d.kind
            {
                return Err(StateError::KindMismatch {
                    name: d.name.clone(),
                    existing: d.kind.name(),
                    requested: handed.descriptors[j].kind.name(),
                });
            }
            ids.push(j.map(|j| j as StateId));
        }
        let expiry: Vec<ExpiryClock> = (0..handed.descriptors.len())
            .map(|j| {
                let clock = ExpiryClock::default();
                let home_id = ids.iter().position(|id| *id == Some(j as StateId));
                if let Some(c) = home_id.and_then(|i| self.clocks.get(i).cloned().flatten()) {
                    let _ = clock.set(c);
                }
                clock
            })
            .collect();
        // The write-back cache's budget, shared by key groups.
        let cache_limit = (self.memory.write_cache as u128 * mine.len() as u128 / self.range.len().max(1) as u128)
            .max(1 << 20) as usize;
        Ok(Plan { handed, range: mine, ids, expiry, cache_limit })
    }
}

/// A handed database about to be taken.
struct Plan<'h> {
    handed: &'h HandedDb,
    /// The key groups taken from it.
    range: KeyGroupRange,
    /// Its id of each of home's states, by home's id; `None` where it
    /// lacks the state.
    ids: Vec<Option<StateId>>,
    /// The TTL clock of each of its states, by its id.
    expiry: Vec<ExpiryClock>,
    /// Its share of the write-back cache's budget.
    cache_limit: usize,
}

impl Plan<'_> {
    /// The database: the old subtask's, open, where it was given up and
    /// this takes all of its key groups; else a copy of its files opened
    /// in a working directory under `localdir` named after `name`, with
    /// the home database's `options`.
    fn open(&self, localdir: &Path, name: &str, options: &Options) -> Result<Database, StateError> {
        if self.range == self.handed.range
            && let Some(db) = self.handed.take_live()
        {
            return db.taken_live(self.cache_limit);
        }
        Database::adopt_handed(localdir, name, options, self.handed, self.range, self.cache_limit, self.expiry.clone())
    }
}

impl Restore for RocksDbBackend {
    fn restore_entry(&mut self, kg: u16, entry: SnapshotEntry<'_>) -> Result<(), StateError> {
        restore_by_calls(self, kg, entry)
    }

    fn reserve_keys(&mut self, kg: u16, s: StateId, keys: usize) {
        let (db, s) = self.at(kg, s);
        db.reserve_keys(kg, s, keys);
    }

    fn adopt_key_groups(&mut self, hand_offs: &[&HandOff]) -> Option<Result<u64, StateError>> {
        let databases: Vec<&DatabaseHandOff> = hand_offs
            .iter()
            .filter_map(|h| match h {
                HandOff::Databases(d) => Some(d),
                HandOff::Tables(_) => None,
            })
            .collect();
        (databases.len() == hand_offs.len()).then(|| self.adopt_databases(&databases))
    }
}
