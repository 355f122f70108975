//! Glue between the generated `handler` exports and an [`Operator`]; used by
//! [`crate::export_operator!`], not by operator code.

use crate::batch;
use crate::bindings::exports::weir::operator::handler::Timer as WitTimer;
use crate::bindings::weir::operator::types::{Element as WitElement, ElementBatch};
use crate::context::{Context, Element, OpenContext, Timer, flush_output};
use crate::error::Error;
use crate::packed;
use crate::{Operator, OperatorInfo};

fn not_open() -> String {
    "operator called before open".to_string()
}

fn finish(result: crate::Result<()>) -> Result<(), String> {
    flush_output();
    result.map_err(|e: Error| e.message().to_string())
}

#[doc(hidden)]
pub fn open<O: Operator>(slot: &mut Option<O>, info: OperatorInfo) -> Result<(), String> {
    // A panic traps the instance; first tell the host which element of the
    // batch was being processed, so its report names the record.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        batch::report_position();
        default_hook(info);
    }));
    let mut ctx = OpenContext { info };
    let result = O::open(&mut ctx).map(|op| *slot = Some(op));
    finish(result)
}

#[doc(hidden)]
pub fn process<O: Operator>(slot: &mut Option<O>, input: WitElement) -> Result<(), String> {
    let op = slot.as_mut().ok_or_else(not_open)?;
    let view = Element { payload: &input.payload, key: input.key.as_deref(), timestamp: input.timestamp };
    finish(op.process(&mut Context { _private: () }, view))
}

#[doc(hidden)]
pub fn process_batch<O: Operator>(slot: &mut Option<O>, inputs: ElementBatch) -> Result<(), String> {
    let op = slot.as_mut().ok_or_else(not_open)?;
    let mut ctx = Context { _private: () };
    batch::begin();
    let mut result = Ok(());
    for i in 0..inputs.index.len() / packed::ELEMENT_ENTRY {
        batch::set_index(i as u32);
        if let Err(e) = op.process(&mut ctx, Element::at(&inputs, i)) {
            // Let the host name the failing record.
            batch::report_position();
            result = Err(e);
            break;
        }
    }
    let written = batch::end(result.is_ok());
    finish(result.and(written))
}

#[doc(hidden)]
pub fn process_broadcast<O: Operator>(slot: &mut Option<O>, input: WitElement) -> Result<(), String> {
    let op = slot.as_mut().ok_or_else(not_open)?;
    let view = Element { payload: &input.payload, key: input.key.as_deref(), timestamp: input.timestamp };
    finish(op.process_broadcast(&mut Context { _private: () }, view))
}

#[doc(hidden)]
pub fn on_timer<O: Operator>(slot: &mut Option<O>, fired: WitTimer) -> Result<(), String> {
    let op = slot.as_mut().ok_or_else(not_open)?;
    let timer = Timer { time: fired.time, domain: fired.domain, key: fired.key };
    finish(op.on_timer(&mut Context { _private: () }, timer))
}

#[doc(hidden)]
pub fn end_of_input<O: Operator>(slot: &mut Option<O>) -> Result<(), String> {
    let op = slot.as_mut().ok_or_else(not_open)?;
    finish(op.end_of_input(&mut Context { _private: () }))
}

#[doc(hidden)]
pub fn migrate_value<O: Operator>(state: &str, from_version: u32, value: Vec<u8>) -> Result<Vec<u8>, String> {
    O::migrate_value(state, from_version, value).map_err(|e| e.message().to_string())
}
