//! Apache Kafka on 127.0.0.1 for the Kafka tests and benchmarks: each
//! [`KafkaBroker`] is a KRaft single node (broker and controller in one
//! JVM) on free ports with its log in a directory of its own, started on
//! the jars `scripts/test` installs from Maven Central (`ensure_kafka` in
//! `scripts/common.sh`; `WEIR_KAFKA_LIBS` names them, default
//! `~/.cache/weir/kafka/<version>/libs`), and a plain rdkafka client that
//! produces test input and reads output back.

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The Apache Kafka version `scripts/common.sh` installs (`KAFKA_VERSION`).
pub const KAFKA_VERSION: &str = "4.1.1";

/// How long a broker may take to start: a JVM on a loaded 2-core machine
/// took up to 8 s; the margin is for one that runs tests beside it.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// Every test broker's cluster id (16 bytes in URL-safe base64, as Kafka
/// wants): each broker is a cluster of its own, so they may share it.
const CLUSTER_ID: &str = "V2Vpci10ZXN0LWJyb2tlcg";

/// A record to produce: key, value, and timestamp in ms (`None`: the
/// producer's clock).
pub type Stamped<'a> = (Option<&'a [u8]>, &'a [u8], Option<i64>);

/// A broker process and its working directory.
pub struct KafkaBroker {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    settings: Vec<(String, String)>,
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its key.
    pub key: Option<Vec<u8>>,
    /// Its value.
    pub payload: Vec<u8>,
    /// Its timestamp (ms).
    pub timestamp: Option<i64>,
    /// Its headers.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl KafkaBroker {
    /// Starts a broker on free ports.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a broker with `settings` (broker properties) added to the
    /// test defaults, or overriding them.
    pub fn start_with(settings: &[(&str, &str)]) -> Self {
        let settings = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut b = KafkaBroker { port: 0, dir: tempfile::tempdir().unwrap(), child: None, settings };
        // Free ports are picked, then bound by the broker: another process
        // may take one in between, so a start that could not bind is tried
        // again on other ports.
        for attempt in 1.. {
            match b.start_process() {
                Ok(()) => return b,
                Err(e) if attempt < 3 && e.contains("Address already in use") => b.stop(),
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!()
    }

    /// The directory of the Kafka jars.
    pub fn libs() -> PathBuf {
        match std::env::var_os("WEIR_KAFKA_LIBS") {
            Some(p) => PathBuf::from(p),
            None => {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
                cache.join("weir/kafka").join(KAFKA_VERSION).join("libs")
            }
        }
    }

    fn java(libs: &Path) -> Command {
        let mut c = Command::new("java");
        // A small heap and the serial collector: many brokers may run at
        // once beside the tests, on two cores.
        c.args(["-Xms256m", "-Xmx1g", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]);
        c.arg(format!("-Dlog4j2.configurationFile={}", libs.with_file_name("log4j2.properties").display()));
        c.arg("-cp").arg(format!("{}/*", libs.display()));
        c
    }

    /// A formatted KRaft log directory, made once per process and copied
    /// for each broker: formatting starts a JVM of its own (3 s). The
    /// copies share a cluster id, which separate single-node clusters may.
    fn formatted() -> &'static Path {
        static TEMPLATE: OnceLock<tempfile::TempDir> = OnceLock::new();
        TEMPLATE
            .get_or_init(|| {
                let libs = Self::libs();
                assert!(
                    libs.join(format!("kafka_2.13-{KAFKA_VERSION}.jar")).is_file(),
                    "Apache Kafka {KAFKA_VERSION} is not installed in {}: scripts/test installs it \
                     (source scripts/common.sh && ensure_kafka), or set WEIR_KAFKA_LIBS",
                    libs.display()
                );
                let dir = tempfile::tempdir().unwrap();
                let props = dir.path().join("format.properties");
                std::fs::write(&props, properties(9092, 9093, &dir.path().join("data"), &[])).unwrap();
                let out = Self::java(&libs)
                    .args(["kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", CLUSTER_ID, "-c"])
                    .arg(&props)
                    .output()
                    .expect("run java (Java 17 or later)");
                assert!(
                    out.status.success(),
                    "formatting a KRaft log directory failed: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                dir
            })
            .path()
    }

    fn start_process(&mut self) -> Result<(), String> {
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        self.port = free();
        let controller = free();
        let data = self.dir.path().join("data");
        if !data.exists() {
            copy_dir(&Self::formatted().join("data"), &data);
        }
        let props = self.dir.path().join("server.properties");
        let settings: Vec<(&str, &str)> = self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        std::fs::write(&props, properties(self.port, controller, &data, &settings)).unwrap();
        let log_path = self.dir.path().join("broker.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Self::java(&Self::libs())
            .arg("kafka.Kafka")
            .arg(&props)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("run java (Java 17 or later)");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let log = self.log();
            if log.contains("Kafka Server started") {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return Err(format!("the Kafka broker exited ({status}) before it started:\n{log}"));
            }
            if Instant::now() > deadline {
                return Err(format!("the Kafka broker did not start within {START_TIMEOUT:?}:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the broker (SIGKILL: its log is thrown away with it).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Freezes the broker (SIGSTOP): it accepts nothing and answers
    /// nothing until [`KafkaBroker::thaw`], as a broker that hangs.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen broker go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let child = self.child.as_ref().expect("the broker runs");
        let status = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill {sig}");
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// `127.0.0.1:<port>`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A client configuration for this broker.
    pub fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap());
        c
    }

    /// Adds partitions to `topic`, to `total` in all (CreatePartitions).
    pub fn add_partitions(&self, topic: &str, total: usize) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results =
            futures::executor::block_on(admin.create_partitions([&NewPartitions::new(topic, total)], &options))
                .expect("create_partitions");
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("adding partitions to {t}: {e}"));
        }
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.create_topic_with(topic, partitions, &[]);
    }

    /// Creates `topic` with `partitions` partitions and topic `configs`.
    pub fn create_topic_with(&self, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        for (k, v) in configs {
            new = new.set(k, v);
        }
        let results = futures::executor::block_on(admin.create_topics([&new], &options)).expect("create_topics");
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
        }
    }

    /// Produces `records` (key, value) to `topic`, letting the client pick
    /// partitions by key, and waits until all are acknowledged.
    pub fn produce(&self, topic: &str, records: &[(Option<&[u8]>, &[u8])]) {
        let producer = self.bulk_producer();
        for (key, value) in records {
            let mut r = BaseRecord::<[u8], [u8]>::to(topic).payload(value);
            if let Some(k) = key {
                r = r.key(k);
            }
            producer.send(r);
        }
        producer.flush();
    }

    /// Produces `records` (key, value, timestamp in ms; the producer's
    /// clock where `None`) to `partition` of `topic`, in order, and waits
    /// until all are acknowledged.
    pub fn produce_to(&self, topic: &str, partition: i32, records: &[Stamped<'_>]) {
        let producer = self.bulk_producer();
        for (key, value, timestamp) in records {
            let mut r = BaseRecord::<[u8], [u8]>::to(topic).partition(partition).payload(value);
            if let Some(k) = key {
                r = r.key(k);
            }
            if let Some(t) = timestamp {
                r = r.timestamp(*t);
            }
            producer.send(r);
        }
        producer.flush();
    }

    /// A producer for inputs of any size: idempotent, keyed records
    /// partitioned as Java clients do, batched as a Java producer would,
    /// and a queue deep enough for a benchmark's input.
    pub fn bulk_producer(&self) -> BulkProducer {
        BulkProducer(
            self.config()
                .set("enable.idempotence", "true")
                .set("partitioner", "murmur2_random")
                .set("linger.ms", "5")
                .set("queue.buffering.max.messages", "1000000")
                .set("queue.buffering.max.kbytes", "2000000")
                .create()
                .unwrap(),
        )
    }

    /// Every record of `topic`, partition by partition in offset order,
    /// read with `isolation.level = read_committed`.
    pub fn consume_all(&self, topic: &str) -> Vec<Consumed> {
        let limit = std::env::var("WEIR_KAFKA_READ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
        let (out, at_end) = self.read_committed(topic, Duration::from_secs(limit), |_| false);
        assert!(at_end, "reading {topic} back took over {limit} s: {} records and not at the end", out.len());
        out
    }

    /// Whether `topic` holds `n` committed records within `limit`. Unlike
    /// [`consume_all`](Self::consume_all) it never waits for the end, which
    /// a topic a running job writes to may not reach while it is read.
    pub fn has_at_least(&self, topic: &str, n: usize, limit: Duration) -> bool {
        self.read_committed(topic, limit, |read| read >= n).0.len() >= n
    }

    /// The committed records of `topic` in partition and offset order,
    /// read until every partition is at its end, `enough` says so (given
    /// how many were read) or `limit` passes; and whether every partition
    /// was at its end.
    fn read_committed(&self, topic: &str, limit: Duration, enough: impl Fn(usize) -> bool) -> (Vec<Consumed>, bool) {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-tests-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
        let partitions = metadata.topics().iter().find(|t| t.name() == topic).map_or(0, |t| t.partitions().len());
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions as i32 {
            let (low, _) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap();
            tpl.add_partition_offset(topic, p, Offset::Offset(low)).unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let mut out = Vec::new();
        let mut at_end = std::collections::HashSet::new();
        let deadline = Instant::now() + limit;
        while at_end.len() < partitions && !enough(out.len()) && Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    at_end.remove(&m.partition());
                    let headers = m
                        .headers()
                        .map(|h| h.iter().map(|x| (x.key.to_string(), x.value.unwrap_or(&[]).to_vec())).collect())
                        .unwrap_or_default();
                    out.push(Consumed {
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key().map(<[u8]>::to_vec),
                        payload: m.payload().unwrap_or(&[]).to_vec(),
                        timestamp: m.timestamp().to_millis(),
                        headers,
                    });
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                }
                // A dropped connection (the broker busy on a loaded
                // machine) is reported, then made again: only the deadline
                // ends the read.
                Some(Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
                ))) => {}
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                None => {}
            }
        }
        out.sort_by_key(|c| (c.partition, c.offset));
        let all_at_end = at_end.len() == partitions;
        (out, all_at_end)
    }
}

/// The broker's properties: a KRaft single node on loopback, with what a
/// one-node cluster needs (internal topics with one replica) and what makes
/// tests quick (no delay before a new group's first rebalance), then
/// `extra`.
fn properties(port: u16, controller: u16, data: &Path, extra: &[(&str, &str)]) -> String {
    let mut p: Vec<(String, String)> = [
        ("process.roles", "broker,controller".to_string()),
        ("node.id", "1".into()),
        ("controller.quorum.voters", format!("1@127.0.0.1:{controller}")),
        ("listeners", format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}")),
        ("advertised.listeners", format!("PLAINTEXT://127.0.0.1:{port}")),
        ("controller.listener.names", "CONTROLLER".into()),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".into()),
        ("inter.broker.listener.name", "PLAINTEXT".into()),
        ("log.dirs", data.display().to_string()),
        ("offsets.topic.replication.factor", "1".into()),
        ("offsets.topic.num.partitions", "4".into()),
        ("transaction.state.log.replication.factor", "1".into()),
        ("transaction.state.log.min.isr", "1".into()),
        ("transaction.state.log.num.partitions", "4".into()),
        ("share.coordinator.state.topic.replication.factor", "1".into()),
        ("share.coordinator.state.topic.min.isr", "1".into()),
        ("group.initial.rebalance.delay.ms", "0".into()),
        ("num.partitions", "1".into()),
        ("auto.create.topics.enable", "false".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in extra {
        match p.iter_mut().find(|(key, _)| key == k) {
            Some(e) => e.1 = v.to_string(),
            None => p.push((k.to_string(), v.to_string())),
        }
    }
    p.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// See [`KafkaBroker::bulk_producer`].
pub struct BulkProducer(ThreadedProducer<DefaultProducerContext>);

impl BulkProducer {
    /// Queues `record`, waiting while the queue is full.
    pub fn send(&self, mut record: BaseRecord<'_, [u8], [u8]>) {
        loop {
            match self.0.send(record) {
                Ok(()) => return,
                Err((_, back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }

    /// Waits until every record queued is acknowledged.
    pub fn flush(&self) {
        self.0.flush(Duration::from_secs(600)).expect("every record acknowledged");
    }
}
