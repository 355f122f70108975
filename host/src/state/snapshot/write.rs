//! Writing the snapshot format: a frozen subtask state, section by
//! section, into one buffer or streamed out in pieces.

use super::{FORMAT_VERSION, MAGIC, SnapshotError, encode_descriptors, put_entry};
use crate::state::FrozenState;

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
    write_sections(frozen, max_parallelism, &mut out, &mut |_| Ok::<(), SnapshotError>(()))?;
    Ok(out)
}

/// As [`write_snapshot`], handing the bytes to `sink` in pieces of about
/// `piece` bytes (whole sections) instead of building the file in memory:
/// a subtask's snapshot is never held whole. The sink's errors come back
/// as they are.
pub fn write_snapshot_streamed<E: From<SnapshotError>>(
    frozen: &mut dyn FrozenState,
    max_parallelism: u32,
    piece: usize,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut out = Vec::with_capacity(piece + piece / 4);
    write_sections(frozen, max_parallelism, &mut out, &mut |out: &mut Vec<u8>| -> Result<(), E> {
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
fn write_sections<E: From<SnapshotError>>(
    frozen: &mut dyn FrozenState,
    max_parallelism: u32,
    out: &mut Vec<u8>,
    after_section: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let range = frozen.range();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let header = encode_descriptors(max_parallelism, frozen.descriptors());
    put_section(out, b"H", &header);
    for kg in range.start..range.end {
        let mut head = [b'K', 0, 0];
        head[1..].copy_from_slice(&kg.to_le_bytes());
        let start = begin_section(out, &head);
        frozen.key_group(kg, &mut |e| put_entry(out, e)).map_err(|e| E::from(SnapshotError::State(e)))?;
        end_section(out, start, head.len());
        after_section(out)?;
    }
    let start = begin_section(out, b"O");
    frozen.operator_state(&mut |e| put_entry(out, e)).map_err(|e| E::from(SnapshotError::State(e)))?;
    end_section(out, start, 1);
    out.push(b'E');
    Ok(())
}
