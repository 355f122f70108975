//! The snapshot format: one subtask's state (every key group it owns, its
//! timers, operator and broadcast state) as bytes, independent of the
//! backend that wrote it, versioned and checksummed. Specified byte by byte
//! in `docs/checkpoint-format.md`.
//!
//! Keyed state is written in one section per key group, so a restore can
//! take only the key groups the restoring subtask owns (another parallelism)
//! and skip the rest. A file is checked whole (magic, version, every
//! section's CRC-32) before anything is restored: a damaged snapshot is
//! reported and leaves the backend untouched.

use super::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use super::{
    FrozenState, Redistribution, SnapshotEntry, StateBackend, StateDescriptor, StateError, StateKind, TimeDomain,
    TtlConfig,
};
use thiserror::Error;

/// The first bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"WEIRSNAP";
/// The version this host writes and reads.
pub const FORMAT_VERSION: u16 = 1;

/// Why a snapshot cannot be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Not a Weir snapshot.
    #[error("not a Weir snapshot (bad magic bytes)")]
    BadMagic,
    /// Written by a format this host does not know.
    #[error("snapshot format version {0} is not supported (this host reads version {FORMAT_VERSION})")]
    UnsupportedVersion(u16),
    /// The bytes end early.
    #[error("snapshot is truncated (at byte {0})")]
    Truncated(usize),
    /// A section's checksum does not match its bytes.
    #[error("snapshot section {0} is corrupt (checksum mismatch)")]
    Checksum(String),
    /// The bytes parse but make no sense.
    #[error("snapshot is corrupt: {0}")]
    Corrupt(String),
    /// The backend refused a state or an entry.
    #[error(transparent)]
    State(#[from] StateError),
    /// Reading a streamed snapshot failed (storage, or its checksum).
    #[error("cannot read the snapshot: {0}")]
    Read(String),
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_section(out: &mut Vec<u8>, head: &[u8], payload: &[u8]) {
    out.extend_from_slice(head);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
}

/// Writes a section head and a length placeholder; returns where the
/// payload starts.
fn begin_section(out: &mut Vec<u8>, head: &[u8]) -> usize {
    out.extend_from_slice(head);
    out.extend_from_slice(&[0; 4]);
    out.len()
}

/// Patches the length of the section whose payload started at `start`
/// and appends its CRC; drops the section if it is empty (`head_len` bytes
/// of head).
fn end_section(out: &mut Vec<u8>, start: usize, head_len: usize) {
    let len = out.len() - start;
    if len == 0 {
        out.truncate(start - 4 - head_len);
        return;
    }
    out[start - 4..start].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

fn kind_code(k: StateKind) -> u8 {
    match k {
        StateKind::Value => 1,
        StateKind::List => 2,
        StateKind::Map => 3,
        StateKind::Reducing => 4,
        StateKind::Aggregating => 5,
        StateKind::OperatorList => 6,
        StateKind::BroadcastMap => 7,
    }
}

fn kind_of(code: u8) -> Option<StateKind> {
    Some(match code {
        1 => StateKind::Value,
        2 => StateKind::List,
        3 => StateKind::Map,
        4 => StateKind::Reducing,
        5 => StateKind::Aggregating,
        6 => StateKind::OperatorList,
        7 => StateKind::BroadcastMap,
        _ => return None,
    })
}

fn put_entry(out: &mut Vec<u8>, e: SnapshotEntry<'_>) {
    match e {
        SnapshotEntry::Value { state, key, value } => {
            out.push(1);
            put_varint(out, u64::from(state));
            put_bytes(out, key);
            put_bytes(out, value);
        }
        SnapshotEntry::ListItem { state, key, value } => {
            out.push(2);
            put_varint(out, u64::from(state));
            put_bytes(out, key);
            put_bytes(out, value);
        }
        SnapshotEntry::MapItem { state, key, user_key, value } => {
            out.push(3);
            put_varint(out, u64::from(state));
            put_bytes(out, key);
            put_bytes(out, user_key);
            put_bytes(out, value);
        }
        SnapshotEntry::Timer { domain, time, key } => {
            out.push(4);
            out.push(match domain {
                TimeDomain::EventTime => 0,
                TimeDomain::ProcessingTime => 1,
            });
            out.extend_from_slice(&time.to_le_bytes());
            put_bytes(out, key);
        }
        SnapshotEntry::OperatorItem { state, value } => {
            out.push(5);
            put_varint(out, u64::from(state));
            put_bytes(out, value);
        }
        SnapshotEntry::BroadcastItem { state, user_key, value } => {
            out.push(6);
            put_varint(out, u64::from(state));
            put_bytes(out, user_key);
            put_bytes(out, value);
        }
    }
}

/// The header payload: the job's key groups and every state's descriptor
/// (also stored beside incremental RocksDB checkpoints).
pub fn encode_descriptors(max_parallelism: u32, descriptors: &[StateDescriptor]) -> Vec<u8> {
    let mut header = Vec::new();
    put_varint(&mut header, u64::from(max_parallelism));
    put_varint(&mut header, descriptors.len() as u64);
    for d in descriptors {
        put_bytes(&mut header, d.name.as_bytes());
        header.push(kind_code(d.kind));
        header.extend_from_slice(&d.version.to_le_bytes());
        put_bytes(&mut header, d.encoding.as_bytes());
        match d.ttl {
            None => header.push(0),
            Some(t) => {
                header.push(1);
                header.extend_from_slice(&t.ttl_ms.to_le_bytes());
                header.push(u8::from(t.renew_on_read) | (u8::from(t.return_expired) << 1));
            }
        }
        header.push(match d.redistribution {
            None => 0,
            Some(Redistribution::EvenSplit) => 1,
            Some(Redistribution::Union) => 2,
        });
    }
    header
}

/// Writes a frozen subtask state of a job with `max_parallelism` key
/// groups (the asynchronous part of a snapshot).
pub fn write_snapshot(frozen: &mut dyn FrozenState, max_parallelism: u32) -> Result<Vec<u8>, SnapshotError> {
    write_snapshot_sized(frozen, max_parallelism, 0)
}

/// As [`write_snapshot`], with room for `size_hint` bytes from the start
/// (the previous snapshot's size: growing a large buffer by doubling costs
/// copies and page faults).
pub fn write_snapshot_sized(
    frozen: &mut dyn FrozenState,
    max_parallelism: u32,
    size_hint: usize,
) -> Result<Vec<u8>, SnapshotError> {
    let mut out = Vec::with_capacity(size_hint);
    write_sections(frozen, max_parallelism, &mut out, &mut |_| Ok(()))?;
    Ok(out)
}

/// As [`write_snapshot`], handing the bytes to `sink` in pieces of about
/// `piece` bytes (whole sections) instead of building the file in memory:
/// a subtask's snapshot is never held whole.
pub fn write_snapshot_streamed(
    frozen: &mut dyn FrozenState,
    max_parallelism: u32,
    piece: usize,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), SnapshotError>,
) -> Result<(), SnapshotError> {
    let mut out = Vec::with_capacity(piece + piece / 4);
    write_sections(frozen, max_parallelism, &mut out, &mut |out| {
        if out.len() >= piece {
            sink(out)?;
            out.clear();
        }
        Ok(())
    })?;
    sink(&out)
}

/// Writes the whole file into `out`, calling `after_section` after each key
/// group's section (which may hand `out` on and empty it). Sections are
/// written in place (length patched afterwards), so the entries are copied
/// once, into `out`.
fn write_sections(
    frozen: &mut dyn FrozenState,
    max_parallelism: u32,
    out: &mut Vec<u8>,
    after_section: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), SnapshotError>,
) -> Result<(), SnapshotError> {
    let range = frozen.range();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let header = encode_descriptors(max_parallelism, frozen.descriptors());
    put_section(out, b"H", &header);
    for kg in range.start..range.end {
        let mut head = [b'K', 0, 0];
        head[1..].copy_from_slice(&kg.to_le_bytes());
        let start = begin_section(out, &head);
        frozen.key_group(kg, &mut |e| put_entry(out, e))?;
        end_section(out, start, head.len());
        after_section(out)?;
    }
    let start = begin_section(out, b"O");
    frozen.operator_state(&mut |e| put_entry(out, e))?;
    end_section(out, start, 1);
    out.push(b'E');
    Ok(())
}

/// A reader over bytes that reports where it ran out.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Offset of `bytes[0]` in the file, for messages.
    base: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else { return Err(SnapshotError::Truncated(self.base + self.bytes.len())) };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take(1)?[0])
    }

    fn varint(&mut self) -> Result<u64, SnapshotError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(SnapshotError::Corrupt("varint longer than 64 bits".into()))
    }

    fn bytes(&mut self) -> Result<&'a [u8], SnapshotError> {
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| SnapshotError::Corrupt("length too large".into()))?)
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

struct Section<'a> {
    tag: u8,
    key_group: u16,
    payload: &'a [u8],
    offset: usize,
}

/// Splits a file into checked sections.
fn sections(bytes: &[u8]) -> Result<Vec<Section<'_>>, SnapshotError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let mut r = Reader { bytes, at: MAGIC.len(), base: 0 };
    let version = u16::from_le_bytes(r.take(2)?.try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let mut out = Vec::new();
    loop {
        let tag = r.u8()?;
        let key_group = match tag {
            b'E' => {
                if !r.done() {
                    return Err(SnapshotError::Corrupt(format!("{} bytes after the end marker", bytes.len() - r.at)));
                }
                return Ok(out);
            }
            b'K' => u16::from_le_bytes(r.take(2)?.try_into().unwrap()),
            b'H' | b'O' => 0,
            other => return Err(SnapshotError::Corrupt(format!("unknown section tag {other:#04x}"))),
        };
        let len = u32::from_le_bytes(r.take(4)?.try_into().unwrap()) as usize;
        let offset = r.at;
        let payload = r.take(len)?;
        let crc = u32::from_le_bytes(r.take(4)?.try_into().unwrap());
        let name = match tag {
            b'H' => "header".to_string(),
            b'K' => format!("key group {key_group}"),
            _ => "operator state".to_string(),
        };
        if crc32fast::hash(payload) != crc {
            return Err(SnapshotError::Checksum(name));
        }
        out.push(Section { tag, key_group, payload, offset });
    }
}

/// Called per section: tag, key group, payload, the payload's offset.
type SectionVisitor<'a> = dyn FnMut(u8, u16, &[u8], usize) -> Result<(), SnapshotError> + 'a;

/// Reads a snapshot from `r` section by section, holding one section at a
/// time, and hands each checked one to `f` (tag, key group, payload, its
/// offset in the file). The streamed form of [`sections`].
fn stream_sections(r: &mut dyn std::io::Read, f: &mut SectionVisitor<'_>) -> Result<(), SnapshotError> {
    let mut at = 0usize;
    let mut read = |buf: &mut [u8], at: &mut usize| -> Result<(), SnapshotError> {
        r.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => SnapshotError::Truncated(*at),
            _ => SnapshotError::Read(e.to_string()),
        })?;
        *at += buf.len();
        Ok(())
    };
    let mut magic = [0u8; 8];
    read(&mut magic, &mut at).map_err(|_| SnapshotError::BadMagic)?;
    if &magic != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let mut word = [0u8; 4];
    read(&mut word[..2], &mut at)?;
    let version = u16::from_le_bytes([word[0], word[1]]);
    if version != FORMAT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let mut payload = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        read(&mut tag, &mut at)?;
        let key_group = match tag[0] {
            b'E' => {
                let mut rest = [0u8; 1];
                return match r.read(&mut rest) {
                    Ok(0) => Ok(()),
                    Ok(_) => Err(SnapshotError::Corrupt("bytes after the end marker".into())),
                    Err(e) => Err(SnapshotError::Read(e.to_string())),
                };
            }
            b'K' => {
                read(&mut word[..2], &mut at)?;
                u16::from_le_bytes([word[0], word[1]])
            }
            b'H' | b'O' => 0,
            other => return Err(SnapshotError::Corrupt(format!("unknown section tag {other:#04x}"))),
        };
        read(&mut word, &mut at)?;
        let len = u32::from_le_bytes(word) as usize;
        let offset = at;
        payload.clear();
        payload.resize(len, 0);
        read(&mut payload, &mut at)?;
        read(&mut word, &mut at)?;
        if crc32fast::hash(&payload) != u32::from_le_bytes(word) {
            return Err(SnapshotError::Checksum(match tag[0] {
                b'H' => "header".to_string(),
                b'K' => format!("key group {key_group}"),
                _ => "operator state".to_string(),
            }));
        }
        f(tag[0], key_group, &payload, offset)?;
    }
}

/// Checks a streamed snapshot whole (framing, every checksum, every entry)
/// holding one section at a time.
pub fn verify_snapshot_stream(r: &mut dyn std::io::Read) -> Result<(), SnapshotError> {
    let mut states = None;
    stream_sections(r, &mut |tag, _, payload, offset| {
        match (tag, states) {
            (b'H', None) => states = Some(parse_descriptors(payload, offset)?.1.len()),
            (b'H', Some(_)) => return Err(SnapshotError::Corrupt("a second header section".into())),
            (_, None) => return Err(SnapshotError::Corrupt("no header section".into())),
            (_, Some(n)) => {
                let mut r = Reader { bytes: payload, at: 0, base: offset };
                while !r.done() {
                    read_entry(&mut r, n)?;
                }
            }
        }
        Ok(())
    })?;
    states.map(|_| ()).ok_or_else(|| SnapshotError::Corrupt("no header section".into()))
}

/// Reads what [`encode_descriptors`] wrote: (max_parallelism, descriptors).
pub fn decode_descriptors(payload: &[u8]) -> Result<(u32, Vec<StateDescriptor>), SnapshotError> {
    parse_descriptors(payload, 0)
}

fn parse_descriptors(payload: &[u8], base: usize) -> Result<(u32, Vec<StateDescriptor>), SnapshotError> {
    let mut r = Reader { bytes: payload, at: 0, base };
    let found = r.varint()? as u32;
    let n = r.varint()?;
    let mut descriptors = Vec::new();
    for _ in 0..n {
        let name = String::from_utf8(r.bytes()?.to_vec())
            .map_err(|_| SnapshotError::Corrupt("state name is not UTF-8".into()))?;
        let kind = kind_of(r.u8()?).ok_or_else(|| SnapshotError::Corrupt(format!("state '{name}': unknown kind")))?;
        let version = u32::from_le_bytes(r.take(4)?.try_into().unwrap());
        let encoding = String::from_utf8(r.bytes()?.to_vec())
            .map_err(|_| SnapshotError::Corrupt("encoding is not UTF-8".into()))?;
        let ttl = match r.u8()? {
            0 => None,
            _ => {
                let ttl_ms = u64::from_le_bytes(r.take(8)?.try_into().unwrap());
                let flags = r.u8()?;
                Some(TtlConfig { ttl_ms, renew_on_read: flags & 1 != 0, return_expired: flags & 2 != 0 })
            }
        };
        let redistribution = match r.u8()? {
            0 => None,
            1 => Some(Redistribution::EvenSplit),
            2 => Some(Redistribution::Union),
            x => return Err(SnapshotError::Corrupt(format!("state '{name}': unknown redistribution {x}"))),
        };
        descriptors.push(StateDescriptor { name, kind, version, encoding, ttl, redistribution });
    }
    Ok((found, descriptors))
}

/// Checks a snapshot's framing and every section's checksum without
/// restoring it.
pub fn verify_snapshot(bytes: &[u8]) -> Result<(), SnapshotError> {
    let sections = sections(bytes)?;
    if sections.first().is_none_or(|s| s.tag != b'H') {
        return Err(SnapshotError::Corrupt("no header section".into()));
    }
    Ok(())
}

/// Reads a whole snapshot without restoring it: checks it, then hands
/// every entry to `visit` with its key group (none for operator and
/// broadcast state). Returns the snapshot's max parallelism and states.
pub fn visit_snapshot(
    bytes: &[u8],
    visit: &mut dyn FnMut(Option<u16>, &SnapshotEntry<'_>),
) -> Result<(u32, Vec<StateDescriptor>), SnapshotError> {
    let sections = sections(bytes)?;
    let Some(header) = sections.first().filter(|s| s.tag == b'H') else {
        return Err(SnapshotError::Corrupt("no header section".into()));
    };
    let (max_parallelism, descriptors) = parse_descriptors(header.payload, header.offset)?;
    for s in &sections[1..] {
        let mut r = Reader { bytes: s.payload, at: 0, base: s.offset };
        while !r.done() {
            let e = read_entry(&mut r, descriptors.len())?;
            visit((s.tag == b'K').then_some(s.key_group), &e);
        }
    }
    Ok((max_parallelism, descriptors))
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
    verify_snapshot_stream(&mut &bytes[..])?;
    restore_snapshot_stream(&mut &bytes[..], backend, range, max_parallelism, share)
}

/// As [`restore_snapshot`], from a stream, holding one section (one key
/// group's entries) at a time: a savepoint restores without its state ever
/// being in memory whole. It checks as it goes, so a damaged section stops
/// it part-way; check the stream first ([`verify_snapshot_stream`]) where
/// that matters.
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
    let mut ids: Option<Vec<u32>> = None;
    let mut dealt: Vec<u32> = Vec::new();
    stream_sections(r, &mut |tag, section_group, payload, offset| {
        let Some(ids) = ids.as_ref() else {
            if tag != b'H' {
                return Err(SnapshotError::Corrupt("no header section".into()));
            }
            let (found, descriptors) = parse_descriptors(payload, offset)?;
            rehash = found != max_parallelism;
            union = descriptors.iter().map(|d| d.redistribution == Some(Redistribution::Union)).collect();
            dealt = vec![0; descriptors.len()];
            ids = Some(descriptors.into_iter().map(|d| backend.register(d)).collect::<Result<_, _>>()?);
            return Ok(());
        };
        if tag == b'H' {
            return Err(SnapshotError::Corrupt("a second header section".into()));
        }
        if tag == b'K' && !rehash && !range.contains(section_group) {
            summary.skipped_key_groups += 1;
            return Ok(());
        }
        if tag == b'O' && share == OperatorShare::Nothing {
            return Ok(());
        }
        if tag == b'K' {
            summary.key_groups += 1;
        }
        let mut r = Reader { bytes: payload, at: 0, base: offset };
        while !r.done() {
            let entry = read_entry(&mut r, ids.len())?;
            let mut key_group = section_group;
            if tag == b'K' && rehash {
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
            backend.restore_entry(key_group, remap(entry, ids))?;
            summary.entries += 1;
        }
        Ok(())
    })?;
    if ids.is_none() {
        return Err(SnapshotError::Corrupt("no header section".into()));
    }
    Ok(summary)
}

/// The key of a keyed entry.
fn entry_key<'a>(e: &SnapshotEntry<'a>) -> &'a [u8] {
    match *e {
        SnapshotEntry::Value { key, .. }
        | SnapshotEntry::ListItem { key, .. }
        | SnapshotEntry::MapItem { key, .. }
        | SnapshotEntry::Timer { key, .. } => key,
        SnapshotEntry::OperatorItem { .. } | SnapshotEntry::BroadcastItem { .. } => &[],
    }
}

fn read_entry<'a>(r: &mut Reader<'a>, states: usize) -> Result<SnapshotEntry<'a>, SnapshotError> {
    let state = |r: &mut Reader<'a>| -> Result<u32, SnapshotError> {
        let s = r.varint()?;
        if s as usize >= states {
            return Err(SnapshotError::Corrupt(format!("entry names state {s}, the snapshot has {states}")));
        }
        Ok(s as u32)
    };
    Ok(match r.u8()? {
        1 => SnapshotEntry::Value { state: state(r)?, key: r.bytes()?, value: r.bytes()? },
        2 => SnapshotEntry::ListItem { state: state(r)?, key: r.bytes()?, value: r.bytes()? },
        3 => SnapshotEntry::MapItem { state: state(r)?, key: r.bytes()?, user_key: r.bytes()?, value: r.bytes()? },
        4 => {
            let domain = match r.u8()? {
                0 => TimeDomain::EventTime,
                1 => TimeDomain::ProcessingTime,
                d => return Err(SnapshotError::Corrupt(format!("unknown time domain {d}"))),
            };
            let time = i64::from_le_bytes(r.take(8)?.try_into().unwrap());
            SnapshotEntry::Timer { domain, time, key: r.bytes()? }
        }
        5 => SnapshotEntry::OperatorItem { state: state(r)?, value: r.bytes()? },
        6 => SnapshotEntry::BroadcastItem { state: state(r)?, user_key: r.bytes()?, value: r.bytes()? },
        t => return Err(SnapshotError::Corrupt(format!("unknown entry tag {t}"))),
    })
}

/// Maps the snapshot's state numbers to the backend's ids.
fn remap<'a>(e: SnapshotEntry<'a>, ids: &[u32]) -> SnapshotEntry<'a> {
    let id = |s: u32| ids[s as usize];
    match e {
        SnapshotEntry::Value { state, key, value } => SnapshotEntry::Value { state: id(state), key, value },
        SnapshotEntry::ListItem { state, key, value } => SnapshotEntry::ListItem { state: id(state), key, value },
        SnapshotEntry::MapItem { state, key, user_key, value } => {
            SnapshotEntry::MapItem { state: id(state), key, user_key, value }
        }
        SnapshotEntry::OperatorItem { state, value } => SnapshotEntry::OperatorItem { state: id(state), value },
        SnapshotEntry::BroadcastItem { state, user_key, value } => {
            SnapshotEntry::BroadcastItem { state: id(state), user_key, value }
        }
        t @ SnapshotEntry::Timer { .. } => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::KeyRef;
    use crate::state::hashmap::HashMapBackend;

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

    #[test]
    fn the_header_starts_with_magic_and_version() {
        let bytes = snapshot();
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), FORMAT_VERSION);
        assert_eq!(*bytes.last().unwrap(), b'E');
    }
}
