//! The output side of a task: partitions records over the subtasks of each
//! downstream node (forward, key, rebalance), buffers them into batches, and
//! sends with back-pressure (a full channel blocks the sender). It notes when
//! the oldest record still buffered arrived, so its task can send partly
//! filled batches before `pipeline.max_batch_delay` passes. A barrier that
//! rescales a downstream operator switches the edge to it onto the new
//! subtasks' channels right after the barrier.

use super::error::TaskError;
use super::message::{Barrier, Message};
use super::task_id::TaskId;
use crate::config::Partition;
use crate::record::{Batch, Record, Records};
use crate::state::key_group::{key_group_of_hash, key_hash, subtask_for_key_group};
use crossbeam_channel::{Sender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

/// Why routing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// A record without key reached a keyed edge.
    MissingKey {
        /// The downstream operator.
        to: Arc<str>,
    },
    /// The downstream task is gone (it failed or was cancelled).
    Disconnected,
}

impl RouteError {
    /// The task error of a routing failure in node `from`.
    pub fn into_task_error(self, from: &Arc<str>) -> TaskError {
        match self {
            RouteError::MissingKey { to } => TaskError::MissingKey { from: from.clone(), to },
            RouteError::Disconnected => TaskError::Disconnected(from.clone()),
        }
    }
}

/// One downstream node as seen from one upstream subtask.
pub struct Edge {
    to: Arc<str>,
    partition: Partition,
    /// For forward edges, the one matching subtask; otherwise one per
    /// downstream subtask, by index.
    senders: Vec<Sender<Message>>,
    buffers: Vec<Batch>,
    next: usize,
    max_parallelism: u32,
}

impl Edge {
    /// An edge to `to` over `senders`.
    pub fn new(
        to: Arc<str>,
        partition: Partition,
        senders: Vec<Sender<Message>>,
        max_parallelism: u32,
        batch_size: usize,
    ) -> Self {
        let keyed = partition == Partition::Key;
        let buffers = senders.iter().map(|_| Batch::with_capacity(batch_size, keyed)).collect();
        Edge { to, partition, senders, buffers, next: 0, max_parallelism }
    }
}

/// Everything one subtask sends.
pub struct Router {
    /// The subtask that sends (a rescale's new channels are found by it).
    owner: Option<TaskId>,
    edges: Vec<Edge>,
    batch_size: usize,
    sent: u64,
    /// When the oldest record not sent yet arrived (none: nothing buffered).
    pending_since: Option<Instant>,
    /// Nanoseconds spent blocked on full channels.
    blocked_ns: u64,
    /// The latest watermark sent.
    output_watermark: i64,
    /// A watermark to send after the records buffered now, at the next
    /// flush.
    deferred_watermark: Option<i64>,
}

impl Router {
    /// A router over `edges`.
    pub fn new(edges: Vec<Edge>, batch_size: usize) -> Self {
        Router {
            owner: None,
            edges,
            batch_size,
            sent: 0,
            pending_since: None,
            blocked_ns: 0,
            output_watermark: i64::MIN,
            deferred_watermark: None,
        }
    }

    /// The router of subtask `owner`.
    pub fn owned_by(mut self, owner: TaskId) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Records routed so far (counted once per record, whatever the fan-out).
    pub fn records_out(&self) -> u64 {
        self.sent
    }

    /// Nanoseconds spent so far blocked on a full downstream channel.
    pub fn backpressured_ns(&self) -> u64 {
        self.blocked_ns
    }

    /// The latest watermark sent; `i64::MIN` before the first.
    pub fn output_watermark(&self) -> i64 {
        self.output_watermark
    }

    /// When the oldest record still buffered arrived; `None` if every
    /// record was sent. Batches sent because they were full do not reset
    /// it, so it may be earlier than the oldest record left: a task then
    /// sends a little early, never late.
    pub fn pending_since(&self) -> Option<Instant> {
        self.pending_since
    }

    /// Routes one record (its bytes are copied into the outgoing batches).
    #[inline]
    pub fn push(&mut self, record: Record<'_>) -> Result<(), RouteError> {
        self.sent += 1;
        if self.pending_since.is_none() && !self.edges.is_empty() {
            self.pending_since = Some(Instant::now());
        }
        for i in 0..self.edges.len() {
            self.push_edge(i, record)?;
        }
        Ok(())
    }

    /// Routes every record of a flat batch, in order.
    pub fn push_all(&mut self, records: &Records) -> Result<(), RouteError> {
        for r in records.iter() {
            self.push(r)?;
        }
        Ok(())
    }

    #[inline]
    fn push_edge(&mut self, i: usize, record: Record<'_>) -> Result<(), RouteError> {
        let batch_size = self.batch_size;
        let blocked = &mut self.blocked_ns;
        let edge = &mut self.edges[i];
        let target = match edge.partition {
            Partition::Forward => 0,
            Partition::Rebalance => {
                let t = edge.next;
                edge.next = (t + 1) % edge.senders.len();
                t
            }
            Partition::Key => {
                let Some(key) = record.key else {
                    return Err(RouteError::MissingKey { to: edge.to.clone() });
                };
                let hash = key_hash(key);
                let kg = key_group_of_hash(hash, edge.max_parallelism);
                let t = subtask_for_key_group(kg, edge.max_parallelism, edge.senders.len() as u32) as usize;
                edge.buffers[t].hashes.push(hash);
                t
            }
            Partition::Broadcast => {
                for t in 1..edge.senders.len() {
                    edge.buffers[t].push(record);
                    if full(&edge.buffers[t], batch_size) {
                        send(edge, t, batch_size, blocked)?;
                    }
                }
                0
            }
        };
        edge.buffers[target].push(record);
        if full(&edge.buffers[target], batch_size) {
            send(edge, target, batch_size, blocked)?;
        }
        Ok(())
    }

    /// Sends every partly filled batch, then a deferred watermark.
    pub fn flush(&mut self) -> Result<(), RouteError> {
        self.pending_since = None;
        let batch_size = self.batch_size;
        for edge in &mut self.edges {
            for t in 0..edge.senders.len() {
                if !edge.buffers[t].is_empty() {
                    send(edge, t, batch_size, &mut self.blocked_ns)?;
                }
            }
        }
        match self.deferred_watermark.take() {
            Some(w) => self.send_watermark(w),
            None => Ok(()),
        }
    }

    /// Flushes, then sends watermark `w` to every downstream subtask (after
    /// the records it covers).
    pub fn watermark(&mut self, w: i64) -> Result<(), RouteError> {
        self.deferred_watermark = None;
        self.flush()?;
        self.send_watermark(w)
    }

    /// Sends watermark `w` after the records buffered now, when they are
    /// sent (within `max_batch_delay`), so that a periodic watermark does
    /// not send a batch early; at once if nothing is buffered.
    pub fn watermark_when_flushed(&mut self, w: i64) -> Result<(), RouteError> {
        if self.pending_since.is_some() {
            self.deferred_watermark = Some(w);
            Ok(())
        } else {
            self.send_watermark(w)
        }
    }

    fn send_watermark(&mut self, w: i64) -> Result<(), RouteError> {
        self.output_watermark = w;
        for edge in &self.edges {
            for s in &edge.senders {
                send_timed(s, Message::Watermark(w), &mut self.blocked_ns)?;
            }
        }
        Ok(())
    }

    /// Flushes, then sends `barrier` to every downstream subtask (after
    /// the records before it).
    pub fn barrier(&mut self, barrier: &Arc<Barrier>) -> Result<(), RouteError> {
        self.flush()?;
        for edge in &self.edges {
            for s in &edge.senders {
                send_timed(s, Message::Barrier(barrier.clone()), &mut self.blocked_ns)?;
            }
        }
        self.rescale(barrier)
    }

    /// After `barrier`, the edge to the operator it rescales goes to the
    /// new subtasks, which hear the latest watermark first.
    fn rescale(&mut self, barrier: &Barrier) -> Result<(), RouteError> {
        let Some(order) = &barrier.rescale else { return Ok(()) };
        let Some(senders) = self.owner.as_ref().and_then(|o| order.senders.get(o)) else { return Ok(()) };
        let batch_size = self.batch_size;
        for edge in self.edges.iter_mut().filter(|e| e.to == order.uid) {
            *edge = Edge::new(edge.to.clone(), edge.partition, senders.clone(), edge.max_parallelism, batch_size);
            if self.output_watermark > i64::MIN {
                for s in &edge.senders {
                    send_timed(s, Message::Watermark(self.output_watermark), &mut self.blocked_ns)?;
                }
            }
        }
        Ok(())
    }

    /// Flushes, then tells every downstream subtask that this one is done.
    pub fn end(&mut self) -> Result<(), RouteError> {
        self.flush()?;
        for edge in &self.edges {
            for s in &edge.senders {
                send_timed(s, Message::EndOfInput, &mut self.blocked_ns)?;
            }
        }
        Ok(())
    }
}

/// Bytes after which a batch is sent whatever its number of records: large
/// records make smaller batches, so a batch stays far from the 4 GiB its
/// `u32` offsets can address, and memory between tasks stays bounded.
const MAX_BATCH_BYTES: usize = 8 << 20;

/// Whether a batch is to be sent now.
#[inline]
fn full(batch: &Batch, batch_size: usize) -> bool {
    batch.len() >= batch_size || batch.records.data.len() >= MAX_BATCH_BYTES
}

fn send(edge: &mut Edge, t: usize, batch_size: usize, blocked_ns: &mut u64) -> Result<(), RouteError> {
    let keyed = edge.partition == Partition::Key;
    let batch = std::mem::replace(&mut edge.buffers[t], Batch::with_capacity(batch_size, keyed));
    send_timed(&edge.senders[t], Message::Data(batch), blocked_ns)
}

/// Sends `message`, adding the time a full channel blocked it to
/// `blocked_ns`: the clock is read only when the channel is full.
fn send_timed(to: &Sender<Message>, message: Message, blocked_ns: &mut u64) -> Result<(), RouteError> {
    match to.try_send(message) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(message)) => {
            let started = Instant::now();
            let sent = to.send(message).map_err(|_| RouteError::Disconnected);
            *blocked_ns += started.elapsed().as_nanos() as u64;
            sent
        }
        Err(TrySendError::Disconnected(_)) => Err(RouteError::Disconnected),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;

    fn rec(key: &str) -> Record<'_> {
        Record { payload: key.as_bytes(), key: Some(key.as_bytes()), timestamp: None }
    }

    fn drain(rx: &crossbeam_channel::Receiver<Message>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(m) = rx.try_recv() {
            if let Message::Data(b) = m {
                out.extend(b.iter().map(|r| String::from_utf8(r.payload.to_vec()).unwrap()));
            }
        }
        out
    }

    #[test]
    fn key_partition_sends_each_key_to_its_key_group_owner() {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..3).map(|_| bounded(100)).unzip();
        let mut r = Router::new(vec![Edge::new("op".into(), Partition::Key, txs, 128, 4)], 4);
        let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
        for k in &keys {
            r.push(rec(k)).unwrap();
        }
        r.end().unwrap();
        for (i, rx) in rxs.iter().enumerate() {
            for k in drain(rx) {
                let kg = key_group_of_hash(key_hash(k.as_bytes()), 128);
                assert_eq!(subtask_for_key_group(kg, 128, 3) as usize, i);
            }
        }
    }

    #[test]
    fn rebalance_spreads_evenly_and_keeps_order_per_channel() {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| bounded(100)).unzip();
        let mut r = Router::new(vec![Edge::new("op".into(), Partition::Rebalance, txs, 128, 3)], 3);
        for i in 0..10 {
            r.push(rec(&i.to_string())).unwrap();
        }
        r.end().unwrap();
        assert_eq!(drain(&rxs[0]), ["0", "2", "4", "6", "8"]);
        assert_eq!(drain(&rxs[1]), ["1", "3", "5", "7", "9"]);
    }

    #[test]
    fn a_record_without_key_on_a_keyed_edge_is_an_error() {
        let (tx, _rx) = bounded(1);
        let mut r = Router::new(vec![Edge::new("counter".into(), Partition::Key, vec![tx], 128, 4)], 4);
        let unkeyed = Record { payload: &[1], key: None, timestamp: None };
        assert_eq!(r.push(unkeyed), Err(RouteError::MissingKey { to: "counter".into() }));
    }

    #[test]
    fn a_rescale_barrier_moves_the_edge_to_the_new_subtasks_after_it() {
        use crate::runtime::message::RescaleOrder;
        let owner = TaskId { node: "src".into(), subtask: 0 };
        let (old_tx, old_rx): (Vec<_>, Vec<_>) = (0..2).map(|_| bounded(100)).unzip();
        let (new_tx, new_rx): (Vec<_>, Vec<_>) = (0..3).map(|_| bounded(100)).unzip();
        let mut r =
            Router::new(vec![Edge::new("op".into(), Partition::Key, old_tx, 128, 1)], 1).owned_by(owner.clone());
        r.watermark(7).unwrap();
        r.push(rec("before")).unwrap();
        let order = RescaleOrder {
            uid: "op".into(),
            from: 2,
            parallelism: 3,
            senders: [(owner, new_tx)].into_iter().collect(),
            receivers: Default::default(),
            handover: Vec::new(),
            taken: crossbeam_channel::bounded(0).1,
        };
        let barrier = Arc::new(Barrier {
            id: 4,
            kind: super::super::message::BarrierKind::Checkpoint,
            rescale: Some(Arc::new(order)),
            shadow: None,
        });
        r.barrier(&barrier).unwrap();
        let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
        for k in &keys {
            r.push(rec(k)).unwrap();
        }
        r.flush().unwrap();
        // The old subtasks got the record before and the barrier, nothing after.
        let old: Vec<Vec<String>> = old_rx
            .iter()
            .map(|rx| {
                let mut seen = Vec::new();
                while let Ok(m) = rx.try_recv() {
                    seen.push(match m {
                        Message::Data(b) => b
                            .iter()
                            .map(|r| String::from_utf8_lossy(r.payload).into_owned())
                            .collect::<Vec<_>>()
                            .join(","),
                        Message::Barrier(b) => format!("barrier {}", b.id),
                        Message::Watermark(w) => format!("watermark {w}"),
                        Message::EndOfInput => "end".into(),
                    });
                }
                seen
            })
            .collect();
        assert!(old.iter().all(|seen| seen.last().map(String::as_str) == Some("barrier 4")), "{old:?}");
        assert_eq!(old.concat().iter().filter(|s| s.as_str() == "before").count(), 1);
        // The new ones: the watermark first, then each key at its owner of 3.
        let mut total = 0;
        for (i, rx) in new_rx.iter().enumerate() {
            assert!(matches!(rx.try_recv(), Ok(Message::Watermark(7))));
            for k in drain(rx) {
                let kg = key_group_of_hash(key_hash(k.as_bytes()), 128);
                assert_eq!(subtask_for_key_group(kg, 128, 3) as usize, i);
                total += 1;
            }
        }
        assert_eq!(total, keys.len());
    }
}
