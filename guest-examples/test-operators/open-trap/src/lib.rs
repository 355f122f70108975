//! An operator that panics in `open`: swapping a running operator to it must
//! fail and leave the old module running.

use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct OpenTrap;

impl Operator for OpenTrap {
    fn open(_ctx: &mut OpenContext) -> Result<Self> {
        panic!("open-trap: this module always traps in open")
    }

    fn process(&mut self, _ctx: &mut Context, _input: Element<'_>) -> Result<()> {
        Ok(())
    }
}

export_operator!(OpenTrap);
