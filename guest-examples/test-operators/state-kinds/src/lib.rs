//! A test operator that exercises every keyed state kind and operator list
//! state through the SDK, end to end. Input: jsonl records keyed by user,
//! payload `{"user": "...", "amount": N}`. For each record it updates, for
//! the record's user:
//! - `amounts`, a `ListState<u64>` (every amount, read back page by page),
//! - `parity`, a `MapState<String, u64>` (how many even and odd amounts),
//! - `total`, a `ReducingState<u64>` (sum),
//! - `mean`, an `AggregatingState` (running mean),
//!
//! and per subtask `seen`, an `OperatorListState<u64>` (records seen), and
//! emits one line with all of them. At end of input each subtask emits its
//! `seen` count.
//!
//! Param `misuse` makes it misuse state on purpose: `kind-mismatch`
//! (re-registers `total` as a value state), `late-register` (registers a state
//! in `process`), `no-key` (reads keyed state in `end-of-input`),
//! `timer-no-key` (registers a timer in `end-of-input`).

use weir_sdk::{
    AggregateFunction, AggregatingState, Context, Element, Error, ListState, MapState, OpenContext, Operator,
    OperatorListState, Redistribution, ReducingState, Result, ValueState, export_operator,
};

struct Mean;

impl AggregateFunction for Mean {
    type Input = u64;
    type Accumulator = (u64, u64);
    type Output = f64;
    fn create(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, input: u64, (sum, n): (u64, u64)) -> (u64, u64) {
        (sum + input, n + 1)
    }
    fn result(&self, &(sum, n): &(u64, u64)) -> f64 {
        sum as f64 / n as f64
    }
}

struct StateKinds {
    amounts: ListState<u64>,
    parity: MapState<String, u64>,
    total: ReducingState<u64>,
    mean: AggregatingState<Mean>,
    seen: OperatorListState<u64>,
    misuse: String,
    subtask: u32,
}

fn amount_of(payload: &[u8]) -> Result<u64> {
    let text = std::str::from_utf8(payload)?;
    let at = text.find("\"amount\":").ok_or_else(|| Error::msg(format!("no amount in {text}")))? + 9;
    let digits: String = text[at..].trim_start().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().map_err(|_| Error::msg(format!("bad amount in {text}")))
}

impl Operator for StateKinds {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let op = StateKinds {
            amounts: ctx.list_state("amounts")?,
            parity: ctx.map_state("parity")?,
            total: ctx.reducing_state("total", |a, b| a + b)?,
            mean: ctx.aggregating_state("mean", Mean)?,
            seen: ctx.operator_list_state("seen", Redistribution::EvenSplit)?,
            misuse: ctx.param("misuse").unwrap_or("").to_string(),
            subtask: ctx.info().subtask_index,
        };
        if op.misuse == "kind-mismatch" {
            let _: ValueState<u64> = ctx.value_state("total")?;
        }
        Ok(op)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        if self.misuse == "late-register" {
            // The typed SDK only registers in `open`; other SDKs could try
            // later, so go through the raw bindings as they would.
            use weir_sdk::bindings::weir::operator::{keyed_state, types::StateDescriptor};
            let d = StateDescriptor { name: "late".into(), version: 1, encoding: "raw".into(), ttl: None };
            keyed_state::register_value(&d).map_err(Error::from)?;
        }
        let user = input.key_str().into_owned();
        let amount = amount_of(input.payload)?;
        self.amounts.add(&amount)?;
        let parity = if amount % 2 == 0 { "even" } else { "odd" }.to_string();
        let count = self.parity.get(&parity)?.unwrap_or(0) + 1;
        self.parity.put(&parity, &count)?;
        let total = self.total.add(amount)?;
        self.mean.add(amount)?;
        let seen = self.seen.get()?.first().copied().unwrap_or(0) + 1;
        self.seen.update(&[seen])?;

        let all: Vec<u64> = self.amounts.get()?;
        let listed: u64 = all.iter().sum();
        let keys: Vec<String> = self.parity.keys().collect::<Result<_>>()?;
        let entries: Vec<(String, u64)> = self.parity.entries().collect::<Result<_>>()?;
        let mean = self.mean.get()?.unwrap_or(0.0);
        ctx.emit(format!(
            "{user} n={} sum-of-list={listed} total={total} mean={mean:.2} keys={} parity={:?} last={}",
            self.amounts.len()?,
            keys.join("+"),
            entries,
            all.last().copied().unwrap_or(0),
        ));
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context) -> Result<()> {
        if self.misuse == "no-key" {
            self.total.get()?;
        }
        if self.misuse == "timer-no-key" {
            ctx.register_event_time_timer(5)?;
        }
        let seen = self.seen.get()?.first().copied().unwrap_or(0);
        ctx.emit(format!("subtask {} saw {seen}", self.subtask));
        Ok(())
    }
}

export_operator!(StateKinds);
