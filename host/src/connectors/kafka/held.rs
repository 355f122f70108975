//! The Kafka sink's held batches, for exactly-once output on any broker
//! (`mode = "publish-after-checkpoint"`): the records of one checkpoint
//! interval, each with the partition it goes to, encoded in one buffer,
//! stored with the checkpoint whose barrier closed them, and produced only
//! once that checkpoint completed. Every produced record carries three
//! headers: `weir-sink` (job, sink and subtask), `weir-batch` (the batch's
//! random nonce) and `weir-seq` (its index in the batch).
//!
//! A restore publishes the batches its checkpoint still held, minus what
//! already arrived: the producer is idempotent, so each partition holds a
//! prefix of what was sent to it, in order; the last record of this sink
//! subtask in a partition's tail says how far that partition got
//! ([`published`]).

use super::KafkaConsumer;
use crate::checkpoint::metadata::{HeldBatch, StateHandle};
use crate::checkpoint::storage::CheckpointStorage;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::SnapshotAt;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;
use rdkafka::message::{Headers, Message};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Header naming the sink subtask that produced a record.
pub const SINK_HEADER: &str = "weir-sink";
/// Header with the batch's nonce, 8 bytes big-endian.
pub const BATCH_HEADER: &str = "weir-batch";
/// Header with the record's index in its batch, 8 bytes big-endian.
pub const SEQ_HEADER: &str = "weir-seq";

/// The `checkpoint` of a batch closed at the end of input, published
/// after the job's final checkpoint.
pub const END: u64 = u64::MAX;

/// One record as held.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldRecord<'a> {
    /// The partition it goes to, chosen when it was written.
    pub partition: i32,
    /// Its key.
    #[serde(borrow, with = "serde_bytes")]
    pub key: Option<&'a [u8]>,
    /// Its value.
    #[serde(borrow, with = "serde_bytes")]
    pub payload: &'a [u8],
    /// Its timestamp, in milliseconds.
    pub timestamp: Option<i64>,
}

/// A batch of held records.
#[derive(Debug, Default)]
pub struct Held {
    /// The checkpoint whose barrier closed it ([`END`]: the end of input).
    pub checkpoint: u64,
    /// Its nonce.
    pub nonce: u64,
    /// Records in it.
    pub records: u64,
    /// The records, postcard-encoded one after another.
    pub bytes: Vec<u8>,
}

impl Held {
    /// Adds a record.
    pub fn push(&mut self, r: &HeldRecord<'_>) {
        self.bytes = postcard::to_extend(r, std::mem::take(&mut self.bytes)).expect("a Vec grows");
        self.records += 1;
    }

    /// The records, in order; a record that does not decode (a damaged
    /// store) ends the iteration with an error.
    pub fn iter(&self) -> impl Iterator<Item = Result<HeldRecord<'_>, ConnectorError>> {
        let mut rest: &[u8] = &self.bytes;
        let nonce = self.nonce;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            match postcard::take_from_bytes::<HeldRecord<'_>>(rest) {
                Ok((r, tail)) => {
                    rest = tail;
                    Some(Ok(r))
                }
                Err(e) => {
                    rest = &[];
                    Some(Err(ConnectorError::Inconsistent(format!("held batch {nonce:016x} does not decode: {e}"))))
                }
            }
        })
    }

    /// Stores the batch with the checkpoint `at` is for (the end of input:
    /// a file of its own) and says where.
    pub fn store(&self, at: &SnapshotAt<'_>) -> Result<HeldBatch, ConnectorError> {
        let name = format!("{}-{:016x}.held", at.owner, self.nonce);
        let stored = |e: crate::checkpoint::storage::StorageError| {
            ConnectorError::Unavailable(format!("cannot store the held output: {e}"))
        };
        let handle = match at.id {
            Some(id) => at.storage.put_state(id, at.owner, &name, self.bytes.clone()).map_err(stored)?,
            None => {
                let path = format!("held/{name}");
                let (size, crc32) = at.storage.put_object(&path, self.bytes.clone()).map_err(stored)?;
                StateHandle::File { path, size, crc32 }
            }
        };
        Ok(HeldBatch { checkpoint: self.checkpoint, nonce: self.nonce, records: self.records, handle })
    }

    /// Reads a batch a checkpoint recorded.
    pub fn load(batch: &HeldBatch, storage: &CheckpointStorage) -> Result<Held, ConnectorError> {
        let bytes = storage.read_state(&batch.handle).map_err(|e| {
            ConnectorError::Inconsistent(format!("cannot read the held output of checkpoint {}: {e}", batch.checkpoint))
        })?;
        let held = Held { checkpoint: batch.checkpoint, nonce: batch.nonce, records: 0, bytes: bytes.to_vec() };
        let records = held.iter().try_fold(0u64, |n, r| r.map(|_| n + 1))?;
        if records != batch.records {
            return Err(ConnectorError::Inconsistent(format!(
                "held output of checkpoint {} has {records} records, the checkpoint says {}",
                batch.checkpoint, batch.records
            )));
        }
        Ok(Held { records, ..held })
    }
}

/// Where one partition's output of this sink subtask ends: the batch
/// nonce and sequence number of its last record there.
pub type LastPublished = BTreeMap<i32, (u64, u64)>;

/// Records read back per step when looking for this sink's last record in
/// a partition's tail; each step back reads four times as many.
const TAIL_STEP: i64 = 1024;

/// For each of `partitions` of `topic`: the last record `ident` produced
/// there, found by reading the partition's tail backwards in growing
/// steps until one of `ident`'s records turns up or the log begins. The
/// first step reads to the end the consumer finds, not to the end offset
/// the broker reports, which some brokers report low.
pub fn published(
    consumer: &KafkaConsumer,
    topic: &str,
    partitions: impl IntoIterator<Item = i32>,
    ident: &[u8],
    timeout: Duration,
) -> Result<LastPublished, ConnectorError> {
    let mut last = LastPublished::new();
    for p in partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, timeout)
            .map_err(|e| ConnectorError::Unavailable(format!("cannot read the offsets of {topic}/{p}: {e}")))?;
        let (mut start, mut end, mut step) = ((high - TAIL_STEP).max(low), None, TAIL_STEP);
        loop {
            if let Some(found) = last_in_range(consumer, topic, p, (start, end), ident, timeout)? {
                last.insert(p, found);
                break;
            }
            if start <= low {
                break;
            }
            end = Some(start);
            step = step.saturating_mul(4);
            start = (start - step).max(low);
        }
    }
    Ok(last)
}

/// The last record of `ident` in offsets `from..to` of `topic`/`p` (`to`
/// `None`: to the partition's end).
fn last_in_range(
    consumer: &KafkaConsumer,
    topic: &str,
    p: i32,
    (from, to): (i64, Option<i64>),
    ident: &[u8],
    timeout: Duration,
) -> Result<Option<(u64, u64)>, ConnectorError> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, p, rdkafka::Offset::Offset(from))
        .map_err(|e| ConnectorError::Unavailable(format!("cannot read {topic}/{p}: {e}")))?;
    consumer.assign(&tpl).map_err(|e| ConnectorError::Unavailable(format!("cannot read {topic}/{p}: {e}")))?;
    let mut found = None;
    let mut deadline = Instant::now() + timeout;
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                deadline = Instant::now() + timeout;
                if to.is_some_and(|to| m.offset() >= to) {
                    break;
                }
                if let Some(h) = m.headers() {
                    let get = |key: &str| h.iter().find(|x| x.key == key).and_then(|x| x.value);
                    if get(SINK_HEADER) == Some(ident)
                        && let (Some(b), Some(s)) = (get(BATCH_HEADER), get(SEQ_HEADER))
                        && let (Ok(b), Ok(s)) = (<[u8; 8]>::try_from(b), <[u8; 8]>::try_from(s))
                    {
                        found = Some((u64::from_be_bytes(b), u64::from_be_bytes(s)));
                    }
                }
                if to.is_some_and(|to| m.offset() + 1 >= to) {
                    break;
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => {
                return Err(ConnectorError::Unavailable(format!("cannot read {topic}/{p} back: {e}")));
            }
            None if Instant::now() > deadline => {
                return Err(ConnectorError::Unavailable(format!(
                    "reading {topic}/{p} back from offset {from} stalled for {}",
                    humantime::format_duration(timeout)
                )));
            }
            None => {}
        }
    }
    consumer.unassign().map_err(|e| ConnectorError::Unavailable(format!("cannot read {topic}/{p}: {e}")))?;
    Ok(found)
}

/// Whether record `seq` of batch `nonce`, going to partition `p`, already
/// arrived, given `held` (the batches being published, oldest first) and
/// where each partition's output ends.
pub fn arrived(last: &LastPublished, held_nonces: &[u64], nonce: u64, p: i32, seq: u64) -> bool {
    let Some(&(last_nonce, last_seq)) = last.get(&p) else { return false };
    // The last record there is from an earlier batch than any held one:
    // nothing held reached this partition.
    let Some(last_at) = held_nonces.iter().position(|&n| n == last_nonce) else { return false };
    let this_at = held_nonces.iter().position(|&n| n == nonce).expect("the batch is held");
    this_at < last_at || (this_at == last_at && seq <= last_seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_an_error() {
        let mut held = Held { checkpoint: 3, nonce: 7, ..Held::default() };
        let a = HeldRecord { partition: 2, key: Some(b"k"), payload: b"v1", timestamp: Some(-5) };
        let b = HeldRecord { partition: 0, key: None, payload: b"", timestamp: None };
        held.push(&a);
        held.push(&b);
        let back: Vec<_> = held.iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, [a, b]);
        held.bytes.truncate(held.bytes.len() - 1);
        held.bytes.push(200);
        assert!(held.iter().any(|r| r.is_err()));
    }

    #[test]
    fn what_arrived_follows_the_order_of_batches() {
        let held = [10, 20];
        let last: LastPublished = [(0, (10, 4)), (1, (20, 2)), (2, (99, 0))].into();
        // Partition 0 got batch 10 up to record 4, nothing of batch 20.
        assert!(arrived(&last, &held, 10, 0, 4));
        assert!(!arrived(&last, &held, 10, 0, 5));
        assert!(!arrived(&last, &held, 20, 0, 0));
        // Partition 1 got all of batch 10 and batch 20 up to record 2.
        assert!(arrived(&last, &held, 10, 1, 1000));
        assert!(arrived(&last, &held, 20, 1, 2));
        assert!(!arrived(&last, &held, 20, 1, 3));
        // Partition 2 ends with an older batch; partition 3 has nothing.
        assert!(!arrived(&last, &held, 10, 2, 0));
        assert!(!arrived(&last, &held, 10, 3, 0));
    }
}
