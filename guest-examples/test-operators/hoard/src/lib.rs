//! A test operator that hoards host memory through its imports rather than
//! its own linear memory, so the host's budgets (`wasm.max_state_bytes`,
//! `wasm.max_state_write_bytes`, `wasm.max_timers`, `wasm.max_log_lines`,
//! `wasm.max_log_bytes`) can be tested with a real component
//! (`tests/all/guest_budgets.rs`). Params (from `job.toml`):
//! - `what`: what each record makes it hoard:
//!   - `list`: items appended to the record key's list state;
//!   - `map`: entries put into the record key's map state, each under a new
//!     user key;
//!   - `operator-list`: items appended to an operator list state;
//!   - `timers`: event-time timers for the record's key, each at a new time
//!     (far in the future, so none fires);
//!   - `log`: lines on stdout and stderr carrying a carriage return, an
//!     escape sequence, a backspace and Unicode bidirectional overrides and
//!     isolates;
//! - `per_record`: how many items, entries, timers or lines one record
//!   writes (default: without end, until the host stops the call);
//! - `item_bytes`: bytes of each list item, map value or operator list item
//!   (default 65536).
//!
//! It emits nothing; with the log it passes every record through.

use weir_sdk::{Context, Element, Error, ListState, MapState, OpenContext, Operator, OperatorListState, Result};
use weir_sdk::{Redistribution, export_operator};

enum What {
    List(ListState<Vec<u8>>),
    Map(MapState<u64, Vec<u8>>),
    OperatorList(OperatorListState<Vec<u8>>),
    Timers,
    Log,
}

struct Hoard {
    what: What,
    per_record: u64,
    item: Vec<u8>,
    /// Items written so far, over every call: each new one is distinct.
    written: u64,
}

impl Operator for Hoard {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let what = match ctx.param("what").unwrap_or("list") {
            "list" => What::List(ctx.list_state("hoard-list")?),
            "map" => What::Map(ctx.map_state("hoard-map")?),
            "operator-list" => What::OperatorList(ctx.operator_list_state("hoard-ops", Redistribution::EvenSplit)?),
            "timers" => What::Timers,
            "log" => What::Log,
            other => return Err(Error::msg(format!("hoard: unknown 'what' {other:?}"))),
        };
        let item_bytes: usize = ctx.param_or("item_bytes", 65536)?;
        Ok(Hoard { what, per_record: ctx.param_or("per_record", u64::MAX)?, item: vec![0x5a; item_bytes], written: 0 })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        for _ in 0..self.per_record {
            let n = self.written;
            self.written += 1;
            match &self.what {
                What::List(list) => list.add(&self.item)?,
                What::Map(map) => map.put(&n, &self.item)?,
                What::OperatorList(list) => list.add(&self.item)?,
                What::Timers => ctx.register_event_time_timer(i64::MAX / 2 + n as i64)?,
                What::Log => {
                    // A line that, written raw, would overwrite itself (\r),
                    // colour the terminal (ESC [), rub out (\x08) and
                    // display reversed (U+202E ... U+202C, U+2067 ... U+2069).
                    println!("hoard {n}\r\x1b[31mforged\x08 \u{202e}desrever\u{202c} \u{2067}isolate\u{2069}");
                    eprintln!("hoard {n} on stderr\r\x1b[2K\u{202e}");
                }
            }
        }
        if matches!(self.what, What::Log) {
            ctx.emit_element(&input);
        }
        Ok(())
    }
}

export_operator!(Hoard);
