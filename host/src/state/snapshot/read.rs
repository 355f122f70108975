//! Reading the snapshot format: the one parser. It reads a snapshot from
//! any stream one section at a time, checking each section's CRC-32 before
//! anything in it is used, and never allocates more than the bytes it has
//! actually read: a crafted length cannot make it reserve memory.

use super::{FORMAT_VERSION, MAGIC, Reader, SnapshotError, entry_key, parse_descriptors, read_entry, remap};
use crate::state::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use crate::state::{Redistribution, SnapshotEntry, StateBackend, StateDescriptor, StateKind};

/// A snapshot's header: its key groups and its states, in id order.
#[derive(Debug, Clone)]
pub struct Header {
    /// The job's number of key groups when it was written.
    pub max_parallelism: u32,
    /// Every state, indexed by the state numbers entries carry.
    pub descriptors: Vec<StateDescriptor>,
}

/// The entries of one checked section, decoded one at a time.
#[derive(Clone)]
pub struct Entries<'a> {
    reader: Reader<'a>,
    /// The kind of each state, by the numbers entries carry.
    kinds: &'a [StateKind],
    /// A key group's section (else operator and broadcast state).
    keyed: bool,
}

impl<'a> Entries<'a> {
    /// The next entry, or `None` at the end of the section.
    pub fn next_entry(&mut self) -> Result<Option<SnapshotEntry<'a>>, SnapshotError> {
        if self.reader.done() { Ok(None) } else { read_entry(&mut self.reader, self.kinds, self.keyed).map(Some) }
    }
}

/// Where a section's entries belong: a key group, or the subtask's operator
/// and broadcast state.
pub type SectionOf = Option<u16>;

/// One part of a snapshot, as the parser hands it on.
enum Part<'a> {
    /// The header, first.
    Header(&'a Header),
    /// A later section, its CRC-32 checked.
    Section(SectionOf, Entries<'a>),
}

/// Parses a snapshot from `r`, one section in memory at a time: checks the
/// magic and version, hands on the header, then every later section
/// (`visit` may skip one without decoding its entries). Returns the
/// header.
fn parse(
    r: &mut dyn std::io::Read,
    visit: &mut dyn FnMut(Part<'_>) -> Result<(), SnapshotError>,
) -> Result<Header, SnapshotError> {
    use std::io::Read;
    let mut at = 0usize;
    let read = |r: &mut dyn std::io::Read, buf: &mut [u8], at: &mut usize| -> Result<(), SnapshotError> {
        r.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => SnapshotError::Truncated(*at),
            _ => SnapshotError::Read(e.to_string()),
        })?;
        *at += buf.len();
        Ok(())
    };
    let mut magic = [0u8; 8];
    read(r, &mut magic, &mut at).map_err(|_| SnapshotError::BadMagic)?;
    if &magic != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let mut word = [0u8; 4];
    read(r, &mut word[..2], &mut at)?;
    let version = u16::from_le_bytes([word[0], word[1]]);
    if version != FORMAT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let mut found: Option<Header> = None;
    let mut kinds: Vec<StateKind> = Vec::new();
    let mut payload = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        read(r, &mut tag, &mut at)?;
        let key_group = match tag[0] {
            b'E' => {
                let mut rest = [0u8; 1];
                return match r.read(&mut rest) {
                    Ok(0) => found.ok_or_else(|| SnapshotError::Corrupt("no header section".into())),
                    Ok(_) => Err(SnapshotError::Corrupt("bytes after the end marker".into())),
                    Err(e) => Err(SnapshotError::Read(e.to_string())),
                };
            }
            b'K' => {
                read(r, &mut word[..2], &mut at)?;
                u16::from_le_bytes([word[0], word[1]])
            }
            b'H' | b'O' => 0,
            other => return Err(SnapshotError::Corrupt(format!("unknown section tag {other:#04x}"))),
        };
        read(r, &mut word, &mut at)?;
        let len = u64::from(u32::from_le_bytes(word));
        let offset = at;
        // Read what is there rather than reserve what the length claims.
        payload.clear();
        let got = r.take(len).read_to_end(&mut payload).map_err(|e| SnapshotError::Read(e.to_string()))?;
        at += got;
        if (got as u64) < len {
            return Err(SnapshotError::Truncated(at));
        }
        read(r, &mut word, &mut at)?;
        if crc32fast::hash(&payload) != u32::from_le_bytes(word) {
            return Err(SnapshotError::Checksum(match tag[0] {
                b'H' => "header".to_string(),
                b'K' => format!("key group {key_group}"),
                _ => "operator state".to_string(),
            }));
        }
        match (tag[0], &found) {
            (b'H', None) => {
                let (max_parallelism, descriptors) = parse_descriptors(&payload, offset)?;
                let h = Header { max_parallelism, descriptors };
                visit(Part::Header(&h))?;
                kinds = h.descriptors.iter().map(|d| d.kind).collect();
                found = Some(h);
            }
            (b'H', Some(_)) => return Err(SnapshotError::Corrupt("a second header section".into())),
            (_, None) => return Err(SnapshotError::Corrupt("no header section".into())),
            (tag, Some(_)) => {
                let keyed = tag == b'K';
                let entries = Entries { reader: Reader { bytes: &payload, at: 0, base: offset }, kinds: &kinds, keyed };
                visit(Part::Section(keyed.then_some(key_group), entries))?;
            }
        }
    }
}

/// Checks a snapshot whole (framing, every checksum, every entry) without
/// restoring it, holding one section at a time.
pub fn verify_snapshot(r: &mut dyn std::io::Read) -> Result<Header, SnapshotError> {
    parse(r, &mut |part| {
        if let Part::Section(_, mut entries) = part {
            while entries.next_entry()?.is_some() {}
        }
        Ok(())
    })
}

/// Reads a snapshot without restoring it, handing every entry to `visit`
/// with its key group (none for operator and broadcast state). Returns the
/// header. A damaged section stops it with an error part-way.
pub fn visit_snapshot(
    r: &mut dyn std::io::Read,
    visit: &mut dyn FnMut(SectionOf, &SnapshotEntry<'_>),
) -> Result<Header, SnapshotError> {
    parse(r, &mut |part| {
        if let Part::Section(of, mut entries) = part {
            while let Some(e) = entries.next_entry()? {
                visit(of, &e);
            }
        }
        Ok(())
    })
}

/// What a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestoreSummary {
    /// Entries restored.
    pub entries: u64,
    /// Key groups restored (those in the target range that had state).
    pub key_groups: u32,
    /// Key groups in the snapshot outside the target range, skipped.
    pub skipped_key_groups: u32,
}

/// Which operator and broadcast state a restoring subtask takes from one
/// subtask's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorShare {
    /// None of it.
    Nothing,
    /// All of it: the same subtask, at the same parallelism.
    All,
    /// Its share after a change of parallelism: the snapshot is of old
    /// subtask `from`, the restoring subtask is `to` of `parallelism`.
    /// Even-split lists are dealt out in turn (element `j` of old subtask
    /// `from` goes to new subtask `(from + j) % parallelism`), union lists
    /// go to everyone, and broadcast state (the same on every subtask) is
    /// taken from old subtask 0.
    Rescaled {
        /// The snapshot's subtask.
        from: u32,
        /// The restoring subtask.
        to: u32,
        /// The new parallelism.
        parallelism: u32,
    },
}

/// Restores a snapshot into `backend`, which owns `range` of
/// `max_parallelism` key groups: registers the snapshot's states, then
/// restores the key groups in `range`, and operator and broadcast state as
/// `share` says. A snapshot taken with another number of key groups is
/// re-hashed: every keyed entry goes to the key group its key has now, so
/// max parallelism can change across a restore. The whole file is checked
/// first; on any error nothing has been restored.
pub fn restore_snapshot(
    bytes: &[u8],
    backend: &mut dyn StateBackend,
    range: KeyGroupRange,
    max_parallelism: u32,
    share: OperatorShare,
) -> Result<RestoreSummary, SnapshotError> {
    // Check every section and entry before changing the backend.
    verify_snapshot(&mut &bytes[..])?;
    restore_snapshot_stream(&mut &bytes[..], backend, range, max_parallelism, share)
}

/// As [`restore_snapshot`], from a stream, holding one section (one key
/// group's entries) at a time: a savepoint restores without its state ever
/// being in memory whole. It checks as it goes, so a damaged section stops
/// it part-way; check the stream first ([`verify_snapshot`]) where that
/// matters.
pub fn restore_snapshot_stream(
    r: &mut dyn std::io::Read,
    backend: &mut dyn StateBackend,
    range: KeyGroupRange,
    max_parallelism: u32,
    share: OperatorShare,
) -> Result<RestoreSummary, SnapshotError> {
    let mut summary = RestoreSummary::default();
    // Set by the header: whether keys are re-hashed, which operator lists
    // are union lists, the backend's id per snapshot state, and per state
    // the operator-list elements seen so far (for even splits).
    let mut rehash = false;
    let mut union: Vec<bool> = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut dealt: Vec<u32> = Vec::new();
    parse(r, &mut |part| {
        let (of, mut entries) = match part {
            Part::Header(h) => {
                rehash = h.max_parallelism != max_parallelism;
                union = h.descriptors.iter().map(|d| d.redistribution == Some(Redistribution::Union)).collect();
                dealt = vec![0; h.descriptors.len()];
                ids = h.descriptors.iter().map(|d| backend.register(d.clone())).collect::<Result<_, _>>()?;
                return Ok(());
            }
            Part::Section(of, entries) => (of, entries),
        };
        match of {
            Some(kg) if !rehash && !range.contains(kg) => {
                summary.skipped_key_groups += 1;
                return Ok(());
            }
            None if share == OperatorShare::Nothing => return Ok(()),
            Some(_) => summary.key_groups += 1,
            None => {}
        }
        if let (Some(kg), false) = (of, rehash) {
            // Decoding a section costs a fraction of inserting it: count
            // its keys first so the backend sizes their tables once. This
            // also checks every entry before any is restored.
            for (state, keys) in keys_per_state(entries.clone(), ids.len())?.into_iter().enumerate() {
                if keys > 0 {
                    backend.reserve_keys(kg, ids[state], keys);
                }
            }
        }
        while let Some(entry) = entries.next_entry()? {
            let mut key_group = of.unwrap_or(0);
            if of.is_some() && rehash {
                key_group = key_group_of_hash(key_hash(entry_key(&entry)), max_parallelism);
                if !range.contains(key_group) {
                    continue;
                }
            }
            if let OperatorShare::Rescaled { from, to, parallelism } = share {
                let keep = match entry {
                    SnapshotEntry::OperatorItem { state, .. } if !union[state as usize] => {
                        let j = dealt[state as usize];
                        dealt[state as usize] += 1;
                        (from + j) % parallelism == to
                    }
                    SnapshotEntry::BroadcastItem { .. } => from == 0,
                    _ => true,
                };
                if !keep {
                    continue;
                }
            }
            backend.restore_entry(key_group, remap(entry, &ids))?;
            summary.entries += 1;
        }
        Ok(())
    })?;
    Ok(summary)
}

/// The keys in a key group's section, per state: a key's entries are
/// written one after another, so a key is counted where it changes.
fn keys_per_state(mut entries: Entries<'_>, states: usize) -> Result<Vec<usize>, SnapshotError> {
    let mut keys = vec![0usize; states];
    let mut last: Option<(u32, &[u8])> = None;
    while let Some(e) = entries.next_entry()? {
        let (state, key) = match e {
            SnapshotEntry::Value { state, key, .. }
            | SnapshotEntry::ListItem { state, key, .. }
            | SnapshotEntry::MapItem { state, key, .. } => (state, key),
            _ => continue,
        };
        if last != Some((state, key)) {
            keys[state as usize] += 1;
            last = Some((state, key));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::hashmap::HashMapBackend;
    use crate::state::snapshot::write_snapshot;
    use crate::state::{KeyRef, StateKind};
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
        parse(&mut &bytes[..], &mut |part| {
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
}
