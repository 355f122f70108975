//! Records and batches: how records are laid out while they move between
//! tasks and into guests. A leaf module: it depends on nothing in the crate,
//! so both the WASM layer and the runtime build on it.
//!
//! Records travel flat: one byte buffer plus one small [`RecordRef`] of
//! offsets per record, the fields of the WIT's packed `element-batch` index.
//! A source, a router or a guest adds a record by copying its bytes, with no
//! allocation per record, and a batch crosses into a guest as two buffers
//! (the WASM layer packs the offsets into the index, without copying the
//! bytes).

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

/// Where one record's bytes are in its buffer (one entry of the WIT's
/// `element-batch` index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef {
    /// Offset of the payload.
    pub payload_start: u32,
    /// Length of the payload.
    pub payload_len: u32,
    /// Offset of the key (meaningless without one).
    pub key_start: u32,
    /// Length of the key.
    pub key_len: u32,
    /// Whether the record has a key.
    pub has_key: bool,
    /// Event time.
    pub timestamp: Option<i64>,
}

/// Records laid out flat: their bytes in one buffer, one [`RecordRef`] each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    /// Payloads and keys, back to back.
    pub data: Vec<u8>,
    /// One entry per record, in order.
    pub refs: Vec<RecordRef>,
}

impl Records {
    /// Empty, with room for `records` records.
    pub fn with_capacity(records: usize) -> Self {
        Records { data: Vec::with_capacity(records * 16), refs: Vec::with_capacity(records) }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Forgets every record, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.data.clear();
        self.refs.clear();
    }

    /// Appends a record (its bytes are copied).
    #[inline]
    pub fn push(&mut self, r: Record<'_>) {
        let payload_start = self.data.len() as u32;
        self.data.extend_from_slice(r.payload);
        let key_start = self.data.len() as u32;
        if let Some(k) = r.key {
            self.data.extend_from_slice(k);
        }
        self.refs.push(RecordRef {
            payload_start,
            payload_len: r.payload.len() as u32,
            key_start,
            key_len: r.key.map_or(0, |k| k.len() as u32),
            has_key: r.key.is_some(),
            timestamp: r.timestamp,
        });
    }

    /// Record `i`. Offsets are right by construction ([`Records::push`]) or
    /// were checked ([`Records::check`]) when a guest wrote them.
    #[inline]
    pub fn get(&self, i: usize) -> Record<'_> {
        view(&self.data, &self.refs[i])
    }

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Bytes the records reference (payloads and keys), counting bytes that
    /// several records share once per record: what copying them out costs.
    pub fn referenced_bytes(&self) -> u64 {
        self.refs.iter().map(|r| u64::from(r.payload_len) + if r.has_key { u64::from(r.key_len) } else { 0 }).sum()
    }

    /// Appends every record of `other`.
    pub fn extend(&mut self, other: &Records) {
        for r in other.iter() {
            self.push(r);
        }
    }

    /// Checks that every record lies inside the buffer: offsets a guest
    /// wrote are not trusted. Names the first record that does not.
    pub fn check(&self) -> Result<(), OutOfBounds> {
        let len = self.data.len() as u64;
        for (i, e) in self.refs.iter().enumerate() {
            let payload_end = u64::from(e.payload_start) + u64::from(e.payload_len);
            let key_end = u64::from(e.key_start) + u64::from(e.key_len);
            if payload_end > len || (e.has_key && key_end > len) {
                return Err(OutOfBounds { record: i, buffer: len });
            }
        }
        Ok(())
    }
}

/// The record `r` describes in `data`.
#[inline]
pub fn view<'a>(data: &'a [u8], r: &RecordRef) -> Record<'a> {
    let p = r.payload_start as usize;
    let k = r.key_start as usize;
    Record {
        payload: &data[p..p + r.payload_len as usize],
        key: r.has_key.then(|| &data[k..k + r.key_len as usize]),
        timestamp: r.timestamp,
    }
}

/// A record whose offsets point past the end of its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("element {record} points past the end of its batch's {buffer}-byte buffer")]
pub struct OutOfBounds {
    /// Which record.
    pub record: usize,
    /// The buffer's length.
    pub buffer: u64,
}

/// Records moving together from one subtask to another.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// The records, flat.
    pub records: Records,
    /// For a keyed edge, record `i`'s key hash, computed once by the
    /// sender's partitioner and reused by the receiver's state backend.
    pub hashes: Vec<u64>,
    /// Whether the records arrived over a keyed edge (`partition = "key"`):
    /// only then does keyed state have a current key.
    pub keyed: bool,
}

impl Batch {
    /// An empty batch with room for `capacity` records.
    pub fn with_capacity(capacity: usize, keyed: bool) -> Self {
        Batch {
            records: Records::with_capacity(capacity),
            hashes: if keyed { Vec::with_capacity(capacity) } else { Vec::new() },
            keyed,
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Appends a record.
    #[inline]
    pub fn push(&mut self, r: Record<'_>) {
        self.records.push(r);
    }

    /// Record `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Record<'_> {
        self.records.get(i)
    }

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = Record<'_>> + '_ {
        self.records.iter()
    }
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
        assert!(b.records.check().is_ok());
    }

    proptest::proptest! {
        #[test]
        fn records_come_back_as_pushed_and_offsets_are_checked(
            records in proptest::collection::vec(
                (proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
                 proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12)),
                 proptest::option::of(proptest::prelude::any::<i64>())),
                0..30,
            ),
            past in 1u32..1000,
        ) {
            let mut r = Records::default();
            for (payload, key, timestamp) in &records {
                r.push(Record { payload, key: key.as_deref(), timestamp: *timestamp });
            }
            proptest::prop_assert!(r.check().is_ok());
            let mut bytes = 0u64;
            for (i, (payload, key, timestamp)) in records.iter().enumerate() {
                proptest::prop_assert_eq!(r.get(i), Record { payload, key: key.as_deref(), timestamp: *timestamp });
                bytes += (payload.len() + key.as_ref().map_or(0, Vec::len)) as u64;
            }
            proptest::prop_assert_eq!(r.referenced_bytes(), bytes);
            if let Some(last) = r.refs.last_mut() {
                // Any offset past the buffer is caught, wherever it points.
                last.payload_len = (r.data.len() as u32).saturating_sub(last.payload_start) + past;
                proptest::prop_assert!(r.check().is_err());
            }
        }
    }

    #[test]
    fn out_of_bounds_records_are_refused() {
        let bad = Records {
            data: vec![1, 2, 3],
            refs: vec![RecordRef {
                payload_start: 2,
                payload_len: 5,
                key_start: 0,
                key_len: 0,
                has_key: false,
                timestamp: None,
            }],
        };
        assert_eq!(bad.check(), Err(OutOfBounds { record: 0, buffer: 3 }));
        assert!(bad.check().unwrap_err().to_string().contains("element 0"));
    }
}
