//! An operator that lacks the `on-timer` and `migrate-value` exports.

wit_bindgen::generate!({ path: "wit", world: "incomplete" });

use exports::weir::operator::handler::{Element, ElementBatch, Guest, OperatorInfo};

struct Incomplete;

impl Guest for Incomplete {
    fn open(_info: OperatorInfo) -> Result<(), String> {
        Ok(())
    }
    fn process(_input: Element) -> Result<(), String> {
        Ok(())
    }
    fn process_batch(_inputs: ElementBatch) -> Result<(), String> {
        Ok(())
    }
    fn process_broadcast(_input: Element) -> Result<(), String> {
        Ok(())
    }
    fn end_of_input() -> Result<(), String> {
        Ok(())
    }
}

export!(Incomplete);
