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

use super::Database;
use super::frozen::FrozenRocksDb;
use super::handoff::{DatabaseHandOff, HandedDb};
use super::options::{ExpiryClock, RocksDbMemory};
use crate::clock::Clock;
use crate::state::key_group::KeyGroupRange;
use crate::state::{
    FrozenState, HandOff, KeyRef, MapEntry, SnapshotEntry, StateBackend, StateDescriptor, StateError, StateId,
    TimeDomain, push_value,
};
use ::rocksdb::Options;
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

impl StateBackend for RocksDbBackend {
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

    fn operator_list_add(&mut self, s: StateId, values: &[&[u8]]) -> Result<(), StateError> {
        self.home.operator_list_add(s, values)
    }

    fn operator_list_update(&mut self, s: StateId, values: Vec<Vec<u8>>) -> Result<(), StateError> {
        self.home.operator_list_update(s, values)
    }

    fn operator_list_read(&mut self, s: StateId, start: u32, max: u32) -> Result<Vec<Vec<u8>>, StateError> {
        self.home.operator_list_read(s, start, max)
    }

    fn operator_list_len(&mut self, s: StateId) -> Result<u32, StateError> {
        self.home.operator_list_len(s)
    }

    fn broadcast_get(&mut self, s: StateId, uk: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.home.broadcast_get(s, uk)
    }

    fn broadcast_put(&mut self, s: StateId, uk: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.home.broadcast_put(s, uk, value)
    }

    fn broadcast_remove(&mut self, s: StateId, uk: &[u8]) -> Result<(), StateError> {
        self.home.broadcast_remove(s, uk)
    }

    fn broadcast_entries(&mut self, s: StateId, after: Option<&[u8]>, max: u32) -> Result<Vec<MapEntry>, StateError> {
        self.home.broadcast_entries(s, after, max)
    }

    fn broadcast_len(&mut self, s: StateId) -> Result<usize, StateError> {
        self.home.broadcast_len(s)
    }

    fn broadcast_clear(&mut self, s: StateId) -> Result<(), StateError> {
        self.home.broadcast_clear(s)
    }

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

    fn reserve_keys(&mut self, kg: u16, s: StateId, keys: usize) {
        let (db, s) = self.at(kg, s);
        db.reserve_keys(kg, s, keys);
    }

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

    fn key_count(&self, s: StateId) -> usize {
        self.home.key_count(s)
            + self.adopted.iter().map(|a| a.db.key_count(a.ids.get(s as usize).copied().unwrap_or(s))).sum::<usize>()
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
