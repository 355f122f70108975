//! A real Kafka-protocol broker (tansu) on 127.0.0.1 for the Kafka tests,
//! each on a free port with its log in memory, and a plain rdkafka client
//! that produces test input and reads output back. `scripts/test` builds
//! tansu once; `WEIR_TANSU` names the binary (default:
//! `~/.cache/weir/tansu/bin/tansu`). (tansu 0.6.0's SQLite engine spins
//! on a fetch of records with headers, which every Weir sink writes, and
//! its S3 engine loses records it acknowledged when it is stopped.)

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What every producer writing to tansu sets `batch.num.messages` to:
/// tansu 0.6.0 indexes its log by batch, so a fetch from an offset inside a
/// batch of several records returns nothing, and the end offset it reports
/// is the last batch's first. With one record per batch both are right.
pub const ONE_RECORD_BATCHES: &str = "1";

/// A broker process and its working directory.
pub struct KafkaBroker {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
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
    /// Starts a broker on a free port, keeping its log in memory.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut b = KafkaBroker { port, dir: tempfile::tempdir().unwrap(), child: None };
        b.start_process();
        b
    }

    /// The tansu binary.
    pub fn binary() -> PathBuf {
        match std::env::var_os("WEIR_TANSU") {
            Some(p) => PathBuf::from(p),
            None => {
                let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
                home.join(".cache/weir/tansu/bin/tansu")
            }
        }
    }

    fn start_process(&mut self) {
        let bin = Self::binary();
        assert!(
            bin.is_file(),
            "{} is missing: scripts/test builds tansu (cargo install tansu --features dynostore); or set WEIR_TANSU",
            bin.display()
        );
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("broker.log")).unwrap();
        let child = Command::new(&bin)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "memory://tansu/"])
            .current_dir(self.dir.path())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start tansu");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "tansu did not listen on port {}: {}", self.port, self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the broker.
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

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
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

    /// A producer for inputs of any size: idempotent, one record per batch
    /// (as tansu needs), keyed records partitioned as Java clients do, and
    /// a queue deep enough for a benchmark's input.
    pub fn bulk_producer(&self) -> BulkProducer {
        BulkProducer(
            self.config()
                .set("enable.idempotence", "true")
                .set("partitioner", "murmur2_random")
                .set("linger.ms", "5")
                .set("batch.num.messages", ONE_RECORD_BATCHES)
                .set("queue.buffering.max.messages", "1000000")
                .set("queue.buffering.max.kbytes", "2000000")
                .create()
                .unwrap(),
        )
    }

    /// Every record of `topic`, partition by partition in offset order,
    /// read with `isolation.level = read_committed`.
    pub fn consume_all(&self, topic: &str) -> Vec<Consumed> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-tests-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", std::env::var("WEIR_ISO").unwrap_or("read_committed".into()))
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
        let deadline = Instant::now()
            + Duration::from_secs(
                std::env::var("WEIR_KAFKA_READ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(120),
            );
        while at_end.len() < partitions {
            assert!(
                Instant::now() < deadline,
                "reading {topic} back took over two minutes: {} records, partitions at their end {at_end:?} of {partitions}",
                out.len()
            );
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
        out
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
