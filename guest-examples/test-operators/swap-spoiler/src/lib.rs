//! A module that a swap must roll back from after it changed state. In
//! `open` it registers an operator list state `spoiled` and adds to it; its
//! `count` is version 2, so the host runs every stored count through
//! `migrate_value`, which hands back the count plus 1,000,000 for the first
//! few values and then fails. A rollback that kept any of it shows: in the
//! counts the old module emits on, and as a `spoiled` state in the next
//! savepoint.

use std::sync::atomic::{AtomicU32, Ordering};
use weir_sdk::{
    Context, Descriptor, Element, Error, OpenContext, Operator, OperatorListState, Redistribution, Result, ValueState,
    convert_value, export_operator,
};

/// Values migrated so far in this instance.
static MIGRATED: AtomicU32 = AtomicU32::new(0);
/// Values migrated before the migration fails.
const FAIL_AFTER: u32 = 3;

struct Spoiler {
    count: ValueState<u64>,
}

impl Operator for Spoiler {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let spoiled: OperatorListState<u64> = ctx.operator_list_state("spoiled", Redistribution::EvenSplit)?;
        spoiled.add(&1)?;
        Ok(Spoiler { count: ctx.value_state(Descriptor::new("count").version(2))? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let word = input.key_str();
        let n = self.count.get()?.unwrap_or(0) + 1;
        self.count.set(&n)?;
        ctx.emit(format!("{word}={n}"));
        Ok(())
    }

    fn migrate_value(state: &str, from_version: u32, value: Vec<u8>) -> Result<Vec<u8>> {
        if MIGRATED.fetch_add(1, Ordering::Relaxed) >= FAIL_AFTER {
            return Err(Error::msg("spoiler: failing part-way through the migration"));
        }
        match (state, from_version) {
            ("count", 1) => convert_value(state, &value, |count: u64| count + 1_000_000),
            _ => Err(Error::msg(format!("state '{state}': no migration from version {from_version}"))),
        }
    }
}

export_operator!(Spoiler);
