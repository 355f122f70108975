//! Word-count counter: keyed by word, keeps a `ValueState<u64>` per word and
//! emits `<word> <count>` on every update. The last line for a word carries
//! its final count.

use weir_sdk::{Context, Element, OpenContext, Operator, Result, ValueState, export_operator};

struct Counter {
    count: ValueState<u64>,
}

impl Operator for Counter {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Counter { count: ctx.value_state("count")? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element) -> Result<()> {
        let n = self.count.get()?.unwrap_or(0) + 1;
        self.count.set(&n)?;
        let word = input.key.as_deref().ok_or("counter needs a keyed input (partition = \"key\")")?;
        let mut line = Vec::with_capacity(word.len() + 12);
        line.extend_from_slice(word);
        line.push(b' ');
        line.extend_from_slice(n.to_string().as_bytes());
        ctx.emit(line);
        Ok(())
    }
}

export_operator!(Counter);
