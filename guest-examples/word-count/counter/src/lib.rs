//! Word-count counter: keyed by word, keeps a `ValueState<u64>` per word and
//! emits `<word> <count>` on every update, keyed by the word (so a Kafka
//! sink puts a word's updates in one partition, in order) and with the
//! input's timestamp (so event time and latency measurements carry
//! through). The last line for a word carries its final count.

use weir_sdk::{Context, Element, OpenContext, Operator, Result, ValueState, export_operator};

struct Counter {
    count: ValueState<u64>,
}

impl Operator for Counter {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Counter { count: ctx.value_state("count")? })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let word = input.key.ok_or("counter needs a keyed input (partition = \"key\")")?;
        let n = self.count.get()?.unwrap_or(0) + 1;
        self.count.set(&n)?;
        // `word count`, written straight into the output buffer.
        ctx.emit_with(Some(word), input.timestamp, |line| {
            line.extend_from_slice(word);
            line.push(b' ');
            write_decimal(line, n);
        });
        Ok(())
    }
}

fn write_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

export_operator!(Counter);
