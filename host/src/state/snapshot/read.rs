//! Reading the snapshot format: the one parser. It reads a snapshot from
//! any stream one section at a time, checking each section's CRC-32 (as
//! its bytes arrive) before anything in it is used. A section's checksum
//! follows its bytes, so a section is held whole: a stored snapshot is
//! read with a bound on that (`state.checkpoints.max_section_size`, the
//! `_within` forms), a larger section refused before it is read, and the
//! buffer grows only as bytes arrive, so a crafted length costs nothing.
//! Each key group has at most one section, within the header's key groups.

use super::{FORMAT_VERSION, MAGIC, Reader, SnapshotError, entry_key, parse_descriptors, read_entry, remap};
use crate::state::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use crate::state::{Redistribution, Restore, SnapshotEntry, StateDescriptor, StateKind};

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

/// No bound but the format's own: a section's length is a `u32`. For
/// snapshots this process wrote, or already holds in memory.
const ANY_SECTION: u64 = u32::MAX as u64;

/// Parses a snapshot from `r`, one section in memory at a time, none over
/// `max_section` bytes: checks the magic and version, hands on the header,
/// then every later section (`visit` may skip one without decoding its
/// entries). Returns the header.
fn parse(
    r: &mut dyn std::io::Read,
    max_section: u64,
    visit: &mut dyn FnMut(Part<'_>) -> Result<(), SnapshotError>,
) -> Result<Header, SnapshotError> {
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
    // Sections seen: a bit per key group of the header's, and the operator
    // state's. A second section for either would restore its state twice.
    let mut seen = KeyGroupSet::default();
    let mut operator_seen = false;
    let mut payload = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        read(r, &mut tag, &mut at)?;
        let section = match (tag[0], &found) {
            (b'E', _) => {
                let mut rest = [0u8; 1];
                return match r.read(&mut rest) {
                    Ok(0) => found.ok_or_else(|| SnapshotError::Corrupt("no header section".into())),
                    Ok(_) => Err(SnapshotError::Corrupt("bytes after the end marker".into())),
                    Err(e) => Err(SnapshotError::Read(e.to_string())),
                };
            }
            (b'H', None) => Section::Header,
            (b'H', Some(_)) => return Err(SnapshotError::Corrupt("a second header section".into())),
            (b'K' | b'O', None) => return Err(SnapshotError::Corrupt("no header section".into())),
            (b'K', Some(h)) => {
                read(r, &mut word[..2], &mut at)?;
                let kg = u16::from_le_bytes([word[0], word[1]]);
                if u32::from(kg) >= h.max_parallelism {
                    return Err(SnapshotError::Corrupt(format!(
                        "a section for key group {kg}, outside the snapshot's {} key groups (0 to {})",
                        h.max_parallelism,
                        h.max_parallelism - 1
                    )));
                }
                if !seen.insert(kg) {
                    return Err(SnapshotError::Corrupt(format!("a second section for key group {kg}")));
                }
                Section::KeyGroup(kg)
            }
            (b'O', Some(_)) => {
                if std::mem::replace(&mut operator_seen, true) {
                    return Err(SnapshotError::Corrupt("a second operator state section".into()));
                }
                Section::Operator
            }
            (other, _) => return Err(SnapshotError::Corrupt(format!("unknown section tag {other:#04x}"))),
        };
        read(r, &mut word, &mut at)?;
        let len = u64::from(u32::from_le_bytes(word));
        if len > max_section {
            return Err(SnapshotError::SectionTooLarge { section: section.to_string(), len, max: max_section });
        }
        let offset = at;
        let crc = read_payload(r, len, &mut payload).map_err(|e| SnapshotError::Read(e.to_string()))?;
        at += payload.len();
        if (payload.len() as u64) < len {
            return Err(SnapshotError::Truncated(at));
        }
        read(r, &mut word, &mut at)?;
        if crc != u32::from_le_bytes(word) {
            return Err(SnapshotError::Checksum(section.to_string()));
        }
        match section {
            Section::Header => {
                let (max_parallelism, descriptors) = parse_descriptors(&payload, offset)?;
                let h = Header { max_parallelism, descriptors };
                visit(Part::Header(&h))?;
                kinds = h.descriptors.iter().map(|d| d.kind).collect();
                seen = KeyGroupSet::new(max_parallelism);
                found = Some(h);
            }
            Section::KeyGroup(_) | Section::Operator => {
                let keyed = matches!(section, Section::KeyGroup(_));
                let of = match section {
                    Section::KeyGroup(kg) => Some(kg),
                    _ => None,
                };
                let entries = Entries { reader: Reader { bytes: &payload, at: 0, base: offset }, kinds: &kinds, keyed };
                visit(Part::Section(of, entries))?;
            }
        }
    }
}

/// Which section a tag and key group name.
#[derive(Debug, Clone, Copy)]
enum Section {
    Header,
    KeyGroup(u16),
    Operator,
}

impl std::fmt::Display for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Section::Header => f.write_str("header"),
            Section::KeyGroup(kg) => write!(f, "key group {kg}"),
            Section::Operator => f.write_str("operator state"),
        }
    }
}

/// Key groups seen, a bit each.
#[derive(Default)]
struct KeyGroupSet(Vec<u64>);

impl KeyGroupSet {
    fn new(key_groups: u32) -> Self {
        KeyGroupSet(vec![0; (key_groups as usize).div_ceil(64)])
    }

    /// Adds `kg` (which must be below the count it was made for); false if
    /// it was there.
    fn insert(&mut self, kg: u16) -> bool {
        let (word, bit) = (usize::from(kg) / 64, 1u64 << (kg % 64));
        debug_assert!(word < self.0.len(), "key group {kg} checked against the header first");
        let Some(w) = self.0.get_mut(word) else { return false };
        let fresh = *w & bit == 0;
        *w |= bit;
        fresh
    }
}

/// The buffer for a section's bytes starts growing from this many.
const GROW_FROM: usize = 1 << 20;

/// Reads a section's `len` bytes into `payload` (emptied first), or fewer
/// if `r` ends; returns the CRC-32 of what it read, computed as it arrives.
/// The buffer doubles as bytes arrive and never grows past `len`: a length
/// that lies costs no more than twice the bytes that are there.
fn read_payload(r: &mut dyn std::io::Read, len: u64, payload: &mut Vec<u8>) -> std::io::Result<u32> {
    let len = usize::try_from(len).map_err(|_| std::io::Error::other("a section larger than this machine's memory"))?;
    let mut hasher = crc32fast::Hasher::new();
    payload.clear();
    while payload.len() < len {
        let start = payload.len();
        let want = (len - start).min(start.max(GROW_FROM));
        payload.reserve_exact(want);
        payload.resize(start + want, 0);
        let mut got = 0;
        while got < want {
            match r.read(&mut payload[start + got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        hasher.update(&payload[start..start + got]);
        payload.truncate(start + got);
        if got < want {
            break;
        }
    }
    Ok(hasher.finalize())
}

/// Checks a snapshot whole (framing, every checksum, every entry) without
/// restoring it, holding one section at a time. For a stored snapshot use
/// [`verify_snapshot_within`].
pub fn verify_snapshot(r: &mut dyn std::io::Read) -> Result<Header, SnapshotError> {
    verify_snapshot_within(r, ANY_SECTION)
}

/// As [`verify_snapshot`], refusing a section over `max_section` bytes
/// before reading it.
pub fn verify_snapshot_within(r: &mut dyn std::io::Read, max_section: u64) -> Result<Header, SnapshotError> {
    parse(r, max_section, &mut |part| {
        if let Part::Section(_, mut entries) = part {
            while entries.next_entry()?.is_some() {}
        }
        Ok(())
    })
}

/// Reads a snapshot without restoring it, handing every entry to `visit`
/// with its key group (none for operator and broadcast state). Returns the
/// header. A damaged section stops it with an error part-way. For a stored
/// snapshot use [`visit_snapshot_within`].
pub fn visit_snapshot(
    r: &mut dyn std::io::Read,
    visit: &mut dyn FnMut(SectionOf, &SnapshotEntry<'_>),
) -> Result<Header, SnapshotError> {
    visit_snapshot_within(r, ANY_SECTION, visit)
}

/// As [`visit_snapshot`], refusing a section over `max_section` bytes
/// before reading it.
pub fn visit_snapshot_within(
    r: &mut dyn std::io::Read,
    max_section: u64,
    visit: &mut dyn FnMut(SectionOf, &SnapshotEntry<'_>),
) -> Result<Header, SnapshotError> {
    parse(r, max_section, &mut |part| {
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
    backend: &mut dyn Restore,
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
/// matters. For a stored snapshot use [`restore_snapshot_stream_within`].
pub fn restore_snapshot_stream(
    r: &mut dyn std::io::Read,
    backend: &mut dyn Restore,
    range: KeyGroupRange,
    max_parallelism: u32,
    share: OperatorShare,
) -> Result<RestoreSummary, SnapshotError> {
    restore_snapshot_stream_within(r, backend, range, max_parallelism, share, ANY_SECTION)
}

/// As [`restore_snapshot_stream`], refusing a section over `max_section`
/// bytes before reading it.
pub fn restore_snapshot_stream_within(
    r: &mut dyn std::io::Read,
    backend: &mut dyn Restore,
    range: KeyGroupRange,
    max_parallelism: u32,
    share: OperatorShare,
    max_section: u64,
) -> Result<RestoreSummary, SnapshotError> {
    let mut summary = RestoreSummary::default();
    // Set by the header: whether keys are re-hashed, which operator lists
    // are union lists, the backend's id per snapshot state, and per state
    // the operator-list elements seen so far (for even splits).
    let mut rehash = false;
    let mut union: Vec<bool> = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut dealt: Vec<u32> = Vec::new();
    parse(r, max_section, &mut |part| {
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
mod tests;
