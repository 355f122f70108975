//! What watches an operator subtask's input besides its module: the
//! recorder (`replay = { record = true }`), which writes each input, the
//! output it led to and the turn's end to the recording; and a shadow run
//! ([`super::shadow`]), which gets a copy of each input to run on the
//! shadow module beside the live one. Both are taps around the one
//! processing step of the operator loop: [`Taps::before`] sees the input
//! the step takes, [`Taps::capture`] each output, [`Taps::after`] the
//! step's end. Neither changes what the live module gets.

use super::recording::Recorder;
use super::shadow::{Input, Shadowing};
use crate::checkpoint::recording::{InputRef, RecordsRef};
use crate::record::{Batch, Records};

/// The subtask's taps.
#[derive(Default)]
pub struct Taps {
    /// Records its input for replay.
    pub recorder: Option<Recorder>,
    /// Its shadow run, if one was forked.
    pub shadow: Shadowing,
}

/// An input of one step, as the taps see it.
#[derive(Clone, Copy)]
pub enum Tapped<'a> {
    Batch(&'a Batch),
    Broadcast(&'a Batch),
    Watermark(i64),
}

impl Taps {
    /// Taps with `recorder`, and no shadow run until one is forked.
    pub fn new(recorder: Option<Recorder>) -> Self {
        Taps { recorder, shadow: Shadowing::default() }
    }

    /// Before the module takes `input`: it is recorded, and copied for the
    /// shadow if one runs (the copy goes to [`Taps::after`]).
    #[inline]
    pub fn before(&mut self, input: Tapped<'_>) -> Option<Input> {
        if let Some(r) = &mut self.recorder {
            match input {
                Tapped::Batch(b) => {
                    r.input(&InputRef::Batch { keyed: b.keyed, records: RecordsRef(&b.records) }, b.len())
                }
                Tapped::Broadcast(b) => r.input(&InputRef::Broadcast(RecordsRef(&b.records)), b.len()),
                Tapped::Watermark(w) => r.input(&InputRef::Watermark(w), 0),
            }
        }
        self.shadow.active().then(|| match input {
            Tapped::Batch(b) => Input::Batch(b.clone()),
            Tapped::Broadcast(b) => Input::Broadcast(b.clone()),
            Tapped::Watermark(w) => Input::Watermark(w),
        })
    }

    /// The module emitted `out` in this step.
    #[inline]
    pub fn capture(&mut self, out: &Records) {
        self.shadow.capture(out);
        if let Some(r) = &mut self.recorder {
            r.capture(out);
        }
    }

    /// The module is done with the step's input: the shadow takes its
    /// copy, the recording closes the turn.
    #[inline]
    pub fn after(&mut self, copy: Option<Input>) {
        if let Some(input) = copy {
            self.shadow.step(input);
        }
        self.recorded();
    }

    /// The input ended at `watermark` (the shadow ends with the live
    /// subtask, at [`Shadowing::end`]).
    pub fn input_ended(&mut self, watermark: i64) {
        if let Some(r) = &mut self.recorder {
            r.input(&InputRef::End(watermark), 0);
        }
    }

    /// Closes the recording's turn (output since the last one belongs to
    /// it).
    #[inline]
    pub fn recorded(&mut self) {
        if let Some(r) = &mut self.recorder {
            r.output();
        }
    }
}
