//! Tests of the snapshot parser: damage of every kind caught before
//! anything is restored, entries held to their state's shape, sections
//! bounded and unique per key group, rescaled and re-hashed restores, and
//! every state kind round-tripped.

use super::*;
use crate::state::hashmap::HashMapBackend;
use crate::state::snapshot::write_snapshot;
use crate::state::{
    Accounting, KeyRef, ListState, MapState, OperatorState, Registry, Snapshots, StateKind, TimerService, ValueState,
};
use std::collections::BTreeMap;

fn snapshot() -> Vec<u8> {
    let range = KeyGroupRange { start: 0, end: 8 };
    let mut b = HashMapBackend::new(range);
    let v = b.register(StateKind::Value.descriptor("count")).unwrap();
    for i in 0..50 {
        let k = format!("k{i}").into_bytes();
        let hash = key_hash(&k);
        b.value_set(v, KeyRef { key: &k, hash, key_group: key_group_of_hash(hash, 8) }, b"1").unwrap();
    }
    write_snapshot(b.freeze().as_mut(), 8).unwrap()
}

fn restore(bytes: &[u8]) -> (Result<RestoreSummary, SnapshotError>, HashMapBackend) {
    let range = KeyGroupRange { start: 0, end: 8 };
    let mut b = HashMapBackend::new(range);
    (restore_snapshot(bytes, &mut b, range, 8, OperatorShare::All), b)
}

#[test]
fn a_flipped_byte_is_caught_and_nothing_is_restored() {
    let good = snapshot();
    assert_eq!(restore(&good).0.unwrap().entries, 50);
    for at in [12, good.len() / 2, good.len() - 6] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        let (result, backend) = restore(&bad);
        assert!(result.is_err(), "flipping byte {at} went unnoticed");
        assert!(backend.descriptors().is_empty(), "nothing registered or restored after an error");
    }
}

/// `good` with the first entry of its first key group's section
/// retagged `tag`, that section's checksum made right again.
fn retagged(good: &[u8], tag: u8) -> Vec<u8> {
    let mut bytes = good.to_vec();
    let header_len = u32::from_le_bytes(bytes[11..15].try_into().unwrap()) as usize;
    let k = 15 + header_len + 4;
    assert_eq!(bytes[k], b'K');
    let len = u32::from_le_bytes(bytes[k + 3..k + 7].try_into().unwrap()) as usize;
    let payload = k + 7;
    bytes[payload] = tag;
    let crc = crc32fast::hash(&bytes[payload..payload + len]);
    bytes[payload + len..payload + len + 4].copy_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn an_entry_must_fit_its_states_kind_and_its_section() {
    let good = snapshot();
    // A list element for the value state `count`.
    let (result, backend) = restore(&retagged(&good, 2));
    let err = result.unwrap_err().to_string();
    assert!(err.contains("for state 0, which is a value state"), "{err}");
    assert!(backend.descriptors().is_empty());
    // Operator state inside a key group's section.
    let err = restore(&retagged(&good, 5)).0.unwrap_err().to_string();
    assert!(err.contains("entry tag 5 in a key group's section"), "{err}");
}

#[test]
fn truncation_wrong_magic_and_versions_are_named() {
    let good = snapshot();
    assert!(matches!(restore(&good[..good.len() - 1]).0, Err(SnapshotError::Truncated(_))));
    assert!(matches!(
        restore(&good[..good.len() / 2]).0,
        Err(SnapshotError::Truncated(_) | SnapshotError::Checksum(_))
    ));
    assert!(matches!(restore(b"PK\x03\x04 not a snapshot").0, Err(SnapshotError::BadMagic)));
    let mut v2 = good.clone();
    v2[8] = 2;
    assert!(matches!(restore(&v2).0, Err(SnapshotError::UnsupportedVersion(2))));
}

#[test]
fn another_max_parallelism_rehashes_every_key() {
    let good = snapshot();
    // 8 key groups written, 32 read, split over two subtasks.
    let mut total = 0;
    for range in [KeyGroupRange { start: 0, end: 16 }, KeyGroupRange { start: 16, end: 32 }] {
        let mut b = HashMapBackend::new(range);
        let summary = restore_snapshot(&good, &mut b, range, 32, OperatorShare::All).unwrap();
        assert_eq!(b.key_count(0), summary.entries as usize);
        for i in 0..50 {
            let k = format!("k{i}").into_bytes();
            let hash = key_hash(&k);
            let kg = key_group_of_hash(hash, 32);
            if range.contains(kg) {
                let v = b.value_get(0, KeyRef { key: &k, hash, key_group: kg }).unwrap();
                assert_eq!(v.as_deref(), Some(&b"1"[..]), "key k{i} in key group {kg}");
            }
        }
        total += summary.entries;
    }
    assert_eq!(total, 50, "every key restored exactly once");
}

#[test]
fn operator_lists_are_dealt_out_and_broadcast_state_copied_on_rescale() {
    use crate::state::Redistribution;
    let range = KeyGroupRange { start: 0, end: 8 };
    let mut snaps = Vec::new();
    for old in 0..2u32 {
        let mut b = HashMapBackend::new(range);
        let split = b.register(StateKind::OperatorList.descriptor("split")).unwrap();
        let mut d = StateKind::OperatorList.descriptor("union");
        d.redistribution = Some(Redistribution::Union);
        let union = b.register(d).unwrap();
        let rules = b.register(StateKind::BroadcastMap.descriptor("rules")).unwrap();
        let items: Vec<Vec<u8>> = (0..5).map(|j| format!("{old}-{j}").into_bytes()).collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        b.operator_list_add(split, &refs).unwrap();
        b.operator_list_add(union, &refs[..1]).unwrap();
        b.broadcast_put(rules, b"r", b"same").unwrap();
        snaps.push(write_snapshot(b.freeze().as_mut(), 8).unwrap());
    }
    let mut split_total = 0;
    for to in 0..3u32 {
        let mut b = HashMapBackend::new(range);
        for (from, bytes) in snaps.iter().enumerate() {
            let share = OperatorShare::Rescaled { from: from as u32, to, parallelism: 3 };
            restore_snapshot(bytes, &mut b, range, 8, share).unwrap();
        }
        let split = b.operator_list_read(0, 0, 100).unwrap();
        assert!((3..=4).contains(&split.len()), "10 elements over 3 subtasks: {split:?}");
        split_total += split.len();
        assert_eq!(b.operator_list_len(1).unwrap(), 2, "union lists go to everyone");
        assert_eq!(b.broadcast_len(2).unwrap(), 1, "broadcast state once, from old subtask 0");
    }
    assert_eq!(split_total, 10);
}

/// A snapshot's entries, by section and (kind, state, key), each
/// group's values in order.
fn entries(bytes: &[u8]) -> BTreeMap<(Option<u16>, String), Vec<String>> {
    let mut m: BTreeMap<(Option<u16>, String), Vec<String>> = BTreeMap::new();
    visit_snapshot(&mut &bytes[..], &mut |of, e| {
        let (group, value) = match *e {
            SnapshotEntry::Value { state, key, value } => (format!("v{state} {key:?}"), format!("{value:?}")),
            SnapshotEntry::ListItem { state, key, value } => (format!("l{state} {key:?}"), format!("{value:?}")),
            SnapshotEntry::MapItem { state, key, user_key, value } => {
                (format!("m{state} {key:?}"), format!("{user_key:?}={value:?}"))
            }
            SnapshotEntry::Timer { domain, time, key } => (format!("t{domain:?} {key:?}"), format!("{time}")),
            SnapshotEntry::OperatorItem { state, value } => (format!("o{state}"), format!("{value:?}")),
            SnapshotEntry::BroadcastItem { state, user_key, value } => {
                (format!("b{state}"), format!("{user_key:?}={value:?}"))
            }
        };
        m.entry((of, group)).or_default().push(value);
    })
    .unwrap();
    m
}

proptest::proptest! {
    #[test]
    fn every_state_kind_round_trips_through_a_snapshot(
        ops in proptest::collection::vec(
            (0u8..6, proptest::collection::vec(0u8..4, 1..3), proptest::collection::vec(0u8..255, 0..6), -5i64..5),
            0..80,
        ),
    ) {
        use crate::state::{Redistribution, TimeDomain};
        let range = KeyGroupRange { start: 0, end: 16 };
        let mut b = HashMapBackend::new(range);
        let value = b.register(StateKind::Value.descriptor("value")).unwrap();
        let list = b.register(StateKind::List.descriptor("list")).unwrap();
        let map = b.register(StateKind::Map.descriptor("map")).unwrap();
        let even = b.register(StateKind::OperatorList.descriptor("even")).unwrap();
        let mut union = StateKind::OperatorList.descriptor("union");
        union.redistribution = Some(Redistribution::Union);
        let union = b.register(union).unwrap();
        let broadcast = b.register(StateKind::BroadcastMap.descriptor("rules")).unwrap();
        for (op, key, bytes, time) in &ops {
            let hash = key_hash(key);
            let k = KeyRef { key, hash, key_group: key_group_of_hash(hash, 16) };
            match op {
                0 => b.value_set(value, k, bytes).unwrap(),
                1 => b.list_add(list, k, &[bytes]).unwrap(),
                2 => b.map_put(map, k, bytes, key).unwrap(),
                3 => b.operator_list_add(if *time > 0 { even } else { union }, &[bytes]).unwrap(),
                4 => b.broadcast_put(broadcast, bytes, key).unwrap(),
                _ => b.timer_register(if *time > 0 { TimeDomain::EventTime } else { TimeDomain::ProcessingTime }, k, *time).unwrap(),
            }
        }
        let written = write_snapshot(b.freeze().as_mut(), 16).unwrap();
        let mut restored = HashMapBackend::new(range);
        restore_snapshot(&written, &mut restored, range, 16, OperatorShare::All).unwrap();
        let again = write_snapshot(restored.freeze().as_mut(), 16).unwrap();
        proptest::prop_assert_eq!(entries(&written), entries(&again));
    }
}

/// A snapshot of 8 key groups and one value state, with a section of
/// one entry for each of `groups`, in that order.
fn with_sections(groups: &[u16]) -> Vec<u8> {
    fn section(out: &mut Vec<u8>, head: &[u8], payload: &[u8]) {
        out.extend_from_slice(head);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(payload);
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    }
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    section(&mut out, b"H", &crate::state::snapshot::encode_descriptors(8, &[StateKind::Value.descriptor("count")]));
    for &kg in groups {
        let mut entry = Vec::new();
        crate::state::snapshot::put_entry(&mut entry, SnapshotEntry::Value { state: 0, key: b"k", value: b"1" });
        let [a, b] = kg.to_le_bytes();
        section(&mut out, &[b'K', a, b], &entry);
    }
    out.push(b'E');
    out
}

#[test]
fn a_key_group_has_one_section_within_the_headers_key_groups() {
    for good in [&[0, 3, 7][..], &[7]] {
        verify_snapshot(&mut &with_sections(good)[..]).unwrap();
    }
    let range = KeyGroupRange { start: 0, end: 8 };
    for (groups, expected) in [
        (&[3, 3][..], "a second section for key group 3"),
        (&[2, 5, 2], "a second section for key group 2"),
        (&[8], "a section for key group 8, outside the snapshot's 8 key groups (0 to 7)"),
        (&[1, 65535], "key group 65535, outside"),
    ] {
        let bytes = with_sections(groups);
        let err = verify_snapshot(&mut &bytes[..]).unwrap_err().to_string();
        assert!(err.contains(expected), "{groups:?}: {err}");
        let err = visit_snapshot(&mut &bytes[..], &mut |_, _| {}).unwrap_err().to_string();
        assert!(err.contains(expected), "{groups:?}: {err}");
        let mut b = HashMapBackend::new(range);
        let err = restore_snapshot(&bytes, &mut b, range, 8, OperatorShare::All).unwrap_err().to_string();
        assert!(err.contains(expected), "{groups:?}: {err}");
        assert!(b.descriptors().is_empty(), "nothing registered or restored");
    }
}

#[test]
fn a_header_needs_between_1_and_32768_key_groups() {
    for (n, ok) in [(0u32, false), (1, true), (32768, true), (32769, false)] {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let header = crate::state::snapshot::encode_descriptors(n, &[]);
        bytes.push(b'H');
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&crc32fast::hash(&header).to_le_bytes());
        bytes.push(b'E');
        let got = verify_snapshot(&mut &bytes[..]);
        assert_eq!(got.is_ok(), ok, "{n} key groups: {:?}", got.err());
    }
}

/// A reader that counts the bytes taken from it.
struct Counted<'a>(&'a [u8], usize);

impl std::io::Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1 += n;
        Ok(n)
    }
}

#[test]
fn a_section_over_the_limit_is_refused_unread() {
    let bytes = with_sections(&[1, 2]);
    let header = u64::from(u32::from_le_bytes(bytes[11..15].try_into().unwrap()));
    assert!(header > 6, "the header is the largest section (each key group's holds 6 bytes)");
    let mut r = Counted(&bytes, 0);
    let err = verify_snapshot_within(&mut r, header - 1).unwrap_err();
    assert!(
        matches!(&err, SnapshotError::SectionTooLarge { section, len, max } if section == "header" && *len == header && *max == header - 1),
        "{err}"
    );
    assert_eq!(r.1, 15, "magic, version, tag and length only");
    assert!(err.to_string().contains("state.checkpoints.max_section_size"), "{err}");
    verify_snapshot_within(&mut &bytes[..], header).unwrap();
    let range = KeyGroupRange { start: 0, end: 8 };
    let mut b = HashMapBackend::new(range);
    let summary =
        restore_snapshot_stream_within(&mut &bytes[..], &mut b, range, 8, OperatorShare::All, header).unwrap();
    assert_eq!(summary.entries, 2);
    let err = visit_snapshot_within(&mut &bytes[..], 5, &mut |_, _| {}).unwrap_err();
    assert!(matches!(err, SnapshotError::SectionTooLarge { max: 5, .. }), "{err}");
}

#[test]
fn a_sections_buffer_grows_with_what_arrives_and_never_past_its_length() {
    let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut payload = Vec::new();
    let crc = read_payload(&mut &data[..], data.len() as u64, &mut payload).unwrap();
    assert_eq!((crc, payload.len(), payload.capacity()), (crc32fast::hash(&data), data.len(), data.len()));
    // A length that claims a gigabyte over 100 bytes costs a chunk.
    let mut payload = Vec::new();
    let crc = read_payload(&mut &data[..100], 1 << 30, &mut payload).unwrap();
    assert_eq!((crc, payload.len()), (crc32fast::hash(&data[..100]), 100));
    assert!(payload.capacity() <= GROW_FROM, "{} bytes reserved", payload.capacity());
}

#[test]
fn the_header_starts_with_magic_and_version() {
    let bytes = snapshot();
    assert_eq!(&bytes[..8], MAGIC);
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), FORMAT_VERSION);
    assert_eq!(*bytes.last().unwrap(), b'E');
}

#[test]
fn a_sections_keys_are_counted_once_per_state_for_sizing_tables() {
    let range = KeyGroupRange { start: 0, end: 8 };
    let mut b = HashMapBackend::new(range);
    let v = b.register(StateKind::Value.descriptor("v")).unwrap();
    let l = b.register(StateKind::List.descriptor("l")).unwrap();
    let m = b.register(StateKind::Map.descriptor("m")).unwrap();
    for i in 0..50 {
        let k = format!("k{i}").into_bytes();
        let hash = key_hash(&k);
        let kr = KeyRef { key: &k, hash, key_group: key_group_of_hash(hash, 8) };
        b.value_set(v, kr, b"1").unwrap();
        if i < 20 {
            b.list_add(l, kr, &[b"a", b"b", b"c"]).unwrap();
            b.timer_register(crate::state::TimeDomain::EventTime, kr, i).unwrap();
        }
        if i < 10 {
            b.map_put(m, kr, b"x", b"1").unwrap();
            b.map_put(m, kr, b"y", b"2").unwrap();
        }
    }
    let bytes = write_snapshot(b.freeze().as_mut(), 8).unwrap();
    let mut total = vec![0; 3];
    parse(&mut &bytes[..], ANY_SECTION, &mut |part| {
        if let Part::Section(Some(_), entries) = part {
            for (t, n) in total.iter_mut().zip(keys_per_state(entries, 3)?) {
                *t += n;
            }
        }
        Ok(())
    })
    .unwrap();
    // Keys, not entries: three list elements or two map entries of a
    // key are one key; timers are no key of any state.
    assert_eq!(total, vec![50, 20, 10]);
}
