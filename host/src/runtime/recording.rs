//! Recording a subtask's input for `host replay` (an operator with
//! `replay = { record = true }`), the live side. The subtask holds its
//! processing time at one reading per turn of its loop ([`Pinned`]), so
//! that every guest call of the turn, and state TTL, see that time; the
//! recorder writes the turn as a step (the time, the input, what the module
//! emitted) into the segment since the last barrier
//! ([`crate::checkpoint::recording`] has the format). At each barrier the
//! segment is cut and handed to the upload of the subtask's part of that
//! checkpoint, which stores it before acknowledging; at the end of input the
//! last segment is stored by the subtask itself.
//!
//! Recording starts at the first barrier, or at once from the checkpoint a
//! subtask was restored from: a replay starts from a checkpoint's state.
//! A segment that outgrows `replay.max_segment` drops its steps and is
//! stored as cut short, so memory stays bounded.

use crate::checkpoint::recording::{FORMAT_VERSION, InputRef, SegmentFile, SegmentHeader, append_input, append_output};
use crate::clock::{Pinned, now_ms};
use crate::record::Records;

/// The segment being recorded.
struct Open {
    start: u64,
    resumed: bool,
    watermark: i64,
    started_at_ms: i64,
    steps: Vec<u8>,
    count: u64,
    records_in: u64,
    cut_short: bool,
}

/// One subtask's recorder.
pub struct Recorder {
    /// The fields every segment of this subtask shares.
    template: SegmentHeader,
    max_bytes: u64,
    pinned: Pinned,
    now: i64,
    open: Option<Open>,
    /// A step's input was written and its output is not yet.
    in_step: bool,
    /// What the module emitted since the last step.
    output: Records,
    /// The last segment's size: the next one's buffer starts there.
    last_len: usize,
}

impl Recorder {
    /// A recorder for the subtask `template` describes (its `start`, `end`,
    /// counts and time are filled per segment), holding processing time in
    /// `pinned`.
    pub fn new(template: SegmentHeader, max_bytes: u64, pinned: Pinned) -> Self {
        Recorder {
            template,
            max_bytes,
            pinned,
            now: 0,
            open: None,
            in_step: false,
            output: Records::default(),
            last_len: 0,
        }
    }

    /// Takes processing time for this turn of the loop and holds it.
    pub fn tick(&mut self) -> i64 {
        self.now = now_ms();
        self.pinned.set(self.now);
        self.now
    }

    /// Starts a segment at barrier `start` (the state the subtask has now;
    /// `resumed`: restored from that checkpoint), the guest seeing
    /// `watermark`.
    pub fn start(&mut self, start: u64, resumed: bool, watermark: i64) {
        self.output.clear();
        self.in_step = false;
        self.open = Some(Open {
            start,
            resumed,
            watermark,
            started_at_ms: self.now,
            // Sized from the last one: growing a large buffer by doubling
            // copies it on the subtask's thread.
            steps: Vec::with_capacity(self.last_len + self.last_len / 8),
            count: 0,
            records_in: 0,
            cut_short: false,
        });
    }

    /// A module was swapped in: its segments say so.
    pub fn swapped(&mut self) {
        self.template.swapped = true;
    }

    /// The module emitted `out`.
    #[inline]
    pub fn capture(&mut self, out: &Records) {
        if self.open.is_some() {
            self.output.extend(out);
        }
    }

    /// The turn's input, before the module processes it (`records`: how
    /// many records it has).
    pub fn input(&mut self, input: &InputRef<'_>, records: usize) {
        let Some(open) = self.open.as_mut().filter(|o| !o.cut_short) else { return };
        append_input(&mut open.steps, self.now, input);
        open.records_in += records as u64;
        self.in_step = true;
    }

    /// The module is done with the turn's input: its output ends the step.
    pub fn output(&mut self) {
        let Some(open) = self.open.as_mut() else { return };
        if std::mem::take(&mut self.in_step) {
            append_output(&mut open.steps, &self.output);
            open.count += 1;
            if open.steps.len() as u64 > self.max_bytes {
                open.cut_short = true;
                open.steps = Vec::new();
                tracing::warn!(
                    operator = %self.template.operator,
                    subtask = self.template.subtask,
                    from = open.start,
                    max_bytes = self.max_bytes,
                    "the input since the barrier outgrew replay.max_segment: this stretch is not recorded, and a replay stops at it"
                );
            }
        }
        self.output.clear();
    }

    /// A turn without input in which processing-time timers fired.
    pub fn timers(&mut self) {
        self.input(&InputRef::Timers, 0);
        self.output();
    }

    /// Ends the segment at barrier `barrier` and starts the next one there,
    /// the guest seeing `watermark`.
    pub fn cut(&mut self, barrier: u64, watermark: i64) -> Option<SegmentFile> {
        let finished = self.finish(Some(barrier));
        self.start(barrier, false, watermark);
        finished
    }

    /// Ends the last segment at the end of input.
    pub fn end(&mut self) -> Option<SegmentFile> {
        self.finish(None)
    }

    fn finish(&mut self, end: Option<u64>) -> Option<SegmentFile> {
        let open = self.open.take()?;
        self.last_len = open.steps.len().min(self.max_bytes as usize);
        let header = SegmentHeader {
            version: FORMAT_VERSION,
            start: open.start,
            resumed: open.resumed,
            watermark: open.watermark,
            end,
            started_at_ms: open.started_at_ms,
            steps: if open.cut_short { 0 } else { open.count },
            records_in: open.records_in,
            cut_short: open.cut_short,
            ..self.template.clone()
        };
        Some(SegmentFile { header, steps: open.steps })
    }
}
