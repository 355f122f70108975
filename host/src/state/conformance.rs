//! The state backend conformance suite: one set of behaviours every
//! [`StateBackend`] must show, run by each backend's tests.

use super::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use super::{KeyRef, StateBackend, StateError, StateKind, TimeDomain};

/// Builds an empty backend owning `range`.
pub type Factory<'a> = &'a dyn Fn(KeyGroupRange) -> Box<dyn StateBackend>;

const MAX_PARALLELISM: u32 = 16;

/// Keys of the test, all owned by the range `0..MAX_PARALLELISM`.
fn key(k: &[u8]) -> KeyRef<'_> {
    let hash = key_hash(k);
    KeyRef { key: k, hash, key_group: key_group_of_hash(hash, MAX_PARALLELISM) }
}

fn full() -> KeyGroupRange {
    KeyGroupRange { start: 0, end: MAX_PARALLELISM as u16 }
}

/// Runs every check.
pub fn run_all(factory: Factory<'_>) {
    value_state_is_per_key(factory);
    list_state_appends_pages_and_clears(factory);
    map_state_orders_pages_and_removes(factory);
    accumulators_store_like_values(factory);
    operator_list_state_is_per_subtask(factory);
    broadcast_state_is_one_ordered_map(factory);
    timers_fire_in_order_once(factory);
    key_scans_cover_every_key(factory);
    snapshots_round_trip_and_split_by_key_group(factory);
    a_frozen_state_ignores_later_writes(factory);
    registration_checks_names_and_kinds(factory);
    keys_outside_the_range_are_refused(factory);
}

fn value_state_is_per_key(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::Value.descriptor("count")).unwrap();
    assert_eq!(b.value_get(s, key(b"a")).unwrap(), None);
    b.value_set(s, key(b"a"), b"1").unwrap();
    b.value_set(s, key(b"b"), b"22").unwrap();
    b.value_set(s, key(b"a"), b"333").unwrap();
    assert_eq!(b.value_get(s, key(b"a")).unwrap().as_deref(), Some(&b"333"[..]));
    assert_eq!(b.value_get(s, key(b"b")).unwrap().as_deref(), Some(&b"22"[..]));
    assert_eq!(b.key_count(s), 2);
    b.value_clear(s, key(b"a")).unwrap();
    assert_eq!(b.value_get(s, key(b"a")).unwrap(), None);
    assert_eq!(b.key_count(s), 1);
    // An empty value is a value, not an absence.
    b.value_set(s, key(b"e"), b"").unwrap();
    assert_eq!(b.value_get(s, key(b"e")).unwrap(), Some(Vec::new()));
    // The batch paths agree with the single ones.
    b.value_set_many(s, &[key(b"x"), key(b"y"), key(b"b")], &[Some(b"7"), Some(b""), None]).unwrap();
    let (mut out, mut spans) = (Vec::new(), Vec::new());
    b.value_get_many(s, &[key(b"x"), key(b"y"), key(b"b"), key(b"zz")], &mut out, &mut spans).unwrap();
    assert_eq!(out, b"7");
    assert_eq!(spans, vec![(0, 1, true), (1, 0, true), (1, 0, false), (1, 0, false)]);
    // A second state of the same kind is separate.
    let t = b.register(StateKind::Value.descriptor("other")).unwrap();
    assert_ne!(s, t);
    assert_eq!(b.value_get(t, key(b"b")).unwrap(), None);
}

fn list_state_appends_pages_and_clears(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::List.descriptor("events")).unwrap();
    assert_eq!(b.list_len(s, key(b"k")).unwrap(), 0);
    assert!(b.list_read(s, key(b"k"), 0, 10).unwrap().is_empty());
    b.list_add(s, key(b"k"), &[b"0"]).unwrap();
    let more: Vec<Vec<u8>> = (1..600).map(|i| i.to_string().into_bytes()).collect();
    let refs: Vec<&[u8]> = more.iter().map(Vec::as_slice).collect();
    b.list_add(s, key(b"k"), &refs).unwrap();
    assert_eq!(b.list_len(s, key(b"k")).unwrap(), 600);
    let mut all = Vec::new();
    let mut start = 0;
    loop {
        let page = b.list_read(s, key(b"k"), start, 256).unwrap();
        start += page.len() as u32;
        let last = page.len() < 256;
        all.extend(page);
        if last {
            break;
        }
    }
    let expected: Vec<Vec<u8>> = (0..600).map(|i| i.to_string().into_bytes()).collect();
    assert_eq!(all, expected);
    assert!(b.list_read(s, key(b"k"), 10_000, 5).unwrap().is_empty());
    b.list_update(s, key(b"k"), vec![b"x".to_vec(), b"y".to_vec()]).unwrap();
    assert_eq!(b.list_read(s, key(b"k"), 0, 10).unwrap(), vec![b"x".to_vec(), b"y".to_vec()]);
    assert_eq!(b.list_len(s, key(b"other")).unwrap(), 0);
    b.list_update(s, key(b"k"), Vec::new()).unwrap();
    assert_eq!(b.list_len(s, key(b"k")).unwrap(), 0);
    b.list_add(s, key(b"k"), &[b"z"]).unwrap();
    b.list_clear(s, key(b"k")).unwrap();
    assert_eq!(b.list_len(s, key(b"k")).unwrap(), 0);
    assert_eq!(b.key_count(s), 0);
}

fn map_state_orders_pages_and_removes(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::Map.descriptor("seen")).unwrap();
    assert!(b.map_is_empty(s, key(b"k")).unwrap());
    for i in (0..300u32).rev() {
        b.map_put(s, key(b"k"), &i.to_be_bytes(), format!("v{i}").as_bytes()).unwrap();
    }
    b.map_put(s, key(b"j"), b"only", b"1").unwrap();
    assert!(!b.map_is_empty(s, key(b"k")).unwrap());
    assert_eq!(b.map_get(s, key(b"k"), &7u32.to_be_bytes()).unwrap().as_deref(), Some(&b"v7"[..]));
    assert!(b.map_contains(s, key(b"k"), &299u32.to_be_bytes()).unwrap());
    assert!(!b.map_contains(s, key(b"j"), &7u32.to_be_bytes()).unwrap());
    // Paging by cursor returns every entry once, in user-key byte order,
    // even when the map changes between pages.
    let mut seen = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = b.map_entries(s, key(b"k"), after.as_deref(), 100).unwrap();
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().0.clone());
        if seen.is_empty() {
            // Remove an entry not yet seen: it must not appear.
            b.map_remove(s, key(b"k"), &250u32.to_be_bytes()).unwrap();
        }
        seen.extend(page.into_iter().map(|(k, _)| u32::from_be_bytes(k.try_into().unwrap())));
    }
    let expected: Vec<u32> = (0..300).filter(|&i| i != 250).collect();
    assert_eq!(seen, expected);
    b.map_put(s, key(b"k"), &7u32.to_be_bytes(), b"new").unwrap();
    assert_eq!(b.map_get(s, key(b"k"), &7u32.to_be_bytes()).unwrap().as_deref(), Some(&b"new"[..]));
    b.map_clear(s, key(b"k")).unwrap();
    assert!(b.map_is_empty(s, key(b"k")).unwrap());
    assert_eq!(b.map_entries(s, key(b"k"), None, 10).unwrap(), Vec::new());
    assert_eq!(b.map_get(s, key(b"j"), b"only").unwrap().as_deref(), Some(&b"1"[..]));
    b.map_remove(s, key(b"j"), b"only").unwrap();
    assert_eq!(b.key_count(s), 0, "removing the last entry removes the key");
}

fn accumulators_store_like_values(factory: Factory<'_>) {
    let mut b = factory(full());
    let r = b.register(StateKind::Reducing.descriptor("sum")).unwrap();
    let a = b.register(StateKind::Aggregating.descriptor("avg")).unwrap();
    b.value_set(r, key(b"k"), b"10").unwrap();
    b.value_set(a, key(b"k"), b"acc").unwrap();
    assert_eq!(b.value_get(r, key(b"k")).unwrap().as_deref(), Some(&b"10"[..]));
    assert_eq!(b.value_get(a, key(b"k")).unwrap().as_deref(), Some(&b"acc"[..]));
    b.value_clear(r, key(b"k")).unwrap();
    assert_eq!(b.value_get(r, key(b"k")).unwrap(), None);
}

fn operator_list_state_is_per_subtask(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::OperatorList.descriptor("offsets")).unwrap();
    assert_eq!(b.operator_list_len(s).unwrap(), 0);
    b.operator_list_add(s, &[b"a", b"b"]).unwrap();
    b.operator_list_add(s, &[b"c"]).unwrap();
    assert_eq!(b.operator_list_read(s, 1, 10).unwrap(), vec![b"b".to_vec(), b"c".to_vec()]);
    b.operator_list_update(s, vec![b"z".to_vec()]).unwrap();
    assert_eq!(b.operator_list_read(s, 0, 10).unwrap(), vec![b"z".to_vec()]);
    assert_eq!(b.operator_list_len(s).unwrap(), 1);
}

fn broadcast_state_is_one_ordered_map(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::BroadcastMap.descriptor("rules")).unwrap();
    assert_eq!(b.broadcast_len(s).unwrap(), 0);
    b.broadcast_put(s, b"b", b"2").unwrap();
    b.broadcast_put(s, b"a", b"1").unwrap();
    b.broadcast_put(s, b"c", b"3").unwrap();
    b.broadcast_put(s, b"a", b"10").unwrap();
    assert_eq!(b.broadcast_get(s, b"a").unwrap().as_deref(), Some(&b"10"[..]));
    assert_eq!(b.broadcast_len(s).unwrap(), 3);
    let first = b.broadcast_entries(s, None, 2).unwrap();
    assert_eq!(first, vec![(b"a".to_vec(), b"10".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
    let rest = b.broadcast_entries(s, Some(b"b"), 2).unwrap();
    assert_eq!(rest, vec![(b"c".to_vec(), b"3".to_vec())]);
    b.broadcast_remove(s, b"b").unwrap();
    assert_eq!(b.broadcast_get(s, b"b").unwrap(), None);
    b.broadcast_clear(s).unwrap();
    assert_eq!(b.broadcast_len(s).unwrap(), 0);
}

fn timers_fire_in_order_once(factory: Factory<'_>) {
    let mut b = factory(full());
    let ev = TimeDomain::EventTime;
    b.timer_register(ev, key(b"b"), 20).unwrap();
    b.timer_register(ev, key(b"a"), 20).unwrap();
    b.timer_register(ev, key(b"a"), 10).unwrap();
    b.timer_register(ev, key(b"a"), 10).unwrap(); // deduplicated
    b.timer_register(ev, key(b"c"), 30).unwrap();
    b.timer_register(TimeDomain::ProcessingTime, key(b"a"), 5).unwrap();
    assert_eq!(b.timer_count(ev), 4);
    b.timer_delete(ev, key(b"c"), 30).unwrap();
    b.timer_delete(ev, key(b"c"), 99).unwrap(); // absent: no-op
    assert_eq!(b.timer_next(ev), Some(10));
    assert_eq!(b.timer_pop_due(ev, 9), None);
    assert_eq!(b.timer_pop_due(ev, 10), Some((10, b"a".to_vec())));
    let mut at_20 = vec![b.timer_pop_due(ev, 25).unwrap(), b.timer_pop_due(ev, 25).unwrap()];
    at_20.sort();
    assert_eq!(at_20, vec![(20, b"a".to_vec()), (20, b"b".to_vec())]);
    assert_eq!(b.timer_pop_due(ev, i64::MAX), None, "the deleted timer never fires");
    assert_eq!(b.timer_count(TimeDomain::ProcessingTime), 1, "domains are separate");
}

fn key_scans_cover_every_key(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::Value.descriptor("count")).unwrap();
    let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i}").into_bytes()).collect();
    for k in &keys {
        b.value_set(s, key(k), b"1").unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor = Some(0);
    while let Some(c) = cursor {
        let (page, next) = b.scan_keys(s, c, 64);
        assert!(page.len() <= 64);
        for (kg, k) in page {
            assert_eq!(kg, key(&k).key_group);
            seen.push(k);
        }
        cursor = next;
    }
    seen.sort();
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(seen, expected);
}

/// Fills one backend with every kind of state.
fn filled(factory: Factory<'_>, keys: &[Vec<u8>]) -> Box<dyn StateBackend> {
    let mut b = factory(full());
    let v = b.register(StateKind::Value.descriptor("v")).unwrap();
    let l = b.register(StateKind::List.descriptor("l")).unwrap();
    let m = b.register(StateKind::Map.descriptor("m")).unwrap();
    let o = b.register(StateKind::OperatorList.descriptor("o")).unwrap();
    let bc = b.register(StateKind::BroadcastMap.descriptor("b")).unwrap();
    for (i, k) in keys.iter().enumerate() {
        b.value_set(v, key(k), format!("value-{i}").as_bytes()).unwrap();
        b.list_add(l, key(k), &[b"x", format!("y{i}").as_bytes()]).unwrap();
        b.map_put(m, key(k), b"uk", format!("m{i}").as_bytes()).unwrap();
        b.timer_register(TimeDomain::EventTime, key(k), i as i64).unwrap();
    }
    b.operator_list_add(o, &[b"offset-7"]).unwrap();
    b.broadcast_put(bc, b"rule", b"on").unwrap();
    b
}

fn snapshots_round_trip_and_split_by_key_group(factory: Factory<'_>) {
    use super::snapshot::{OperatorShare, restore_snapshot, write_snapshot};
    let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key{i}").into_bytes()).collect();
    let mut original = filled(factory, &keys);
    let bytes = write_snapshot(original.freeze().as_mut(), MAX_PARALLELISM).unwrap();

    // The same range: everything comes back.
    let mut copy = factory(full());
    let summary = restore_snapshot(&bytes, copy.as_mut(), full(), MAX_PARALLELISM, OperatorShare::All).unwrap();
    assert_eq!(summary.skipped_key_groups, 0);
    assert_eq!(copy.descriptors(), original.descriptors());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(copy.value_get(0, key(k)).unwrap(), Some(format!("value-{i}").into_bytes()));
        assert_eq!(copy.list_read(1, key(k), 0, 10).unwrap(), vec![b"x".to_vec(), format!("y{i}").into_bytes()]);
        assert_eq!(copy.map_get(2, key(k), b"uk").unwrap(), Some(format!("m{i}").into_bytes()));
    }
    assert_eq!(copy.timer_count(TimeDomain::EventTime), keys.len());
    assert_eq!(copy.operator_list_read(3, 0, 10).unwrap(), vec![b"offset-7".to_vec()]);
    assert_eq!(copy.broadcast_get(4, b"rule").unwrap(), Some(b"on".to_vec()));

    // Two subtasks: each takes only its key groups, together all of them.
    let halves = [KeyGroupRange { start: 0, end: 7 }, KeyGroupRange { start: 7, end: MAX_PARALLELISM as u16 }];
    let mut parts: Vec<Box<dyn StateBackend>> = halves.iter().map(|&r| factory(r)).collect();
    let mut restored_groups = 0;
    for (part, range) in parts.iter_mut().zip(halves) {
        let s = restore_snapshot(&bytes, part.as_mut(), range, MAX_PARALLELISM, OperatorShare::All).unwrap();
        restored_groups += s.key_groups;
        assert!(s.skipped_key_groups > 0);
    }
    assert_eq!(restored_groups, u32::from(MAX_PARALLELISM as u16));
    for k in &keys {
        let owner = if halves[0].contains(key(k).key_group) { 0 } else { 1 };
        assert!(parts[owner].value_get(0, key(k)).unwrap().is_some());
    }
    let timers: usize = parts.iter().map(|p| p.timer_count(TimeDomain::EventTime)).sum();
    assert_eq!(timers, keys.len());
}

fn a_frozen_state_ignores_later_writes(factory: Factory<'_>) {
    use super::snapshot::{OperatorShare, restore_snapshot, write_snapshot};
    let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("key{i}").into_bytes()).collect();
    let mut live = filled(factory, &keys);
    let mut frozen = live.freeze();
    // Every kind of write after the freeze, while the snapshot is unwritten.
    for k in &keys {
        live.value_set(0, key(k), b"changed").unwrap();
        live.list_add(1, key(k), &[b"more"]).unwrap();
        live.map_remove(2, key(k), b"uk").unwrap();
    }
    live.value_set(0, key(b"new-key"), b"new").unwrap();
    while live.timer_pop_due(TimeDomain::EventTime, i64::MAX).is_some() {}
    live.operator_list_update(3, vec![b"offset-9".to_vec()]).unwrap();
    live.broadcast_clear(4).unwrap();
    let bytes = write_snapshot(frozen.as_mut(), MAX_PARALLELISM).unwrap();
    let mut copy = factory(full());
    restore_snapshot(&bytes, copy.as_mut(), full(), MAX_PARALLELISM, OperatorShare::All).unwrap();
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(copy.value_get(0, key(k)).unwrap(), Some(format!("value-{i}").into_bytes()));
        assert_eq!(copy.list_len(1, key(k)).unwrap(), 2);
        assert_eq!(copy.map_get(2, key(k), b"uk").unwrap(), Some(format!("m{i}").into_bytes()));
    }
    assert_eq!(copy.value_get(0, key(b"new-key")).unwrap(), None);
    assert_eq!(copy.timer_count(TimeDomain::EventTime), keys.len());
    assert_eq!(copy.operator_list_read(3, 0, 10).unwrap(), vec![b"offset-7".to_vec()]);
    assert_eq!(copy.broadcast_get(4, b"rule").unwrap(), Some(b"on".to_vec()));
    // And the live backend kept its writes.
    assert_eq!(live.value_get(0, key(&keys[0])).unwrap().as_deref(), Some(&b"changed"[..]));
    assert_eq!(live.timer_count(TimeDomain::EventTime), 0);
    // Writes after the snapshot was written need no copy, and still land.
    live.value_set(0, key(&keys[1]), b"again").unwrap();
    assert_eq!(live.value_get(0, key(&keys[1])).unwrap().as_deref(), Some(&b"again"[..]));
}

fn registration_checks_names_and_kinds(factory: Factory<'_>) {
    let mut b = factory(full());
    let s = b.register(StateKind::Value.descriptor("count")).unwrap();
    assert_eq!(b.register(StateKind::Value.descriptor("count")).unwrap(), s, "re-registering returns the same state");
    match b.register(StateKind::List.descriptor("count")) {
        Err(StateError::KindMismatch { existing, requested, .. }) => {
            assert_eq!((existing, requested), ("value", "list"));
        }
        other => panic!("expected a kind mismatch, got {other:?}"),
    }
    assert!(matches!(b.register(StateKind::Value.descriptor("")), Err(StateError::InvalidName(_))));
    assert!(matches!(b.register(StateKind::Value.descriptor("a b")), Err(StateError::InvalidName(_))));
    assert_eq!(b.descriptors().len(), 1);
    assert_eq!(b.descriptors()[0].name, "count");
}

fn keys_outside_the_range_are_refused(factory: Factory<'_>) {
    let mut b = factory(KeyGroupRange { start: 0, end: 1 });
    let s = b.register(StateKind::Value.descriptor("count")).unwrap();
    let outside = KeyRef { key: b"x", hash: 5, key_group: 5 };
    assert!(matches!(b.value_set(s, outside, b"1"), Err(StateError::KeyGroupOutOfRange { .. })));
}
