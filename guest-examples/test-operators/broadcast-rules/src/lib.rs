//! A test operator for broadcast input and broadcast state. Broadcast lines
//! are commands, `set NAME VALUE`, `del NAME` or `clear`, applied to the
//! `rules` broadcast map. Main-input lines are names: each is answered with
//! `NAME => VALUE` (or `NAME => none`) from the rules as they stand. At end of
//! input every subtask emits its whole map, so a test can see that every
//! replica is the same. With param `misuse = "write"` it writes broadcast
//! state from the main input, which the host refuses.

use weir_sdk::{BroadcastMapState, Context, Element, Error, OpenContext, Operator, Result, export_operator};

struct Rules {
    rules: BroadcastMapState<String, String>,
    misuse: bool,
    subtask: u32,
}

impl Operator for Rules {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Rules {
            rules: ctx.broadcast_map_state("rules")?,
            misuse: ctx.param("misuse") == Some("write"),
            subtask: ctx.info().subtask_index,
        })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let name = input.payload_str().trim().to_string();
        if self.misuse {
            self.rules.put(&name, &"from process".to_string())?;
        }
        let value = self.rules.get(&name)?.unwrap_or_else(|| "none".into());
        ctx.emit(format!("{name} => {value}"));
        Ok(())
    }

    fn process_broadcast(&mut self, _ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("set"), Some(name), Some(value)) => self.rules.put(&name.to_string(), &value.to_string()),
            (Some("del"), Some(name), None) => self.rules.remove(&name.to_string()),
            (Some("clear"), None, None) => self.rules.clear(),
            _ => Err(Error::msg(format!("bad rule command {line:?}"))),
        }
    }

    fn end_of_input(&mut self, ctx: &mut Context) -> Result<()> {
        let all: Vec<(String, String)> = self.rules.entries().collect::<Result<_>>()?;
        let text: Vec<String> = all.iter().map(|(k, v)| format!("{k}={v}")).collect();
        ctx.emit(format!("subtask {} rules: {}", self.subtask, text.join(",")));
        Ok(())
    }
}

export_operator!(Rules);
