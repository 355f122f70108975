//! The RocksDB backend of one subtask: its own database (`home`) and, after
//! a live rescale, the databases it took over whole from old subtasks
//! (`handoff.rs`), each holding the key groups of its range. A keyed call
//! goes to the database of its key group, operator and broadcast state to
//! home, and timers fire across all of them in time order.
//!
//! Why several databases: merging the old subtasks' keys into one database
//! costs a copy of every key, as much as a savepoint and a restore, while
//! opening linked copies of their files costs milliseconds at any size, and
//! a database one new subtask takes whole is not even opened: the old
//! subtask gives it up open (`give_up_into`) and it moves as it is. The
//! price comes later and is bounded: while a subtask has more than one
//! database, its checkpoints are canonical snapshots instead of incremental
//! file sets (an incremental checkpoint holds one database per subtask),
//! and each database has its own memtables. A restart from a checkpoint
//! brings one database again.
//!
//! This file routes the calls; `adopt.rs` takes databases over, `freeze.rs`
//! freezes several as one state and gives them up.

mod adopt;
mod freeze;

use super::Database;
use super::options::RocksDbMemory;
use crate::clock::Clock;
use crate::state::key_group::KeyGroupRange;
use crate::state::{
    Accounting, KeyRef, KeyScan, ListState, MapEntry, MapState, OperatorState, PassThrough, Registry, StateDescriptor,
    StateError, StateId, TimeDomain, TimerService, ValueState, push_value,
};
use std::path::{Path, PathBuf};

/// State of one operator subtask in embedded RocksDB.
pub struct RocksDbBackend {
    /// The database opened with the backend: the key groups no adopted
    /// database holds, and operator and broadcast state.
    home: Database,
    /// Databases taken over at live rescales; their ranges are disjoint.
    adopted: Vec<Adopted>,
    range: KeyGroupRange,
    localdir: PathBuf,
    name: String,
    memory: RocksDbMemory,
    /// The TTL clock of each of home's states that expires in compaction,
    /// for databases adopted later.
    clocks: Vec<Option<Clock>>,
}

/// A database taken over at a live rescale.
struct Adopted {
    db: Database,
    /// Its id of each of home's states, by home's id.
    ids: Vec<StateId>,
}

impl RocksDbBackend {
    /// Opens a fresh database for a subtask owning `range`, in a new
    /// directory under `localdir` named after `name`.
    pub fn open(localdir: &Path, name: &str, range: KeyGroupRange, memory: RocksDbMemory) -> Result<Self, StateError> {
        let home = Database::open(localdir, name, range, memory)?;
        Ok(Self::over(home, localdir, name, memory))
    }

    /// Opens a database restored from an incremental checkpoint: the files
    /// in `files` (a RocksDB checkpoint directory) become this subtask's
    /// database, with the states `descriptors` describes.
    pub fn adopt(
        localdir: &Path,
        name: &str,
        range: KeyGroupRange,
        memory: RocksDbMemory,
        files: &Path,
        descriptors: Vec<StateDescriptor>,
    ) -> Result<Self, StateError> {
        let home = Database::adopt(localdir, name, range, memory, files, descriptors)?;
        Ok(Self::over(home, localdir, name, memory))
    }

    fn over(home: Database, localdir: &Path, name: &str, memory: RocksDbMemory) -> Self {
        RocksDbBackend {
            range: home.range,
            clocks: vec![None; home.descriptors.len()],
            home,
            adopted: Vec::new(),
            localdir: localdir.to_path_buf(),
            name: name.to_string(),
            memory,
        }
    }

    /// Whether a file of a checkpoint that [`adopt`](Self::adopt) took
    /// over stays in the database under its stored name. Layer files do
    /// not: they are ingested under new file numbers, and their names are
    /// unique only within a process, so a layer this database writes later
    /// may carry a stored layer's name (and size) with other contents.
    pub fn keeps_name(file: &str) -> bool {
        Database::keeps_name(file)
    }

    /// The home database's working directory.
    pub fn path(&self) -> &Path {
        self.home.path()
    }

    /// Databases this backend holds.
    pub fn databases(&self) -> usize {
        1 + self.adopted.len()
    }

    /// Which database holds key group `kg`: 0 is home, `i + 1` adopted `i`.
    fn index(&self, kg: u16) -> usize {
        self.adopted.iter().position(|a| a.db.range.contains(kg)).map_or(0, |i| i + 1)
    }

    /// Database `i` (as [`index`](Self::index) numbers them) and its id of
    /// home's state `s`.
    fn nth(&mut self, i: usize, s: StateId) -> (&mut Database, StateId) {
        match i {
            0 => (&mut self.home, s),
            _ => {
                let a = &mut self.adopted[i - 1];
                (&mut a.db, a.ids.get(s as usize).copied().unwrap_or(s))
            }
        }
    }

    /// The database of key group `kg`, and its id of home's state `s`.
    fn at(&mut self, kg: u16, s: StateId) -> (&mut Database, StateId) {
        let i = self.index(kg);
        self.nth(i, s)
    }
}

impl Registry for RocksDbBackend {
    fn register(&mut self, d: StateDescriptor) -> Result<StateId, StateError> {
        let id = self.home.register(d.clone())?;
        for a in &mut self.adopted {
            let own = a.db.register(d.clone())?;
            match a.ids.get(id as usize) {
                Some(&known) if known != own => {
                    return Err(StateError::HandOff(format!("state '{}' has two ids in one database", d.name)));
                }
                Some(_) => {}
                None => a.ids.push(own),
            }
        }
        if self.clocks.len() <= id as usize {
            self.clocks.resize(id as usize + 1, None);
        }
        Ok(id)
    }

    fn expire_in_background(&mut self, s: StateId, clock: &Clock) -> bool {
        let home = self.home.expire_in_background(s, clock);
        for i in 0..self.adopted.len() {
            let (db, own) = self.nth(i + 1, s);
            db.expire_in_background(own, clock);
        }
        if let Some(slot) = self.clocks.get_mut(s as usize) {
            *slot = Some(clock.clone());
        }
        home
    }

    fn descriptors(&self) -> &[StateDescriptor] {
        &self.home.descriptors
    }
}

impl ValueState for RocksDbBackend {
    fn value_get(&mut self, s: StateId, k: KeyRef<'_>) -> Result<Option<Vec<u8>>, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.value_get(s, k)
    }

    fn value_get_many(
        &mut self,
        s: StateId,
        keys: &[KeyRef<'_>],
        out: &mut Vec<u8>,
        spans: &mut Vec<(u32, u32, bool)>,
    ) -> Result<(), StateError> {
        let which: Vec<usize> = keys.iter().map(|k| self.index(k.key_group)).collect();
        let Some(&first) = which.first() else { return Ok(()) };
        if which.iter().all(|&i| i == first) {
            let (db, s) = self.nth(first, s);
            return db.value_get_many(s, keys, out, spans);
        }
        // Each database answers for its keys; the answers go out in the
        // keys' order.
        let (mut read, mut answers) = (Vec::new(), vec![(0u32, 0u32, false); keys.len()]);
        for i in 0..self.databases() {
            let positions: Vec<usize> = (0..keys.len()).filter(|&p| which[p] == i).collect();
            if positions.is_empty() {
                continue;
            }
            let mine: Vec<KeyRef<'_>> = positions.iter().map(|&p| keys[p]).collect();
            let mut got = Vec::with_capacity(mine.len());
            let (db, own) = self.nth(i, s);
            db.value_get_many(own, &mine, &mut read, &mut got)?;
            for (p, span) in positions.into_iter().zip(got) {
                answers[p] = span;
            }
        }
        for (start, len, present) in answers {
            let value = present.then(|| &read[start as usize..(start + len) as usize]);
            push_value(out, spans, value);
        }
        Ok(())
    }

    fn value_set_many(&mut self, s: StateId, keys: &[KeyRef<'_>], values: &[Option<&[u8]>]) -> Result<(), StateError> {
        if self.adopted.is_empty() {
            return self.home.value_set_many(s, keys, values);
        }
        for (k, v) in keys.iter().zip(values) {
            let (db, s) = self.at(k.key_group, s);
            match v {
                Some(v) => db.value_set(s, *k, v)?,
                None => db.value_clear(s, *k)?,
            }
        }
        Ok(())
    }

    fn value_set(&mut self, s: StateId, k: KeyRef<'_>, value: &[u8]) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.value_set(s, k, value)
    }

    fn value_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.value_clear(s, k)
    }
}

impl ListState for RocksDbBackend {
    fn list_add(&mut self, s: StateId, k: KeyRef<'_>, values: &[&[u8]]) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.list_add(s, k, values)
    }

    fn list_update(&mut self, s: StateId, k: KeyRef<'_>, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.list_update(s, k, values)
    }

    fn list_read(&mut self, s: StateId, k: KeyRef<'_>, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.list_read(s, k, start, max)
    }

    fn list_len(&mut self, s: StateId, k: KeyRef<'_>) -> Result<u32, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.list_len(s, k)
    }

    fn list_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.list_clear(s, k)
    }
}

impl MapState for RocksDbBackend {
    fn map_get(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_get(s, k, uk)
    }

    fn map_put(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_put(s, k, uk, value)
    }

    fn map_remove(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_remove(s, k, uk)
    }

    fn map_contains(&mut self, s: StateId, k: KeyRef<'_>, uk: &[u8]) -> Result<bool, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_contains(s, k, uk)
    }

    fn map_is_empty(&mut self, s: StateId, k: KeyRef<'_>) -> Result<bool, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_is_empty(s, k)
    }

    fn map_entries(
        &mut self,
        s: StateId,
        k: KeyRef<'_>,
        after: Option<&[u8]>,
        max: u32,
    ) -> Result<Vec<MapEntry>, StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_entries(s, k, after, max)
    }

    fn map_clear(&mut self, s: StateId, k: KeyRef<'_>) -> Result<(), StateError> {
        let (db, s) = self.at(k.key_group, s);
        db.map_clear(s, k)
    }
}

impl KeyScan for RocksDbBackend {
    fn scan_keys(&mut self, s: StateId, cursor: u64, max: u32) -> (Vec<(u16, Vec<u8>)>, Option<u64>) {
        // A cursor is the database's number (above the lowest bit) and
        // that database's own cursor (0 or 1); 0 is home's start.
        let (mut i, mut own) = ((cursor >> 1) as usize, cursor & 1);
        while i < self.databases() {
            let (db, sid) = self.nth(i, s);
            let (keys, next) = db.scan_keys(sid, own, max);
            match next {
                Some(c) => return (keys, Some(((i as u64) << 1) | c.min(1))),
                None if i + 1 == self.databases() => return (keys, None),
                None if keys.is_empty() => (i, own) = (i + 1, 0),
                None => return (keys, Some(((i + 1) as u64) << 1)),
            }
        }
        (Vec::new(), None)
    }
}

/// Operator and broadcast state live in home alone.
impl PassThrough<dyn OperatorState> for RocksDbBackend {
    type Part = Database;

    fn part(&self) -> &Database {
        &self.home
    }

    fn part_mut(&mut self) -> &mut Database {
        &mut self.home
    }
}

impl TimerService for RocksDbBackend {
    fn timer_register(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        let (db, _) = self.at(k.key_group, 0);
        db.timer_register(d, k, time)
    }

    fn timer_delete(&mut self, d: TimeDomain, k: KeyRef<'_>, time: i64) -> Result<(), StateError> {
        let (db, _) = self.at(k.key_group, 0);
        db.timer_delete(d, k, time)
    }

    fn timer_pop_due(&mut self, d: TimeDomain, up_to: i64) -> Option<(i64, Vec<u8>)> {
        if self.adopted.is_empty() {
            return self.home.timer_pop_due(d, up_to);
        }
        // The database with the earliest timer fires it.
        let earliest = (0..self.databases())
            .filter_map(|i| self.nth(i, 0).0.timer_next(d).map(|t| (t, i)))
            .min()
            .filter(|(t, _)| *t <= up_to)?;
        self.nth(earliest.1, 0).0.timer_pop_due(d, up_to)
    }

    fn timer_next(&self, d: TimeDomain) -> Option<i64> {
        std::iter::once(&self.home).chain(self.adopted.iter().map(|a| &a.db)).filter_map(|db| db.timer_next(d)).min()
    }

    fn timer_count(&self, d: TimeDomain) -> usize {
        self.home.timer_count(d) + self.adopted.iter().map(|a| a.db.timer_count(d)).sum::<usize>()
    }
}

impl Accounting for RocksDbBackend {
    fn key_count(&self, s: StateId) -> usize {
        self.home.key_count(s)
            + self.adopted.iter().map(|a| a.db.key_count(a.ids.get(s as usize).copied().unwrap_or(s))).sum::<usize>()
    }
}
