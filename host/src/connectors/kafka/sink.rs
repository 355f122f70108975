//! `kind = "kafka"` sink: records to a topic, keyed by the record key
//! (Kafka's murmur2 partitioner; records without a key round-robin), with
//! the record's event time as the Kafka timestamp.
//!
//! `delivery`:
//! - `exactly-once` (default): `mode = "publish-after-checkpoint"` holds
//!   each checkpoint interval's records ([`super::held`]), stores them with
//!   the checkpoint, and produces them with an idempotent producer once it
//!   completed; a restore produces what its checkpoint held minus what
//!   the topic shows arrived. Readers see each record once, at checkpoint
//!   granularity, on any broker. `mode = "transactions"` sends records as
//!   they come inside Kafka transactions, committed when the checkpoint
//!   that ended them completes ([`super::transactions`]); it needs a
//!   broker with transactions and readers at `read_committed`.
//! - `at-least-once`: records are produced as they come; every barrier
//!   waits until all are acknowledged, so nothing before a checkpoint is
//!   lost; a restore repeats what came after it.
//! - `none`: produced as they come, never waited for except at the end.

use super::held::{BATCH_HEADER, END, Held, HeldRecord, SEQ_HEADER, SINK_HEADER};
use super::transactions::{Transactions, TxnSettings};
use super::{ClusterOptions, KafkaConsumer, describe, partition_counts};
use crate::checkpoint::metadata::SinkState;
use crate::checkpoint::storage::{CheckpointStorage, LogPosition};
use crate::config::ConnectorSpec;
use crate::config::units::{ByteSize, HumanDuration};
use crate::connectors::{OptionsError, options};
use crate::record::Batch;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::{OpenAt, Sink, SinkWriter, SnapshotAt};
use crossbeam_channel::Sender;
use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a sink's records reach the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// Each record once, after the checkpoint that covers it.
    ExactlyOnce,
    /// Nothing lost; records after the last checkpoint repeat on restore.
    AtLeastOnce,
    /// Fire and forget.
    None,
}

/// How `exactly-once` is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Held with the checkpoint, produced after it completed.
    PublishAfterCheckpoint,
    /// Kafka transactions (a transactional producer per subtask).
    Transactions,
}

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    bootstrap_servers: String,
    topic: String,
    delivery: Option<Delivery>,
    mode: Option<Mode>,
    /// Most bytes of output held for checkpoints not yet complete.
    max_held: Option<ByteSize>,
    /// How long the producer may take to have everything acknowledged.
    flush_timeout: Option<HumanDuration>,
    request_timeout: Option<HumanDuration>,
    #[serde(default)]
    create_topic: bool,
    partitions: Option<i32>,
    /// Transactions: what every transactional id of the sink starts with.
    transactional_id_prefix: Option<String>,
    /// Transactions: `transaction.timeout.ms`.
    transaction_timeout: Option<HumanDuration>,
    #[serde(default)]
    properties: BTreeMap<String, toml::Value>,
}

/// A configured Kafka sink.
pub struct KafkaSink {
    id: String,
    cluster: ClusterOptions,
    topic: String,
    delivery: Delivery,
    mode: Mode,
    max_held: u64,
    flush_timeout: Duration,
    transactional_id_prefix: Option<String>,
    transaction_timeout: Option<Duration>,
}

/// The longest transaction timeout Weir picks by itself: Kafka's default
/// `transaction.max.timeout.ms`.
const MAX_DEFAULT_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// `transaction_timeout` unless set: ten checkpoint intervals (a restart
/// must commit a pre-committed transaction before it runs out), at least
/// a minute, at most Kafka's default ceiling.
fn default_transaction_timeout(interval: Duration) -> Duration {
    (interval * 10).clamp(Duration::from_secs(60), MAX_DEFAULT_TRANSACTION_TIMEOUT)
}

/// Default for `max_held`.
const DEFAULT_MAX_HELD: u64 = 512 << 20;

/// Builds the sink from its entry.
pub fn build(spec: &ConnectorSpec, _: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    let o: Options = options(spec, "sink")?;
    let bad = |message: String| OptionsError { node: format!("sink '{}'", spec.id), message };
    if !crate::checkpoint::metadata::is_topic_name(&o.topic) {
        return Err(bad(format!("topic = {:?}: 1 to 249 letters, digits, '.', '_' or '-'", o.topic)));
    }
    let delivery = o.delivery.unwrap_or(Delivery::ExactlyOnce);
    let mode = match (delivery, o.mode) {
        (Delivery::ExactlyOnce, mode) => mode.unwrap_or(Mode::PublishAfterCheckpoint),
        (_, None) => Mode::PublishAfterCheckpoint,
        (_, Some(_)) => return Err(bad("mode is for delivery = \"exactly-once\"".into())),
    };
    let transactional = delivery == Delivery::ExactlyOnce && mode == Mode::Transactions;
    if !transactional && (o.transactional_id_prefix.is_some() || o.transaction_timeout.is_some()) {
        return Err(bad("transactional_id_prefix and transaction_timeout are for mode = \"transactions\"".into()));
    }
    if let Some(p) = &o.transactional_id_prefix
        && (p.is_empty() || p.len() > 200 || p.chars().any(|c| c.is_control() || c.is_whitespace()))
    {
        return Err(bad(format!(
            "transactional_id_prefix = {p:?}: 1 to 200 characters, no spaces or control characters"
        )));
    }
    if transactional
        && let Some(protocol) = o.properties.get("security.protocol").and_then(|v| v.as_str())
        && !protocol.eq_ignore_ascii_case("plaintext")
    {
        return Err(bad(format!(
            "mode = \"transactions\" commits a restored checkpoint's transaction by talking to the transaction coordinator itself, over PLAINTEXT only in this version; security.protocol = {protocol:?} is not supported there (use mode = \"publish-after-checkpoint\")"
        )));
    }
    let cluster = ClusterOptions {
        bootstrap_servers: o.bootstrap_servers,
        request_timeout: o.request_timeout,
        create_topic: o.create_topic,
        partitions: o.partitions,
        properties: o.properties,
    };
    cluster.check().map_err(|e| bad(e.to_string()))?;
    Ok(Arc::new(KafkaSink {
        id: spec.id.clone(),
        cluster,
        topic: o.topic,
        delivery,
        mode,
        max_held: o.max_held.map_or(DEFAULT_MAX_HELD, |b| b.0),
        flush_timeout: o.flush_timeout.map_or(Duration::from_secs(60), |d| d.0),
        transactional_id_prefix: o.transactional_id_prefix,
        transaction_timeout: o.transaction_timeout.map(|d| d.0),
    }))
}

impl Sink for KafkaSink {
    fn open(&self, at: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        let mut w = self.writer(at)?;
        if let Some(r) = at.restore
            && let SinkState::Kafka { batches } = r.state
        {
            let held = Held::load_all(batches, r.storage)?;
            w.publish_restored(held, at.cancelled)?;
        }
        Ok(Box::new(w))
    }

    fn publish_finished(&self, at: OpenAt<'_>) -> Result<(), ConnectorError> {
        self.open(at).map(drop)
    }

    fn check(&self, checkpoint_interval: Option<Duration>) -> Result<(), ConnectorError> {
        if !self.transactional() {
            return Ok(());
        }
        let Some(interval) = checkpoint_interval else {
            return Err(ConnectorError::Refused(
                "mode = \"transactions\" commits at checkpoints: add [checkpointing]".into(),
            ));
        };
        let timeout = self.transaction_timeout.unwrap_or_else(|| default_transaction_timeout(interval));
        if timeout <= interval {
            return Err(ConnectorError::Refused(format!(
                "transaction_timeout = {} is not longer than the checkpoint interval ({}): a transaction stays open from one checkpoint until the next completes, so the broker would abort it; raise transaction_timeout (and the broker's transaction.max.timeout.ms if needed)",
                humantime::format_duration(timeout),
                humantime::format_duration(interval)
            )));
        }
        Ok(())
    }
}

impl KafkaSink {
    fn transactional(&self) -> bool {
        self.delivery == Delivery::ExactlyOnce && self.mode == Mode::Transactions
    }

    /// The transactions of a sink subtask in `mode = "transactions"`,
    /// recovering what a restored checkpoint pre-committed.
    fn transactions(
        &self,
        at: OpenAt<'_>,
        failures: &Sender<ConnectorError>,
    ) -> Result<Transactions<Deliveries>, ConnectorError> {
        let interval = at.checkpoint_interval.unwrap_or(Duration::ZERO);
        let timeout = self.transaction_timeout.unwrap_or_else(|| default_transaction_timeout(interval));
        let prefix = self.transactional_id_prefix.clone().unwrap_or_else(|| format!("weir-{}-{}", at.job, self.id));
        let config = self.cluster.client_config(&[
            ("linger.ms", "5".into()),
            // Every record is acknowledged within the transaction, or the
            // transaction cannot commit.
            ("message.timeout.ms", self.flush_timeout.min(timeout).as_millis().to_string()),
        ])?;
        let settings = TxnSettings {
            ids: format!("{prefix}-{}", at.subtask),
            config,
            transaction_timeout: timeout,
            request_timeout: self.cluster.timeout(),
            servers: self.cluster.bootstrap_servers.clone(),
        };
        let restored = match at.restore.map(|r| r.state) {
            Some(SinkState::KafkaTransactions { pending }) => pending.as_slice(),
            _ => &[],
        };
        let failures = failures.clone();
        Transactions::start(
            settings,
            restored,
            Box::new(move || Deliveries { failures: failures.clone() }),
            at.cancelled,
        )
    }

    fn writer(&self, at: OpenAt<'_>) -> Result<KafkaWriter, ConnectorError> {
        // The read-back after a restore looks for records as they landed,
        // committed or not: a read_committed reader would wait at the
        // last stable offset for other writers' open transactions.
        let consumer: KafkaConsumer = self.cluster.create(&[
            ("enable.partition.eof", "true".into()),
            ("group.id", format!("weir-{}", at.job)),
            ("isolation.level", "read_uncommitted".into()),
        ])?;
        let partitions = partition_counts(&consumer, &self.cluster, std::slice::from_ref(&self.topic))?[&self.topic];
        let (failures, failed) = crossbeam_channel::unbounded();
        let transactions = if self.transactional() { Some(self.transactions(at, &failures)?) } else { None };
        // In cluster mode the producer never sends a record twice: an
        // idempotent producer resends records it had in flight when its
        // process froze, and after records expire it starts a new epoch,
        // under which the broker takes the resent ones as new; a member
        // paused past its session would then repeat output the partition's
        // new owner already published. Without retries a failed request
        // fails the copy instead, and its restore fills the gap.
        let idempotent = self.delivery != Delivery::None && at.fence.is_none();
        let retries = if at.fence.is_some() { "0" } else { "2147483647" };
        let producer: ThreadedProducer<Deliveries> = self
            .cluster
            .client_config(&[
                ("enable.idempotence", idempotent.to_string()),
                ("message.send.max.retries", retries.into()),
                ("linger.ms", "5".into()),
                ("message.timeout.ms", self.flush_timeout.as_millis().to_string()),
            ])?
            .create_with_context(Deliveries { failures })
            .map_err(|e| ConnectorError::Refused(describe(&e)))?;
        Ok(KafkaWriter {
            id: self.id.clone(),
            topic: self.topic.clone(),
            partitions,
            delivery: self.delivery,
            ident: format!("{}/{}/{}", at.job, self.id, at.subtask).into_bytes(),
            producer,
            failed,
            consumer,
            open: Held::default(),
            held: Vec::new(),
            held_bytes: 0,
            max_held: self.max_held,
            flush_timeout: self.flush_timeout,
            timeout: self.cluster.timeout(),
            next: at.subtask,
            fence: at.fence.cloned(),
            log: at.log,
            transactions,
            opened: Some(Instant::now()),
        })
    }
}

/// `r` as a record for `topic`: its partition, key, value and timestamp.
fn base_record<'a>(topic: &'a str, r: &HeldRecord<'a>) -> BaseRecord<'a, [u8], [u8]> {
    let mut record = BaseRecord::<[u8], [u8]>::to(topic).partition(r.partition).payload(r.payload);
    if let Some(k) = r.key {
        record = record.key(k);
    }
    if let Some(t) = r.timestamp {
        record = record.timestamp(t);
    }
    record
}

/// Records a cluster-mode publication sends before its first wait for
/// acknowledgements; later chunks follow the broker's pace.
const FIRST_CHUNK: u64 = 100;

/// The size of the next chunk, after `size` records took `took` to be
/// acknowledged: what the broker acknowledges in an eighth of
/// `flush_timeout` (every record must be acknowledged within it), at most
/// twice the last and between 10 and 5000 records. The margin is for a
/// broker that slows down at once (one sharing a busy machine with
/// checkpoint uploads, say): a chunk not acknowledged in time fails the
/// copy, which restores and reads its output back.
fn next_chunk(size: u64, took: Duration, flush_timeout: Duration) -> u64 {
    let target = flush_timeout.as_secs_f64() / 8.0;
    let paced = size as f64 * target / took.as_secs_f64().max(1e-4);
    (paced as u64).clamp(10, (size * 2).min(5000))
}

/// How long a passed fence check lets a cluster-mode copy hand records to
/// the producer; far below half a session.
const FENCE_FRESH: Duration = Duration::from_millis(200);

/// Cluster mode: a record goes to the producer only shortly after the
/// partition's commit log showed no other claim, and never after a wait
/// (for acknowledgements, or for the CPU) without looking again. A member
/// frozen in the middle of a publication would otherwise, on waking, send
/// the rest of it after the partition's new owner published it too.
struct FenceCheck<'a> {
    storage: Option<&'a CheckpointStorage>,
    /// Where the run stood in the log, as the writer last heard.
    log: Option<LogPosition>,
    checked: Option<Instant>,
}

impl FenceCheck<'_> {
    /// Looks at the commit log unless it did within [`FENCE_FRESH`].
    fn check(&mut self) -> Result<(), ConnectorError> {
        let Some(storage) = self.storage else { return Ok(()) };
        if self.checked.is_none_or(|at| at.elapsed() > FENCE_FRESH) {
            storage.check_fence(self.log).map_err(|e| ConnectorError::Fenced(Box::new(e)))?;
            self.checked = Some(Instant::now());
        }
        Ok(())
    }

    /// The sink waited: the next record needs a fresh look.
    fn waited(&mut self) {
        self.checked = None;
    }
}

/// Sends delivery failures to the writer (the producer's own thread
/// reports them).
pub struct Deliveries {
    failures: Sender<ConnectorError>,
}

impl ClientContext for Deliveries {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        super::log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        super::client_error(error, reason);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = result {
            use rdkafka::message::Message;
            let what = format!("a record for {}/{} was not delivered", m.topic(), m.partition());
            let _ = self.failures.send(super::transactions::delivery_failed(&what, e));
        }
    }
}

/// A sink subtask's producer and what it holds back.
struct KafkaWriter {
    id: String,
    topic: String,
    partitions: i32,
    delivery: Delivery,
    /// `<job>/<sink>/<subtask>`: the `weir-sink` header.
    ident: Vec<u8>,
    producer: ThreadedProducer<Deliveries>,
    /// Delivery failures, from the producer's thread.
    failed: crossbeam_channel::Receiver<ConnectorError>,
    /// Reads output back after a restore.
    consumer: KafkaConsumer,
    /// Exactly-once: records since the last barrier.
    open: Held,
    /// Exactly-once: closed batches not yet published, oldest first.
    held: Vec<Held>,
    held_bytes: u64,
    max_held: u64,
    flush_timeout: Duration,
    timeout: Duration,
    /// Round robin over partitions for records without a key.
    next: u32,
    /// Cluster mode's commit log, checked before each publication.
    fence: Option<std::sync::Arc<CheckpointStorage>>,
    /// Where the run stood in that log when the writer last heard (at
    /// open, then with each completed checkpoint).
    log: Option<LogPosition>,
    /// `mode = "transactions"`: the transactions records go out in.
    transactions: Option<Transactions<Deliveries>>,
    /// When the writer opened, until its first output is visible: a
    /// takeover's last phase (see [`KafkaWriter::first_output`]).
    opened: Option<Instant>,
}

impl KafkaWriter {
    /// Logs, once, how long after the writer opened its first records
    /// became visible to readers: the end of a restart's or a cluster
    /// takeover's time without output.
    fn first_output(&mut self, records: u64) {
        if records > 0
            && let Some(opened) = self.opened.take()
        {
            tracing::info!(
                sink = %self.id,
                topic = %self.topic,
                records,
                since_open_ms = opened.elapsed().as_millis() as u64,
                "first output visible"
            );
        }
    }

    fn partition(&mut self, key: Option<&[u8]>) -> i32 {
        match key {
            Some(k) => super::partition_for_key(k, self.partitions),
            None => {
                self.next = self.next.wrapping_add(1);
                (self.next % self.partitions as u32) as i32
            }
        }
    }

    /// Sends one record, waiting while the producer's queue is full.
    fn send(&self, r: &HeldRecord<'_>, tag: Option<(u64, u64)>) -> Result<(), ConnectorError> {
        let mut record = base_record(&self.topic, r);
        if let Some((nonce, seq)) = tag {
            let (nonce, seq) = (nonce.to_be_bytes(), seq.to_be_bytes());
            record = record.headers(
                OwnedHeaders::new_with_capacity(3)
                    .insert(Header { key: SINK_HEADER, value: Some(self.ident.as_slice()) })
                    .insert(Header { key: BATCH_HEADER, value: Some(&nonce[..]) })
                    .insert(Header { key: SEQ_HEADER, value: Some(&seq[..]) }),
            );
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => {
                    return Err(ConnectorError::Unavailable(format!("cannot produce to {}: {e}", self.topic)));
                }
            }
        }
    }

    /// Waits until every record sent is acknowledged, or fails.
    fn flush(&self) -> Result<(), ConnectorError> {
        self.producer.flush(self.flush_timeout).map_err(|e| {
            ConnectorError::Unavailable(format!(
                "records for {} were not acknowledged within {}: {e}",
                self.topic,
                humantime::format_duration(self.flush_timeout)
            ))
        })?;
        self.delivered()
    }

    /// The first delivery failure reported so far, as an error. Every
    /// failure is reported before a flush returns.
    fn delivered(&self) -> Result<(), ConnectorError> {
        self.failed.try_iter().next().map_or(Ok(()), Err)
    }

    /// Produces `batch` (held records) after a completed checkpoint,
    /// skipping the records `arrived` says are there already.
    fn publish(&self, batch: &Held, arrived: impl Fn(i32, u64) -> bool) -> Result<u64, ConnectorError> {
        let mut fence = FenceCheck { storage: self.fence.as_deref(), log: self.log, checked: None };
        let (mut sent, mut chunk, mut in_chunk) = (0, FIRST_CHUNK, 0);
        for (seq, r) in batch.iter().enumerate() {
            let r = r?;
            let seq = seq as u64;
            if arrived(r.partition, seq) {
                continue;
            }
            // In cluster mode a record may wait in the producer no longer
            // than `flush_timeout` (half a session): a large batch goes out
            // in acknowledged chunks, as large as the broker acknowledges
            // well within that.
            if fence.storage.is_some() && in_chunk >= chunk {
                let began = Instant::now();
                self.flush()?;
                chunk = next_chunk(chunk, began.elapsed(), self.flush_timeout);
                in_chunk = 0;
                fence.waited();
            }
            fence.check()?;
            self.send(&r, Some((batch.nonce, seq)))?;
            sent += 1;
            in_chunk += 1;
            if seq == batch.records / 2 && batch.records > 1 {
                // Half a batch out: where a crash tests recovery of a
                // publish cut short.
                self.flush()?;
                fence.waited();
                crate::crash_point::crash_point("kafka.publish-half");
            }
        }
        self.flush()?;
        Ok(sent)
    }

    /// After a restore: publishes what the checkpoint held, minus what the
    /// topic shows arrived before the process stopped.
    fn publish_restored(&mut self, held: Vec<Held>, cancelled: &dyn Fn() -> bool) -> Result<(), ConnectorError> {
        if held.is_empty() {
            return Ok(());
        }
        let arrived = super::held::published(&self.consumer, &self.topic, &held, &self.ident, self.timeout, cancelled)?;
        let (mut sent, mut skipped) = (0, 0);
        for b in &held {
            if cancelled() {
                return Err(ConnectorError::Cancelled);
            }
            let n = self.publish(b, |p, seq| arrived.contains(p, b.nonce, seq))?;
            sent += n;
            skipped += b.records - n;
        }
        tracing::info!(
            sink = %self.id,
            topic = %self.topic,
            batches = held.len(),
            sent,
            already_there = skipped,
            "published the output the restored checkpoint held"
        );
        self.first_output(sent);
        Ok(())
    }
}

impl SinkWriter for KafkaWriter {
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError> {
        for r in batch.iter() {
            let partition = self.partition(r.key);
            let record = HeldRecord { partition, key: r.key, payload: r.payload, timestamp: r.timestamp };
            if let Some(t) = &mut self.transactions {
                t.send(base_record(&self.topic, &record)).map_err(|e| t.explain(e))?;
                continue;
            }
            match self.delivery {
                Delivery::ExactlyOnce => {
                    self.open.push(&record);
                    if self.held_bytes + self.open.bytes.len() as u64 > self.max_held {
                        return Err(ConnectorError::Refused(format!(
                            "more than max_held ({}) of output is held for checkpoints that have not completed: checkpoint more often, or raise max_held",
                            bytesize::ByteSize::b(self.max_held).display().iec()
                        )));
                    }
                }
                Delivery::AtLeastOnce | Delivery::None => self.send(&record, None)?,
            }
        }
        Ok(())
    }

    fn checkpoint(&mut self, at: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        if let Some(t) = &mut self.transactions {
            // Disjoint from `t`: the failures `delivered` reads.
            let failed = &self.failed;
            let pending = t.pre_commit(at.id.unwrap_or(END)).and_then(|p| failed.try_iter().next().map_or(Ok(p), Err));
            return pending.map(|pending| Some(SinkState::KafkaTransactions { pending })).map_err(|e| t.explain(e));
        }
        match self.delivery {
            Delivery::ExactlyOnce => {
                if self.open.records > 0 {
                    let mut closed = std::mem::take(&mut self.open);
                    closed.checkpoint = at.id.unwrap_or(END);
                    closed.nonce = rand::random();
                    self.held_bytes += closed.bytes.len() as u64;
                    self.held.push(closed);
                }
                // Every batch still held goes into this checkpoint, so it
                // stands alone when older ones are deleted.
                let batches = self.held.iter().map(|b| b.store(at)).collect::<Result<Vec<_>, _>>()?;
                Ok(Some(SinkState::Kafka { batches }))
            }
            Delivery::AtLeastOnce => self.flush().map(|()| None),
            Delivery::None if at.id.is_none() => self.flush().map(|()| None),
            Delivery::None => Ok(None),
        }
    }

    fn commit(&mut self, upto: Option<u64>, log: Option<LogPosition>) -> Result<(), ConnectorError> {
        self.log = log.or(self.log);
        if let Some(t) = &mut self.transactions {
            let committed = t.commit(upto).map_err(|e| t.explain(e))?;
            self.first_output(committed);
            return Ok(());
        }
        let due = self.held.iter().take_while(|b| upto.is_none_or(|c| b.checkpoint <= c)).count();
        for b in self.held.drain(..due).collect::<Vec<_>>() {
            let sent = self.publish(&b, |_, _| false)?;
            self.held_bytes -= b.bytes.len() as u64;
            self.first_output(sent);
        }
        Ok(())
    }

    fn discard(&mut self) -> Result<(), ConnectorError> {
        self.open = Held::default();
        match &mut self.transactions {
            Some(t) => t.discard().map_err(|e| t.explain(e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::next_chunk;
    use std::time::Duration;

    #[test]
    fn chunks_follow_the_brokers_pace() {
        let half_session = Duration::from_secs(3);
        // 100 records acknowledged in 10 ms: the next chunk doubles, up to 5000.
        assert_eq!(next_chunk(100, Duration::from_millis(10), half_session), 200);
        assert_eq!(next_chunk(4000, Duration::from_millis(10), half_session), 5000);
        // 1000 records took 3 s: the next takes an eighth of that.
        assert_eq!(next_chunk(1000, Duration::from_secs(3), half_session), 125);
        // A broker slower still: never under 10.
        assert_eq!(next_chunk(100, Duration::from_secs(60), half_session), 10);
    }
}
