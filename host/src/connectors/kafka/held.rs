//! The Kafka sink's held batches, for exactly-once output on any broker
//! (`mode = "publish-after-checkpoint"`): the records of one checkpoint
//! interval, each with the partition it goes to, encoded in one buffer,
//! stored with the checkpoint whose barrier closed them, and produced only
//! once that checkpoint completed. Every produced record carries three
//! headers: `weir-sink` (job, sink and subtask), `weir-batch` (the batch's
//! random nonce) and `weir-seq` (its index in the batch).
//!
//! A restore publishes the batches its checkpoint still held, minus what
//! already arrived: it reads each partition's tail back, below the high
//! watermark it found when it began, until it passes the held batches (a
//! record of this sink subtask from an older batch, or the log's start)
//! and skips exactly the records it found there ([`published`]). It does not assume that what arrived is a prefix of
//! what was sent: a producer without retries (cluster mode's) can lose a
//! request and deliver the next, and the restore fills that gap.

use super::KafkaConsumer;
use crate::checkpoint::metadata::{HeldBatch, StateHandle};
use crate::checkpoint::storage::CheckpointStorage;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::SnapshotAt;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;
use rdkafka::message::{Headers, Message};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
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

    /// Reads the batches a checkpoint recorded, all held in memory together
    /// to be published: refused unread if `_metadata` gives them more than
    /// `state.checkpoints.max_section_size` together. Each is streamed into
    /// memory, counted against the size `_metadata` gives it.
    pub fn load_all(batches: &[HeldBatch], storage: &CheckpointStorage) -> Result<Vec<Held>, ConnectorError> {
        let total = batches.iter().fold(0u64, |sum, b| sum.saturating_add(b.handle.size()));
        let limit = storage.limits().max_section_size;
        if total > limit {
            return Err(ConnectorError::Inconsistent(format!(
                "{}: the held output of {} checkpoints is {total} bytes by _metadata, over state.checkpoints.max_section_size = {limit} bytes, so none was read; raise the setting in the host settings if this checkpoint is trusted",
                storage.display(),
                batches.len()
            )));
        }
        batches.iter().map(|b| Held::load(b, storage)).collect()
    }

    /// Reads a batch a checkpoint recorded.
    fn load(batch: &HeldBatch, storage: &CheckpointStorage) -> Result<Held, ConnectorError> {
        let bytes = storage.read_state(&batch.handle).map_err(|e| {
            ConnectorError::Inconsistent(format!("cannot read the held output of checkpoint {}: {e}", batch.checkpoint))
        })?;
        let held = Held { checkpoint: batch.checkpoint, nonce: batch.nonce, records: 0, bytes };
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

/// The held records already in the topic: partition to (batch nonce,
/// record index) pairs.
#[derive(Debug, Default)]
pub struct Arrived(BTreeMap<i32, HashSet<(u64, u64)>>);

impl Arrived {
    /// Whether record `seq` of batch `nonce`, going to partition `p`, is
    /// in the topic.
    pub fn contains(&self, p: i32, nonce: u64, seq: u64) -> bool {
        self.0.get(&p).is_some_and(|found| found.contains(&(nonce, seq)))
    }
}

/// How far before a partition's end the first read back begins; each
/// further read begins four times as far back.
const TAIL_STEP: i64 = 1024;

/// Which records of `held` (the batches being published, oldest first)
/// `ident` already produced to `topic`. Each partition they go to is read
/// backwards in growing steps from its high watermark as of now: the held
/// records were produced (if at all) before this restore began, so they
/// are below it, and what other writers add meanwhile is never waited for.
/// The steps stop once every held record for the partition turned up, a
/// step holds a record of `ident` from an older batch (everything before
/// it is older still: batches go out one after another), or the log
/// begins. `cancelled` is asked between records: a restore that is no
/// longer wanted (its partition was revoked) stops at once.
pub fn published(
    consumer: &KafkaConsumer,
    topic: &str,
    held: &[Held],
    ident: &[u8],
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<Arrived, ConnectorError> {
    let nonces: BTreeSet<u64> = held.iter().map(|b| b.nonce).collect();
    let mut expected: BTreeMap<i32, usize> = BTreeMap::new();
    for b in held {
        for r in b.iter() {
            *expected.entry(r?.partition).or_default() += 1;
        }
    }
    let mut arrived = Arrived::default();
    for (&p, &want) in &expected {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, timeout)
            .map_err(|e| ConnectorError::Unavailable(format!("cannot read the offsets of {topic}/{p}: {e}")))?;
        let found = arrived.0.entry(p).or_default();
        let began = Instant::now();
        let (mut start, mut end, mut step) = ((high - TAIL_STEP).max(low), high, TAIL_STEP);
        let (mut steps, mut read) = (0, 0);
        loop {
            let range = Range { topic, partition: p, from: start, to: end };
            let older = read_range(consumer, range, ident, timeout, cancelled, |nonce, seq| {
                let ours = nonces.contains(&nonce);
                if ours {
                    found.insert((nonce, seq));
                }
                // Once every held record turned up there is nothing left
                // to learn.
                (found.len() < want).then_some(ours)
            })?;
            steps += 1;
            read += end - start;
            if older || found.len() >= want || start <= low {
                tracing::info!(
                    topic,
                    partition = p,
                    high_watermark = high,
                    from = start,
                    steps,
                    offsets = read,
                    held = want,
                    found = found.len(),
                    took_ms = began.elapsed().as_millis() as u64,
                    "read the output back"
                );
                break;
            }
            end = start;
            step = step.saturating_mul(4);
            start = (start - step).max(low);
        }
    }
    Ok(arrived)
}

/// Offsets `from..to` of one partition.
struct Range<'a> {
    topic: &'a str,
    partition: i32,
    from: i64,
    to: i64,
}

/// Reads `range`, handing each record of `ident` (batch nonce, index) to
/// `held`, which says whether it is of a held batch, or `None` to stop
/// reading here; true if one was not. The read ends at the range's end
/// (a record at or past it, or the partition's end: offsets of
/// transaction markers are never delivered), never later.
fn read_range(
    consumer: &KafkaConsumer,
    range: Range<'_>,
    ident: &[u8],
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
    mut held: impl FnMut(u64, u64) -> Option<bool>,
) -> Result<bool, ConnectorError> {
    let Range { topic, partition: p, from, to } = range;
    if from >= to {
        return Ok(false);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, p, rdkafka::Offset::Offset(from))
        .map_err(|e| ConnectorError::Unavailable(format!("cannot read {topic}/{p}: {e}")))?;
    consumer.assign(&tpl).map_err(|e| ConnectorError::Unavailable(format!("cannot read {topic}/{p}: {e}")))?;
    let mut older = false;
    let mut deadline = Instant::now() + timeout;
    loop {
        if cancelled() {
            let _ = consumer.unassign();
            return Err(ConnectorError::Cancelled);
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                deadline = Instant::now() + timeout;
                if m.partition() != p || m.topic() != topic {
                    continue;
                }
                if m.offset() >= to {
                    break;
                }
                if let Some(h) = m.headers() {
                    let get = |key: &str| h.iter().find(|x| x.key == key).and_then(|x| x.value);
                    if get(SINK_HEADER) == Some(ident)
                        && let (Some(b), Some(s)) = (get(BATCH_HEADER), get(SEQ_HEADER))
                        && let (Ok(b), Ok(s)) = (<[u8; 8]>::try_from(b), <[u8; 8]>::try_from(s))
                    {
                        match held(u64::from_be_bytes(b), u64::from_be_bytes(s)) {
                            Some(ours) => older |= !ours,
                            None => break,
                        }
                    }
                }
                if m.offset() + 1 >= to {
                    break;
                }
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(eof))) if eof == p => break,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => {}
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
    Ok(older)
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
    fn held_output_is_read_only_within_the_section_limit_and_its_stated_size() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = crate::config::StorageSettings {
            dir: Some(format!("file://{}", tmp.path().display())),
            inline_threshold: 16,
            memory_max_state_size: 0,
            fsync: false,
            s3: crate::config::S3Settings::default(),
            fenced_by: None,
            limits: crate::config::settings::ReadLimits { max_file_size: 1 << 20, max_section_size: 1000 },
        };
        let storage = CheckpointStorage::open(&settings, "job").unwrap();
        let mut held = Held { checkpoint: 4, nonce: 9, ..Held::default() };
        for i in 0..30u8 {
            held.push(&HeldRecord { partition: 0, key: None, payload: &[i; 20], timestamp: None });
        }
        let at = SnapshotAt { id: Some(4), tag: "0000000004", storage: &storage, owner: "sink-out-0" };
        let batch = held.store(&at).unwrap();
        let StateHandle::File { size, .. } = batch.handle else { panic!("stored as a file: {:?}", batch.handle) };
        assert!(size > 500 && size <= 1000, "one batch fits: {size} bytes");
        let back = Held::load_all(std::slice::from_ref(&batch), &storage).unwrap();
        assert_eq!((back[0].records, &back[0].bytes), (30, &held.bytes));
        // Two of them pass the limit together: refused before either is
        // read (the second names a file that does not exist).
        let mut missing = batch.clone();
        missing.handle = StateHandle::File { path: "chk-4/none.held".into(), size, crc32: 0 };
        let err = Held::load_all(&[batch.clone(), missing], &storage).unwrap_err().to_string();
        assert!(err.contains("over state.checkpoints.max_section_size = 1000 bytes"), "{err}");
        // A batch whose file holds more than _metadata says is refused at
        // the stated size, not read to its end.
        let mut short = batch.clone();
        let StateHandle::File { path, crc32, .. } = &batch.handle else { unreachable!() };
        short.handle = StateHandle::File { path: path.clone(), size: size - 1, crc32: *crc32 };
        let err = Held::load_all(&[short], &storage).unwrap_err().to_string();
        assert!(err.contains(&format!("more than the {} bytes", size - 1)), "{err}");
    }

    #[test]
    fn arrived_is_exactly_the_records_found() {
        let arrived = Arrived([(0, [(10, 4), (10, 6)].into()), (1, [(20, 0)].into())].into());
        assert!(arrived.contains(0, 10, 4));
        // A gap (record 5 lost, 6 delivered) is not taken as arrived.
        assert!(!arrived.contains(0, 10, 5));
        assert!(arrived.contains(0, 10, 6));
        assert!(!arrived.contains(0, 20, 0));
        assert!(arrived.contains(1, 20, 0));
        assert!(!arrived.contains(2, 10, 4));
    }
}
