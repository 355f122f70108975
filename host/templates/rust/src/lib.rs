//! {{name}}: a Weir operator. Counts the events of each key (job.toml keys
//! the input by its `user` field) in value state, and emits `<key> <count>`
//! on every event, keyed by the key.

use weir_sdk::{Context, Element, OpenContext, Operator, Result, ValueState, export_operator};

struct Counter {
    count: ValueState<u64>,
}

impl Operator for Counter {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Counter { count: ctx.value_state("count")? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let key = input.key.ok_or("needs a keyed input (partition = \"key\")")?;
        let n = self.count.get()?.unwrap_or(0) + 1;
        self.count.set(&n)?;
        ctx.emit_keyed(key, format!("{} {n}", input.key_str()));
        Ok(())
    }
}

export_operator!(Counter);
