//! Benchmark operator: performs one state or timer operation per record, so
//! `tests/benches/state_ops.rs` can measure what each costs through the
//! WASM boundary. Param `op`: `noop`, `value` (get and set a `u64`),
//! `list-add`, `map-put`, `map-get`, `timer` (register an event-time timer at
//! the record's time; it fires as the watermark passes). Emits nothing.

use weir_sdk::{
    Context, Element, ListState, MapState, OpenContext, Operator, Result, Timer, ValueState, export_operator,
};

struct OpBench {
    op: String,
    value: ValueState<u64>,
    list: ListState<u64>,
    map: MapState<u32, u64>,
    fired: u64,
}

impl Operator for OpBench {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(OpBench {
            op: ctx.param("op").unwrap_or("noop").to_string(),
            value: ctx.value_state("value")?,
            list: ctx.list_state("list")?,
            map: ctx.map_state("map")?,
            fired: 0,
        })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self.op.as_str() {
            "noop" => {}
            "value" => {
                let n = self.value.get()?.unwrap_or(0);
                self.value.set(&(n + 1))?;
            }
            "list-add" => self.list.add(&1)?,
            "map-put" => self.map.put(&7, &1)?,
            "map-get" => {
                std::hint::black_box(self.map.get(&7)?);
            }
            "timer" => ctx.register_event_time_timer(input.timestamp.unwrap_or(0))?,
            other => return Err(format!("unknown op '{other}'").into()),
        }
        Ok(())
    }

    fn on_timer(&mut self, _ctx: &mut Context, _timer: Timer) -> Result<()> {
        self.fired += 1;
        Ok(())
    }
}

export_operator!(OpBench);
