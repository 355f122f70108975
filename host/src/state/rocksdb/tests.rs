//! Tests of the RocksDB backend: the conformance suite, the write-back
//! cache, TTL in compaction, directories, and the key layout.

use super::*;
use std::sync::Arc;

#[test]
fn passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let localdir = dir.path().to_path_buf();
    crate::state::conformance::run_all(&move |range| {
        Box::new(RocksDbBackend::open(&localdir, "test", range, RocksDbMemory::default()).unwrap())
    });
}

#[test]
fn passes_the_conformance_suite_when_the_write_back_cache_keeps_filling() {
    let dir = tempfile::tempdir().unwrap();
    let localdir = dir.path().to_path_buf();
    let memory = RocksDbMemory { write_cache: 512, ..RocksDbMemory::default() };
    crate::state::conformance::run_all(&move |range| {
        Box::new(RocksDbBackend::open(&localdir, "test", range, memory).unwrap())
    });
}

#[test]
fn a_full_write_back_cache_loses_no_value_in_a_batch_read() {
    let dir = tempfile::tempdir().unwrap();
    let range = KeyGroupRange { start: 0, end: 16 };
    let memory = RocksDbMemory { write_cache: 1024, ..RocksDbMemory::default() };
    let mut b = RocksDbBackend::open(dir.path(), "t", range, memory).unwrap();
    let s = b.register(StateKind::Value.descriptor("n")).unwrap();
    let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i}").into_bytes()).collect();
    let refs: Vec<KeyRef<'_>> = keys
        .iter()
        .map(|k| {
            let hash = crate::state::key_group::key_hash(k);
            KeyRef { key: k, hash, key_group: crate::state::key_group::key_group_of_hash(hash, 16) }
        })
        .collect();
    let values: Vec<Option<&[u8]>> = keys.iter().map(|k| Some(k.as_slice())).collect();
    b.value_set_many(s, &refs, &values).unwrap();
    for _ in 0..3 {
        let (mut out, mut spans) = (Vec::new(), Vec::new());
        b.value_get_many(s, &refs, &mut out, &mut spans).unwrap();
        for (k, (start, len, present)) in keys.iter().zip(spans) {
            assert!(present);
            assert_eq!(&out[start as usize..(start + len) as usize], &k[..]);
        }
    }
    assert_eq!(b.key_count(s), 500);
}

impl RocksDbBackend {
    /// Every state's entries on disk, compacted twice (merged lists
    /// reach the compaction filter as values only the second time).
    fn compact_and_count(&mut self) -> Vec<usize> {
        self.write_back().unwrap();
        (0..self.descriptors.len() as StateId)
            .map(|s| {
                for _ in 0..2 {
                    self.db().flush_cf(self.cf(s)).unwrap();
                    self.db().compact_range_cf(self.cf(s), None::<&[u8]>, None::<&[u8]>);
                }
                self.scan(self.cf(s), b"", b"", usize::MAX).unwrap().len()
            })
            .collect()
    }
}

#[test]
fn compaction_drops_what_expired_without_any_access() {
    use crate::state::TtlConfig;
    use crate::state::ttl::TtlBackend;
    use std::sync::atomic::AtomicI64;
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicI64::new(1_000));
    let clock_now = now.clone();
    let clock: Clock = Arc::new(move || clock_now.load(Ordering::SeqCst));
    let range = KeyGroupRange { start: 0, end: 16 };
    let db = RocksDbBackend::open(dir.path(), "t", range, RocksDbMemory::default()).unwrap();
    let mut b = TtlBackend::new(db, clock, 16);
    let ttl = Some(TtlConfig { ttl_ms: 100, renew_on_read: false, return_expired: false });
    let [value, list, map] = [StateKind::Value, StateKind::List, StateKind::Map]
        .map(|kind| b.register(StateDescriptor { ttl, ..kind.descriptor(kind.name()) }).unwrap());
    let plain = b.register(StateKind::Value.descriptor("no-ttl")).unwrap();
    let keys: Vec<Vec<u8>> = (0..300).map(|i| format!("k{i}").into_bytes()).collect();
    fn at(k: &[u8]) -> KeyRef<'_> {
        let hash = crate::state::key_group::key_hash(k);
        KeyRef { key: k, hash, key_group: crate::state::key_group::key_group_of_hash(hash, 16) }
    }
    for k in &keys {
        b.value_set(value, at(k), b"v").unwrap();
        b.list_add(list, at(k), &[b"old"]).unwrap();
        b.map_put(map, at(k), b"uk", b"m").unwrap();
        b.value_set(plain, at(k), b"kept").unwrap();
    }
    // Written later: 100 keys of each state still live when the rest
    // expired, and 100 lists with one live element among expired ones.
    now.store(1_050, Ordering::SeqCst);
    for k in &keys[..100] {
        b.value_set(value, at(k), b"v2").unwrap();
        b.map_put(map, at(k), b"uk", b"m2").unwrap();
        b.list_add(list, at(k), &[b"new"]).unwrap();
    }
    assert_eq!(b.inner().compact_and_count(), vec![300, 300, 300, 300], "nothing expired yet");
    now.store(1_120, Ordering::SeqCst);
    assert_eq!(b.inner().compact_and_count(), vec![100, 100, 100, 300], "expired entries gone, others kept");
    assert_eq!(b.value_get(value, at(&keys[0])).unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(b.list_read(list, at(&keys[0]), 0, 10).unwrap(), vec![b"new".to_vec()]);
    assert_eq!(b.value_get(value, at(&keys[200])).unwrap(), None);
    now.store(1_200, Ordering::SeqCst);
    assert_eq!(b.inner().compact_and_count(), vec![0, 0, 0, 300]);
}

#[test]
fn the_working_directory_goes_away_with_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let b =
        RocksDbBackend::open(dir.path(), "op-0", KeyGroupRange { start: 0, end: 4 }, RocksDbMemory::default()).unwrap();
    let path = b.path().to_path_buf();
    assert!(path.join("db").is_dir());
    drop(b);
    assert!(!path.exists());
}

#[test]
fn directories_of_dead_processes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    // A pid above Linux's maximum: no such process.
    let orphan = dir.path().join("op-0-4194999-0");
    let other_operator = dir.path().join("op-1-4194999-0");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::create_dir_all(&other_operator).unwrap();
    let b =
        RocksDbBackend::open(dir.path(), "op-0", KeyGroupRange { start: 0, end: 4 }, RocksDbMemory::default()).unwrap();
    assert!(!orphan.exists());
    assert!(other_operator.exists(), "only directories of the same subtask name are touched");
    assert!(b.path().exists());
}

#[test]
fn keys_and_timers_sort_as_documented() {
    assert!(timer_key(TimeDomain::EventTime, -5, 0, b"a") < timer_key(TimeDomain::EventTime, 3, 0, b"a"));
    assert!(timer_key(TimeDomain::EventTime, 3, 0, b"b") < timer_key(TimeDomain::EventTime, 3, 1, b"a"));
    assert_eq!(
        split_timer_key(&timer_key(TimeDomain::ProcessingTime, -7, 9, b"k")),
        Some((TimeDomain::ProcessingTime, -7, 9, &b"k"[..]))
    );
    assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
    assert_eq!(prefix_end(&[0xff, 0xff]), None);
    let m = {
        let mut k = map_prefix(3, b"key");
        k.extend_from_slice(b"uk");
        k
    };
    assert_eq!(split_map_key(&m), Some((3, &b"key"[..], &b"uk"[..])));
}
