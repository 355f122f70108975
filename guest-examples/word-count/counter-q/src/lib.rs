//! The word-count counter (`word-count/counter`) with one known change, for
//! shadow runs: a word starting with `q` counts twice. Every other word's
//! state and output are the counter's, byte for byte; a shadow of the
//! counter running this module must differ on exactly the `q` words.

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
        let step = if word.first() == Some(&b'q') { 2 } else { 1 };
        let n = self.count.get()?.unwrap_or(0) + step;
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
