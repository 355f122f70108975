//! The [`Operator`] trait that user code implements.

use crate::context::Element;
use crate::context::{Context, OpenContext, Timer};
use crate::error::{Error, Result};

/// A stream operator. One instance runs per parallel subtask; the host calls
/// it from one thread, never concurrently.
pub trait Operator: Sized + 'static {
    /// Creates the operator and registers its state. Called once per subtask
    /// before anything else.
    fn open(ctx: &mut OpenContext) -> Result<Self>;

    /// Processes one element of the main input; its key is the current key.
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()>;

    /// Processes one element of the broadcast input (the only place broadcast
    /// state can be written). The default fails: the operator has no
    /// broadcast input.
    fn process_broadcast(&mut self, _ctx: &mut Context, _input: Element<'_>) -> Result<()> {
        Err(Error::msg("this operator does not take a broadcast input"))
    }

    /// A timer fired; its key is the current key. The default ignores it.
    fn on_timer(&mut self, _ctx: &mut Context, _timer: Timer) -> Result<()> {
        Ok(())
    }

    /// Every input ended; emit final results here. The default does nothing.
    fn end_of_input(&mut self, _ctx: &mut Context) -> Result<()> {
        Ok(())
    }

    /// Converts a value of state `state` written with value-format version
    /// `from_version` to the version this operator declares. The default
    /// refuses, which aborts the restore or swap and keeps the old state.
    fn migrate_value(state: &str, from_version: u32, _value: Vec<u8>) -> Result<Vec<u8>> {
        Err(Error::msg(format!(
            "state '{state}': no migration from version {from_version} (implement Operator::migrate_value)"
        )))
    }
}
