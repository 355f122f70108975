//! An operator built against the operator contract 0.1.0.

wit_bindgen::generate!({ path: "wit", world: "outdated" });

use exports::weir::operator::handler::{Element, ElementBatch, Guest, OperatorInfo};

struct Outdated;

impl Guest for Outdated {
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

export!(Outdated);
