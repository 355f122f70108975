//! The Kafka sink's `mode = "transactions"`: exactly-once output through
//! Kafka transactions, with the semantics of Flink's `KafkaSink` at
//! `EXACTLY_ONCE`. Records go out as they come, inside a transaction;
//! each barrier ends the transaction (pre-commit: everything sent is
//! acknowledged) and the next one begins; a transaction is committed once
//! the checkpoint whose barrier ended it completed. A `read_committed`
//! reader sees each record once, a checkpoint interval at a time.
//!
//! Transactional ids are `<prefix>-<subtask>-<slot>`, slots `0` to
//! [`SLOTS`]` - 1`: a pre-committed transaction keeps its slot's producer
//! until it is committed, while the next one runs on another slot. Every
//! run starts by initialising every slot's id, which aborts whatever an
//! earlier run left open and fences its producers (a zombie's next send
//! or commit fails on the old epoch). Before that, a restore commits the
//! transactions its checkpoint pre-committed (recover-and-commit): the
//! checkpoint records each one's producer id, epoch and start time, and
//! the coordinator commits it if it is still that transaction and open
//! ([`TxnClient`]).

use super::txn_client::{TxnClient, TxnInfo};
use crate::checkpoint::metadata::PendingTxn;
use crate::runtime::error::ConnectorError;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use std::collections::VecDeque;
use std::time::Duration;

/// Transactional ids per sink subtask: two in turn while checkpoints
/// complete before the next barrier, more when they lag.
pub const SLOTS: usize = 4;

/// What a transactional writer is given.
pub struct TxnSettings {
    /// `<prefix>-<subtask>`: every id of this sink subtask starts so.
    pub ids: String,
    /// The producer's configuration, before `transactional.id`.
    pub config: ClientConfig,
    /// `transaction.timeout.ms`.
    pub transaction_timeout: Duration,
    /// How long a request to the cluster may take.
    pub request_timeout: Duration,
    /// `bootstrap.servers`, for the coordinator requests.
    pub servers: String,
}

/// One transactional id and its producer.
struct Slot<C: ProducerContext<DeliveryOpaque = ()> + 'static> {
    id: String,
    producer: ThreadedProducer<C>,
}

/// A transaction ended at a barrier, waiting for its checkpoint.
struct Ended {
    /// The checkpoint whose barrier ended it.
    checkpoint: u64,
    slot: usize,
    /// How the coordinator knows it; `None` if it holds no records.
    recorded: Option<PendingTxn>,
    /// How many records it holds.
    records: u64,
}

/// A sink subtask's transactions.
pub struct Transactions<C: ProducerContext<DeliveryOpaque = ()> + 'static> {
    settings: TxnSettings,
    client: TxnClient,
    slots: Vec<Option<Slot<C>>>,
    /// The slot of the open transaction.
    open: usize,
    /// Records sent in it.
    open_records: u64,
    /// Pre-committed, oldest first.
    ended: VecDeque<Ended>,
    make_context: Box<dyn Fn() -> C + Send>,
}

impl<C: ProducerContext<DeliveryOpaque = ()> + 'static> Transactions<C> {
    /// Starts a run: commits what `restored` (the checkpoint's pending
    /// transactions) lists and the coordinator still has open, then
    /// initialises every slot (aborting and fencing what an earlier run
    /// left) and begins a transaction. `cancelled` is asked between steps.
    pub fn start(
        settings: TxnSettings,
        restored: &[PendingTxn],
        make_context: Box<dyn Fn() -> C + Send>,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Self, ConnectorError> {
        let client = TxnClient::new(&settings.servers, settings.request_timeout);
        for p in restored {
            if cancelled() {
                return Err(ConnectorError::Cancelled);
            }
            recover(&client, p)?;
        }
        let mut t = Transactions {
            settings,
            client,
            slots: Vec::new(),
            open: 0,
            open_records: 0,
            ended: VecDeque::new(),
            make_context,
        };
        for k in 0..SLOTS {
            if cancelled() {
                return Err(ConnectorError::Cancelled);
            }
            let slot = t.init(k)?;
            // Two slots serve while checkpoints keep up; the others were
            // initialised only to fence what an earlier run left there.
            t.slots.push((k < 2).then_some(slot));
        }
        t.begin(0)?;
        Ok(t)
    }

    /// A producer for slot `k`, its transactions initialised.
    fn init(&self, k: usize) -> Result<Slot<C>, ConnectorError> {
        let id = format!("{}-{k}", self.settings.ids);
        let mut config = self.settings.config.clone();
        config.set("transactional.id", &id);
        config.set("transaction.timeout.ms", self.settings.transaction_timeout.as_millis().to_string());
        let producer: ThreadedProducer<C> = config
            .create_with_context((self.make_context)())
            .map_err(|e| ConnectorError::Refused(super::describe(&e)))?;
        producer.init_transactions(self.settings.request_timeout).map_err(|e| {
            let why = match e.rdkafka_error_code() {
                Some(RDKafkaErrorCode::InvalidTransactionTimeout) => format!(
                    "transaction_timeout = {} is more than the broker allows (transaction.max.timeout.ms)",
                    humantime::format_duration(self.settings.transaction_timeout)
                ),
                _ => e.to_string(),
            };
            ConnectorError::Unavailable(format!("cannot initialise transactional id '{id}': {why}"))
        })?;
        Ok(Slot { id, producer })
    }

    /// Begins a transaction on slot `k`.
    fn begin(&mut self, k: usize) -> Result<(), ConnectorError> {
        if self.slots[k].is_none() {
            self.slots[k] = Some(self.init(k)?);
        }
        let slot = self.slots[k].as_ref().expect("initialised");
        slot.producer.begin_transaction().map_err(|e| failed(&slot.id, "begin a transaction", e))?;
        self.open = k;
        self.open_records = 0;
        Ok(())
    }

    /// Sends a record in the open transaction, waiting while the
    /// producer's queue is full.
    pub fn send(&mut self, mut record: BaseRecord<'_, [u8], [u8]>) -> Result<(), ConnectorError> {
        let slot = self.slots[self.open].as_ref().expect("the open transaction has a slot");
        loop {
            match slot.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(failed(&slot.id, "send a record", e)),
            }
        }
        self.open_records += 1;
        Ok(())
    }

    /// Ends the open transaction at the barrier of `checkpoint` (every
    /// record acknowledged: the pre-commit), begins the next one on a free
    /// slot, and says which transactions the checkpoint must record: every
    /// one ended and not yet committed, this one included.
    pub fn pre_commit(&mut self, checkpoint: u64) -> Result<Vec<PendingTxn>, ConnectorError> {
        let k = self.open;
        let slot = self.slots[k].as_ref().expect("the open transaction has a slot");
        slot.producer.flush(self.settings.request_timeout).map_err(|e| failed(&slot.id, "flush", e))?;
        let recorded = if self.open_records == 0 {
            None
        } else {
            let info = self.client.describe(&slot.id)?.ok_or_else(|| {
                ConnectorError::Inconsistent(format!("the coordinator does not know transactional id '{}'", slot.id))
            })?;
            Some(PendingTxn {
                checkpoint,
                transactional_id: slot.id.clone(),
                producer_id: info.producer_id,
                epoch: info.epoch,
                start_ms: info.start_ms,
            })
        };
        self.ended.push_back(Ended { checkpoint, slot: k, recorded, records: self.open_records });
        let busy: Vec<usize> = self.ended.iter().map(|e| e.slot).collect();
        let Some(free) = (0..SLOTS).find(|k| !busy.contains(k)) else {
            return Err(ConnectorError::Unavailable(format!(
                "{SLOTS} transactions wait for their checkpoints to complete (the oldest for checkpoint {}): checkpoints are not completing",
                self.ended.front().map_or(checkpoint, |e| e.checkpoint)
            )));
        };
        self.begin(free)?;
        Ok(self.ended.iter().filter_map(|e| e.recorded.clone()).collect())
    }

    /// Commits every ended transaction whose checkpoint is `upto` or
    /// older (`None`: all of them), oldest first; how many records that
    /// made visible.
    pub fn commit(&mut self, upto: Option<u64>) -> Result<u64, ConnectorError> {
        let mut committed = 0;
        while let Some(e) = self.ended.front() {
            if upto.is_some_and(|c| e.checkpoint > c) {
                break;
            }
            if e.recorded.is_some() {
                // Its checkpoint completed and it is not committed yet:
                // where a crash tests recover-and-commit.
                crate::crash_point::crash_point("kafka.txn-before-commit");
            }
            let slot = self.slots[e.slot].as_ref().expect("an ended transaction has a slot");
            slot.producer
                .commit_transaction(self.settings.request_timeout)
                .map_err(|err| failed(&slot.id, "commit the transaction", err))?;
            committed += e.records;
            self.ended.pop_front();
        }
        Ok(committed)
    }

    /// `e`, or that the producer is fenced when a slot's producer says so.
    /// librdkafka raises fencing as the producer's fatal error, and what
    /// fails first (a queued record purged, a send refused as fatal, a
    /// flush timing out) does not name the cause.
    pub fn explain(&self, e: ConnectorError) -> ConnectorError {
        if matches!(e, ConnectorError::ProducerFenced(_)) {
            return e;
        }
        for slot in self.slots.iter().flatten() {
            if let Some((code, reason)) = slot.producer.client().fatal_error()
                && fenced_code(code)
            {
                return ConnectorError::ProducerFenced(format!(
                    "transactional id '{}' was taken over by another run of this sink (its producer is fenced: {reason}); what failed first: {e}",
                    slot.id
                ));
            }
        }
        e
    }

    /// Aborts the open transaction (the job stopped with a savepoint:
    /// nothing after it is published) and begins a fresh one.
    pub fn discard(&mut self) -> Result<(), ConnectorError> {
        let k = self.open;
        let slot = self.slots[k].as_ref().expect("the open transaction has a slot");
        slot.producer
            .abort_transaction(self.settings.request_timeout)
            .map_err(|e| failed(&slot.id, "abort the transaction", e))?;
        self.begin(k)
    }
}

/// Commits `p` if the coordinator still has it open: its transactional id
/// shows the same producer id, epoch and start, Ongoing (or committing
/// already). Anything else means it ended before: committed by the run
/// that wrote the checkpoint (the usual case), or aborted by the broker
/// after `transaction.timeout.ms`, which loses its output and is an
/// error.
fn recover(client: &TxnClient, p: &PendingTxn) -> Result<(), ConnectorError> {
    let id = &p.transactional_id;
    let Some(info) = client.describe(id)? else {
        tracing::warn!(transactional_id = %id, checkpoint = p.checkpoint,
            "the coordinator no longer knows the transaction the checkpoint pre-committed; taking it as committed");
        return Ok(());
    };
    let same = |i: &TxnInfo| i.producer_id == p.producer_id && i.start_ms == p.start_ms;
    match info.state.as_str() {
        "Ongoing" | "PrepareCommit" if same(&info) && info.epoch == p.epoch => {
            client.end(id, p.producer_id, p.epoch, true)?;
            tracing::info!(transactional_id = %id, checkpoint = p.checkpoint,
                "committed the transaction the checkpoint pre-committed (recover and commit)");
            Ok(())
        }
        "PrepareAbort" | "CompleteAbort" | "PrepareEpochFence" if same(&info) => {
            Err(ConnectorError::Inconsistent(format!(
                "the transaction of checkpoint {} (transactional id '{id}') was aborted before this restore could commit it, most likely by the broker once its transaction_timeout passed: its output is lost; raise transaction_timeout above the time a restart takes",
                p.checkpoint
            )))
        }
        state => {
            tracing::debug!(transactional_id = %id, checkpoint = p.checkpoint, state,
                "the transaction the checkpoint pre-committed was committed before the restore");
            Ok(())
        }
    }
}

/// Whether `e` says the producer's epoch is no longer the transactional
/// id's: another run initialised it.
fn fenced(e: &KafkaError) -> bool {
    e.rdkafka_error_code().is_some_and(fenced_code)
}

fn fenced_code(code: RDKafkaErrorCode) -> bool {
    matches!(code, RDKafkaErrorCode::Fenced | RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::InvalidProducerEpoch)
}

/// A record `what` describes was not delivered: fenced (another run owns
/// the producer's transactional id now) is said so, the rest may pass
/// with a restart.
pub fn delivery_failed(what: &str, e: &KafkaError) -> ConnectorError {
    if fenced(e) {
        ConnectorError::ProducerFenced(format!(
            "{what}: another run of this sink took its transactional id over (its producer is fenced)"
        ))
    } else {
        ConnectorError::Unavailable(format!("{what}: {e}"))
    }
}

/// A transactional producer's call failed: fenced (another run owns the
/// id now) is said so, for the cluster's supervisor; the rest may pass
/// with a restart.
fn failed(id: &str, what: &str, e: KafkaError) -> ConnectorError {
    if fenced(&e) {
        ConnectorError::ProducerFenced(format!(
            "transactional id '{id}' was taken over by another run of this sink (its producer is fenced): cannot {what}"
        ))
    } else {
        ConnectorError::Unavailable(format!("transactional id '{id}': cannot {what}: {e}"))
    }
}
