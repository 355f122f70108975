//! What a transactional sink needs of Kafka's transaction coordinator and
//! librdkafka does not offer: the state of a transactional id (its
//! producer id and epoch, and when its open transaction began), and ending
//! a transaction by producer id and epoch. A sink that restarts uses them
//! to commit the transaction its checkpoint pre-committed, as Flink's
//! `KafkaSink` does by resuming the Java producer's transaction. Requests
//! are Kafka's wire protocol over TCP, encoded by the `kafka-protocol`
//! crate, to PLAINTEXT listeners (the sink refuses other security
//! protocols in this mode).
//!
//! Everything here is a short request and answer with a deadline; no
//! answer is trusted for its size (a frame over [`MAX_FRAME`] is refused).

use crate::runtime::error::ConnectorError;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, FindCoordinatorRequest, FindCoordinatorResponse, ProducerId, RequestHeader,
    ResponseHeader, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The largest answer read: the coordinator's answers here are a few
/// hundred bytes.
const MAX_FRAME: usize = 1 << 20;

/// How long to wait between tries of a request the coordinator asks to be
/// tried again (it is loading, moving, or finishing another transaction).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// A transactional id's state, as the coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnInfo {
    /// `Empty`, `Ongoing`, `PrepareCommit`, `PrepareAbort`,
    /// `CompleteCommit`, `CompleteAbort`, `Dead`, `PrepareEpochFence`.
    pub state: String,
    /// The producer id the transactional id has now.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// When the open (or last) transaction began, on the coordinator's
    /// clock (ms); -1 when none did.
    pub start_ms: i64,
}

/// A client of the transaction coordinators of one cluster.
pub struct TxnClient {
    servers: Vec<String>,
    timeout: Duration,
}

impl TxnClient {
    /// A client of the cluster at `servers` (`host:port[,...]`), each
    /// request given `timeout`.
    pub fn new(servers: &str, timeout: Duration) -> Self {
        TxnClient { servers: servers.split(',').map(|s| s.trim().to_string()).collect(), timeout }
    }

    /// The state of transactional id `id`, `None` if the coordinator does
    /// not know it.
    pub fn describe(&self, id: &str) -> Result<Option<TxnInfo>, ConnectorError> {
        self.with_coordinator(id, |conn| {
            let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
            let response = conn.call(&request, 0)?;
            let Some(s) = response.transaction_states.into_iter().next() else {
                return Err(Answer::Failed("the coordinator described no transaction".into()));
            };
            match ResponseError::try_from_code(s.error_code) {
                None => Ok(Some(TxnInfo {
                    state: s.transaction_state.to_string(),
                    producer_id: s.producer_id.0,
                    epoch: s.producer_epoch,
                    start_ms: s.transaction_start_time_ms,
                })),
                Some(ResponseError::TransactionalIdNotFound) => Ok(None),
                Some(e) => Err(Answer::from_error(e)),
            }
        })
    }

    /// Ends the open transaction of `id`, begun by producer `producer_id`
    /// at `epoch`: commits it, or aborts it.
    pub fn end(&self, id: &str, producer_id: i64, epoch: i16, commit: bool) -> Result<(), ConnectorError> {
        self.with_coordinator(id, |conn| {
            let request = EndTxnRequest::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_committed(commit);
            // Version 4 at most: 5 is the form of transactions that bump
            // the epoch at their end (KIP-890), which these, begun by
            // librdkafka, are not.
            let response = conn.call(&request, 4)?;
            match ResponseError::try_from_code(response.error_code) {
                None => Ok(()),
                Some(e) => Err(Answer::from_error(e)),
            }
        })
    }

    /// Runs `request` on a connection to `id`'s coordinator, finding it
    /// first, and again while the coordinator asks for a retry, until the
    /// timeout.
    fn with_coordinator<T>(
        &self,
        id: &str,
        mut request: impl FnMut(&mut Connection) -> Result<T, Answer>,
    ) -> Result<T, ConnectorError> {
        let deadline = Instant::now() + self.timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            let attempt = self.coordinator(id, deadline).and_then(|mut conn| request(&mut conn));
            match attempt {
                Ok(t) => return Ok(t),
                Err(Answer::Retry(why)) => last = why,
                Err(Answer::Failed(why)) => {
                    return Err(ConnectorError::Unavailable(format!("transactional id '{id}': {why}")));
                }
            }
            std::thread::sleep(RETRY_BACKOFF);
        }
        Err(ConnectorError::Unavailable(format!(
            "transactional id '{id}': no answer from its coordinator on {} within {} ({last})",
            self.servers.join(","),
            humantime::format_duration(self.timeout)
        )))
    }

    /// A connection to the coordinator of transactional id `id`.
    fn coordinator(&self, id: &str, deadline: Instant) -> Result<Connection, Answer> {
        let mut last = Answer::Retry("no bootstrap server".into());
        for server in &self.servers {
            let found = Connection::open(server, deadline).and_then(|mut conn| {
                // Versions 4 and later ask for a list of keys, earlier ones
                // for one.
                let version = conn.version::<FindCoordinatorRequest>(4)?;
                let key = StrBytes::from_string(id.to_string());
                let request = FindCoordinatorRequest::default().with_key_type(1);
                let request =
                    if version >= 4 { request.with_coordinator_keys(vec![key]) } else { request.with_key(key) };
                let response = conn.exchange(&request, version)?;
                // Versions 4 and later answer per key; earlier ones once.
                let (error, host, port) = match response.coordinators.into_iter().next() {
                    Some(c) => (c.error_code, c.host, c.port),
                    None => (response.error_code, response.host, response.port),
                };
                if let Some(e) = ResponseError::try_from_code(error) {
                    return Err(Answer::from_error(e));
                }
                Connection::open(&format!("{host}:{port}"), deadline)
            });
            match found {
                Ok(conn) => return Ok(conn),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// A request this client sends, with its answer's type. (The crate's own
/// `Request` trait needs the broker side's decoding too.)
trait Call: Encodable + HeaderVersion + Message {
    const KEY: ApiKey;
    type Response: Decodable + HeaderVersion;
}

impl Call for ApiVersionsRequest {
    const KEY: ApiKey = ApiKey::ApiVersions;
    type Response = ApiVersionsResponse;
}

impl Call for FindCoordinatorRequest {
    const KEY: ApiKey = ApiKey::FindCoordinator;
    type Response = FindCoordinatorResponse;
}

impl Call for DescribeTransactionsRequest {
    const KEY: ApiKey = ApiKey::DescribeTransactions;
    type Response = DescribeTransactionsResponse;
}

impl Call for EndTxnRequest {
    const KEY: ApiKey = ApiKey::EndTxn;
    type Response = EndTxnResponse;
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// Why a request did not succeed.
#[derive(Debug)]
enum Answer {
    /// Worth another try (a connection lost, a coordinator moving).
    Retry(String),
    /// Not worth one.
    Failed(String),
}

impl Answer {
    fn from_error(e: ResponseError) -> Answer {
        match e {
            ResponseError::CoordinatorLoadInProgress
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::NotCoordinator
            | ResponseError::ConcurrentTransactions => Answer::Retry(e.to_string()),
            e if e.is_retriable() => Answer::Retry(e.to_string()),
            e => Answer::Failed(e.to_string()),
        }
    }
}

/// One connection, with the versions the broker speaks.
struct Connection {
    stream: TcpStream,
    server: String,
    versions: BTreeMap<i16, (i16, i16)>,
    correlation: i32,
}

impl Connection {
    /// Connects to `server` and asks which versions it speaks.
    fn open(server: &str, deadline: Instant) -> Result<Connection, Answer> {
        let lost = |e: std::io::Error| Answer::Retry(format!("{server}: {e}"));
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let addr = server
            .to_socket_addrs()
            .map_err(lost)?
            .next()
            .ok_or_else(|| Answer::Failed(format!("{server}: no address")))?;
        let stream = TcpStream::connect_timeout(&addr, left).map_err(lost)?;
        stream.set_read_timeout(Some(left)).map_err(lost)?;
        stream.set_write_timeout(Some(left)).map_err(lost)?;
        stream.set_nodelay(true).map_err(lost)?;
        let mut conn = Connection { stream, server: server.to_string(), versions: BTreeMap::new(), correlation: 0 };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("weir"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response: ApiVersionsResponse = conn.exchange(&request, 3)?;
        if let Some(e) = ResponseError::try_from_code(response.error_code) {
            return Err(Answer::Failed(format!("{server}: ApiVersions: {e}")));
        }
        conn.versions = response.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        Ok(conn)
    }

    /// Sends `request` at the highest version both sides speak, up to
    /// `most`, and reads its answer.
    fn call<R: Call>(&mut self, request: &R, most: i16) -> Result<R::Response, Answer> {
        let version = self.version::<R>(most)?;
        self.exchange(request, version)
    }

    /// The highest version of `R` both sides speak, up to `most`.
    fn version<R: Call>(&self, most: i16) -> Result<i16, Answer> {
        let name = format!("{:?}", R::KEY);
        let Some(&(low, high)) = self.versions.get(&(R::KEY as i16)) else {
            return Err(Answer::Failed(format!("{}: the broker does not offer {name}", self.server)));
        };
        let version = most.min(high).min(R::VERSIONS.max);
        if version < low.max(R::VERSIONS.min) {
            return Err(Answer::Failed(format!(
                "{}: the broker speaks {name} versions {low} to {high}, Weir {} to {most}",
                self.server,
                R::VERSIONS.min
            )));
        }
        Ok(version)
    }

    /// Writes one request frame and reads the answer's.
    fn exchange<R: Call>(&mut self, request: &R, version: i16) -> Result<R::Response, Answer> {
        let server = self.server.clone();
        let bad = |e: anyhow::Error| Answer::Failed(format!("{server}: {e}"));
        let lost = |e: std::io::Error| Answer::Retry(format!("{}: {e}", self.server));
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("weir")));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).map_err(bad)?;
        request.encode(&mut body, version).map_err(bad)?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_u32(body.len() as u32);
        frame.put_slice(&body);
        self.stream.write_all(&frame).map_err(lost)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(lost)?;
        let size = u32::from_be_bytes(size) as usize;
        if size > MAX_FRAME {
            return Err(Answer::Failed(format!("{}: an answer of {size} bytes (at most {MAX_FRAME})", self.server)));
        }
        let mut answer = vec![0u8; size];
        self.stream.read_exact(&mut answer).map_err(lost)?;
        let mut answer = Bytes::from(answer);
        let header = ResponseHeader::decode(&mut answer, R::Response::header_version(version)).map_err(bad)?;
        if header.correlation_id != self.correlation {
            return Err(Answer::Retry(format!("{}: an answer to another request", self.server)));
        }
        let response = R::Response::decode(&mut answer, version).map_err(bad)?;
        if answer.has_remaining() {
            tracing::debug!(server = %self.server, left = answer.remaining(), "bytes after a Kafka answer");
        }
        Ok(response)
    }
}
