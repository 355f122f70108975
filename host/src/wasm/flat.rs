//! The boundary between the host's flat records ([`crate::record`]) and the
//! WIT's `element-batch` that bindgen generates: the same layout, so a batch
//! changes hands by moving its buffers and rewriting the offsets in place,
//! without copying the record bytes.

use super::bindings::weir::operator::types::{Element, ElementBatch, ElementRef};
use crate::record::{Record, RecordRef, Records};

/// A batch as a guest receives it.
pub fn to_wit(records: Records) -> ElementBatch {
    // Same size and alignment: `collect` reuses the allocation.
    let elements = records
        .refs
        .into_iter()
        .map(|r| ElementRef {
            payload_start: r.payload_start,
            payload_len: r.payload_len,
            key_start: r.key_start,
            key_len: r.key_len,
            has_key: r.has_key,
            timestamp: r.timestamp,
        })
        .collect();
    ElementBatch { data: records.data, elements }
}

/// A batch a guest emitted, as the host's records (offsets not checked yet).
pub fn from_wit(batch: ElementBatch) -> Records {
    let refs = batch.elements.iter().map(record_ref).collect();
    Records { data: batch.data, refs }
}

/// One element's offsets.
pub fn record_ref(e: &ElementRef) -> RecordRef {
    RecordRef {
        payload_start: e.payload_start,
        payload_len: e.payload_len,
        key_start: e.key_start,
        key_len: e.key_len,
        has_key: e.has_key,
        timestamp: e.timestamp,
    }
}

/// Element `i` of a batch a guest received (offsets right by construction).
pub fn record_at(batch: &ElementBatch, i: usize) -> Record<'_> {
    crate::record::view(&batch.data, &record_ref(&batch.elements[i]))
}

/// One record as the WIT's owned `element`, for single-record calls.
pub fn to_element(r: Record<'_>) -> Element {
    Element { payload: r.payload.to_vec(), key: r.key.map(<[u8]>::to_vec), timestamp: r.timestamp }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_crosses_the_boundary_unchanged() {
        let mut records = Records::default();
        records.push(Record { payload: b"hello", key: Some(b"k"), timestamp: Some(7) });
        records.push(Record { payload: b"x", key: None, timestamp: None });
        let wit = to_wit(records.clone());
        assert_eq!(record_at(&wit, 0), records.get(0));
        assert_eq!(record_at(&wit, 1), records.get(1));
        assert_eq!(from_wit(wit), records);
    }
}
