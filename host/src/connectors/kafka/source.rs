//! `kind = "kafka"` source: reads topics with a consumer per subtask that
//! owns a share of their partitions (assigned by Weir, not by the group:
//! the offsets in the checkpoint are the truth, as in Flink's Kafka
//! source). Each subtask tracks the next offset of every partition it
//! owns; a restore seeks to what the checkpoint recorded, at any
//! parallelism; completed checkpoints' offsets are committed to `group`
//! for monitoring only. With event time, each partition has its own
//! watermark and the subtask's is their minimum, leaving out partitions
//! silent for `pipeline.idle_timeout` that have nothing left to read. New
//! partitions are picked up every `discovery_interval`.

use super::{ClusterOptions, KafkaConsumer, partition_counts, unreachable};
use crate::checkpoint::metadata::PartitionOffsets;
use crate::config::ConnectorSpec;
use crate::config::units::HumanDuration;
use crate::connectors::file_source::{json_key, json_timestamp};
use crate::connectors::{OptionsError, options};
use crate::record::Record;
use crate::runtime::error::ConnectorError;
use crate::runtime::source::{Halt, Source, SourceContext};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a subtask starts reading a partition the checkpoint does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Earliest,
    Latest,
    /// The first record at or after this time (ms).
    Timestamp(i64),
    /// The group's committed offset (earliest where it has none).
    GroupOffsets,
}

impl<'de> Deserialize<'de> for Start {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "earliest" => Ok(Start::Earliest),
            "latest" => Ok(Start::Latest),
            "group-offsets" => Ok(Start::GroupOffsets),
            other => other
                .strip_prefix("timestamp:")
                .and_then(|t| t.parse().ok())
                .map(Start::Timestamp)
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "start = {other:?}: use \"earliest\", \"latest\", \"group-offsets\" or \"timestamp:<ms since the epoch>\""
                    ))
                }),
        }
    }
}

/// Where the stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum End {
    /// It does not: the job runs until stopped.
    Never,
    /// At each partition's end: a partition is done once its end offset
    /// when the subtask started is read and the consumer reached the end
    /// of what the partition holds (a bounded read).
    Latest,
}

/// What to do when a checkpoint's offset is no longer in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum IfMissing {
    Fail,
    Earliest,
}

/// Where event time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TimestampFrom {
    /// The Kafka record's timestamp.
    Kafka,
}

/// Payload formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Format {
    /// Bytes as they are.
    #[default]
    Raw,
    /// A JSON object, for `key_field` and `timestamp_field`.
    Json,
}

/// One topic or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Topics {
    One(String),
    Many(Vec<String>),
}

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    bootstrap_servers: String,
    topic: Topics,
    group: Option<String>,
    start: Option<Start>,
    end: Option<End>,
    start_if_missing: Option<IfMissing>,
    #[serde(default)]
    format: Format,
    key_field: Option<String>,
    timestamp: Option<TimestampFrom>,
    timestamp_field: Option<String>,
    max_out_of_orderness: Option<HumanDuration>,
    discovery_interval: Option<HumanDuration>,
    records_per_second: Option<f64>,
    request_timeout: Option<HumanDuration>,
    #[serde(default)]
    create_topic: bool,
    partitions: Option<i32>,
    only_partitions: Option<Vec<i32>>,
    #[serde(default)]
    properties: BTreeMap<String, toml::Value>,
}

/// A configured Kafka source.
pub struct KafkaSource {
    id: String,
    cluster: ClusterOptions,
    topics: Vec<String>,
    group: String,
    start: Start,
    end: End,
    if_missing: IfMissing,
    key_field: Option<String>,
    timestamp: Option<TimestampFrom>,
    timestamp_field: Option<String>,
    watermark_lag_ms: Option<i64>,
    discovery: Option<Duration>,
    rate: Option<f64>,
    /// Read only these partitions (of every topic): cluster mode runs one
    /// copy of the job per partition a member owns.
    only: Option<Vec<i32>>,
}

/// Builds the source from its entry.
pub fn build(spec: &ConnectorSpec, _: &Path) -> Result<Arc<dyn crate::runtime::source::Source>, OptionsError> {
    let o: Options = options(spec, "source")?;
    let bad = |message: String| OptionsError { node: format!("source '{}'", spec.id), message };
    let topics = match o.topic {
        Topics::One(t) => vec![t],
        Topics::Many(list) => list,
    };
    if topics.is_empty() {
        return Err(bad("topic is an empty list".into()));
    }
    if let Some(t) = topics.iter().find(|t| !crate::checkpoint::metadata::is_topic_name(t)) {
        return Err(bad(format!("topic {t:?}: 1 to 249 letters, digits, '.', '_' or '-'")));
    }
    if (o.key_field.is_some() || o.timestamp_field.is_some()) && o.format != Format::Json {
        return Err(bad("key_field and timestamp_field need format = \"json\"".into()));
    }
    if o.timestamp.is_some() && o.timestamp_field.is_some() {
        return Err(bad("set timestamp = \"kafka\" or timestamp_field, not both".into()));
    }
    let event_time = o.timestamp.is_some() || o.timestamp_field.is_some();
    if o.max_out_of_orderness.is_some() && !event_time {
        return Err(bad("max_out_of_orderness needs timestamp = \"kafka\" or timestamp_field".into()));
    }
    if let Some(problem) = crate::connectors::file_source::rate_problem(o.records_per_second) {
        return Err(bad(problem));
    }
    if let Some(p) = o.only_partitions.iter().flatten().find(|&&p| p < 0) {
        return Err(bad(format!("only_partitions: {p} is not a partition number")));
    }
    let cluster = ClusterOptions {
        bootstrap_servers: o.bootstrap_servers,
        request_timeout: o.request_timeout,
        create_topic: o.create_topic,
        partitions: o.partitions,
        properties: o.properties,
    };
    cluster.check().map_err(|e| bad(e.to_string()))?;
    Ok(Arc::new(KafkaSource {
        id: spec.id.clone(),
        cluster,
        group: o.group.unwrap_or_else(|| format!("weir-{}", spec.id)),
        topics,
        start: o.start.unwrap_or(Start::Earliest),
        end: o.end.unwrap_or(End::Never),
        if_missing: o.start_if_missing.unwrap_or(IfMissing::Fail),
        key_field: o.key_field,
        timestamp: o.timestamp,
        timestamp_field: o.timestamp_field,
        watermark_lag_ms: event_time.then(|| o.max_out_of_orderness.map_or(0, |d| d.0.as_millis() as i64)),
        discovery: match o.discovery_interval {
            Some(d) if d.0.is_zero() => None,
            Some(d) => Some(d.0),
            None => Some(Duration::from_secs(10)),
        },
        rate: o.records_per_second,
        only: o.only_partitions,
    }))
}

/// Which subtask owns partition `p` of `topic`: stable as partitions are
/// added (a partition never changes owner while the job runs), and spread
/// round robin over the subtasks within a topic.
fn owner(topic: &str, p: i32, parallelism: u32) -> u32 {
    let base = xxhash_rust::xxh3::xxh3_64(topic.as_bytes());
    ((base.wrapping_add(p as u64)) % parallelism as u64) as u32
}

/// Where partition `p` of `topic` resumes when the checkpoint says `at`
/// and the log now starts at `low`. An offset past the log's end is left to
/// the first fetch to refuse (see `consume_error`): some brokers report the
/// end low, and only a fetch says for sure.
fn resume_at(topic: &str, p: i32, at: i64, low: i64, if_missing: IfMissing) -> Result<i64, ConnectorError> {
    match if_missing {
        _ if at >= low => Ok(at),
        IfMissing::Earliest => Ok(low),
        IfMissing::Fail => Err(ConnectorError::Inconsistent(format!(
            "the checkpoint resumes {topic}/{p} at offset {at}, but the log now starts at {low} (deleted by retention); set start_if_missing = \"earliest\" to skip the lost records"
        ))),
    }
}

/// One owned partition as the subtask reads it.
struct Owned {
    /// The largest event time seen, and when its last record came.
    max_time: i64,
    last_seen: Instant,
    /// Bounded read: the partition's end when the subtask started.
    stop: Option<i64>,
    /// The next offset to read.
    next: i64,
    /// Bounded read: read to its end.
    done: bool,
}

impl Source for KafkaSource {
    fn watermark_lag_ms(&self) -> Option<i64> {
        self.watermark_lag_ms
    }

    fn records_per_second(&self) -> Option<f64> {
        self.rate
    }

    fn run(&self, ctx: &mut SourceContext) -> Result<(), Halt> {
        let consumer: KafkaConsumer = self
            .cluster
            .create(&[
                ("group.id", self.group.clone()),
                ("enable.auto.commit", "false".into()),
                ("enable.auto.offset.store", "false".into()),
                // An offset the log no longer has is an error the source
                // reports, never a silent jump, unless start_if_missing
                // asks for the jump.
                ("auto.offset.reset", if self.if_missing == IfMissing::Earliest { "earliest" } else { "error" }.into()),
                ("allow.auto.create.topics", "false".into()),
                ("enable.partition.eof", (self.end == End::Latest).to_string()),
            ])
            .map_err(|e| ctx.fail(e))?;
        let restored = ctx.partitions.take().unwrap_or_default();
        // Only this subtask's partitions go into its checkpoints.
        ctx.partitions = Some(BTreeMap::new());
        let mut owned: BTreeMap<String, BTreeMap<i32, Owned>> = BTreeMap::new();
        let mut known = BTreeMap::new();
        self.discover(ctx, &consumer, &restored, &mut owned, &mut known)?;
        let mut next_discovery = self.discovery.map(|d| Instant::now() + d);
        let mut event_time = i64::MIN;
        if self.watermark_lag_ms.is_some() {
            // Partitions that have sent nothing yet hold event time back:
            // the first records of another must not move it.
            ctx.own_event_time();
        }
        let mut warned: Option<Instant> = None;
        loop {
            let mut all = owned.values().flat_map(|t| t.values());
            if self.end == End::Latest && all.all(|o| o.done) {
                return Ok(());
            }
            if let Some(done) = ctx.take_completed() {
                self.commit_to_group(&consumer, &done);
            }
            if next_discovery.is_some_and(|t| Instant::now() >= t) {
                self.discover(ctx, &consumer, &restored, &mut owned, &mut known)?;
                next_discovery = self.discovery.map(|d| Instant::now() + d);
            }
            let message = match consumer.poll(Duration::from_millis(20)) {
                None => {
                    self.advance_event_time(ctx, &consumer, &owned, &mut event_time);
                    ctx.idle()?;
                    continue;
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    // The event names no topic: each owned partition `p`
                    // that got past its end offset is done. (An end offset
                    // alone is not enough: some brokers report it low.)
                    for o in owned.values_mut().filter_map(|t| t.get_mut(&p)) {
                        o.done |= o.stop.is_some_and(|s| o.next >= s);
                    }
                    continue;
                }
                Some(Err(e)) => {
                    self.consume_error(ctx, &consumer, &owned, e, &mut warned)?;
                    ctx.idle()?;
                    continue;
                }
                Some(Ok(m)) => m,
            };
            let (topic, p, offset) = (message.topic(), message.partition(), message.offset());
            let Some(state) = owned.get_mut(topic).and_then(|t| t.get_mut(&p)) else { continue };
            if state.done {
                continue;
            }
            let payload = message.payload().unwrap_or(&[]);
            let (key, timestamp) = self.key_and_time(ctx, &message, payload, (topic, p, offset))?;
            if let Some(t) = timestamp {
                state.max_time = state.max_time.max(t);
            }
            state.last_seen = Instant::now();
            state.next = offset + 1;
            if let Some(next) = ctx.partitions.as_mut().and_then(|t| t.get_mut(topic)).and_then(|t| t.get_mut(&p)) {
                *next = offset + 1;
            }
            if self.watermark_lag_ms.is_some() {
                self.advance_event_time(ctx, &consumer, &owned, &mut event_time);
            }
            let key = match &key {
                Some(k) => Some(k.as_slice()),
                None => message.key(),
            };
            ctx.emit(Record { payload, key, timestamp })?;
        }
    }
}

impl KafkaSource {
    /// Finds the topics' partitions, takes the ones this subtask owns that
    /// it does not read yet, and starts reading them where the checkpoint
    /// says (or `start` does).
    fn discover(
        &self,
        ctx: &mut SourceContext,
        consumer: &KafkaConsumer,
        restored: &PartitionOffsets,
        owned: &mut BTreeMap<String, BTreeMap<i32, Owned>>,
        known: &mut BTreeMap<String, i32>,
    ) -> Result<(), Halt> {
        let counts = partition_counts(consumer, &self.cluster, &self.topics).map_err(|e| ctx.fail(e))?;
        for (topic, &count) in &counts {
            let before = known.get(topic).copied().unwrap_or(0);
            if count < before {
                return Err(ctx.fail(ConnectorError::Inconsistent(format!(
                    "topic '{topic}' went from {before} to {count} partitions while the job ran"
                ))));
            }
            if let Some(p) = self.only.iter().flatten().find(|&&p| p >= count) {
                return Err(ctx.fail(ConnectorError::Inconsistent(format!(
                    "only_partitions names partition {p}, but topic '{topic}' has {count} partitions"
                ))));
            }
            if let Some(p) = restored.get(topic).and_then(|r| r.keys().find(|&&p| p >= count)) {
                return Err(ctx.fail(ConnectorError::Inconsistent(format!(
                    "topic '{topic}' has {count} partitions, but the checkpoint has an offset for partition {p}: the topic shrank, or this is another topic"
                ))));
            }
            if before > 0 && count > before {
                tracing::info!(source = %self.id, topic, from = before, to = count, "new partitions");
            }
            known.insert(topic.clone(), count);
        }
        let (subtask, parallelism) = ctx.subtask();
        let mut new = TopicPartitionList::new();
        for (topic, &count) in &counts {
            for p in 0..count {
                let excluded = self.only.as_ref().is_some_and(|only| !only.contains(&p));
                if excluded
                    || owner(topic, p, parallelism) != subtask
                    || owned.get(topic).is_some_and(|t| t.contains_key(&p))
                {
                    continue;
                }
                let offset = self.start_offset(ctx, consumer, topic, p, restored)?;
                let stop = match self.end {
                    End::Never => None,
                    End::Latest => {
                        let (_, high) = consumer
                            .fetch_watermarks(topic, p, self.cluster.timeout())
                            .map_err(|e| ctx.fail(unreachable(&self.cluster, &e)))?;
                        Some(high)
                    }
                };
                owned.entry(topic.clone()).or_default().insert(
                    p,
                    Owned { max_time: i64::MIN, last_seen: Instant::now(), stop, next: offset, done: false },
                );
                ctx.partitions.get_or_insert_default().entry(topic.clone()).or_default().insert(p, offset);
                new.add_partition_offset(topic, p, Offset::Offset(offset))
                    .map_err(|e| ctx.fail(ConnectorError::Refused(e.to_string())))?;
            }
        }
        if new.count() > 0 {
            tracing::info!(source = %self.id, subtask, partitions = new.count(), "reading Kafka partitions");
            consumer
                .incremental_assign(&new)
                .map_err(|e| ctx.fail(ConnectorError::Unavailable(format!("cannot assign partitions: {e}"))))?;
        }
        Ok(())
    }

    /// The offset to read partition `p` of `topic` from: the checkpoint's,
    /// checked against the log, else as `start` says.
    fn start_offset(
        &self,
        ctx: &SourceContext,
        consumer: &KafkaConsumer,
        topic: &str,
        p: i32,
        restored: &PartitionOffsets,
    ) -> Result<i64, Halt> {
        let timeout = self.cluster.timeout();
        let (low, high) =
            consumer.fetch_watermarks(topic, p, timeout).map_err(|e| ctx.fail(unreachable(&self.cluster, &e)))?;
        if let Some(&at) = restored.get(topic).and_then(|r| r.get(&p)) {
            let offset = resume_at(topic, p, at, low, self.if_missing).map_err(|e| ctx.fail(e))?;
            if offset != at {
                tracing::warn!(source = %self.id, topic, partition = p, checkpoint = at, earliest = low,
                    "the checkpoint's offset was deleted by retention; reading from the earliest (start_if_missing = \"earliest\")");
            }
            return Ok(offset);
        }
        let unavailable = |e: KafkaError| ctx.fail(unreachable(&self.cluster, &e));
        Ok(match self.start {
            Start::Earliest => low,
            Start::Latest => high,
            Start::Timestamp(t) => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(topic, p, Offset::Offset(t)).map_err(unavailable)?;
                let found = consumer.offsets_for_times(tpl, timeout).map_err(unavailable)?;
                match found.find_partition(topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => high,
                }
            }
            Start::GroupOffsets => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(topic, p);
                let found = consumer.committed_offsets(tpl, timeout).map_err(unavailable)?;
                match found.find_partition(topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) if (low..=high).contains(&o) => o,
                    _ => low,
                }
            }
        })
    }

    /// The record's key and event time as configured.
    fn key_and_time(
        &self,
        ctx: &SourceContext,
        message: &rdkafka::message::BorrowedMessage<'_>,
        payload: &[u8],
        (topic, p, offset): (&str, i32, i64),
    ) -> Result<(Option<Vec<u8>>, Option<i64>), Halt> {
        let mut key = None;
        let mut time = match self.timestamp {
            Some(TimestampFrom::Kafka) => message.timestamp().to_millis(),
            None => None,
        };
        if self.key_field.is_some() || self.timestamp_field.is_some() {
            let at = |m: String| ctx.fail(ConnectorError::BadRecord(format!("{topic}/{p} offset {offset}: {m}")));
            let value: serde_json::Value =
                serde_json::from_slice(payload).map_err(|e| at(format!("invalid JSON: {e}")))?;
            if let Some(field) = &self.key_field {
                key = Some(json_key(&value, field).map_err(|e| at(e.to_string()))?);
            }
            if let Some(field) = &self.timestamp_field {
                time = Some(json_timestamp(&value, field).map_err(|e| at(e.to_string()))?);
            }
        }
        Ok((key, time))
    }

    /// Moves the subtask's event time to the minimum over its partitions,
    /// leaving out idle ones: silent past the idle timeout with nothing
    /// left to read. A partition with records still to come (the consumer
    /// fetched others first, or reads slower than they arrive) holds event
    /// time back however long it was silent: leaving it out would make its
    /// records late. A partition that has sent nothing yet holds it at the
    /// start until then, as a Flink split does.
    fn advance_event_time(
        &self,
        ctx: &mut SourceContext,
        consumer: &KafkaConsumer,
        owned: &BTreeMap<String, BTreeMap<i32, Owned>>,
        current: &mut i64,
    ) {
        if self.watermark_lag_ms.is_none() {
            return;
        }
        let idle = ctx.idle_timeout();
        let now = Instant::now();
        let active =
            owned.iter().flat_map(|(topic, t)| t.iter().map(move |(p, o)| (topic, *p, o))).filter(|(topic, p, o)| {
                let Some(timeout) = idle else { return true };
                if now.duration_since(o.last_seen) < timeout {
                    return true;
                }
                // Silent: idle only when caught up with the end the consumer
                // last heard of (cached from fetches; unknown counts as not).
                super::cached_high_watermark(consumer, topic, *p).is_none_or(|high| o.next < high)
            });
        if let Some(min) = active.map(|(_, _, o)| o.max_time).min()
            && min > *current
        {
            *current = min;
            ctx.set_event_time(min);
        }
    }

    /// Commits a completed checkpoint's offsets to the group, so Kafka's
    /// tools show how far the job got. Nothing depends on it.
    fn commit_to_group(&self, consumer: &KafkaConsumer, offsets: &PartitionOffsets) {
        let mut tpl = TopicPartitionList::new();
        for (topic, partitions) in offsets {
            for (&p, &o) in partitions {
                let _ = tpl.add_partition_offset(topic, p, Offset::Offset(o));
            }
        }
        if tpl.count() > 0
            && let Err(e) = consumer.commit(&tpl, CommitMode::Async)
        {
            tracing::debug!(source = %self.id, error = %e, "cannot commit offsets to the group (monitoring only)");
        }
    }

    /// A consumer error: the ones the client recovers from by itself (a
    /// broker away, a connection dropped) are logged, at most every ten
    /// seconds, while the source waits; the rest fail the source.
    fn consume_error(
        &self,
        ctx: &SourceContext,
        consumer: &KafkaConsumer,
        owned: &BTreeMap<String, BTreeMap<i32, Owned>>,
        e: KafkaError,
        warned: &mut Option<Instant>,
    ) -> Result<(), Halt> {
        use rdkafka::types::RDKafkaErrorCode as Code;
        let servers = &self.cluster.bootstrap_servers;
        match e {
            KafkaError::MessageConsumption(Code::AutoOffsetReset) => {
                // The error does not say which partition: find the ones
                // whose next offset is outside the log.
                let mut outside = Vec::new();
                for (topic, partitions) in owned {
                    for (&p, o) in partitions {
                        if let Ok((low, high)) = consumer.fetch_watermarks(topic, p, self.cluster.timeout())
                            && !(low..=high).contains(&o.next)
                        {
                            outside.push(format!("{topic}/{p} at offset {} (the log holds {low}..{high})", o.next));
                        }
                    }
                }
                let which = if outside.is_empty() { "a partition".to_string() } else { outside.join(", ") };
                Err(ctx.fail(ConnectorError::Inconsistent(format!(
                    "reading from {servers}: {which}: the offset to read is not in the log (deleted by retention, or past the end of a topic that was deleted and created again); set start_if_missing = \"earliest\" to skip what was lost"
                ))))
            }
            KafkaError::MessageConsumption(
                Code::BrokerTransportFailure
                | Code::AllBrokersDown
                | Code::Resolve
                | Code::OperationTimedOut
                | Code::RequestTimedOut
                | Code::NetworkException
                | Code::LeaderNotAvailable
                | Code::NotLeaderForPartition,
            ) => {
                if warned.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    tracing::warn!(source = %self.id, servers = %servers, error = %e, "Kafka is not answering; retrying");
                    *warned = Some(Instant::now());
                }
                Ok(())
            }
            other => Err(ctx.fail(ConnectorError::Unavailable(format!("reading from {servers}: {other}")))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_keep_their_owner_as_a_topic_grows_and_spread_evenly() {
        for parallelism in [1, 2, 3, 5] {
            let owners: Vec<u32> = (0..12).map(|p| owner("words", p, parallelism)).collect();
            // Consecutive partitions go to consecutive subtasks.
            for w in owners.windows(2) {
                assert_eq!((w[0] + 1) % parallelism, w[1]);
            }
            assert!(owners.iter().all(|&o| o < parallelism));
        }
    }

    #[test]
    fn an_offset_retention_deleted_is_named_or_skipped_as_configured() {
        assert_eq!(resume_at("t", 2, 50, 10, IfMissing::Fail).unwrap(), 50);
        assert_eq!(resume_at("t", 2, 10, 10, IfMissing::Fail).unwrap(), 10);
        let e = resume_at("t", 2, 5, 10, IfMissing::Fail).unwrap_err().to_string();
        assert!(e.contains("resumes t/2 at offset 5, but the log now starts at 10"), "{e}");
        assert!(e.contains("start_if_missing = \"earliest\""), "{e}");
        assert_eq!(resume_at("t", 2, 5, 10, IfMissing::Earliest).unwrap(), 10);
    }

    fn spec(options: &str) -> ConnectorSpec {
        ConnectorSpec {
            id: "k".into(),
            kind: "kafka".into(),
            options: toml::from_str(options).unwrap(),
            parallelism: 1,
        }
    }

    #[test]
    fn options_are_checked_before_any_broker_is_asked() {
        let base = "bootstrap_servers = \"127.0.0.1:1\"\n";
        let err = |o: &str| build(&spec(&format!("{base}{o}")), Path::new(".")).err().unwrap().to_string();
        assert!(err("topic = \"a b\"").contains("topic \"a b\": 1 to 249 letters"));
        assert!(err("topic = []").contains("topic is an empty list"));
        assert!(err("topic = \"t\"\nstart = \"yesterday\"").contains("start = \"yesterday\": use \"earliest\""));
        assert!(err("topic = \"t\"\nkey_field = \"k\"").contains("need format = \"json\""));
        assert!(err("topic = \"t\"\nmax_out_of_orderness = \"1s\"").contains("needs timestamp = \"kafka\""));
        assert!(err("topic = \"t\"\npartitions = 3").contains("partitions is for create_topic = true"));
        assert!(
            build(&spec(&format!("{base}topic = [\"a\", \"b\"]\nstart = \"timestamp:1700000000000\"")), Path::new("."))
                .is_ok()
        );
    }
}
