//! `kind = "kafka"` source and sink ([`source`], [`sink`]), and what they
//! share: the client configuration, topic metadata with errors that name
//! the address and topic, and Kafka's own key partitioner. This module and
//! its children are the only code that sees `rdkafka` types. Cluster mode
//! uses [`group`] membership.

pub mod group;
pub mod held;
pub mod sink;
pub mod source;
pub mod transactions;
pub mod txn_client;

use crate::config::kafka_properties;
use crate::config::units::HumanDuration;
use crate::runtime::error::ConnectorError;
use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a request to the cluster may take before the connector says
/// it is unreachable, unless `request_timeout` says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What a source and a sink entry share.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterOptions {
    /// `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// How long a metadata or admin request may take.
    pub request_timeout: Option<HumanDuration>,
    /// Create a missing topic (with `partitions` partitions) instead of
    /// failing.
    #[serde(default)]
    pub create_topic: bool,
    /// Partitions of a topic this connector creates.
    pub partitions: Option<i32>,
    /// librdkafka properties passed through (`security.protocol`,
    /// `sasl.mechanisms`, ...), after Weir's own.
    #[serde(default)]
    pub properties: BTreeMap<String, toml::Value>,
}

impl ClusterOptions {
    /// The request timeout.
    pub fn timeout(&self) -> Duration {
        self.request_timeout.map_or(DEFAULT_REQUEST_TIMEOUT, |d| d.0)
    }

    /// A client configuration: the servers, then `extra` (Weir's settings
    /// for this client), then the entry's `properties`, which win.
    pub fn client_config(&self, extra: &[(&str, String)]) -> Result<ClientConfig, ConnectorError> {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap_servers);
        c.set("socket.connection.setup.timeout.ms", self.timeout().as_millis().to_string());
        for (k, v) in extra {
            c.set(*k, v);
        }
        for (k, v) in &self.properties {
            // Validation refused these already; a client is never built
            // with one, whoever built the options.
            kafka_properties::check(k, v).map_err(|e| ConnectorError::Refused(e.to_string()))?;
            let v = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => {
                    return Err(ConnectorError::Refused(format!(
                        "properties.{k} = {other}: a string, number or boolean"
                    )));
                }
            };
            c.set(k, v);
        }
        Ok(c)
    }

    /// The entry's problems that need no cluster to see.
    pub fn check(&self) -> Result<(), ConnectorError> {
        let refused = |m: String| Err(ConnectorError::Refused(m));
        if self.bootstrap_servers.trim().is_empty() {
            return refused("bootstrap_servers is empty".into());
        }
        if let Some(p) = self.partitions
            && p < 1
        {
            return refused(format!("partitions = {p}: a topic has at least one partition"));
        }
        if self.partitions.is_some() && !self.create_topic {
            return refused("partitions is for create_topic = true".into());
        }
        // librdkafka checks names and values when the client is created.
        self.create::<KafkaConsumer>(&[]).map(|_| ())
    }

    /// A client of kind `C` configured as [`ClusterOptions::client_config`]
    /// says; a configuration librdkafka refuses is an error that quotes it.
    pub fn create<C: rdkafka::config::FromClientConfigAndContext<Logs>>(
        &self,
        extra: &[(&str, String)],
    ) -> Result<C, ConnectorError> {
        self.client_config(extra)?.create_with_context(Logs).map_err(|e| ConnectorError::Refused(describe(&e)))
    }
}

/// The consumers' context: librdkafka's logs and errors go to `tracing`.
pub struct Logs;

/// A consumer of this module's.
pub type KafkaConsumer = BaseConsumer<Logs>;

/// The end of partition `p` of `topic` as `consumer` last heard it from
/// the broker (cached from fetch answers, no request made); `None` before
/// any fetch of it answered. rdkafka has no safe call for this.
pub fn cached_high_watermark(consumer: &KafkaConsumer, topic: &str, p: i32) -> Option<i64> {
    let topic = std::ffi::CString::new(topic).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the client pointer lives as long as `consumer`; librdkafka
    // reads the NUL-terminated topic name during the call only and writes
    // the two offsets through valid pointers.
    let err = unsafe {
        rdkafka::bindings::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            p,
            &mut low,
            &mut high,
        )
    };
    (err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
}

impl ClientContext for Logs {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        client_error(error, reason);
    }
}

impl ConsumerContext for Logs {}

/// A librdkafka log line, at its level.
pub fn log(level: RDKafkaLogLevel, facility: &str, message: &str) {
    use RDKafkaLogLevel as L;
    match level {
        L::Emerg | L::Alert | L::Critical | L::Error => tracing::error!(facility, "librdkafka: {message}"),
        L::Warning => tracing::warn!(facility, "librdkafka: {message}"),
        L::Notice | L::Info => tracing::info!(facility, "librdkafka: {message}"),
        L::Debug => tracing::debug!(facility, "librdkafka: {message}"),
    }
}

/// An error librdkafka reports outside any call. The end of a partition,
/// which the source and the sink ask to be told (it comes as a partition's
/// or as a global error), is not one; the rest are
/// what the client retries by itself (a broker away), so a warning.
pub fn client_error(error: KafkaError, reason: &str) {
    let end = matches!(
        error,
        KafkaError::PartitionEOF(_) | KafkaError::Global(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
    );
    if !end {
        tracing::warn!(%error, "Kafka client: {reason}");
    }
}

/// A readable sentence for a client error.
pub fn describe(e: &KafkaError) -> String {
    match e {
        KafkaError::ClientCreation(m) => format!("invalid client configuration: {m}"),
        other => other.to_string(),
    }
}

/// The partition count of each of `topics`, creating missing ones when
/// `cluster.create_topic` says so. An unreachable cluster or a missing
/// topic is an error that names it.
pub fn partition_counts(
    consumer: &KafkaConsumer,
    cluster: &ClusterOptions,
    topics: &[String],
) -> Result<BTreeMap<String, i32>, ConnectorError> {
    let mut counts = BTreeMap::new();
    for topic in topics {
        let mut count = topic_partitions(consumer, cluster, topic)?;
        if count.is_none() && cluster.create_topic {
            create_topic(cluster, topic)?;
            count = Some(created_partitions(consumer, cluster, topic)?);
        }
        let Some(count) = count else {
            return Err(ConnectorError::Refused(format!(
                "topic '{topic}' does not exist on {} (create it, or set create_topic = true)",
                cluster.bootstrap_servers
            )));
        };
        counts.insert(topic.clone(), count);
    }
    Ok(counts)
}

/// The partition count of `topic`, `None` if it does not exist.
fn topic_partitions(
    consumer: &KafkaConsumer,
    cluster: &ClusterOptions,
    topic: &str,
) -> Result<Option<i32>, ConnectorError> {
    let timeout = cluster.timeout();
    let metadata = consumer.fetch_metadata(Some(topic), timeout).map_err(|e| unreachable(cluster, &e))?;
    let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else { return Ok(None) };
    match t.error() {
        None if !t.partitions().is_empty() => Ok(Some(t.partitions().len() as i32)),
        None => Ok(None),
        Some(code) => match RDKafkaErrorCode::from(code) {
            RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => Ok(None),
            other => Err(ConnectorError::Unavailable(format!(
                "cannot read the metadata of topic '{topic}' from {}: {other}",
                cluster.bootstrap_servers
            ))),
        },
    }
}

/// The partition count of `topic`, just created. Kafka answers a
/// creation once its controller made the topic; a broker's metadata shows
/// it a moment later (on a loaded machine, long enough for three members
/// that created the same topic to all find it missing). So the metadata is
/// read again, less and less often, until it shows the topic or the
/// cluster's timeout passed.
fn created_partitions(consumer: &KafkaConsumer, cluster: &ClusterOptions, topic: &str) -> Result<i32, ConnectorError> {
    let until = Instant::now() + cluster.timeout();
    let mut pause = Duration::from_millis(10);
    loop {
        if let Some(count) = topic_partitions(consumer, cluster, topic)? {
            return Ok(count);
        }
        if Instant::now() >= until {
            return Err(ConnectorError::Unavailable(format!(
                "topic '{topic}' was created on {} but its metadata did not show it within {}",
                cluster.bootstrap_servers,
                humantime::format_duration(cluster.timeout())
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

fn create_topic(cluster: &ClusterOptions, topic: &str) -> Result<(), ConnectorError> {
    let partitions = cluster.partitions.unwrap_or(1);
    let admin: AdminClient<DefaultClientContext> =
        cluster.client_config(&[])?.create().map_err(|e| ConnectorError::Refused(describe(&e)))?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
    let options =
        AdminOptions::new().operation_timeout(Some(cluster.timeout())).request_timeout(Some(cluster.timeout()));
    let results =
        futures::executor::block_on(admin.create_topics([&new], &options)).map_err(|e| unreachable(cluster, &e))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => {
                return Err(ConnectorError::Unavailable(format!(
                    "cannot create topic '{name}' on {}: {code}",
                    cluster.bootstrap_servers
                )));
            }
        }
    }
    tracing::info!(topic, partitions, servers = %cluster.bootstrap_servers, "created the Kafka topic");
    Ok(())
}

/// The cluster did not answer a request in time.
pub fn unreachable(cluster: &ClusterOptions, e: &KafkaError) -> ConnectorError {
    ConnectorError::Unavailable(format!(
        "Kafka at {} did not answer within {} ({})",
        cluster.bootstrap_servers,
        humantime::format_duration(cluster.timeout()),
        describe(e)
    ))
}

/// Kafka's own key partitioner (the Java client's default, murmur2 of the
/// key bytes), so records keyed by Weir land where Kafka Streams and every
/// Java producer put the same key. librdkafka's default differs (CRC32);
/// its `murmur2_random` is this one for keyed records, but the sink must
/// know each record's partition before it is sent (see [`held`]).
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    ((murmur2(key) & 0x7fff_ffff) % partitions as u32) as i32
}

/// MurmurHash2, 32-bit, with Kafka's seed, bit for bit as
/// `org.apache.kafka.common.utils.Utils.murmur2`.
fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_own_test_vectors() {
        // From the Apache Kafka client's UtilsTest.testMurmur2.
        let cases: [(&str, i32); 6] = [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            ("abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()) as i32, expected, "{input}");
        }
        assert!((0..4).contains(&partition_for_key(b"foobar", 4)));
    }

    #[test]
    fn properties_pass_through_and_bad_ones_are_named() {
        let opts: ClusterOptions = toml::from_str(
            "bootstrap_servers = \"127.0.0.1:1\"\n[properties]\n\"security.protocol\" = \"plaintext\"\n\"linger.ms\" = 5",
        )
        .unwrap();
        opts.check().unwrap();
        let bad: ClusterOptions =
            toml::from_str("bootstrap_servers = \"127.0.0.1:1\"\n[properties]\n\"no.such.property\" = \"x\"").unwrap();
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains("no.such.property"), "{e}");
        let plugin: ClusterOptions = toml::from_str(
            "bootstrap_servers = \"127.0.0.1:1\"\n[properties]\n\"plugin.library.paths\" = \"/tmp/evil.so\"",
        )
        .unwrap();
        let e = plugin.check().unwrap_err().to_string();
        assert!(e.contains("properties.plugin.library.paths: librdkafka would load each library"), "{e}");
        let kinit: ClusterOptions = toml::from_str(
            "bootstrap_servers = \"127.0.0.1:1\"\n[properties]\n\"sasl.kerberos.kinit.cmd\" = \"touch /tmp/x\"",
        )
        .unwrap();
        let e = kinit.check().unwrap_err().to_string();
        assert!(e.contains("properties.sasl.kerberos.kinit.cmd: librdkafka would run it as a shell command"), "{e}");
    }
}
