//! A counter whose state `count` is a `MapState<String, u64>`, where the
//! word-count counter keeps a `ValueState<u64>` of the same name: restoring
//! or swapping between the two must be refused with the state named.

use weir_sdk::{Context, Element, MapState, OpenContext, Operator, Result, export_operator};

struct CountAsMap {
    count: MapState<String, u64>,
}

impl Operator for CountAsMap {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(CountAsMap { count: ctx.map_state("count")? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let word = input.key_str().to_string();
        let n = self.count.get(&word)?.unwrap_or(0) + 1;
        self.count.put(&word, &n)?;
        ctx.emit(format!("{word} {n}"));
        Ok(())
    }
}

export_operator!(CountAsMap);
