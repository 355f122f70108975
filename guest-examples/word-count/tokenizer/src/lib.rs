//! Word-count tokenizer: stateless. Splits each input line into words
//! (runs of letters, digits and apostrophes), lowercases them, and emits each
//! word keyed by itself so the counter downstream is partitioned by word.

use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct Tokenizer;

impl Operator for Tokenizer {
    fn open(_ctx: &mut OpenContext) -> Result<Self> {
        Ok(Tokenizer)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        for word in line
            .split(|c: char| !(c.is_alphanumeric() || c == '\''))
            .map(|w| w.trim_matches('\''))
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            ctx.emit_keyed(&word, &word);
        }
        Ok(())
    }
}

export_operator!(Tokenizer);
