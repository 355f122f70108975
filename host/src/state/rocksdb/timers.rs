//! The timer queues of the RocksDB backend: every timer is stored in the
//! `timers` column family (so snapshots hold them), and the head of each
//! domain's queue is cached in memory.
//!
//! Why a cache: firing a timer deletes it, and a RocksDB delete is a
//! tombstone until compaction. A queue that sought its first timer from the
//! start of the domain would step over every timer fired since the last
//! compaction, so firing n timers would cost O(n²) (Nexmark q5, a timer per
//! auction and window, spent minutes there). As Flink's RocksDB timer
//! queue does, the smallest timers live in memory too: every stored timer
//! whose key is below `bound` is in `head`. Firing reads memory, and a
//! refill seeks to `bound`, past every tombstone a firing left.

use super::keys::{domain_byte, prefix_end, split_timer_key};
use super::storage_error;
use crate::state::key_group::KeyGroupRange;
use crate::state::{StateError, TimeDomain};
use ::rocksdb::{ColumnFamily, DB, Direction, IteratorMode, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeSet;

/// Timers a refill reads into the head at once.
const REFILL: usize = 1024;

/// Above this many cached timers the largest half leaves memory (they stay
/// stored): the head of a queue that only grows stays bounded.
const MAX_HEAD: usize = 4 * REFILL;

/// One domain's queue.
struct Queue {
    /// Cached timers (whole timer keys, ordered as they fire).
    head: BTreeSet<Vec<u8>>,
    /// Every stored timer of this domain with a key below `bound` is in
    /// `head`; `None`: every stored timer is.
    bound: Option<Vec<u8>>,
    /// Stored timers of this domain.
    count: usize,
}

impl Queue {
    fn cached(&self, key: &[u8]) -> bool {
        self.bound.as_deref().is_none_or(|b| key < b)
    }

    /// Moves the largest half of an oversized head out of memory.
    fn trim(&mut self) {
        if self.head.len() > MAX_HEAD {
            let first_out = self.head.iter().nth(MAX_HEAD / 2).cloned().expect("the head is longer");
            self.head.split_off(&first_out);
            self.bound = Some(first_out);
        }
    }
}

/// Both domains' queues, over the backend's `timers` column family.
pub(super) struct Timers {
    queues: [Queue; 2],
}

impl Timers {
    /// The queues of a new, empty database: nothing stored, all cached.
    pub(super) fn empty() -> Timers {
        let queue = || Queue { head: BTreeSet::new(), bound: None, count: 0 };
        Timers { queues: [queue(), queue()] }
    }

    /// The queues of a database restored with timers: counted, none cached.
    pub(super) fn restored(db: &DB, cf: &ColumnFamily) -> Result<Timers, StateError> {
        Self::restored_in(db, cf, &WriteOptions::default(), None)
    }

    /// The same, for a database taken over at a live rescale that may hold
    /// timers of key groups outside `keep`: those are deleted.
    pub(super) fn restored_in(
        db: &DB,
        cf: &ColumnFamily,
        write: &WriteOptions,
        keep: Option<KeyGroupRange>,
    ) -> Result<Timers, StateError> {
        let mut t = Timers::empty();
        for (i, q) in t.queues.iter_mut().enumerate() {
            q.bound = Some(vec![i as u8]);
        }
        let mut foreign = WriteBatch::default();
        for item in db.iterator_cf(cf, IteratorMode::Start) {
            let (k, _) = item.map_err(storage_error)?;
            match split_timer_key(&k) {
                Some((d, _, kg, _)) if keep.is_none_or(|r| r.contains(kg)) => {
                    t.queues[usize::from(domain_byte(d))].count += 1;
                }
                Some(_) => foreign.delete_cf(cf, &k),
                None => {}
            }
        }
        if !foreign.is_empty() {
            db.write_opt(foreign, write).map_err(storage_error)?;
        }
        Ok(t)
    }

    /// Stores the timer `key` (a `timer_key`) unless it is already there.
    pub(super) fn register(
        &mut self,
        db: &DB,
        cf: &ColumnFamily,
        write: &WriteOptions,
        d: TimeDomain,
        key: Vec<u8>,
    ) -> Result<(), StateError> {
        let q = &mut self.queues[usize::from(domain_byte(d))];
        if q.cached(&key) {
            if q.head.contains(&key) {
                return Ok(());
            }
            db.put_cf_opt(cf, &key, b"", write).map_err(storage_error)?;
            q.head.insert(key);
            q.trim();
        } else {
            if db.get_pinned_cf(cf, &key).map_err(storage_error)?.is_some() {
                return Ok(());
            }
            db.put_cf_opt(cf, &key, b"", write).map_err(storage_error)?;
        }
        q.count += 1;
        Ok(())
    }

    /// Removes the timer `key`, if stored.
    pub(super) fn delete(
        &mut self,
        db: &DB,
        cf: &ColumnFamily,
        write: &WriteOptions,
        d: TimeDomain,
        key: &[u8],
    ) -> Result<(), StateError> {
        let q = &mut self.queues[usize::from(domain_byte(d))];
        let stored = if q.cached(key) {
            q.head.contains(key)
        } else {
            db.get_pinned_cf(cf, key).map_err(storage_error)?.is_some()
        };
        if stored {
            db.delete_cf_opt(cf, key, write).map_err(storage_error)?;
            q.head.remove(key);
            q.count -= 1;
        }
        Ok(())
    }

    /// Removes and returns the earliest timer of `d` due at `up_to`:
    /// its time and key.
    pub(super) fn pop_due(
        &mut self,
        db: &DB,
        cf: &ColumnFamily,
        write: &WriteOptions,
        d: TimeDomain,
        up_to: i64,
    ) -> Option<(i64, Vec<u8>)> {
        let q = &mut self.queues[usize::from(domain_byte(d))];
        if q.head.is_empty() {
            let from = q.bound.clone()?;
            let rows = first_keys(db, cf, d, &from, REFILL).ok()?;
            q.bound = (rows.len() == REFILL).then(|| rows.last().map(|k| [k.as_slice(), &[0]].concat())).flatten();
            q.head.extend(rows);
        }
        let first = q.head.first()?;
        let (_, time, _, key) = split_timer_key(first)?;
        if time > up_to {
            return None;
        }
        let key = key.to_vec();
        db.delete_cf_opt(cf, first, write).ok()?;
        q.head.pop_first();
        q.count -= 1;
        Some((time, key))
    }

    /// The time of the earliest timer of `d`.
    pub(super) fn next(&self, db: &DB, cf: &ColumnFamily, d: TimeDomain) -> Option<i64> {
        let q = &self.queues[usize::from(domain_byte(d))];
        let first = match (q.head.first(), &q.bound) {
            (Some(k), _) => k.clone(),
            (None, Some(from)) => first_keys(db, cf, d, from, 1).ok()?.pop()?,
            (None, None) => return None,
        };
        split_timer_key(&first).map(|(_, t, _, _)| t)
    }

    /// Stored timers of `d`.
    pub(super) fn count(&self, d: TimeDomain) -> usize {
        self.queues[usize::from(domain_byte(d))].count
    }
}

/// Up to `max` timer keys of domain `d`, from `from` on.
fn first_keys(db: &DB, cf: &ColumnFamily, d: TimeDomain, from: &[u8], max: usize) -> Result<Vec<Vec<u8>>, StateError> {
    let mut ro = ReadOptions::default();
    if let Some(end) = prefix_end(&[domain_byte(d)]) {
        ro.set_iterate_upper_bound(end);
    }
    let mut out = Vec::new();
    for item in db.iterator_cf_opt(cf, ro, IteratorMode::From(from, Direction::Forward)).take(max) {
        out.push(item.map_err(storage_error)?.0.to_vec());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::rocksdb::keys::timer_key;

    fn open(dir: &std::path::Path) -> DB {
        let mut o = ::rocksdb::Options::default();
        o.create_if_missing(true);
        o.create_missing_column_families(true);
        DB::open_cf(&o, dir, ["timers"]).unwrap()
    }

    /// Many more timers than the head holds, registered out of order,
    /// some deleted, some restored into a fresh queue: each fires once, in
    /// time order, and the count follows.
    #[test]
    fn a_queue_larger_than_its_head_fires_every_timer_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let cf = db.cf_handle("timers").unwrap();
        let w = WriteOptions::default();
        let ev = TimeDomain::EventTime;
        let mut t = Timers::empty();
        let n = 3 * MAX_HEAD as i64;
        // A permutation of 0..n (n is not a multiple of 7919).
        let times: Vec<i64> = (0..n).map(|i| (i * 7919) % n).collect();
        for &time in &times {
            t.register(&db, cf, &w, ev, timer_key(ev, time, 0, b"k")).unwrap();
            t.register(&db, cf, &w, ev, timer_key(ev, time, 0, b"k")).unwrap();
        }
        assert_eq!(t.count(ev), n as usize);
        for time in (0..n).filter(|t| t % 5 == 0) {
            t.delete(&db, cf, &w, ev, &timer_key(ev, time, 0, b"k")).unwrap();
        }
        let mut fired = Vec::new();
        while fired.len() < 100 {
            fired.push(t.pop_due(&db, cf, &w, ev, i64::MAX).unwrap().0);
        }
        // What is left is found again by a queue that knows nothing cached.
        let mut t = Timers::restored(&db, cf).unwrap();
        assert_eq!(t.count(ev), (0..n).filter(|t| t % 5 != 0).count() - 100);
        // A timer earlier than all that is left, registered after the restore.
        t.register(&db, cf, &w, ev, timer_key(ev, -1, 0, b"k")).unwrap();
        assert_eq!(t.next(&db, cf, ev), Some(-1));
        assert_eq!(t.pop_due(&db, cf, &w, ev, -1), Some((-1, b"k".to_vec())));
        assert_eq!(t.next(&db, cf, ev), Some(fired.last().unwrap() + 1 + i64::from(fired.last().unwrap() % 5 == 4)));
        while let Some((time, _)) = t.pop_due(&db, cf, &w, ev, i64::MAX) {
            fired.push(time);
        }
        let expected: Vec<i64> = (0..n).filter(|t| t % 5 != 0).collect();
        assert_eq!(fired, expected);
        assert_eq!(t.count(ev), 0);
        assert_eq!(t.next(&db, cf, ev), None);
    }
}
