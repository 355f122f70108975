//! `host inspect`: what a checkpoint or savepoint holds, read without
//! running the job. Every subtask's state is streamed as a canonical
//! snapshot (incremental RocksDB state is downloaded and converted first,
//! through the restore path's [`read_canonical`]), one subtask at a time,
//! no section over `state.checkpoints.max_section_size`, and summed up per
//! operator, state and key group; or searched for one key's value, in the
//! one subtask that held its key group.

use super::restore::backend::read_canonical;
use super::restore::{RestoreError, RestoreSource, Restored};
use crate::state::key_group::{key_group_of_hash, key_hash, subtask_for_key_group};
use crate::state::snapshot::visit_snapshot_within;
use crate::state::{SnapshotEntry, StateKind};
use std::collections::{BTreeMap, HashSet};
use thiserror::Error;

/// Why a checkpoint cannot be shown.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InspectError {
    /// Its state could not be read.
    #[error(transparent)]
    Read(#[from] RestoreError),
    /// No operator of that uid.
    #[error("no operator '{uid}' in {location} (it has: {known})")]
    NoOperator {
        /// The uid asked for.
        uid: String,
        /// The checkpoint.
        location: String,
        /// Its operators.
        known: String,
    },
    /// The operator has no state of that name.
    #[error("operator '{uid}' has no state '{state}'")]
    NoState {
        /// The operator.
        uid: String,
        /// The state asked for.
        state: String,
    },
}

/// One state of one operator, over all its subtasks.
#[derive(Debug, Clone)]
pub struct StateSummary {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: StateKind,
    /// The guest's value-format version.
    pub version: u32,
    /// The guest's value encoding.
    pub encoding: String,
    /// Keys (keyed state) or elements and entries (operator and broadcast
    /// state).
    pub keys: u64,
    /// Bytes of keys, user keys and values.
    pub bytes: u64,
    /// Per key group: keys and bytes.
    pub key_groups: BTreeMap<u16, (u64, u64)>,
}

/// One operator.
#[derive(Debug, Clone)]
pub struct OperatorSummary {
    /// Its uid.
    pub uid: String,
    /// Its parallelism when the checkpoint was taken.
    pub parallelism: u32,
    /// Its states, by name.
    pub states: Vec<StateSummary>,
    /// Pending timers.
    pub timers: u64,
}

/// Keys, bytes, and both per key group, of one state.
type Counts = (u64, u64, BTreeMap<u16, (u64, u64)>);

/// Streams subtask `i` of `uid`'s state as a canonical snapshot into
/// `visit`, downloading into a scratch directory that is removed after.
fn visit_subtask(
    r: &Restored,
    uid: &str,
    i: usize,
    source: &RestoreSource,
    visit: &mut dyn FnMut(Option<u16>, &SnapshotEntry<'_>),
) -> Result<Vec<crate::state::StateDescriptor>, InspectError> {
    let scratch = tempfile::Builder::new()
        .prefix("weir-inspect-")
        .tempdir()
        .map_err(|source| RestoreError::Local { path: std::env::temp_dir(), cause: source })?;
    let mut reader = read_canonical(&r.storage, source, r.metadata.max_parallelism, scratch.path())?;
    let max_section = r.storage.limits().max_section_size;
    let header = visit_snapshot_within(&mut reader, max_section, visit).map_err(|source| RestoreError::Snapshot {
        location: format!("{}: state of operator '{uid}' subtask {i}", r.location),
        cause: source,
    })?;
    Ok(header.descriptors)
}

/// Every operator's states, summed over its subtasks.
pub fn summarize(r: &Restored) -> Result<Vec<OperatorSummary>, InspectError> {
    let mut out = Vec::new();
    for (uid, op) in &r.metadata.operators {
        let mut states: Vec<StateSummary> = Vec::new();
        let mut timers = 0;
        let Some(sources) = r.states.get(uid) else { continue };
        for (i, source) in sources.iter().enumerate() {
            // Keys seen per (state, key group), to count each key once.
            let mut seen: HashSet<(u32, u16, Vec<u8>)> = HashSet::new();
            let mut counts: Vec<Counts> = Vec::new();
            let descriptors = visit_subtask(r, uid, i, source, &mut |kg, e| {
                let (state, key, size) = match *e {
                    SnapshotEntry::Value { state, key, value } => (state, Some(key), key.len() + value.len()),
                    SnapshotEntry::ListItem { state, key, value } => (state, Some(key), value.len()),
                    SnapshotEntry::MapItem { state, key, user_key, value } => {
                        (state, Some(key), user_key.len() + value.len())
                    }
                    SnapshotEntry::OperatorItem { state, value } => (state, None, value.len()),
                    SnapshotEntry::BroadcastItem { state, user_key, value } => {
                        (state, None, user_key.len() + value.len())
                    }
                    SnapshotEntry::Timer { .. } => {
                        timers += 1;
                        return;
                    }
                };
                if counts.len() <= state as usize {
                    counts.resize_with(state as usize + 1, Default::default);
                }
                let c = &mut counts[state as usize];
                let new_key = match (key, kg) {
                    (Some(k), Some(g)) => seen.insert((state, g, k.to_vec())),
                    _ => true,
                };
                let (keys, bytes) = (u64::from(new_key), size as u64);
                c.0 += keys;
                c.1 += bytes;
                if let Some(g) = kg {
                    let slot = c.2.entry(g).or_default();
                    slot.0 += keys;
                    slot.1 += bytes;
                }
            })?;
            for (id, d) in descriptors.iter().enumerate() {
                let summary = match states.iter_mut().find(|s| s.name == d.name) {
                    Some(s) => s,
                    None => {
                        states.push(StateSummary {
                            name: d.name.clone(),
                            kind: d.kind,
                            version: d.version,
                            encoding: d.encoding.clone(),
                            keys: 0,
                            bytes: 0,
                            key_groups: BTreeMap::new(),
                        });
                        states.last_mut().expect("pushed")
                    }
                };
                let Some((keys, bytes, groups)) = counts.get(id) else { continue };
                // Broadcast state is the same on every subtask: count it once.
                if d.kind == StateKind::BroadcastMap && i > 0 {
                    continue;
                }
                summary.keys += keys;
                summary.bytes += bytes;
                for (g, (k, b)) in groups {
                    let slot = summary.key_groups.entry(*g).or_default();
                    slot.0 += k;
                    slot.1 += b;
                }
            }
        }
        out.push(OperatorSummary { uid: uid.clone(), parallelism: op.parallelism, states, timers });
    }
    Ok(out)
}

/// What one key holds in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A value (value, reducing and aggregating state).
    Value(Vec<u8>),
    /// A list element.
    Element(Vec<u8>),
    /// A map entry.
    Entry(Vec<u8>, Vec<u8>),
}

/// The value of `key` in state `state` of operator `uid`, with the state's
/// encoding. Only the subtask that held the key's key group is read: the
/// others' state (RocksDB files among it) is not fetched at all.
pub fn lookup(r: &Restored, uid: &str, state: &str, key: &[u8]) -> Result<(String, Vec<Found>), InspectError> {
    let sources = r.states.get(uid).ok_or_else(|| InspectError::NoOperator {
        uid: uid.to_string(),
        location: r.location.clone(),
        known: r.metadata.operators.keys().map(String::as_str).collect::<Vec<_>>().join(", "),
    })?;
    let group = key_group_of_hash(key_hash(key), r.metadata.max_parallelism);
    let holder = subtask_for_key_group(group, r.metadata.max_parallelism, sources.len() as u32) as usize;
    let no_state = || InspectError::NoState { uid: uid.to_string(), state: state.to_string() };
    let source = sources.get(holder).ok_or_else(no_state)?;
    let mut hits = Vec::new();
    let descriptors = visit_subtask(r, uid, holder, source, &mut |kg, e| {
        if kg != Some(group) {
            return;
        }
        match *e {
            SnapshotEntry::Value { state, key: k, value } if k == key => {
                hits.push((state, Found::Value(value.to_vec())))
            }
            SnapshotEntry::ListItem { state, key: k, value } if k == key => {
                hits.push((state, Found::Element(value.to_vec())))
            }
            SnapshotEntry::MapItem { state, key: k, user_key, value } if k == key => {
                hits.push((state, Found::Entry(user_key.to_vec(), value.to_vec())))
            }
            _ => {}
        }
    })?;
    let id = descriptors.iter().position(|d| d.name == state).ok_or_else(no_state)?;
    let found = hits.into_iter().filter(|(s, _)| *s as usize == id).map(|(_, f)| f).collect();
    Ok((descriptors[id].encoding.clone(), found))
}

/// Bytes for people: text for text encodings (`utf8`, `json`), else hex
/// with the printable characters beside it.
pub fn show(encoding: &str, bytes: &[u8]) -> String {
    let encoding = printable(encoding);
    if matches!(&*encoding, "utf8" | "json")
        && let Ok(text) = std::str::from_utf8(bytes)
    {
        return printable(text).into_owned();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = bytes.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '.' }).collect();
    // A postcard unsigned integer is one LEB128 varint: worth showing.
    let number = (encoding == "postcard")
        .then(|| postcard::take_from_bytes::<u64>(bytes).ok().filter(|(_, rest)| rest.is_empty()).map(|(n, _)| n))
        .flatten();
    match number {
        Some(n) => format!("0x{hex} ({encoding}: {n} if an unsigned integer)"),
        None => format!("0x{hex} ({encoding}: \"{text}\")"),
    }
}

/// Stored text made safe for a terminal: control characters (escape
/// sequences among them) and bidirectional overrides are shown escaped, as
/// `\u{1b}` (the host's one rule, [`crate::paths::terminal`]).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    crate::paths::terminal::escape(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_text_cannot_drive_the_terminal() {
        assert_eq!(show("utf8", b"\x1b[2Jgone\x07"), "\\u{1b}[2Jgone\\u{7}");
        assert_eq!(printable("plain"), "plain");
        assert!(!show("\x1b]0;title\x07", b"\x01").contains('\x1b'));
    }

    #[test]
    fn values_show_as_text_or_hex() {
        assert_eq!(show("utf8", b"hello"), "hello");
        assert_eq!(show("postcard", &[0xac, 0x02]), "0xac02 (postcard: 300 if an unsigned integer)");
        assert_eq!(show("raw", b"a\x01"), "0x6101 (raw: \"a.\")");
    }
}
