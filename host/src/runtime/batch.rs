//! What travels on the channels between tasks: batches of records and
//! end-of-input markers.

use crate::wasm::Element;

/// Records moving together from one subtask to another.
#[derive(Debug, Default)]
pub struct Batch {
    /// The records, in order.
    pub records: Vec<Element>,
    /// For a keyed edge, `records[i]`'s key hash, computed once by the
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
            records: Vec::with_capacity(capacity),
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
}

/// A message on a data channel.
#[derive(Debug)]
pub enum Message {
    /// Records.
    Data(Batch),
    /// The sending subtask will send nothing more.
    EndOfInput,
}
