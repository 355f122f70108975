//! Word-count counter, version 2: the same count per word as
//! `word-count/counter`, kept in a richer value (`Tally`, state version 2)
//! and emitted as `word=count`, keyed by the word. A savepoint or a swapped-out version 1
//! holds plain `u64` counts under the same state name; `migrate_value`
//! turns each into a `Tally` before this module sees it.

use serde::{Deserialize, Serialize};
use weir_sdk::{
    Context, Descriptor, Element, Error, OpenContext, Operator, Result, ValueState, convert_value, export_operator,
};

#[derive(Serialize, Deserialize)]
struct Tally {
    count: u64,
    /// The count came from version 1.
    migrated: bool,
}

struct Counter {
    tally: ValueState<Tally>,
}

impl Operator for Counter {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Counter { tally: ctx.value_state(Descriptor::new("count").version(2))? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let word = input.key.ok_or("counter needs a keyed input (partition = \"key\")")?;
        let mut t = self.tally.get()?.unwrap_or(Tally { count: 0, migrated: false });
        t.count += 1;
        self.tally.set(&t)?;
        // Keyed by the word, as version 1: a Kafka sink keeps a word's
        // updates in one partition, in order, across the swap.
        ctx.emit_with(Some(word), input.timestamp, |line| {
            line.extend_from_slice(word);
            line.extend_from_slice(format!("={}", t.count).as_bytes());
        });
        Ok(())
    }

    fn migrate_value(state: &str, from_version: u32, value: Vec<u8>) -> Result<Vec<u8>> {
        match (state, from_version) {
            ("count", 1) => convert_value(state, &value, |count: u64| Tally { count, migrated: true }),
            _ => Err(Error::msg(format!("state '{state}': no migration from version {from_version}"))),
        }
    }
}

export_operator!(Counter);
