//! What travels on the channels between tasks: batches of records, laid out
//! flat (one byte buffer plus one small entry per record, the WIT's
//! `element-batch`), and end-of-input markers.
//!
//! Flat batches are what keeps records cheap: a source, a router or a guest
//! adds a record by copying its bytes, with no allocation per record, and a
//! batch crosses into a guest as two buffers.

use crate::wasm::{Element, ElementBatch, ElementRef};

/// A borrowed view of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The payload bytes.
    pub payload: &'a [u8],
    /// The key, if any.
    pub key: Option<&'a [u8]>,
    /// Event time, if any.
    pub timestamp: Option<i64>,
}

impl Record<'_> {
    /// An owned element (for single-record calls).
    pub fn to_element(&self) -> Element {
        Element { payload: self.payload.to_vec(), key: self.key.map(<[u8]>::to_vec), timestamp: self.timestamp }
    }
}

/// Records moving together from one subtask to another.
#[derive(Debug)]
pub struct Batch {
    /// The records, flat.
    pub records: ElementBatch,
    /// For a keyed edge, record `i`'s key hash, computed once by the
    /// sender's partitioner and reused by the receiver's state backend.
    pub hashes: Vec<u64>,
    /// Whether the records arrived over a keyed edge (`partition = "key"`):
    /// only then does keyed state have a current key.
    pub keyed: bool,
}

impl Default for Batch {
    fn default() -> Self {
        Batch::with_capacity(0, false)
    }
}

impl Batch {
    /// An empty batch with room for `capacity` records.
    pub fn with_capacity(capacity: usize, keyed: bool) -> Self {
        Batch {
            records: ElementBatch { data: Vec::with_capacity(capacity * 16), elements: Vec::with_capacity(capacity) },
            hashes: if keyed { Vec::with_capacity(capacity) } else { Vec::new() },
            keyed,
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.elements.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.records.elements.is_empty()
    }

    /// Appends a record.
    #[inline]
    pub fn push(&mut self, r: Record<'_>) {
        push_flat(&mut self.records, r);
    }

    /// Record `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Record<'_> {
        record_at(&self.records, i)
    }

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Appends `r` to a flat batch.
#[inline]
pub fn push_flat(b: &mut ElementBatch, r: Record<'_>) {
    let payload_start = b.data.len() as u32;
    b.data.extend_from_slice(r.payload);
    let key_start = b.data.len() as u32;
    if let Some(k) = r.key {
        b.data.extend_from_slice(k);
    }
    b.elements.push(ElementRef {
        payload_start,
        payload_len: r.payload.len() as u32,
        key_start,
        key_len: r.key.map_or(0, |k| k.len() as u32),
        has_key: r.key.is_some(),
        timestamp: r.timestamp,
    });
}

/// Record `i` of a flat batch. Offsets were checked by [`check_flat`] for
/// batches that came from a guest, and are built correctly by `push_flat`.
#[inline]
pub fn record_at(b: &ElementBatch, i: usize) -> Record<'_> {
    let e = &b.elements[i];
    let p = e.payload_start as usize;
    let k = e.key_start as usize;
    Record {
        payload: &b.data[p..p + e.payload_len as usize],
        key: e.has_key.then(|| &b.data[k..k + e.key_len as usize]),
        timestamp: e.timestamp,
    }
}

/// Checks that every element of a batch a guest emitted lies inside its
/// buffer; names the first that does not.
pub fn check_flat(b: &ElementBatch) -> Result<(), String> {
    let len = b.data.len() as u64;
    for (i, e) in b.elements.iter().enumerate() {
        let payload_end = u64::from(e.payload_start) + u64::from(e.payload_len);
        let key_end = u64::from(e.key_start) + u64::from(e.key_len);
        if payload_end > len || (e.has_key && key_end > len) {
            return Err(format!("emitted element {i} points past the end of its batch's {len}-byte buffer"));
        }
    }
    Ok(())
}

/// A message on a data channel.
#[derive(Debug)]
pub enum Message {
    /// Records.
    Data(Batch),
    /// Event time on this channel has reached this value: no record with a
    /// smaller timestamp follows (except late ones). `i64::MAX` at the end.
    Watermark(i64),
    /// Checkpoint barrier: every record before it belongs to checkpoint
    /// `id`, every record after it to the next.
    Barrier(u64),
    /// The sending subtask will send nothing more.
    EndOfInput,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_flat_batch() {
        let mut b = Batch::with_capacity(2, false);
        b.push(Record { payload: b"hello", key: Some(b"k"), timestamp: Some(7) });
        b.push(Record { payload: b"", key: Some(b""), timestamp: None });
        b.push(Record { payload: b"x", key: None, timestamp: None });
        assert_eq!(b.len(), 3);
        assert_eq!(b.get(0), Record { payload: b"hello", key: Some(b"k"), timestamp: Some(7) });
        assert_eq!(b.get(1), Record { payload: b"", key: Some(b""), timestamp: None });
        assert_eq!(b.get(2).key, None);
        assert!(check_flat(&b.records).is_ok());
    }

    #[test]
    fn out_of_bounds_elements_are_refused() {
        let bad = ElementBatch {
            data: vec![1, 2, 3],
            elements: vec![ElementRef {
                payload_start: 2,
                payload_len: 5,
                key_start: 0,
                key_len: 0,
                has_key: false,
                timestamp: None,
            }],
        };
        assert!(check_flat(&bad).unwrap_err().contains("element 0"));
    }
}
