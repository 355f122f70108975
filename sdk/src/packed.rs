//! The packed indexes of the WIT's `element-batch` and `value-batch`
//! (layouts in `wit/types.wit`): reading the host's entries and writing
//! this guest's. The host builds what it sends, so reads index without
//! checks beyond Rust's bounds checks (a bad entry traps this instance,
//! never the host); the host checks what the guest sends.

/// Bytes of one `element-batch` index entry.
pub(crate) const ELEMENT_ENTRY: usize = 32;
/// Bytes of one `value-batch` index entry.
const VALUE_ENTRY: usize = 16;

const HAS_KEY: u32 = 1;
const HAS_TIMESTAMP: u32 = 2;
const PRESENT: u32 = 1;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Element `i` of a batch's index: payload range, key range (if any), and
/// event time (if any).
pub(crate) fn element(index: &[u8], i: usize) -> ElementEntry {
    let e = &index[i * ELEMENT_ENTRY..(i + 1) * ELEMENT_ENTRY];
    let flags = u32_at(e, 16);
    let key = (flags & HAS_KEY != 0).then(|| (u32_at(e, 8), u32_at(e, 12)));
    let timestamp = (flags & HAS_TIMESTAMP != 0)
        .then(|| i64::from_le_bytes([e[24], e[25], e[26], e[27], e[28], e[29], e[30], e[31]]));
    ElementEntry { payload: (u32_at(e, 0), u32_at(e, 4)), key, timestamp }
}

/// One element's entry: `(start, len)` ranges into the batch's data.
pub(crate) struct ElementEntry {
    pub payload: (u32, u32),
    pub key: Option<(u32, u32)>,
    pub timestamp: Option<i64>,
}

/// Appends an element's entry to an index.
pub(crate) fn push_element(index: &mut Vec<u8>, e: ElementEntry) {
    let (key_start, key_len) = e.key.unwrap_or((0, 0));
    let flags = if e.key.is_some() { HAS_KEY } else { 0 } | if e.timestamp.is_some() { HAS_TIMESTAMP } else { 0 };
    for word in [e.payload.0, e.payload.1, key_start, key_len, flags, 0] {
        index.extend_from_slice(&word.to_le_bytes());
    }
    index.extend_from_slice(&e.timestamp.unwrap_or(0).to_le_bytes());
}

/// Where one value lies in a value buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
    pub present: bool,
}

impl Span {
    pub(crate) const ABSENT: Span = Span { start: 0, len: 0, present: false };
}

/// The entries of a value index: each slot and its value's span.
pub(crate) fn value_entries(index: &[u8]) -> impl Iterator<Item = (u32, Span)> + '_ {
    index
        .chunks_exact(VALUE_ENTRY)
        .map(|e| (u32_at(e, 0), Span { start: u32_at(e, 4), len: u32_at(e, 8), present: u32_at(e, 12) & PRESENT != 0 }))
}

/// The spans of a `get-batch` answer, one per slot in slot order.
pub(crate) fn value_spans(index: &[u8]) -> Vec<Span> {
    value_entries(index).map(|(_, s)| s).collect()
}

/// The index of a `set-batch`: slot `slots[i]` takes the value `spans[i]`
/// locates (or is cleared).
pub(crate) fn value_index(slots: &[u32], spans: &[Span]) -> Vec<u8> {
    let mut index = Vec::with_capacity(slots.len() * VALUE_ENTRY);
    for (&slot, s) in slots.iter().zip(spans) {
        let (start, len) = if s.present { (s.start, s.len) } else { (0, 0) };
        for word in [slot, start, len, if s.present { PRESENT } else { 0 }] {
            index.extend_from_slice(&word.to_le_bytes());
        }
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout `wit/types.wit` documents, written out by hand.
    #[test]
    fn element_entries_follow_the_documented_layout() {
        let mut index = Vec::new();
        push_element(&mut index, ElementEntry { payload: (0, 2), key: Some((2, 1)), timestamp: Some(-2) });
        push_element(&mut index, ElementEntry { payload: (3, 0), key: None, timestamp: None });
        let mut want = Vec::new();
        for w in [0u32, 2, 2, 1, 3, 0] {
            want.extend_from_slice(&w.to_le_bytes());
        }
        want.extend_from_slice(&(-2i64).to_le_bytes());
        for w in [3u32, 0, 0, 0, 0, 0, 0, 0] {
            want.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(index, want);
        let e = element(&index, 0);
        assert_eq!((e.payload, e.key, e.timestamp), ((0, 2), Some((2, 1)), Some(-2)));
        let e = element(&index, 1);
        assert_eq!((e.payload, e.key, e.timestamp), ((3, 0), None, None));
    }

    #[test]
    fn value_entries_round_trip_with_their_slots() {
        let spans = [Span { start: 4, len: 2, present: true }, Span::ABSENT, Span { start: 6, len: 0, present: true }];
        let index = value_index(&[7, 1, 3], &spans);
        assert_eq!(index.len(), 48);
        assert_eq!(u32_at(&index, 16), 1);
        assert_eq!(value_spans(&index), spans);
        let slots: Vec<u32> = value_entries(&index).map(|(slot, _)| slot).collect();
        assert_eq!(slots, [7, 1, 3]);
    }
}
