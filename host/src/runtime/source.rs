//! Sources: the [`Source`] trait a source connector implements, and the
//! [`SourceContext`] it emits through. The context does what every source
//! shares: batching, pacing, watermarks, progress, cancellation, and the
//! checkpoint protocol (a barrier at a trigger, the stop-with-savepoint
//! handshake), so a connector only reads its input and keeps its position.

use super::error::{ConnectorError, TaskError};
use super::events::{AckTiming, Counters, Reporter, TaskEvent, TaskSnapshot};
use super::message::{Barrier, Control, SavepointEnd};
use super::router::{RouteError, Router};
use crate::checkpoint::metadata::{PartitionOffsets, SourcePosition};
use crate::record::Record;
use crossbeam_channel::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source connector, configured from its `[[sources]]` entry. One value
/// serves every run (attempt) of the job; each run calls [`Source::run`].
pub trait Source: Send + Sync + 'static {
    /// For a source that assigns event time: how far (ms) its watermarks
    /// trail the largest timestamp seen. `None`: no event time.
    fn watermark_lag_ms(&self) -> Option<i64>;

    /// At most this many records per second, if limited.
    fn records_per_second(&self) -> Option<f64> {
        None
    }

    /// Reads from [`SourceContext::position`] to the end of the input,
    /// emitting every record through `ctx` and advancing the position
    /// before each. Returns when the input is exhausted; passes on the
    /// [`Halt`] of an `emit` at once.
    fn run(&self, ctx: &mut SourceContext) -> Result<(), Halt>;
}

/// Why a source stops before its input ends.
#[derive(Debug)]
pub enum Halt {
    /// It stopped with a savepoint: not a failure.
    Stopped,
    /// It failed, or was cancelled.
    Failed(TaskError),
}

impl From<TaskError> for Halt {
    fn from(e: TaskError) -> Self {
        Halt::Failed(e)
    }
}

/// Runs `source` in `ctx` to its end (or its stop with a savepoint).
pub fn run_source(source: &dyn Source, mut ctx: SourceContext) -> Result<Counters, TaskError> {
    if ctx.finished_before {
        // Restored from a checkpoint taken after it had finished: it reads
        // nothing again, and only ends its stream.
        return ctx.finish();
    }
    match source.run(&mut ctx) {
        Ok(()) => ctx.finish(),
        Err(Halt::Stopped) => Ok(ctx.counters),
        Err(Halt::Failed(e)) => Err(e),
    }
}

/// A paced source whose records are due closer together than this sends
/// them in bursts this long: a wake-up from sleep costs more than the gap
/// at a million records per second, and the sleeping source would take the
/// CPU the pipeline needs.
const PACE_BURST: Duration = Duration::from_micros(50);

/// Waits shorter than this sleep rather than wait on the control channel.
const SHORT_WAIT: Duration = Duration::from_millis(2);

/// A source slower than `batch_size` records per this long still looks at
/// the coordinator's messages, emits its watermark and reports progress
/// this often (Flink's `pipeline.auto-watermark-interval` default).
const PERIODIC: Duration = Duration::from_millis(200);

/// What every source task shares: where to send, how to report, when to stop.
pub struct SourceContext {
    id: Arc<str>,
    router: Router,
    reporter: Reporter,
    control: Receiver<Control>,
    /// Records per batch (how often control messages are checked).
    batch_size: usize,
    counters: Counters,
    /// For sources with event time: how far watermarks trail the largest
    /// timestamp seen.
    watermark_lag: Option<i64>,
    max_timestamp: i64,
    watermark: i64,
    /// With a rate limit: when the stream started (and the wall clock then,
    /// in microseconds since the epoch), and the gap per record.
    pace: Option<(Instant, i64, Duration)>,
    /// The longest a record waits in a partly filled batch.
    max_batch_delay: Duration,
    /// When the periodic work (messages, watermark, progress) is due at
    /// the latest.
    next_periodic: Instant,
    /// Where the source is: what a checkpoint records, so a restore
    /// resumes at the next record. Sources set it before each `emit`.
    pub position: u64,
    /// A partitioned source's position instead (topic, partition, next
    /// offset), set before each `emit` likewise: `Some` makes it what
    /// checkpoints record.
    pub partitions: Option<PartitionOffsets>,
    /// This subtask's index and the source's parallelism.
    subtask: (u32, u32),
    /// Set by a source that tracks event time itself (per partition):
    /// `emit` then leaves the largest timestamp to it.
    own_event_time: bool,
    /// `pipeline.idle_timeout`.
    idle_timeout: Option<Duration>,
    /// A partitioned source's positions at barriers not yet known to be
    /// complete, oldest first.
    acknowledged: Vec<(u64, PartitionOffsets)>,
    /// The position of the latest completed checkpoint, not yet taken.
    completed: Option<PartitionOffsets>,
    /// The checkpoint it restores from was taken after it had finished.
    finished_before: bool,
}

/// Where one source subtask sits in its source and its job.
#[derive(Debug, Clone)]
pub struct SubtaskInfo {
    /// Its index.
    pub subtask: u32,
    /// The source's parallelism.
    pub parallelism: u32,
    /// `pipeline.idle_timeout`: when a silent input stops holding event time.
    pub idle_timeout: Option<Duration>,
}

impl SourceContext {
    /// A context for subtask `info` of source `id`, starting at
    /// `position` (the start, or where a checkpoint left it), emitting
    /// watermarks `watermark_lag` behind the largest timestamp, at most
    /// `rate` records per second, sending batches of `batch_size` records
    /// or whatever is buffered after `max_batch_delay`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: Arc<str>,
        info: SubtaskInfo,
        router: Router,
        reporter: Reporter,
        control: Receiver<Control>,
        (batch_size, max_batch_delay): (usize, Duration),
        position: SourcePosition,
        watermark_lag: Option<i64>,
        rate: Option<f64>,
    ) -> Self {
        let (position, partitions) = match position {
            SourcePosition::Offset(n) => (n, None),
            SourcePosition::Partitions(p) => (0, Some(p)),
        };
        SourceContext {
            id,
            router,
            reporter,
            control,
            batch_size,
            counters: Counters::default(),
            watermark_lag,
            max_timestamp: i64::MIN,
            watermark: i64::MIN,
            pace: rate.map(|r| (Instant::now(), crate::clock::now_us(), Duration::from_secs_f64(1.0 / r))),
            max_batch_delay,
            next_periodic: Instant::now() + PERIODIC,
            position,
            partitions,
            subtask: (info.subtask, info.parallelism),
            own_event_time: false,
            idle_timeout: info.idle_timeout,
            acknowledged: Vec::new(),
            completed: None,
            finished_before: false,
        }
    }

    /// The checkpoint it restores from was taken after this source had
    /// finished: it reads nothing and only ends its stream.
    pub fn finished_before(mut self, finished: bool) -> Self {
        self.finished_before = finished;
        self
    }

    /// A partitioned source's position in the latest checkpoint that
    /// completed since the last call, if any (to commit to the Kafka
    /// group, for monitoring).
    pub fn take_completed(&mut self) -> Option<PartitionOffsets> {
        self.completed.take()
    }

    /// This subtask's index and the source's parallelism.
    pub fn subtask(&self) -> (u32, u32) {
        self.subtask
    }

    /// `pipeline.idle_timeout`.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// For a source that tracks event time itself (per partition, as
    /// Flink's Kafka source does), called before its first record: from
    /// now on only [`SourceContext::set_event_time`] moves the watermark,
    /// not the timestamps of the records it emits.
    pub fn own_event_time(&mut self) {
        self.own_event_time = true;
    }

    /// The watermark trails `t` from now on (see
    /// [`SourceContext::own_event_time`]).
    pub fn set_event_time(&mut self, t: i64) {
        self.own_event_time = true;
        self.max_timestamp = self.max_timestamp.max(t);
    }

    /// No record is ready: sends what waited its batch delay, handles the
    /// coordinator's messages, emits the watermark and reports progress,
    /// as `emit` does between records. A source that waits for input
    /// calls it at least every few tens of milliseconds, or its barriers
    /// wait for it.
    pub fn idle(&mut self) -> Result<(), Halt> {
        let now = Instant::now();
        self.flush_if_due(now)?;
        self.periodic(false)
    }

    /// What checkpoint `id`, whose barrier is sent now, records.
    fn snapshot_position(&mut self, id: u64) -> SourcePosition {
        match &self.partitions {
            Some(p) => {
                // A bound on what waits for completion: checkpoints that
                // never complete are forgotten, oldest first.
                if self.acknowledged.len() >= 16 {
                    self.acknowledged.remove(0);
                }
                self.acknowledged.push((id, p.clone()));
                SourcePosition::Partitions(p.clone())
            }
            None => SourcePosition::Offset(self.position),
        }
    }

    /// Sends one record; every `batch_size` records, and at least every
    /// [`PERIODIC`], handles the coordinator's messages, emits a watermark
    /// and reports progress. A paced source waits until the record is due.
    /// A record waits in a partly filled batch at most `max_batch_delay`
    /// (checked every 64 records, or every record if it is zero or the
    /// source waited for it, and while a paced source waits).
    #[inline]
    pub fn emit(&mut self, record: Record<'_>) -> Result<(), Halt> {
        if let Some(t) = record.timestamp
            && !self.own_event_time
        {
            self.max_timestamp = self.max_timestamp.max(t);
        }
        let (deferred, waited) = self.wait_for_pace()?;
        self.router.push(record).map_err(|e| self.route_error(e))?;
        self.counters.records_in += 1;
        for c in deferred {
            self.on_control(c)?;
        }
        let periodic = self.counters.records_in.is_multiple_of(self.batch_size as u64);
        let mut late = false;
        if self.counters.records_in.is_multiple_of(64) || self.max_batch_delay.is_zero() || waited {
            let now = Instant::now();
            self.flush_if_due(now)?;
            late = now >= self.next_periodic;
        }
        if periodic || late {
            self.periodic(periodic)?;
        }
        Ok(())
    }

    /// Handles the coordinator's messages, emits a watermark and reports
    /// progress; `full` after a full batch (whose records went out
    /// before the watermark), else the watermark waits for the records
    /// before it to be sent.
    fn periodic(&mut self, full: bool) -> Result<(), Halt> {
        self.next_periodic = Instant::now() + PERIODIC;
        self.poll_control()?;
        // Bounded out-of-orderness, as Flink's: the watermark trails the
        // largest timestamp by the lag, minus one.
        if let Some(lag) = self.watermark_lag {
            let w = self.max_timestamp.saturating_sub(lag).saturating_sub(1);
            if w > self.watermark {
                self.watermark = w;
                let sent = if full { self.router.watermark(w) } else { self.router.watermark_when_flushed(w) };
                sent.map_err(|e| self.route_error(e))?;
            }
        }
        self.counters.records_out = self.router.records_out();
        self.counters.backpressured_ns = self.router.backpressured_ns();
        self.counters.output_watermark = self.router.output_watermark();
        self.reporter.tick(self.counters);
        Ok(())
    }

    /// A failure of this source's connector.
    pub fn fail(&self, e: ConnectorError) -> Halt {
        Halt::Failed(TaskError::Source { id: self.id.clone(), cause: e })
    }

    /// When the next record is due, in microseconds since the epoch: for
    /// a paced source its place in the schedule (so a record held back by
    /// a slow pipeline still counts its wait), otherwise now.
    pub fn due_time_us(&self) -> i64 {
        match self.pace {
            Some((_, wall, gap)) => wall + (gap.as_secs_f64() * 1e6 * self.counters.records_in as f64) as i64,
            None => crate::clock::now_us(),
        }
    }

    /// Sends the partly filled batches if their oldest record has waited
    /// `max_batch_delay`.
    fn flush_if_due(&mut self, now: Instant) -> Result<(), Halt> {
        if let Some(since) = self.router.pending_since()
            && now.saturating_duration_since(since) >= self.max_batch_delay
        {
            self.router.flush().map_err(|e| self.route_error(e))?;
        }
        Ok(())
    }

    /// For a paced source, waits until the next record is due, on the
    /// control channel so it stays responsive, sending buffered records
    /// when their batch delay runs out meanwhile; returns the messages that
    /// arrived, to handle after the record (the position already counts
    /// it: its barrier must follow it), and whether it waited.
    fn wait_for_pace(&mut self) -> Result<(Vec<Control>, bool), Halt> {
        let mut deferred = Vec::new();
        let Some((start, _, gap)) = self.pace else { return Ok((deferred, false)) };
        let due = start + gap.mul_f64(self.counters.records_in as f64);
        // Records due closer together than a wake-up costs go in bursts:
        // sleep a little past this one's time, then send every record due
        // by then without sleeping.
        let until = if gap < PACE_BURST { due + PACE_BURST } else { due };
        let mut now = Instant::now();
        if now >= due {
            return Ok((deferred, false));
        }
        let waiting_since = now;
        loop {
            self.flush_if_due(now)?;
            if now >= until {
                self.counters.idle_ns += now.duration_since(waiting_since).as_nanos() as u64;
                return Ok((deferred, true));
            }
            let wake = self.router.pending_since().map_or(until, |since| (since + self.max_batch_delay).min(until));
            let wait = wake.saturating_duration_since(now);
            if wait < SHORT_WAIT {
                // A channel's timed receive spins and yields through a wait
                // this short, taking a core from the pipeline: sleep instead,
                // then look at the control channel.
                std::thread::sleep(wait);
                while let Ok(c) = self.control.try_recv() {
                    if matches!(c, Control::Cancel) {
                        return Err(TaskError::Cancelled.into());
                    }
                    deferred.push(c);
                }
            } else {
                match self.control.recv_deadline(wake) {
                    Ok(Control::Cancel) => return Err(TaskError::Cancelled.into()),
                    Ok(c) => deferred.push(c),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
                }
            }
            now = Instant::now();
        }
    }

    fn route_error(&self, e: RouteError) -> TaskError {
        e.into_task_error(&self.id)
    }

    /// Handles what the coordinator sent since the last look.
    fn poll_control(&mut self) -> Result<(), Halt> {
        while let Ok(c) = self.control.try_recv() {
            self.on_control(c)?;
        }
        Ok(())
    }

    fn on_control(&mut self, c: Control) -> Result<(), Halt> {
        match c {
            Control::Cancel => Err(TaskError::Cancelled.into()),
            Control::Trigger(barrier) => match barrier.stop() {
                Some(end) => self.stop(barrier, end),
                None => {
                    // The position and the barrier mark the same point:
                    // every record before it is covered by the checkpoint.
                    let started = Instant::now();
                    self.router.barrier(&barrier).map_err(|e| self.route_error(e))?;
                    let timing = AckTiming::since(started, Duration::ZERO);
                    let position = self.snapshot_position(barrier.id);
                    self.reporter.acknowledge(barrier.id, TaskSnapshot::Source(position), timing);
                    Ok(())
                }
            },
            Control::Complete { id, .. } => {
                // Completion subsumes: the newest position at or below it.
                if let Some(i) = self.acknowledged.iter().rposition(|(a, _)| *a <= id) {
                    self.completed = Some(self.acknowledged.swap_remove(i).1);
                    self.acknowledged.retain(|(a, _)| *a > id);
                }
                Ok(())
            }
            Control::Resume
            | Control::EndStopped
            | Control::SwapCommit(_)
            | Control::SwapAbort(_)
            | Control::RescaleAbandoned
            | Control::ShadowStop(_) => Ok(()),
        }
    }

    /// Stop with the savepoint of `barrier`: nothing follows the barrier
    /// until the coordinator says how the savepoint went. If it completed,
    /// the stream ends here (without the end-of-input watermark unless
    /// `Drain` sent it before the barrier); if it failed, the source
    /// carries on as if nothing happened, unless it drained, which cannot
    /// be undone.
    fn stop(&mut self, barrier: Arc<Barrier>, end: SavepointEnd) -> Result<(), Halt> {
        let drain = end == SavepointEnd::Drain;
        if drain {
            self.router.watermark(i64::MAX).map_err(|e| self.route_error(e))?;
        }
        let started = Instant::now();
        self.router.barrier(&barrier).map_err(|e| self.route_error(e))?;
        let timing = AckTiming::since(started, Duration::ZERO);
        let position = self.snapshot_position(barrier.id);
        self.reporter.acknowledge(barrier.id, TaskSnapshot::Source(position), timing);
        loop {
            match self.control.recv() {
                Ok(Control::Complete { id: c, .. }) if c >= barrier.id => {
                    self.router.end().map_err(|e| self.route_error(e))?;
                    self.counters.records_out = self.router.records_out();
                    self.counters.backpressured_ns = self.router.backpressured_ns();
                    return Err(Halt::Stopped);
                }
                Ok(Control::Resume) if !drain => return Ok(()),
                Ok(Control::Resume) => {
                    return Err(self.fail(ConnectorError::Inconsistent(format!(
                        "stop --drain with savepoint {} failed after event time was advanced to the end",
                        barrier.id
                    ))));
                }
                Ok(Control::Cancel) | Err(_) => return Err(TaskError::Cancelled.into()),
                Ok(_) => {}
            }
        }
    }

    /// Ends the stream: event time jumps to the end (so pending event-time
    /// timers downstream fire), then end of input.
    fn finish(mut self) -> Result<Counters, TaskError> {
        // A trigger that arrived with the last records still gets its barrier.
        match self.poll_control() {
            Ok(()) => {}
            Err(Halt::Stopped) => return Ok(self.counters),
            Err(Halt::Failed(e)) => return Err(e),
        }
        // Every record is routed: from here the coordinator acknowledges
        // checkpoints for it, with this position. Said before its stream
        // ends, so the coordinator hears of it before any task downstream
        // can end; a checkpoint it acknowledges so still waits downstream
        // for this end, which counts as the barrier there.
        let position = match self.partitions.take() {
            Some(p) => SourcePosition::Partitions(p),
            None => SourcePosition::Offset(self.position),
        };
        self.reporter.send(TaskEvent::SourceEnded { task: self.reporter.id().clone(), position });
        self.router.watermark(i64::MAX).map_err(|e| self.route_error(e))?;
        self.router.end().map_err(|e| self.route_error(e))?;
        self.counters.records_out = self.router.records_out();
        self.counters.backpressured_ns = self.router.backpressured_ns();
        Ok(self.counters)
    }
}
