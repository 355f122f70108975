//! The TTL layer's tests: expiry, renewal, clean-up, and the conformance
//! suite through the layer.

use super::*;
use crate::state::hashmap::HashMapBackend;
use crate::state::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use crate::state::{Accounting, KeyRef, ListState, MapState, StateKind, ValueState};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

const MAXP: u32 = 16;

fn key(k: &[u8]) -> KeyRef<'_> {
    let hash = key_hash(k);
    KeyRef { key: k, hash, key_group: key_group_of_hash(hash, MAXP) }
}

fn setup(ttl_ms: u64, renew_on_read: bool, return_expired: bool) -> (TtlBackend<HashMapBackend>, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(1_000));
    let clock_now = now.clone();
    let clock: Clock = Arc::new(move || clock_now.load(Ordering::SeqCst));
    let mut b = TtlBackend::new(HashMapBackend::new(KeyGroupRange { start: 0, end: MAXP as u16 }), clock, MAXP);
    for kind in [StateKind::Value, StateKind::List, StateKind::Map] {
        let mut d = kind.descriptor(kind.name());
        d.ttl = Some(TtlConfig { ttl_ms, renew_on_read, return_expired });
        b.register(d).unwrap();
    }
    (b, now)
}

const VALUE: StateId = 0;
const LIST: StateId = 1;
const MAP: StateId = 2;

#[test]
fn values_expire_after_their_ttl() {
    let (mut b, now) = setup(100, false, false);
    b.value_set(VALUE, key(b"a"), b"1").unwrap();
    now.store(1_099, Ordering::SeqCst);
    assert_eq!(b.value_get(VALUE, key(b"a")).unwrap().as_deref(), Some(&b"1"[..]));
    now.store(1_100, Ordering::SeqCst);
    assert_eq!(b.value_get(VALUE, key(b"a")).unwrap(), None, "expired at write time + ttl");
    assert_eq!(b.key_count(VALUE), 0, "removed when found expired");
    // A write renews.
    b.value_set(VALUE, key(b"a"), b"2").unwrap();
    now.store(1_150, Ordering::SeqCst);
    assert_eq!(b.value_get(VALUE, key(b"a")).unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn reads_renew_when_asked() {
    let (mut b, now) = setup(100, true, false);
    b.value_set(VALUE, key(b"a"), b"1").unwrap();
    for t in [1_050, 1_120, 1_190] {
        now.store(t, Ordering::SeqCst);
        assert!(b.value_get(VALUE, key(b"a")).unwrap().is_some(), "read at {t} renewed the entry");
    }
    now.store(1_290, Ordering::SeqCst);
    assert_eq!(b.value_get(VALUE, key(b"a")).unwrap(), None);
}

#[test]
fn expired_values_may_be_returned_until_cleaned_when_allowed() {
    let (mut b, now) = setup(100, false, true);
    b.value_set(VALUE, key(b"a"), b"1").unwrap();
    now.store(5_000, Ordering::SeqCst);
    assert_eq!(b.value_get(VALUE, key(b"a")).unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn list_elements_expire_one_by_one() {
    let (mut b, now) = setup(100, false, false);
    b.list_add(LIST, key(b"a"), &[b"old"]).unwrap();
    now.store(1_060, Ordering::SeqCst);
    b.list_add(LIST, key(b"a"), &[b"new"]).unwrap();
    now.store(1_120, Ordering::SeqCst);
    assert_eq!(b.list_read(LIST, key(b"a"), 0, 10).unwrap(), vec![b"new".to_vec()]);
    assert_eq!(b.list_len(LIST, key(b"a")).unwrap(), 1);
    now.store(1_200, Ordering::SeqCst);
    assert_eq!(b.list_len(LIST, key(b"a")).unwrap(), 0);
}

#[test]
fn map_entries_expire_and_pages_skip_them() {
    let (mut b, now) = setup(100, false, false);
    for i in 0..10u8 {
        b.map_put(MAP, key(b"a"), &[i], b"v").unwrap();
    }
    now.store(1_050, Ordering::SeqCst);
    b.map_put(MAP, key(b"a"), &[4], b"fresh").unwrap();
    b.map_put(MAP, key(b"a"), &[8], b"fresh").unwrap();
    now.store(1_120, Ordering::SeqCst);
    assert_eq!(b.map_get(MAP, key(b"a"), &[1]).unwrap(), None);
    assert!(b.map_contains(MAP, key(b"a"), &[4]).unwrap());
    let page = b.map_entries(MAP, key(b"a"), None, 1).unwrap();
    assert_eq!(page, vec![(vec![4], b"fresh".to_vec())], "a page of one skips the expired entries before it");
    let rest = b.map_entries(MAP, key(b"a"), Some(&[4]), 5).unwrap();
    assert_eq!(rest, vec![(vec![8], b"fresh".to_vec())]);
    assert!(!b.map_is_empty(MAP, key(b"a")).unwrap());
    now.store(1_200, Ordering::SeqCst);
    assert!(b.map_is_empty(MAP, key(b"a")).unwrap());
}

#[test]
fn untouched_expired_keys_are_cleaned_up_incrementally() {
    let (mut b, now) = setup(100, false, false);
    for i in 0..200 {
        b.value_set(VALUE, key(format!("old{i}").as_bytes()), b"1").unwrap();
    }
    assert_eq!(b.key_count(VALUE), 200);
    now.store(2_000, Ordering::SeqCst);
    // Work on one other key only; every access checks a few more keys.
    for _ in 0..150 {
        b.value_set(VALUE, key(b"busy"), b"1").unwrap();
    }
    assert!(b.key_count(VALUE) < 50, "clean-up kept up: {} keys left", b.key_count(VALUE));
    for _ in 0..150 {
        b.value_get(VALUE, key(b"busy")).unwrap();
    }
    assert_eq!(b.key_count(VALUE), 1, "only the live key remains");
}

#[test]
fn a_state_without_ttl_is_untouched() {
    let (mut b, now) = setup(100, false, false);
    let plain = b.register(StateKind::Value.descriptor("plain")).unwrap();
    b.value_set(plain, key(b"a"), b"1").unwrap();
    now.store(i64::MAX - 1, Ordering::SeqCst);
    assert_eq!(b.value_get(plain, key(b"a")).unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn the_conformance_suite_passes_through_the_layer() {
    let clock: Clock = Arc::new(|| 0);
    crate::state::conformance::run_all(&|range| {
        Box::new(TtlBackend::new(HashMapBackend::new(range), clock.clone(), 16))
    });
}
