//! The boundary between the host's flat records ([`crate::record`]) and the
//! WIT's packed batches: `element-batch` (records) and `value-batch` (the
//! values of a batch's key slots). Both are a byte buffer plus an index of
//! fixed-size little-endian entries, laid out as `wit/types.wit` documents.
//! A batch's bytes change hands by moving the buffer; only the index is
//! written or parsed here. What a guest wrote is not trusted: parsing checks
//! every entry and names the first bad one.

use super::bindings::weir::operator::types::{Element, ElementBatch, ValueBatch};
use crate::record::{Record, RecordRef, Records};
use thiserror::Error;

/// Bytes of one `element-batch` index entry.
pub const ELEMENT_ENTRY: usize = 32;
/// Bytes of one `value-batch` index entry.
pub const VALUE_ENTRY: usize = 16;

const HAS_KEY: u32 = 1;
const HAS_TIMESTAMP: u32 = 2;
const PRESENT: u32 = 1;

/// An index a guest wrote that does not follow the layout.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum IndexError {
    /// The index is not a whole number of entries.
    #[error("an index of {len} bytes, not a multiple of the {entry}-byte entry")]
    Length {
        /// Index length in bytes.
        len: usize,
        /// Entry size.
        entry: usize,
    },
    /// An entry sets flag bits the layout does not define, or a reserved
    /// word that is not zero.
    #[error("entry {entry} sets bits the layout leaves zero ({flags:#x})")]
    Flags {
        /// Entry number.
        entry: usize,
        /// The offending bits.
        flags: u32,
    },
    /// An entry's bytes lie outside the buffer.
    #[error("entry {entry} lies outside the {buffer}-byte data buffer")]
    OutOfBounds {
        /// Entry number.
        entry: usize,
        /// Buffer length.
        buffer: u64,
    },
}

fn u32_at(entry: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(entry[at..at + 4].try_into().expect("4 bytes"))
}

fn entries(index: &[u8], size: usize) -> Result<std::slice::ChunksExact<'_, u8>, IndexError> {
    if !index.len().is_multiple_of(size) {
        return Err(IndexError::Length { len: index.len(), entry: size });
    }
    Ok(index.chunks_exact(size))
}

/// The index of `refs`, as a guest receives it.
pub fn pack_refs(refs: &[RecordRef]) -> Vec<u8> {
    let mut index = Vec::with_capacity(refs.len() * ELEMENT_ENTRY);
    for r in refs {
        let flags = if r.has_key { HAS_KEY } else { 0 } | if r.timestamp.is_some() { HAS_TIMESTAMP } else { 0 };
        for word in [r.payload_start, r.payload_len, r.key_start, r.key_len, flags, 0] {
            index.extend_from_slice(&word.to_le_bytes());
        }
        index.extend_from_slice(&r.timestamp.unwrap_or(0).to_le_bytes());
    }
    index
}

/// The records an index describes, without checking their offsets against
/// a buffer ([`Records::check`] does).
pub fn unpack_refs(index: &[u8]) -> Result<Vec<RecordRef>, IndexError> {
    let mut refs = Vec::with_capacity(index.len() / ELEMENT_ENTRY);
    for (i, e) in entries(index, ELEMENT_ENTRY)?.enumerate() {
        let flags = u32_at(e, 16);
        let stray = (flags & !(HAS_KEY | HAS_TIMESTAMP)) | u32_at(e, 20);
        if stray != 0 {
            return Err(IndexError::Flags { entry: i, flags: stray });
        }
        refs.push(RecordRef {
            payload_start: u32_at(e, 0),
            payload_len: u32_at(e, 4),
            key_start: u32_at(e, 8),
            key_len: u32_at(e, 12),
            has_key: flags & HAS_KEY != 0,
            timestamp: (flags & HAS_TIMESTAMP != 0).then(|| i64::from_le_bytes(e[24..32].try_into().expect("8 bytes"))),
        });
    }
    Ok(refs)
}

/// A batch as a guest receives it, and the offsets the host keeps to read
/// its records back ([`record_at`]).
pub fn to_wit(records: Records) -> (ElementBatch, Vec<RecordRef>) {
    let index = pack_refs(&records.refs);
    (ElementBatch { data: records.data, index }, records.refs)
}

/// A batch a guest emitted, as the host's records, every entry checked.
pub fn from_wit(batch: ElementBatch) -> Result<Records, IndexError> {
    let refs = unpack_refs(&batch.index)?;
    let records = Records { data: batch.data, refs };
    records.check().map_err(|e| IndexError::OutOfBounds { entry: e.record, buffer: e.buffer })?;
    Ok(records)
}

/// One record of a batch given to a guest (offsets right by construction).
pub fn record_at<'a>(batch: &'a ElementBatch, refs: &[RecordRef], i: usize) -> Record<'a> {
    crate::record::view(&batch.data, &refs[i])
}

/// One record as the WIT's owned `element`, for single-record calls.
pub fn to_element(r: Record<'_>) -> Element {
    Element { payload: r.payload.to_vec(), key: r.key.map(<[u8]>::to_vec), timestamp: r.timestamp }
}

/// Where one slot's value is in a `value-batch` buffer: `(start, len,
/// present)`, as the state backends' batch reads produce them.
pub type ValueSpan = (u32, u32, bool);

/// `get-batch`'s answer: slot `i`'s value located by `spans[i]`.
pub fn pack_values(data: Vec<u8>, spans: &[ValueSpan]) -> ValueBatch {
    let mut index = Vec::with_capacity(spans.len() * VALUE_ENTRY);
    for (slot, &(start, len, present)) in spans.iter().enumerate() {
        let (start, len) = if present { (start, len) } else { (0, 0) };
        for word in [slot as u32, start, len, if present { PRESENT } else { 0 }] {
            index.extend_from_slice(&word.to_le_bytes());
        }
    }
    ValueBatch { data, index }
}

/// One entry of a `set-batch`: a slot and its new value (none clears it).
pub struct SlotWrite<'a> {
    /// The key slot (`context.batch-slots`).
    pub slot: u32,
    /// The value's bytes, or none to clear.
    pub value: Option<&'a [u8]>,
}

/// The writes a `set-batch` carries, every entry checked against the
/// buffer.
pub fn unpack_values(values: &ValueBatch) -> Result<Vec<SlotWrite<'_>>, IndexError> {
    let buffer = values.data.len() as u64;
    let mut writes = Vec::with_capacity(values.index.len() / VALUE_ENTRY);
    for (i, e) in entries(&values.index, VALUE_ENTRY)?.enumerate() {
        let flags = u32_at(e, 12);
        if flags & !PRESENT != 0 {
            return Err(IndexError::Flags { entry: i, flags: flags & !PRESENT });
        }
        let value = if flags & PRESENT != 0 {
            let start = u64::from(u32_at(e, 4));
            let end = start + u64::from(u32_at(e, 8));
            if end > buffer {
                return Err(IndexError::OutOfBounds { entry: i, buffer });
            }
            Some(&values.data[start as usize..end as usize])
        } else {
            None
        };
        writes.push(SlotWrite { slot: u32_at(e, 0), value });
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_crosses_the_boundary_unchanged() {
        let mut records = Records::default();
        records.push(Record { payload: b"hello", key: Some(b"k"), timestamp: Some(-7) });
        records.push(Record { payload: b"x", key: None, timestamp: None });
        records.push(Record { payload: b"", key: Some(b""), timestamp: Some(i64::MAX) });
        let (wit, refs) = to_wit(records.clone());
        assert_eq!(wit.index.len(), 3 * ELEMENT_ENTRY);
        for i in 0..3 {
            assert_eq!(record_at(&wit, &refs, i), records.get(i));
        }
        assert_eq!(from_wit(wit).unwrap(), records);
    }

    /// The layout as `wit/types.wit` documents it, written out by hand.
    #[test]
    fn the_element_index_is_the_documented_layout() {
        let mut records = Records::default();
        records.push(Record { payload: b"ab", key: Some(b"k"), timestamp: Some(-2) });
        let (wit, _) = to_wit(records);
        let mut want = Vec::new();
        for w in [0u32, 2, 2, 1, 0b11, 0] {
            want.extend_from_slice(&w.to_le_bytes());
        }
        want.extend_from_slice(&(-2i64).to_le_bytes());
        assert_eq!(wit.index, want);
        assert_eq!(wit.data, b"abk");
    }

    #[test]
    fn a_guest_index_that_breaks_the_layout_is_refused_by_entry() {
        let batch = |data: &[u8], index: Vec<u8>| ElementBatch { data: data.to_vec(), index };
        let entry = |words: [u32; 6]| {
            let mut e: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            e.extend_from_slice(&0i64.to_le_bytes());
            e
        };
        let good = entry([0, 1, 0, 0, 0, 0]);
        assert_eq!(
            from_wit(batch(b"x", good[..31].to_vec())),
            Err(IndexError::Length { len: 31, entry: ELEMENT_ENTRY })
        );
        let mut two = good.clone();
        two.extend(entry([0, 1, 0, 0, 4, 0]));
        assert_eq!(from_wit(batch(b"x", two)), Err(IndexError::Flags { entry: 1, flags: 4 }));
        assert_eq!(from_wit(batch(b"x", entry([0, 1, 0, 0, 0, 9]))), Err(IndexError::Flags { entry: 0, flags: 9 }));
        assert_eq!(
            from_wit(batch(b"x", entry([0, 2, 0, 0, 0, 0]))),
            Err(IndexError::OutOfBounds { entry: 0, buffer: 1 })
        );
        // A key past the buffer matters only when the element has one.
        assert!(from_wit(batch(b"x", entry([0, 1, 5, 5, 0, 0]))).is_ok());
        assert_eq!(
            from_wit(batch(b"x", entry([0, 1, 5, 5, 1, 0]))),
            Err(IndexError::OutOfBounds { entry: 0, buffer: 1 })
        );
        // Offsets near u32::MAX do not wrap around.
        assert!(from_wit(batch(b"x", entry([u32::MAX, 2, 0, 0, 0, 0]))).is_err());
    }

    #[test]
    fn values_round_trip_and_bad_entries_are_named() {
        let packed = pack_values(b"abc".to_vec(), &[(0, 2, true), (9, 9, false), (2, 0, true)]);
        let writes = unpack_values(&packed).unwrap();
        let got: Vec<(u32, Option<&[u8]>)> = writes.iter().map(|w| (w.slot, w.value)).collect();
        assert_eq!(got, vec![(0, Some(&b"ab"[..])), (1, None), (2, Some(&b""[..]))]);

        let words = |w: [u32; 4]| w.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let bad = |index: Vec<u8>| unpack_values(&ValueBatch { data: b"abc".to_vec(), index }).map(|w| w.len());
        assert_eq!(bad(words([0, 0, 0, 1])[..15].to_vec()), Err(IndexError::Length { len: 15, entry: VALUE_ENTRY }));
        assert_eq!(bad(words([0, 2, 2, 1])), Err(IndexError::OutOfBounds { entry: 0, buffer: 3 }));
        assert_eq!(bad(words([0, u32::MAX, 2, 1])), Err(IndexError::OutOfBounds { entry: 0, buffer: 3 }));
        assert_eq!(bad(words([0, 0, 0, 3])), Err(IndexError::Flags { entry: 0, flags: 2 }));
        // A cleared slot's offsets are not read.
        assert_eq!(bad(words([0, 99, 99, 0])), Ok(1));
    }
}
