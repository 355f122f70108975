//! Unit tests of the key-group hand-off: every state kind, TTL, timers,
//! operator and broadcast state, compared with the canonical-snapshot path.

use super::*;
use crate::state::HandOff;
use crate::state::handoff::{Handed, hand_off_state, take_over_state};
use crate::state::key_group::{key_group_of_hash, key_hash};
use crate::state::snapshot::visit_snapshot;
use crate::state::snapshot::{OperatorShare, restore_snapshot_stream, write_snapshot};
use crate::state::ttl::{Clock, TtlBackend};
use crate::state::{KeyRef, Redistribution, StateBackend, StateKind, TtlConfig};
use std::collections::BTreeMap;

type Backend = Box<dyn StateBackend>;

fn clock() -> Clock {
    Arc::new(|| 1_000)
}

fn hashmap(range: KeyGroupRange, max_parallelism: u32) -> Backend {
    Box::new(TtlBackend::new(HashMapBackend::new(range), clock(), max_parallelism))
}

/// Every kind of state an operator can have, one of them with TTL and
/// a newer version.
fn descriptors() -> Vec<StateDescriptor> {
    let mut ttl = StateKind::Value.descriptor("session");
    ttl.ttl = Some(TtlConfig { ttl_ms: 60_000, renew_on_read: true, return_expired: false });
    ttl.version = 3;
    ttl.encoding = "postcard".into();
    let mut union = StateKind::OperatorList.descriptor("union");
    union.redistribution = Some(Redistribution::Union);
    vec![
        StateKind::Value.descriptor("count"),
        StateKind::List.descriptor("events"),
        StateKind::Map.descriptor("attrs"),
        ttl,
        StateKind::OperatorList.descriptor("offsets"),
        union,
        StateKind::BroadcastMap.descriptor("rules"),
    ]
}

/// A state's id in `b`, by name.
fn id(b: &dyn StateBackend, name: &str) -> StateId {
    b.descriptors().iter().position(|d| d.name == name).unwrap() as StateId
}

/// `parallelism` old subtasks over `max_parallelism` key groups with
/// `keys` keys in all, every state filled. Subtask `i` registers the
/// states rotated by `i`, so ids differ between subtasks.
fn old_subtasks(parallelism: u32, max_parallelism: u32, keys: usize) -> Vec<Backend> {
    old_subtasks_on(parallelism, max_parallelism, keys, &|range| hashmap(range, max_parallelism))
}

/// The same, on the backends `new` opens.
fn old_subtasks_on(
    parallelism: u32,
    max_parallelism: u32,
    keys: usize,
    new: &dyn Fn(KeyGroupRange) -> Backend,
) -> Vec<Backend> {
    let mut old: Vec<Backend> = (0..parallelism)
        .map(|i| {
            let mut b = new(KeyGroupRange::for_subtask(i, parallelism, max_parallelism));
            let mut d = descriptors();
            let n = d.len();
            d.rotate_left(i as usize % n);
            for d in d {
                b.register(d).unwrap();
            }
            b
        })
        .collect();
    for k in 0..keys {
        let key = format!("key-{k}").into_bytes();
        let hash = key_hash(&key);
        let kg = key_group_of_hash(hash, max_parallelism);
        let owner = crate::state::key_group::subtask_for_key_group(kg, max_parallelism, parallelism);
        let b = old[owner as usize].as_mut();
        let at = KeyRef { key: &key, hash, key_group: kg };
        b.value_set(id(b, "count"), at, format!("{k}").as_bytes()).unwrap();
        if k % 2 == 0 {
            let items: Vec<Vec<u8>> = (0..k % 5).map(|j| format!("e{j}").into_bytes()).collect();
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            b.list_add(id(b, "events"), at, &refs).unwrap();
        }
        if k % 3 == 0 {
            b.map_put(id(b, "attrs"), at, b"b", b"2").unwrap();
            b.map_put(id(b, "attrs"), at, b"a", format!("{k}").as_bytes()).unwrap();
        }
        if k % 4 == 0 {
            b.value_set(id(b, "session"), at, b"s").unwrap();
        }
        if k % 5 == 0 {
            b.timer_register(TimeDomain::EventTime, at, (k % 17) as i64).unwrap();
            b.timer_register(TimeDomain::ProcessingTime, at, -(k as i64)).unwrap();
        }
    }
    for (i, b) in old.iter_mut().enumerate() {
        let b = b.as_mut();
        let items: Vec<Vec<u8>> = (0..7 + i).map(|j| format!("{i}-{j}").into_bytes()).collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        b.operator_list_add(id(b, "offsets"), &refs).unwrap();
        b.operator_list_add(id(b, "union"), &refs[..2]).unwrap();
        b.broadcast_put(id(b, "rules"), b"r1", b"x").unwrap();
        b.broadcast_put(id(b, "rules"), b"r0", b"y").unwrap();
    }
    old
}

/// A backend's whole state, by section and (state name, key), each
/// key's values in stored order (hash tables iterate in no set order).
type Dump = BTreeMap<(Option<u16>, String), Vec<String>>;

fn dump(b: &mut dyn StateBackend, max_parallelism: u32) -> (Vec<StateDescriptor>, Dump) {
    let bytes = write_snapshot(b.freeze().as_mut(), max_parallelism).unwrap();
    let names: Vec<String> = b.descriptors().iter().map(|d| d.name.clone()).collect();
    let name = |s: StateId| names[s as usize].clone();
    let mut m = Dump::new();
    visit_snapshot(&mut &bytes[..], &mut |of, e| {
        let (group, value) = match *e {
            SnapshotEntry::Value { state, key, value } => (format!("{} {key:?}", name(state)), format!("{value:?}")),
            SnapshotEntry::ListItem { state, key, value } => (format!("{} {key:?}", name(state)), format!("{value:?}")),
            SnapshotEntry::MapItem { state, key, user_key, value } => {
                (format!("{} {key:?}", name(state)), format!("{user_key:?}={value:?}"))
            }
            SnapshotEntry::Timer { domain, time, key } => (format!("timer {domain:?} {key:?}"), format!("{time}")),
            SnapshotEntry::OperatorItem { state, value } => (name(state), format!("{value:?}")),
            SnapshotEntry::BroadcastItem { state, user_key, value } => (name(state), format!("{user_key:?}={value:?}")),
        };
        m.entry((of, group)).or_default().push(value);
    })
    .unwrap();
    (b.descriptors().to_vec(), m)
}

/// The new subtasks as the canonical snapshot path builds them.
fn by_snapshot(
    old: &mut [Backend],
    to: u32,
    max_parallelism: u32,
    new: &dyn Fn(KeyGroupRange) -> Backend,
) -> Vec<Backend> {
    let snapshots: Vec<Vec<u8>> =
        old.iter_mut().map(|b| write_snapshot(b.freeze().as_mut(), max_parallelism).unwrap()).collect();
    (0..to)
        .map(|i| {
            let range = KeyGroupRange::for_subtask(i, to, max_parallelism);
            let mut b = new(range);
            for (from, bytes) in snapshots.iter().enumerate() {
                let share = OperatorShare::Rescaled { from: from as u32, to: i, parallelism: to };
                restore_snapshot_stream(&mut &bytes[..], b.as_mut(), range, max_parallelism, share).unwrap();
            }
            b
        })
        .collect()
}

/// What one old subtask sends: the snapshot and the hand-off.
type Sent = (Vec<u8>, Option<Arc<HandOff>>);

/// A hashmap hand-off's tables.
fn tables(h: &HandOff) -> &KeyGroupHandOff {
    match h {
        HandOff::Tables(t) => t,
        other => panic!("a hashmap backend hands off tables, not {other:?}"),
    }
}

/// The new subtasks as a live rescale builds them now: a hand-off where
/// the old backend has one. Also returns what was handed.
fn by_hand_off(
    old: &mut [Backend],
    to: u32,
    max_parallelism: u32,
    new: &dyn Fn(KeyGroupRange) -> Backend,
) -> (Vec<Backend>, Vec<Sent>) {
    by_hand_off_giving_up(old, to, max_parallelism, new, false)
}

/// The same; with `give_up`, each old backend also gives up its live
/// state into its hand-off, as an old subtask does, and is not used after.
fn by_hand_off_giving_up(
    old: &mut [Backend],
    to: u32,
    max_parallelism: u32,
    new: &dyn Fn(KeyGroupRange) -> Backend,
    give_up: bool,
) -> (Vec<Backend>, Vec<Sent>) {
    let handed: Vec<Sent> = old
        .iter_mut()
        .map(|b| {
            let mut h = hand_off_state(b.freeze().as_mut(), max_parallelism).unwrap();
            if give_up && let Some(k) = h.keyed.as_mut() {
                b.give_up_into(k);
            }
            (h.snapshot, h.keyed.map(Arc::new))
        })
        .collect();
    let backends = (0..to)
        .map(|i| {
            let range = KeyGroupRange::for_subtask(i, to, max_parallelism);
            let mut b = new(range);
            let handed: Vec<Handed<'_>> = handed
                .iter()
                .enumerate()
                .map(|(from, (snapshot, keyed))| Handed {
                    snapshot,
                    keyed: keyed.as_deref(),
                    share: OperatorShare::Rescaled { from: from as u32, to: i, parallelism: to },
                })
                .collect();
            take_over_state(b.as_mut(), &handed, range, max_parallelism).unwrap();
            b
        })
        .collect();
    (backends, handed)
}

/// Groups and timer sets a hand-off still holds.
fn left(h: &KeyGroupHandOff) -> usize {
    let handed = h.lock();
    let groups: usize = handed
        .tables
        .iter()
        .map(|t| match t {
            FrozenTable::Value(g) => g.iter().flatten().count(),
            FrozenTable::List(g) => g.iter().flatten().count(),
            FrozenTable::Map(g) => g.iter().flatten().count(),
            _ => 0,
        })
        .sum();
    groups + handed.timers.iter().flatten().count()
}

fn rescale_agrees(from: u32, to: u32, max_parallelism: u32, keys: usize) {
    let new = |range| hashmap(range, max_parallelism);
    let mut old = old_subtasks(from, max_parallelism, keys);
    let mut expected = by_snapshot(&mut old, to, max_parallelism, &new);
    let (mut got, handed) = by_hand_off(&mut old, to, max_parallelism, &new);
    for (snapshot, keyed) in &handed {
        let keyed = tables(keyed.as_ref().expect("a hashmap backend hands its key groups off"));
        let mut keyed_sections = 0;
        visit_snapshot(&mut &snapshot[..], &mut |of, _| keyed_sections += usize::from(of.is_some())).unwrap();
        assert_eq!(keyed_sections, 0, "no keyed entry is encoded beside a hand-off");
        // Only a set of timers stays behind when no new subtask held
        // the old subtask's whole range (each copied its own out).
        let whole = (0..to).any(|i| {
            let r = KeyGroupRange::for_subtask(i, to, max_parallelism);
            r.start <= keyed.range.start && keyed.range.end <= r.end
        });
        assert!(left(keyed) <= if whole { 0 } else { 2 }, "every key group was adopted");
    }
    let mut keys_total = 0;
    for (i, (e, g)) in expected.iter_mut().zip(got.iter_mut()).enumerate() {
        let (e_descriptors, e_dump) = dump(e.as_mut(), max_parallelism);
        let (g_descriptors, g_dump) = dump(g.as_mut(), max_parallelism);
        assert_eq!(g_descriptors, e_descriptors, "{from} -> {to}, new subtask {i}: descriptors");
        assert_eq!(g_dump.len(), e_dump.len(), "{from} -> {to}, new subtask {i}: as many keys and states");
        for (k, v) in &e_dump {
            assert_eq!(g_dump.get(k), Some(v), "{from} -> {to}, new subtask {i}: {k:?}");
        }
        assert_eq!(g_dump, e_dump);
        keys_total += g.key_count(id(g.as_ref(), "count"));
        for d in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
            assert_eq!(g.timer_count(d), e.timer_count(d));
            assert_eq!(g.timer_next(d), e.timer_next(d));
        }
    }
    assert_eq!(keys_total, keys, "every key arrived once");
}

#[test]
fn two_to_three_and_three_to_one_equal_the_snapshot_path() {
    rescale_agrees(2, 3, 128, 5_000);
    rescale_agrees(3, 1, 128, 5_000);
    rescale_agrees(1, 4, 16, 2_000);
    rescale_agrees(4, 4, 16, 2_000);
}

#[test]
fn adopted_state_reads_and_writes_like_restored_state() {
    let max_parallelism = 32;
    let mut old = old_subtasks(2, max_parallelism, 1_000);
    let (mut got, _) = by_hand_off(&mut old, 3, max_parallelism, &|range| hashmap(range, max_parallelism));
    // The old subtasks' state does not change under the new ones.
    let before: Vec<Dump> = old.iter_mut().map(|b| dump(b.as_mut(), max_parallelism).1).collect();
    for k in 0..1_000 {
        let key = format!("key-{k}").into_bytes();
        let hash = key_hash(&key);
        let kg = key_group_of_hash(hash, max_parallelism);
        let to = crate::state::key_group::subtask_for_key_group(kg, max_parallelism, 3);
        let b = got[to as usize].as_mut();
        let at = KeyRef { key: &key, hash, key_group: kg };
        let count = id(b, "count");
        assert_eq!(b.value_get(count, at).unwrap(), Some(format!("{k}").into_bytes()));
        b.value_set(count, at, b"changed").unwrap();
        let session = id(b, "session");
        // Stored under TTL with the expiry it had: still live, readable
        // through the TTL layer.
        assert_eq!(b.value_get(session, at).unwrap().is_some(), k % 4 == 0, "key-{k}");
        let attrs = id(b, "attrs");
        b.map_put(attrs, at, b"c", b"3").unwrap();
    }
    let after: Vec<Dump> = old.iter_mut().map(|b| dump(b.as_mut(), max_parallelism).1).collect();
    assert!(before == after, "writes to adopted groups copy them, never reach the old subtask's");
}

#[test]
fn a_mismatched_hand_off_is_an_error_not_a_panic() {
    let max_parallelism = 16;
    let mut old = old_subtasks(1, max_parallelism, 100);
    let h = hand_off_state(old[0].freeze().as_mut(), max_parallelism).unwrap();
    let keyed = h.keyed.unwrap();
    let range = KeyGroupRange { start: 0, end: 16 };
    // States not registered (the snapshot was never restored).
    let mut empty = hashmap(range, max_parallelism);
    assert!(matches!(empty.adopt_key_groups(&[&keyed]), Some(Err(StateError::HandOff(_)))));
    // A state of the same name but another kind.
    let mut other = hashmap(range, max_parallelism);
    other.register(StateKind::Map.descriptor("count")).unwrap();
    assert!(matches!(other.adopt_key_groups(&[&keyed]), Some(Err(StateError::KindMismatch { .. }))));
    // Nothing moved: a fitting backend still gets every key.
    let mut fits = hashmap(range, max_parallelism);
    let handed = Handed { snapshot: &h.snapshot, keyed: Some(&keyed), share: OperatorShare::All };
    take_over_state(fits.as_mut(), &[handed], range, max_parallelism).unwrap();
    assert_eq!(fits.key_count(id(fits.as_ref(), "count")), 100);
    assert_eq!(left(tables(&keyed)), 0);
}

/// RocksDB backends hand their databases over: a live rescale 2 -> 3 -> 1
/// (the second from backends of several databases) leaves what the
/// snapshot path leaves, whether the new subtasks open copies of the files
/// or take a database given up whole as it is; and a backend that cannot
/// adopt databases (hashmap) restores them through snapshots, with the
/// same result.
#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_databases_handed_over_equal_the_snapshot_path() {
    use crate::state::rocksdb::{RocksDbBackend, RocksDbMemory};
    let dir = tempfile::tempdir().unwrap();
    let max_parallelism = 32;
    // A small write-back cache: layers are pending at every freeze.
    let memory = RocksDbMemory { write_cache: 16 << 10, ..RocksDbMemory::default() };
    let rocksdb = |range: KeyGroupRange| -> Backend {
        let db = RocksDbBackend::open(dir.path(), "t", range, memory).unwrap();
        Box::new(TtlBackend::new(db, clock(), max_parallelism))
    };
    let mut old = old_subtasks_on(2, max_parallelism, 3_000, &rocksdb);
    for (from, to) in [(2, 3), (3, 1)] {
        let mut expected = by_snapshot(&mut old, to, max_parallelism, &rocksdb);
        let mut by_hashmap = by_snapshot(&mut old, to, max_parallelism, &|r| hashmap(r, max_parallelism));
        let (mut got, handed) = by_hand_off(&mut old, to, max_parallelism, &rocksdb);
        for (snapshot, keyed) in &handed {
            assert!(matches!(keyed.as_deref(), Some(HandOff::Databases(_))), "{from} -> {to}: databases");
            let mut keyed_sections = 0;
            visit_snapshot(&mut &snapshot[..], &mut |of, _| keyed_sections += usize::from(of.is_some())).unwrap();
            assert_eq!(keyed_sections, 0, "no keyed entry is encoded beside a hand-off");
        }
        let (mut into_hashmap, _) = by_hand_off(&mut old, to, max_parallelism, &|r| hashmap(r, max_parallelism));
        // Last: the old backends are not used after giving up.
        let (mut live, handed) = by_hand_off_giving_up(&mut old, to, max_parallelism, &rocksdb, true);
        for (_, keyed) in &handed {
            let Some(HandOff::Databases(d)) = keyed.as_deref() else { panic!("{from} -> {to}: databases") };
            // 2 -> 3 splits every old range, 3 -> 1 takes each whole.
            let whole = (0..to).any(|i| KeyGroupRange::for_subtask(i, to, max_parallelism).covers(d.range()));
            let (left, given) = d.live_left();
            assert_eq!(left, if whole { 0 } else { given }, "{from} -> {to}: databases taken as they are");
        }
        let mut keys_total = 0;
        for i in 0..to as usize {
            let want = dump(expected[i].as_mut(), max_parallelism);
            assert_eq!(dump(got[i].as_mut(), max_parallelism), want, "{from} -> {to}, new subtask {i}");
            assert_eq!(dump(live[i].as_mut(), max_parallelism), want, "{from} -> {to} given up, new subtask {i}");
            let want = dump(by_hashmap[i].as_mut(), max_parallelism);
            assert_eq!(dump(into_hashmap[i].as_mut(), max_parallelism), want, "{from} -> {to} into hashmap, {i}");
            keys_total += got[i].key_count(id(got[i].as_ref(), "count"));
            assert_eq!(
                live[i].key_count(id(live[i].as_ref(), "count")),
                got[i].key_count(id(got[i].as_ref(), "count"))
            );
            for d in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
                assert_eq!(got[i].timer_count(d), expected[i].timer_count(d));
                assert_eq!(got[i].timer_next(d), expected[i].timer_next(d));
                assert_eq!(live[i].timer_count(d), expected[i].timer_count(d));
                assert_eq!(live[i].timer_next(d), expected[i].timer_next(d));
            }
        }
        assert_eq!(keys_total, 3_000, "{from} -> {to}: every key arrived once");
        drop(got);
        // The new subtasks go on changing state: the next rescale starts
        // from them, some of several databases.
        let mut got = live;
        for b in got.iter_mut() {
            let b = b.as_mut();
            let count = id(b, "count");
            let range = b.freeze().range();
            for k in (0..3_000).step_by(7) {
                let key = format!("key-{k}").into_bytes();
                let hash = key_hash(&key);
                let at = KeyRef { key: &key, hash, key_group: key_group_of_hash(hash, max_parallelism) };
                if range.contains(at.key_group) {
                    b.value_set(count, at, b"later").unwrap();
                }
            }
        }
        old = got;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn any_state_arrives_as_the_snapshot_path_brings_it(
        ops in proptest::collection::vec(
            (0u8..7, proptest::collection::vec(0u8..6, 1..3), proptest::collection::vec(0u8..255, 0..5), -4i64..4),
            0..120,
        ),
        from in 1u32..5,
        to in 1u32..5,
    ) {
        let max_parallelism = 8;
        let mut old: Vec<Backend> = (0..from)
            .map(|i| {
                let mut b = hashmap(KeyGroupRange::for_subtask(i, from, max_parallelism), max_parallelism);
                for d in descriptors() {
                    b.register(d).unwrap();
                }
                b
            })
            .collect();
        for (n, (op, key, bytes, time)) in ops.iter().enumerate() {
            let hash = key_hash(key);
            let kg = key_group_of_hash(hash, max_parallelism);
            let owner = crate::state::key_group::subtask_for_key_group(kg, max_parallelism, from);
            let b = old[owner as usize].as_mut();
            let at = KeyRef { key, hash, key_group: kg };
            match op {
                0 => b.value_set(0, at, bytes).unwrap(),
                1 => b.list_add(1, at, &[bytes]).unwrap(),
                2 => b.map_put(2, at, bytes, key).unwrap(),
                3 => b.value_set(3, at, bytes).unwrap(),
                4 => {
                    // Operator state on any old subtask.
                    let b = old[n % from as usize].as_mut();
                    b.operator_list_add(if *time > 0 { 4 } else { 5 }, &[bytes]).unwrap();
                }
                5 => {
                    for b in old.iter_mut() {
                        b.broadcast_put(6, bytes, key).unwrap();
                    }
                }
                _ => {
                    let d = if *time > 0 { TimeDomain::EventTime } else { TimeDomain::ProcessingTime };
                    b.timer_register(d, at, *time).unwrap();
                }
            }
        }
        let new = |range| hashmap(range, max_parallelism);
        let mut expected = by_snapshot(&mut old, to, max_parallelism, &new);
        let (mut got, _) = by_hand_off(&mut old, to, max_parallelism, &new);
        for (e, g) in expected.iter_mut().zip(got.iter_mut()) {
            proptest::prop_assert_eq!(dump(g.as_mut(), max_parallelism), dump(e.as_mut(), max_parallelism));
        }
    }
}
