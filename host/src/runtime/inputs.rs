//! The input side of a task: one channel per upstream subtask plus the
//! control channel. It merges the channels into one sequence of batches,
//! watermark advances (the minimum over channels, idle channels left out)
//! and aligned checkpoint barriers.
//!
//! Barrier alignment, as Flink's: in exactly-once mode a channel that
//! delivered barrier *n* is not read again until every channel delivered it,
//! so no record after the barrier is processed before the snapshot; in
//! at-least-once mode channels keep flowing and the barrier is reported when
//! the last one delivers it. A channel that ended counts as aligned.
//!
//! A barrier that rescales an upstream operator replaces, once aligned,
//! the channels from that operator's old subtasks by those from its new
//! ones: an old subtask's channel goes quiet (and then away) after the
//! barrier, and the new ones carry what follows it.

use super::message::{Barrier, Control, Message};
use super::task_id::TaskId;
use crate::checkpoint::protocol::CheckpointId;
use crate::record::Batch;
use crossbeam_channel::{Receiver, RecvError, Select, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the input side yields next.
pub enum Next {
    /// A batch from some upstream subtask; `broadcast` when it came over a
    /// broadcast edge.
    Batch {
        /// The records.
        batch: Batch,
        /// Whether the edge is `partition = "broadcast"`.
        broadcast: bool,
    },
    /// The minimum watermark over the input channels advanced to this.
    Watermark(i64),
    /// Every channel delivered this barrier: snapshot, then forward it.
    Barrier(Arc<Barrier>),
    /// A newer barrier arrived before `id` was aligned: `id` is abandoned.
    BarrierAborted(CheckpointId),
    /// The deadline passed with nothing to do.
    Timeout,
    /// Every upstream subtask sent end-of-input.
    Ended,
    /// An upstream task vanished without ending (it failed).
    Disconnected,
    /// The coordinator cancelled the job.
    Cancelled,
    /// Another message from the coordinator.
    Control(Control),
}

/// How barriers from several channels are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    /// Block channels that delivered the barrier until all did.
    ExactlyOnce,
    /// Never block; report the barrier when the last channel delivers it.
    AtLeastOnce,
}

struct Channel {
    rx: Receiver<Message>,
    broadcast: bool,
    /// The upstream node.
    from: Option<Arc<str>>,
    /// Its upstream subtask ended at a rescale's barrier, which it
    /// delivered: it is not read again.
    retired: bool,
    /// The latest watermark it delivered.
    watermark: i64,
    /// When it last delivered anything.
    last_seen: Instant,
    /// Silent for longer than the idle timeout.
    idle: bool,
    /// Delivered the barrier being aligned.
    barriered: bool,
}

impl Channel {
    fn new(rx: Receiver<Message>, broadcast: bool, from: Option<Arc<str>>) -> Self {
        Channel {
            rx,
            broadcast,
            from,
            retired: false,
            watermark: i64::MIN,
            last_seen: Instant::now(),
            idle: false,
            barriered: false,
        }
    }
}

/// The receiving side of a task.
pub struct Inputs {
    /// The subtask that reads (a rescale's new channels are found by it).
    owner: Option<TaskId>,
    channels: Vec<Channel>,
    idle_timeout: Option<Duration>,
    alignment: Alignment,
    /// The barrier being aligned.
    aligning: Option<Arc<Barrier>>,
    /// When the first channel delivered the barrier being aligned.
    aligning_since: Option<Instant>,
    /// How long the last completed alignment took.
    last_alignment: Duration,
    /// The minimum watermark, as last reported.
    watermark: i64,
    control: Receiver<Control>,
    /// A control message [`Inputs::cancel_requested`] took off the channel
    /// that was not a cancel: the next read returns it first.
    held_control: Option<Control>,
}

impl Inputs {
    /// Inputs over `receivers` (each marked whether broadcast); with
    /// `idle_timeout`, a channel that sends nothing for that long stops
    /// holding the watermark back.
    pub fn new(
        receivers: Vec<(Receiver<Message>, bool)>,
        control: Receiver<Control>,
        idle_timeout: Option<Duration>,
    ) -> Self {
        Inputs {
            owner: None,
            channels: receivers.into_iter().map(|(rx, broadcast)| Channel::new(rx, broadcast, None)).collect(),
            idle_timeout,
            alignment: Alignment::ExactlyOnce,
            aligning: None,
            aligning_since: None,
            last_alignment: Duration::ZERO,
            watermark: i64::MIN,
            control,
            held_control: None,
        }
    }

    /// The inputs of subtask `owner`, whose channels come from the nodes
    /// `from` (one per channel, in order).
    pub fn owned_by(mut self, owner: TaskId, from: Vec<Arc<str>>) -> Self {
        self.owner = Some(owner);
        for (c, from) in self.channels.iter_mut().zip(from) {
            c.from = Some(from);
        }
        self
    }

    /// Waits for a message on `rx`, answering the coordinator meanwhile:
    /// `Err` with the control message (or `Cancel` if the coordinator is
    /// gone) that came first.
    pub fn recv_or_control<T>(&self, rx: &Receiver<T>) -> Result<T, Control> {
        crossbeam_channel::select! {
            recv(rx) -> m => m.map_err(|_| Control::Cancel),
            recv(self.control) -> c => Err(c.unwrap_or(Control::Cancel)),
        }
    }

    /// Sets how barriers are aligned.
    pub fn with_alignment(mut self, alignment: Alignment) -> Self {
        self.alignment = alignment;
        self
    }

    /// The task's watermark: the minimum over its inputs.
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// How long the latest aligned barrier took: from the first of the
    /// inputs' barriers to the last.
    pub fn last_alignment(&self) -> Duration {
        self.last_alignment
    }

    /// Whether channel `i` may be read now.
    fn readable(&self, i: usize) -> bool {
        let c = &self.channels[i];
        !(c.retired || (self.alignment == Alignment::ExactlyOnce && c.barriered))
    }

    /// Reports the minimum watermark over the active channels if it
    /// advanced. When every channel is idle, the largest watermark any of
    /// them sent stands (as Flink's watermark valve does).
    fn advanced(&mut self) -> Option<Next> {
        let min = if self.channels.is_empty() {
            i64::MAX
        } else if self.channels.iter().all(|c| c.idle) {
            self.channels.iter().map(|c| c.watermark).max()?
        } else {
            self.channels.iter().filter(|c| !c.idle).map(|c| c.watermark).min()?
        };
        if min > self.watermark {
            self.watermark = min;
            Some(Next::Watermark(min))
        } else {
            None
        }
    }

    /// Completes the alignment if every channel has the barrier.
    fn aligned(&mut self) -> Option<Next> {
        if self.aligning.is_some() && self.channels.iter().all(|c| c.barriered) {
            for c in &mut self.channels {
                c.barriered = false;
            }
            self.last_alignment = self.aligning_since.take().map_or(Duration::ZERO, |t| t.elapsed());
            let barrier = self.aligning.take()?;
            self.rescale(&barrier);
            return Some(Next::Barrier(barrier));
        }
        None
    }

    /// At an aligned barrier that rescales an upstream operator: its old
    /// subtasks' channels go, its new subtasks' come.
    fn rescale(&mut self, barrier: &Barrier) {
        let Some(order) = &barrier.rescale else { return };
        let Some(new) = self.owner.as_ref().and_then(|o| order.receivers.get(o)) else { return };
        self.channels.retain(|c| c.from.as_ref() != Some(&order.uid));
        for (rx, broadcast) in new {
            self.channels.push(Channel::new(rx.clone(), *broadcast, Some(order.uid.clone())));
        }
    }

    /// Whether channel `i` delivered the barrier being aligned, which
    /// rescales the operator at either end: its old subtasks end at the
    /// barrier, and upstream subtasks send to the new ones after it, so the
    /// channel closes. (Seen in at-least-once mode only, where a channel
    /// that delivered the barrier is still read.)
    fn retiring(&self, i: usize) -> bool {
        let c = &self.channels[i];
        let Some(r) = self.aligning.as_ref().and_then(|b| b.rescale.as_ref()) else { return false };
        c.barriered && (c.from.as_ref() == Some(&r.uid) || self.owner.as_ref().is_some_and(|o| o.node == r.uid))
    }

    fn take(&mut self, i: usize, message: Result<Message, RecvError>) -> Option<Next> {
        let c = &mut self.channels[i];
        c.last_seen = Instant::now();
        c.idle = false;
        match message {
            Ok(Message::Data(batch)) => Some(Next::Batch { batch, broadcast: c.broadcast }),
            Ok(Message::Watermark(w)) => {
                c.watermark = c.watermark.max(w);
                self.advanced()
            }
            Ok(Message::Barrier(barrier)) => match self.aligning.as_ref().map(|b| b.id) {
                Some(current) if barrier.id < current => None, // a barrier of an abandoned checkpoint
                Some(current) if barrier.id > current => {
                    // The coordinator moved on: drop the old alignment.
                    for c in &mut self.channels {
                        c.barriered = false;
                    }
                    self.channels[i].barriered = true;
                    self.aligning = Some(barrier);
                    self.aligning_since = Some(Instant::now());
                    Some(Next::BarrierAborted(current))
                }
                _ => {
                    if self.aligning.is_none() {
                        self.aligning_since = Some(Instant::now());
                    }
                    self.aligning = Some(barrier);
                    self.channels[i].barriered = true;
                    self.aligned()
                }
            },
            Ok(Message::EndOfInput) => {
                self.channels.swap_remove(i);
                if self.channels.is_empty() {
                    return None;
                }
                self.aligned().or_else(|| self.advanced())
            }
            Err(_) if self.retiring(i) => {
                self.channels[i].retired = true;
                None
            }
            Err(_) => Some(Next::Disconnected),
        }
    }

    /// The control channel alone (for a task with no data inputs: a
    /// source).
    pub fn into_control(self) -> Receiver<Control> {
        self.control
    }

    /// Blocks until the coordinator sends something (after the end of
    /// input); a vanished coordinator reads as a cancel.
    pub fn next_control(&mut self) -> Control {
        self.held_control.take().unwrap_or_else(|| self.control.recv().unwrap_or(Control::Cancel))
    }

    /// Whether the coordinator cancelled the task (or is gone), without
    /// waiting: for a task busy before it reads its input (a sink
    /// restoring its output). Another message that came is kept for the
    /// next read; a cancel stays pending too.
    pub fn cancel_requested(&mut self) -> bool {
        if self.held_control.is_none() {
            self.held_control = match self.control.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => Some(Control::Cancel),
            };
        }
        matches!(self.held_control, Some(Control::Cancel))
    }

    /// Blocks until the next batch, watermark advance, aligned barrier or
    /// the end.
    pub fn next_batch(&mut self) -> Next {
        self.next_until(None)
    }

    /// As [`Inputs::next_batch`], but returns [`Next::Timeout`] at `deadline`.
    /// Broadcast input that is ready goes first, so broadcast state is as
    /// fresh as it can be when main input is processed.
    pub fn next_until(&mut self, deadline: Option<Instant>) -> Next {
        match self.held_control.take() {
            Some(Control::Cancel) => return Next::Cancelled,
            Some(c) => return Next::Control(c),
            None => {}
        }
        loop {
            if self.channels.is_empty() {
                return Next::Ended;
            }
            let mut ended_one = false;
            for i in 0..self.channels.len() {
                if self.channels[i].broadcast && self.readable(i) {
                    match self.channels[i].rx.try_recv() {
                        Ok(m) => match self.take(i, Ok(m)) {
                            Some(next) => return next,
                            None => {
                                ended_one = true;
                                break;
                            }
                        },
                        Err(TryRecvError::Empty) => {}
                        Err(TryRecvError::Disconnected) if self.retiring(i) => self.channels[i].retired = true,
                        Err(TryRecvError::Disconnected) => return Next::Disconnected,
                    }
                }
            }
            if ended_one {
                continue;
            }
            // Wake up for the caller's deadline, or when a channel would go idle.
            let idle_at =
                self.idle_timeout.and_then(|t| self.channels.iter().filter(|c| !c.idle).map(|c| c.last_seen + t).min());
            let wake = match (deadline, idle_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let received = {
                let mut sel = Select::new();
                let mut index = Vec::new();
                for (i, c) in self.channels.iter().enumerate() {
                    if self.readable(i) {
                        sel.recv(&c.rx);
                        index.push(i);
                    }
                }
                let control = sel.recv(&self.control);
                let op = match wake {
                    None => Some(sel.select()),
                    Some(d) => sel.select_deadline(d).ok(),
                };
                match op {
                    Some(op) if op.index() == control => {
                        return match op.recv(&self.control) {
                            Ok(Control::Cancel) | Err(_) => Next::Cancelled,
                            Ok(c) => Next::Control(c),
                        };
                    }
                    Some(op) => {
                        let i = index[op.index()];
                        Some((i, op.recv(&self.channels[i].rx)))
                    }
                    None => None,
                }
            };
            match received {
                Some((i, message)) => {
                    if let Some(next) = self.take(i, message) {
                        return next;
                    }
                }
                None => {
                    if let Some(t) = self.idle_timeout {
                        let now = Instant::now();
                        for c in &mut self.channels {
                            if now >= c.last_seen + t {
                                c.idle = true;
                            }
                        }
                        if let Some(next) = self.advanced() {
                            return next;
                        }
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Next::Timeout;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crossbeam_channel::{Sender, bounded, unbounded};

    fn inputs(n: usize, idle: Option<Duration>) -> (Vec<Sender<Message>>, Inputs, Sender<Control>) {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| unbounded()).unzip();
        let (ctl_tx, ctl_rx) = bounded(1);
        (txs, Inputs::new(rxs.into_iter().map(|r| (r, false)).collect(), ctl_rx, idle), ctl_tx)
    }

    fn data(tag: &str) -> Message {
        let mut b = Batch::with_capacity(1, false);
        b.push(Record { payload: tag.as_bytes(), key: None, timestamp: None });
        Message::Data(b)
    }

    fn tag(next: Next) -> String {
        match next {
            Next::Batch { batch, .. } => String::from_utf8(batch.get(0).payload.to_vec()).unwrap(),
            Next::Barrier(b) => format!("barrier {}", b.id),
            Next::BarrierAborted(id) => format!("aborted {id}"),
            Next::Watermark(w) => format!("watermark {w}"),
            Next::Ended => "ended".into(),
            _ => "other".into(),
        }
    }

    #[test]
    fn the_watermark_is_the_minimum_over_inputs() {
        let (tx, mut inputs, _ctl) = inputs(2, None);
        tx[0].send(Message::Watermark(100)).unwrap();
        tx[1].send(Message::Watermark(40)).unwrap();
        // Whichever arrives first, the minimum is reported only once both spoke.
        assert_eq!(tag(inputs.next_batch()), "watermark 40");
        tx[1].send(Message::Watermark(150)).unwrap();
        assert_eq!(tag(inputs.next_batch()), "watermark 100", "b passed a: a is the minimum");
        tx[0].send(Message::EndOfInput).unwrap();
        assert_eq!(tag(inputs.next_batch()), "watermark 150", "an ended input stops counting");
    }

    #[test]
    fn an_idle_input_stops_holding_the_watermark_back() {
        let started = Instant::now();
        let (tx, mut inputs, _ctl) = inputs(2, Some(Duration::from_millis(50)));
        tx[0].send(Message::Watermark(100)).unwrap();
        assert_eq!(tag(inputs.next_until(Some(Instant::now() + Duration::from_secs(5)))), "watermark 100");
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn without_an_idle_timeout_a_silent_input_holds_the_watermark() {
        let (tx, mut inputs, _ctl) = inputs(2, None);
        tx[0].send(Message::Watermark(100)).unwrap();
        assert!(matches!(inputs.next_until(Some(Instant::now() + Duration::from_millis(100))), Next::Timeout));
    }

    #[test]
    fn exactly_once_alignment_holds_back_records_after_the_barrier() {
        let (tx, mut inputs, _ctl) = inputs(2, None);
        tx[0].send(Message::Barrier(Barrier::checkpoint(1))).unwrap();
        tx[0].send(data("a-after")).unwrap();
        // Channel 0 is blocked once its barrier is in: its later record must
        // wait for channel 1's barrier, whatever order the channels are read.
        let mut seen = Vec::new();
        tx[1].send(data("b-before")).unwrap();
        seen.push(tag(inputs.next_batch()));
        tx[1].send(Message::Barrier(Barrier::checkpoint(1))).unwrap();
        seen.push(tag(inputs.next_batch()));
        seen.push(tag(inputs.next_batch()));
        assert_eq!(seen, ["b-before", "barrier 1", "a-after"]);
    }

    #[test]
    fn at_least_once_lets_records_overtake_and_reports_the_last_barrier() {
        let (tx, inputs, _ctl) = inputs(2, None);
        let mut inputs = inputs.with_alignment(Alignment::AtLeastOnce);
        tx[0].send(Message::Barrier(Barrier::checkpoint(1))).unwrap();
        tx[0].send(data("a-after")).unwrap();
        assert_eq!(tag(inputs.next_batch()), "a-after", "not blocked");
        tx[1].send(Message::Barrier(Barrier::checkpoint(1))).unwrap();
        assert_eq!(tag(inputs.next_batch()), "barrier 1");
    }

    #[test]
    fn an_ended_channel_counts_as_aligned_and_newer_barriers_abort_older() {
        let (tx, mut inputs, _ctl) = inputs(3, None);
        tx[0].send(Message::Barrier(Barrier::checkpoint(1))).unwrap();
        assert!(matches!(inputs.next_until(Some(Instant::now() + Duration::from_millis(50))), Next::Timeout));
        tx[1].send(Message::Barrier(Barrier::checkpoint(2))).unwrap();
        assert_eq!(tag(inputs.next_batch()), "aborted 1");
        tx[0].send(Message::Barrier(Barrier::checkpoint(2))).unwrap();
        tx[2].send(Message::EndOfInput).unwrap();
        assert_eq!(tag(inputs.next_batch()), "barrier 2");
    }

    #[test]
    fn a_finished_inputs_records_come_before_a_barrier_it_never_sends() {
        // A source that finished before its barrier: its channel's last
        // records, then its end, count before the barrier of the others.
        let (tx, mut inputs, _ctl) = inputs(2, None);
        tx[1].send(Message::Barrier(Barrier::checkpoint(4))).unwrap();
        tx[1].send(data("b-after")).unwrap();
        tx[0].send(data("a-last")).unwrap();
        tx[0].send(Message::Watermark(i64::MAX)).unwrap();
        tx[0].send(Message::EndOfInput).unwrap();
        assert_eq!(tag(inputs.next_batch()), "a-last");
        assert_eq!(tag(inputs.next_batch()), "barrier 4", "aligned on the input left, once the other ended");
        assert_eq!(tag(inputs.next_batch()), "b-after");
        // Later barriers align on the remaining input alone.
        tx[1].send(Message::Barrier(Barrier::checkpoint(5))).unwrap();
        assert_eq!(tag(inputs.next_batch()), "barrier 5");
    }

    #[test]
    fn an_aligned_rescale_barrier_replaces_the_old_subtasks_channels_by_the_new_ones() {
        use crate::runtime::message::{BarrierKind, RescaleOrder};
        let owner = TaskId { node: "sink".into(), subtask: 0 };
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..3).map(|_| unbounded()).unzip();
        let (_ctl_tx, ctl_rx) = bounded(1);
        // Channel 0 from "other", channels 1 and 2 from the rescaled "op".
        let from = vec!["other".into(), "op".into(), "op".into()];
        let mut inputs =
            Inputs::new(rxs.into_iter().map(|r| (r, false)).collect(), ctl_rx, None).owned_by(owner.clone(), from);
        let (new_tx, new_rx) = unbounded();
        let order = RescaleOrder {
            uid: "op".into(),
            from: 2,
            parallelism: 1,
            senders: Default::default(),
            receivers: [(owner, vec![(new_rx, false)])].into_iter().collect(),
            handover: Vec::new(),
            taken: crossbeam_channel::bounded(0).1,
        };
        let barrier =
            Arc::new(Barrier { id: 9, kind: BarrierKind::Checkpoint, rescale: Some(Arc::new(order)), shadow: None });
        let mut txs = txs.into_iter();
        let (other, old_a, old_b) = (txs.next().unwrap(), txs.next().unwrap(), txs.next().unwrap());
        old_a.send(Message::Barrier(barrier.clone())).unwrap();
        drop(old_a); // the old subtask ends right after its barrier
        other.send(Message::Barrier(barrier.clone())).unwrap();
        old_b.send(data("late old")).unwrap();
        old_b.send(Message::Barrier(barrier)).unwrap();
        drop(old_b);
        new_tx.send(data("new")).unwrap();
        assert_eq!(tag(inputs.next_batch()), "late old");
        assert_eq!(tag(inputs.next_batch()), "barrier 9");
        // From here the new channel is read and the old ones are gone.
        assert_eq!(tag(inputs.next_batch()), "new");
        other.send(data("other")).unwrap();
        assert_eq!(tag(inputs.next_batch()), "other");
        new_tx.send(Message::EndOfInput).unwrap();
        other.send(Message::EndOfInput).unwrap();
        assert_eq!(tag(inputs.next_batch()), "ended");
    }

    #[test]
    fn in_at_least_once_mode_an_old_subtask_outlives_its_inputs_closing_after_its_rescale_barrier() {
        use crate::runtime::message::{BarrierKind, RescaleOrder};
        let owner = TaskId { node: "op".into(), subtask: 0 };
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| unbounded()).unzip();
        let (_ctl_tx, ctl_rx) = bounded(1);
        let mut inputs = Inputs::new(rxs.into_iter().map(|r| (r, false)).collect(), ctl_rx, None)
            .with_alignment(Alignment::AtLeastOnce)
            .owned_by(owner, vec!["src".into(), "src".into()]);
        let order = RescaleOrder {
            uid: "op".into(),
            from: 1,
            parallelism: 2,
            senders: Default::default(),
            receivers: Default::default(),
            handover: Vec::new(),
            taken: crossbeam_channel::bounded(0).1,
        };
        let barrier =
            Arc::new(Barrier { id: 3, kind: BarrierKind::Checkpoint, rescale: Some(Arc::new(order)), shadow: None });
        let mut txs = txs.into_iter();
        let (a, b) = (txs.next().unwrap(), txs.next().unwrap());
        // Upstream subtask a switches to the new subtasks after the barrier:
        // its channel here closes while b's barrier is still to come.
        a.send(Message::Barrier(barrier.clone())).unwrap();
        drop(a);
        b.send(data("before")).unwrap();
        assert_eq!(tag(inputs.next_batch()), "before");
        b.send(Message::Barrier(barrier)).unwrap();
        assert_eq!(tag(inputs.next_batch()), "barrier 3");
    }
}
