//! Tests of the RocksDB backend: the conformance suite, the write-back
//! cache, TTL in compaction, directories, and the key layout.

use super::keys::split_timer_key;
use super::*;
use std::collections::BTreeMap;
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

/// A backend of three databases (home and two adopted halves), as a live
/// rescale leaves one: every call routed to the right database.
#[test]
fn passes_the_conformance_suite_as_several_databases() {
    let dir = tempfile::tempdir().unwrap();
    let localdir = dir.path().to_path_buf();
    crate::state::conformance::run_all(&move |range| {
        let memory = RocksDbMemory::default();
        let mut b = RocksDbBackend::open(&localdir, "split", range, memory).unwrap();
        let mid = range.start + (range.end - range.start) / 2;
        // Both halves at once: opened side by side.
        let halves = [KeyGroupRange { start: range.start, end: mid }, KeyGroupRange { start: mid, end: range.end }];
        let olds: Vec<RocksDbBackend> = halves
            .into_iter()
            .filter(|h| !h.is_empty())
            .map(|half| RocksDbBackend::open(&localdir, "old", half, memory).unwrap())
            .collect();
        let handed: Vec<_> = olds
            .into_iter()
            .map(|mut old| old.freeze().hand_off().expect("a RocksDB backend hands its database off"))
            .collect();
        b.adopt_key_groups(&handed.iter().collect::<Vec<_>>()).expect("adopts databases").unwrap();
        assert!(b.databases() > 1);
        Box::new(b)
    });
}

#[test]
fn a_full_write_back_cache_loses_no_value_in_a_batch_read() {
    let dir = tempfile::tempdir().unwrap();
    let range = KeyGroupRange { start: 0, end: 16 };
    let memory = RocksDbMemory { write_cache: 1024, ..RocksDbMemory::default() };
    let mut b = Database::open(dir.path(), "t", range, memory).unwrap();
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

impl Database {
    /// Every state's entries on disk, compacted twice (merged lists
    /// reach the compaction filter as values only the second time).
    fn compact_and_count(&mut self) -> Vec<usize> {
        self.settle().unwrap();
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
    let db = Database::open(dir.path(), "t", range, RocksDbMemory::default()).unwrap();
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
    let b = Database::open(dir.path(), "op-0", KeyGroupRange { start: 0, end: 4 }, RocksDbMemory::default()).unwrap();
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
    let b = Database::open(dir.path(), "op-0", KeyGroupRange { start: 0, end: 4 }, RocksDbMemory::default()).unwrap();
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

fn key_ref(k: &[u8]) -> KeyRef<'_> {
    let hash = crate::state::key_group::key_hash(k);
    KeyRef { key: k, hash, key_group: crate::state::key_group::key_group_of_hash(hash, 16) }
}

/// Every value of state 0 a frozen state holds, read the canonical way.
fn frozen_values(frozen: &mut dyn FrozenState) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for kg in 0..16 {
        frozen
            .key_group(kg, &mut |e| {
                if let crate::state::SnapshotEntry::Value { state: 0, key, value } = e {
                    out.insert(key.to_vec(), value.to_vec());
                }
            })
            .unwrap();
    }
    out
}

/// A frozen state's own files, the layers among them, copied into `to`
/// as a stored incremental checkpoint is downloaded.
fn copy_native(frozen: &mut dyn FrozenState, to: &Path) -> usize {
    let native = frozen.native_checkpoint().expect("RocksDB stores its files").unwrap();
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(&native.dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    for (name, path) in &native.layers {
        std::fs::copy(path, to.join(name)).unwrap();
    }
    native.layers.len()
}

/// Writes and clears values through a cache so small that it keeps
/// freezing into layers, freezes the backend now and then while layers are
/// still being written, and checks every frozen state, read canonically
/// and adopted as an incremental checkpoint, against a plain map of what
/// was written before its freeze.
#[test]
fn checkpoints_taken_while_cache_layers_are_pending_hold_exactly_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let range = KeyGroupRange { start: 0, end: 16 };
    let memory = RocksDbMemory { write_cache: 8 << 10, ..RocksDbMemory::default() };
    let mut b = Database::open(dir.path(), "t", range, memory).unwrap();
    let s = b.register(StateKind::Value.descriptor("n")).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut frozen = Vec::new();
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    for step in 0..20_000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let key = format!("k{}", rng % 3_000).into_bytes();
        if rng.is_multiple_of(7) {
            b.value_clear(s, key_ref(&key)).unwrap();
            model.remove(&key);
        } else {
            let old = b.value_get(s, key_ref(&key)).unwrap();
            assert_eq!(old.as_ref(), model.get(&key), "read at step {step}");
            let value = step.to_le_bytes().to_vec();
            b.value_set(s, key_ref(&key), &value).unwrap();
            model.insert(key, value);
        }
        if step % 4_000 == 3_999 {
            frozen.push((b.freeze(), model.clone()));
        }
    }
    let mut layers_listed = 0;
    for (i, (mut f, expected)) in frozen.into_iter().enumerate() {
        let files = dir.path().join(format!("restore-{i}"));
        layers_listed += copy_native(f.as_mut(), &files);
        assert_eq!(frozen_values(f.as_mut()), expected, "checkpoint {i}, read canonically");
        let descriptors = f.descriptors().to_vec();
        let mut adopted = Database::adopt(dir.path(), &format!("a{i}"), range, memory, &files, descriptors).unwrap();
        for k in 0..3_000 {
            let key = format!("k{k}").into_bytes();
            assert_eq!(
                adopted.value_get(s, key_ref(&key)).unwrap().as_ref(),
                expected.get(&key),
                "checkpoint {i}, adopted"
            );
        }
        assert_eq!(adopted.key_count(s), expected.len());
    }
    assert!(layers_listed > 0, "some checkpoint listed layers its database had not taken in");
}

#[test]
fn a_checkpoint_lists_the_written_values_as_a_layer_and_the_database_takes_them_in_later() {
    let dir = tempfile::tempdir().unwrap();
    let range = KeyGroupRange { start: 0, end: 16 };
    let mut b = Database::open(dir.path(), "t", range, RocksDbMemory::default()).unwrap();
    let s = b.register(StateKind::Value.descriptor("n")).unwrap();
    for k in 0..1_000 {
        b.value_set(s, key_ref(format!("k{k}").as_bytes()), b"1").unwrap();
    }
    let mut first = b.freeze();
    let native = first.native_checkpoint().unwrap().unwrap();
    assert_eq!(native.layers.len(), 1, "one state written: one layer file");
    assert!(native.layers[0].0.starts_with(layers::LAYER_PREFIX));
    // Once written, the next state call ingests the layer: the database
    // itself has the values, and the next checkpoint lists no layer.
    drop(first);
    b.ingest_layers(Wait::All).unwrap();
    assert_eq!(b.get(s, &keys::keyed_key(key_ref(b"k7").key_group, b"k7")).unwrap().as_deref(), Some(&b"1"[..]));
    let mut second = b.freeze();
    assert!(second.native_checkpoint().unwrap().unwrap().layers.is_empty(), "nothing written since");
    assert_eq!(frozen_values(second.as_mut()).len(), 1_000);
}

/// What an incremental uploader may take as already stored after a restore:
/// the files of the adopted checkpoint that `keeps_name` names are in the
/// database under their names with their bytes (a later file of that name
/// is the same file); the layer files are not (they were ingested under new
/// numbers, and a later layer may reuse a name with other contents).
#[test]
fn an_adopted_checkpoint_keeps_its_database_files_under_their_names_and_not_its_layers() {
    let dir = tempfile::tempdir().unwrap();
    let range = KeyGroupRange { start: 0, end: 16 };
    let mut b = Database::open(dir.path(), "t", range, RocksDbMemory::default()).unwrap();
    let s = b.register(StateKind::Value.descriptor("n")).unwrap();
    let l = b.register(StateKind::List.descriptor("l")).unwrap();
    for k in 0..1_000 {
        let key = format!("k{k}");
        b.value_set(s, key_ref(key.as_bytes()), b"1").unwrap();
        b.list_add(l, key_ref(key.as_bytes()), &[b"x"]).unwrap();
    }
    // The first layer goes into the database; the second stays a layer.
    drop(b.freeze());
    b.ingest_layers(Wait::All).unwrap();
    for k in 0..1_000 {
        b.value_set(s, key_ref(format!("k{k}").as_bytes()), b"2").unwrap();
    }
    let mut frozen = b.freeze();
    let files = dir.path().join("stored");
    assert!(copy_native(frozen.as_mut(), &files) > 0, "the checkpoint lists a layer");
    let stored: BTreeMap<String, Vec<u8>> = std::fs::read_dir(&files)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
        .collect();
    let descriptors = frozen.descriptors().to_vec();
    let adopted = Database::adopt(dir.path(), "a", range, RocksDbMemory::default(), &files, descriptors).unwrap();
    let db = adopted.path().join("db");
    let (mut kept, mut layers) = (0, 0);
    for (name, bytes) in &stored {
        let now = std::fs::read(db.join(name)).ok();
        if !name.ends_with(".sst") {
            continue;
        }
        if Database::keeps_name(name) {
            assert_eq!(now.as_ref(), Some(bytes), "{name} is the database's under its name");
            kept += 1;
        } else {
            assert_eq!(now, None, "{name} was ingested under another name");
            layers += 1;
        }
    }
    assert!(kept > 0 && layers > 0, "{kept} database files, {layers} layers");
}
