//! The snapshot format: one subtask's state (every key group it owns, its
//! timers, operator and broadcast state) as bytes, independent of the
//! backend that wrote it, versioned and checksummed. Specified byte by byte
//! in `docs/checkpoint-format.md`.
//!
//! Keyed state is written in one section per key group, so a restore can
//! take only the key groups the restoring subtask owns (another parallelism)
//! and skip the rest. [`write`] produces the format; [`read`] is its one
//! parser, which reads a file section by section from any stream, so no
//! snapshot is ever held in memory whole. This file holds what both share:
//! the error, the constants, and the encoding of entries and descriptors.

mod read;
mod write;

pub use read::{
    Entries, Header, OperatorShare, RestoreSummary, SectionOf, restore_snapshot, restore_snapshot_stream,
    restore_snapshot_stream_within, verify_snapshot, verify_snapshot_within, visit_snapshot, visit_snapshot_within,
};
pub use write::{write_snapshot, write_snapshot_sized, write_snapshot_streamed};

use super::{Redistribution, Shape, SnapshotEntry, StateDescriptor, StateError, StateKind, TimeDomain, TtlConfig};
use crate::config::job::MAX_MAX_PARALLELISM as MAX_KEY_GROUPS;
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
    /// A section claims more bytes than a reader holds in memory at once.
    #[error(
        "snapshot section {section} claims {len} bytes, over the {max}-byte limit on a section held in memory to be checked (state.checkpoints.max_section_size), so it was not read"
    )]
    SectionTooLarge {
        /// Which section (`key group 5`, `header`, `operator state`).
        section: String,
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
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

/// A reader over bytes that reports where it ran out.
#[derive(Clone)]
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

/// Reads what [`encode_descriptors`] wrote: (max_parallelism, descriptors).
pub fn decode_descriptors(payload: &[u8]) -> Result<(u32, Vec<StateDescriptor>), SnapshotError> {
    parse_descriptors(payload, 0)
}

fn parse_descriptors(payload: &[u8], base: usize) -> Result<(u32, Vec<StateDescriptor>), SnapshotError> {
    let mut r = Reader { bytes: payload, at: 0, base };
    let found = r.varint()?;
    let found = u32::try_from(found).ok().filter(|n| (1..=MAX_KEY_GROUPS).contains(n)).ok_or_else(|| {
        SnapshotError::Corrupt(format!("max_parallelism {found} is not between 1 and {MAX_KEY_GROUPS}"))
    })?;
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

/// Reads one entry of a section whose states are `kinds` (by state
/// number), `keyed` for a key group's section. An entry must name a state
/// of its own shape, in a section of its scope: a backend is never handed
/// a map entry for a value state, nor a key group's entry as operator state.
fn read_entry<'a>(r: &mut Reader<'a>, kinds: &[StateKind], keyed: bool) -> Result<SnapshotEntry<'a>, SnapshotError> {
    let tag = r.u8()?;
    let state = |r: &mut Reader<'a>, shape: Shape| -> Result<u32, SnapshotError> {
        let s = r.varint()?;
        let Some(kind) = usize::try_from(s).ok().and_then(|i| kinds.get(i)) else {
            return Err(SnapshotError::Corrupt(format!("entry names state {s}, the snapshot has {}", kinds.len())));
        };
        if kind.shape() != shape {
            return Err(SnapshotError::Corrupt(format!(
                "a {shape:?} entry for state {s}, which is a {} state",
                kind.name()
            )));
        }
        Ok(s as u32)
    };
    let in_keyed = matches!(tag, 1..=4);
    if matches!(tag, 1..=6) && in_keyed != keyed {
        let section = if keyed { "a key group's section" } else { "the operator state section" };
        return Err(SnapshotError::Corrupt(format!("entry tag {tag} in {section}")));
    }
    Ok(match tag {
        1 => SnapshotEntry::Value { state: state(r, Shape::Value)?, key: r.bytes()?, value: r.bytes()? },
        2 => SnapshotEntry::ListItem { state: state(r, Shape::List)?, key: r.bytes()?, value: r.bytes()? },
        3 => SnapshotEntry::MapItem {
            state: state(r, Shape::Map)?,
            key: r.bytes()?,
            user_key: r.bytes()?,
            value: r.bytes()?,
        },
        4 => {
            let domain = match r.u8()? {
                0 => TimeDomain::EventTime,
                1 => TimeDomain::ProcessingTime,
                d => return Err(SnapshotError::Corrupt(format!("unknown time domain {d}"))),
            };
            let time = i64::from_le_bytes(r.take(8)?.try_into().unwrap());
            SnapshotEntry::Timer { domain, time, key: r.bytes()? }
        }
        5 => SnapshotEntry::OperatorItem { state: state(r, Shape::OperatorList)?, value: r.bytes()? },
        6 => SnapshotEntry::BroadcastItem {
            state: state(r, Shape::BroadcastMap)?,
            user_key: r.bytes()?,
            value: r.bytes()?,
        },
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
