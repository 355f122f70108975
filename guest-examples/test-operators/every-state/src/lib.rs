//! A test operator whose output shows the exact contents of every kind of
//! state, so that a restore test can compare a restored run with an
//! uninterrupted one element by element (`tests/all/every_state.rs`).
//!
//! Main input: jsonl keyed by `k`, with event time `t` and fields `seq`,
//! `v` and `f` (flags). For each record, for its key, it:
//! - reads `prev` (value) and `long` (value with a one-hour TTL), the
//!   previous record's `seq`, then writes this `seq` to both;
//! - appends `v` to `vals` (list), counts `v % 5` in `counts` (map), adds
//!   `v` to `sum` (reducing) and to `stats` (aggregating: count, min, max);
//! - registers an event-time timer at `t + et_delay`, remembered in
//!   `et-pending` (map: time -> seq);
//! - flag `s`: writes `seq` to `short` (value with a TTL of `short_ttl_ms`);
//!   from `seq >= read_from` on, it reads `short` and shows it;
//! - flag `p`: registers a processing-time timer `pt_delay_ms` from now,
//!   remembered in `pt-pending` (map: seq -> time), so the line the timer
//!   emits is the same whenever it fires;
//! - flag `m`: appends `seq` to `even` (operator list, even-split) and
//!   `union` (operator list, union);
//!
//! and emits `rec KEY seq=.. prev=.. list=[..] counts=[..] sum=.. stats=..
//! long=.. short=..`. Timers emit `et KEY t=T seq=S` and `pt KEY seq=S`.
//! Broadcast input: jsonl whose `cmd` is `set NAME VALUE` or `del NAME`,
//! applied to `rules` (broadcast map).
//! In `open` and at end of input each subtask emits its operator lists and
//! rules: `open I/P even=[..] union=[..] rules=[..]` (`end ...` at the end),
//! so a test sees what every subtask got back from a restore.

use std::time::Duration;
use weir_sdk::bindings::weir::operator::{collector, types::Element as WitElement};
use weir_sdk::{
    AggregateFunction, AggregatingState, BroadcastMapState, Context, Descriptor, Element, Error, ListState, MapState,
    OpenContext, Operator, OperatorListState, Redistribution, ReducingState, Result, TimeDomain, Timer, Ttl,
    ValueState, export_operator,
};

/// Count, minimum and maximum of the values.
struct Stats;

impl AggregateFunction for Stats {
    type Input = u64;
    type Accumulator = (u64, u64, u64);
    type Output = String;
    fn create(&self) -> (u64, u64, u64) {
        (0, u64::MAX, 0)
    }
    fn add(&self, v: u64, (n, min, max): (u64, u64, u64)) -> (u64, u64, u64) {
        (n + 1, min.min(v), max.max(v))
    }
    fn result(&self, &(n, min, max): &(u64, u64, u64)) -> String {
        format!("{n}/{min}/{max}")
    }
}

struct EveryState {
    prev: ValueState<u64>,
    long: ValueState<u64>,
    short: ValueState<u64>,
    vals: ListState<u64>,
    counts: MapState<u64, u64>,
    sum: ReducingState<u64>,
    stats: AggregatingState<Stats>,
    et_pending: MapState<i64, u64>,
    pt_pending: MapState<u64, i64>,
    even: OperatorListState<u64>,
    union: OperatorListState<u64>,
    rules: BroadcastMapState<String, String>,
    et_delay: i64,
    pt_delay_ms: i64,
    read_from: u64,
    me: String,
}

/// The raw text of `"name": ...` in a flat JSON object (quotes removed).
fn field<'a>(json: &'a str, name: &str) -> Result<&'a str> {
    let missing = || Error::msg(format!("no field {name} in {json}"));
    let at = json.find(&format!("\"{name}\"")).ok_or_else(missing)? + name.len() + 2;
    let rest = json[at..].trim_start().strip_prefix(':').ok_or_else(missing)?.trim_start();
    Ok(match rest.strip_prefix('"') {
        Some(s) => s.split('"').next().unwrap_or(""),
        None => rest.split([',', '}']).next().unwrap_or("").trim(),
    })
}

fn number(json: &str, name: &str) -> Result<u64> {
    let text = field(json, name)?;
    text.parse().map_err(|_| Error::msg(format!("field {name} is {text:?}, not a number")))
}

fn joined(items: &[u64]) -> String {
    items.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn show(value: Option<u64>) -> String {
    value.map_or_else(|| "none".into(), |v| v.to_string())
}

impl EveryState {
    /// This subtask's operator lists and broadcast rules, as one line.
    fn lists(&self, when: &str) -> Result<String> {
        let rules: Vec<(String, String)> = self.rules.entries().collect::<Result<_>>()?;
        let rules: Vec<String> = rules.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Ok(format!(
            "{when} {} even=[{}] union=[{}] rules=[{}]",
            self.me,
            joined(&self.even.get()?),
            joined(&self.union.get()?),
            rules.join(",")
        ))
    }
}

impl Operator for EveryState {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let hour = Ttl::new(Duration::from_secs(3600));
        let short = Ttl::new(Duration::from_millis(ctx.param_or("short_ttl_ms", 1000u64)?));
        let op = EveryState {
            prev: ctx.value_state("prev")?,
            long: ctx.value_state(Descriptor::new("long").ttl(hour))?,
            short: ctx.value_state(Descriptor::new("short").ttl(short))?,
            vals: ctx.list_state("vals")?,
            counts: ctx.map_state("counts")?,
            sum: ctx.reducing_state("sum", |a, b| a + b)?,
            stats: ctx.aggregating_state("stats", Stats)?,
            et_pending: ctx.map_state("et-pending")?,
            pt_pending: ctx.map_state("pt-pending")?,
            even: ctx.operator_list_state("even", Redistribution::EvenSplit)?,
            union: ctx.operator_list_state("union", Redistribution::Union)?,
            rules: ctx.broadcast_map_state("rules")?,
            et_delay: ctx.param_or("et_delay", 200i64)?,
            pt_delay_ms: ctx.param_or("pt_delay_ms", 2000i64)?,
            read_from: ctx.param_or("read_from", u64::MAX)?,
            me: format!("{}/{}", ctx.info().subtask_index, ctx.info().parallelism),
        };
        // `open` has no `Context`; the collector import works here too, and
        // what it emits shows the state this subtask was restored with.
        let line = op.lists("open")?;
        collector::emit(&WitElement { payload: line.into_bytes(), key: None, timestamp: None });
        Ok(op)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        let key = input.key_str().into_owned();
        let seq = number(&line, "seq")?;
        let v = number(&line, "v")?;
        let flags = field(&line, "f")?;
        let t = input.timestamp.ok_or_else(|| Error::msg(format!("no event time on {line}")))?;

        let prev = self.prev.get()?;
        self.prev.set(&seq)?;
        let long = self.long.get()?;
        self.long.set(&seq)?;
        self.vals.add(&v)?;
        let bucket = v % 5;
        let n = self.counts.get(&bucket)?.unwrap_or(0) + 1;
        self.counts.put(&bucket, &n)?;
        let sum = self.sum.add(v)?;
        self.stats.add(v)?;
        let timer = t + self.et_delay;
        self.et_pending.put(&timer, &seq)?;
        ctx.register_event_time_timer(timer)?;
        if flags.contains('s') {
            self.short.set(&seq)?;
        }
        let short = if seq >= self.read_from { show(self.short.get()?) } else { "-".into() };
        if flags.contains('p') {
            let at = ctx.processing_time() + self.pt_delay_ms;
            self.pt_pending.put(&seq, &at)?;
            ctx.register_processing_time_timer(at)?;
        }
        if flags.contains('m') {
            self.even.add(&seq)?;
            self.union.add(&seq)?;
        }

        let counts: Vec<(u64, u64)> = self.counts.entries().collect::<Result<_>>()?;
        let counts: Vec<String> = counts.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        ctx.emit(format!(
            "rec {key} seq={seq} prev={} list=[{}] counts=[{}] sum={sum} stats={} long={} short={short}",
            show(prev),
            joined(&self.vals.get()?),
            counts.join(","),
            self.stats.get()?.unwrap_or_default(),
            show(long),
        ));
        Ok(())
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let key = String::from_utf8_lossy(&timer.key).into_owned();
        match timer.domain {
            TimeDomain::EventTime => {
                let seq = self.et_pending.get(&timer.time)?;
                let seq = seq.ok_or_else(|| Error::msg(format!("event-time timer {} of {key} unknown", timer.time)))?;
                self.et_pending.remove(&timer.time)?;
                ctx.emit(format!("et {key} t={} seq={seq}", timer.time));
            }
            TimeDomain::ProcessingTime => {
                // Records of one batch share a processing time, so one timer
                // may stand for several registrations.
                let due: Vec<(u64, i64)> = self.pt_pending.entries().collect::<Result<_>>()?;
                let due: Vec<u64> = due.into_iter().filter(|&(_, at)| at == timer.time).map(|(s, _)| s).collect();
                if due.is_empty() {
                    return Err(Error::msg(format!("processing-time timer {} of {key} unknown", timer.time)));
                }
                for seq in due {
                    self.pt_pending.remove(&seq)?;
                    ctx.emit(format!("pt {key} seq={seq}"));
                }
            }
        }
        Ok(())
    }

    fn process_broadcast(&mut self, _ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        let words: Vec<&str> = field(&line, "cmd")?.split_whitespace().collect();
        match words[..] {
            ["set", name, value] => self.rules.put(&name.to_string(), &value.to_string()),
            ["del", name] => self.rules.remove(&name.to_string()),
            _ => Err(Error::msg(format!("bad rule command {line:?}"))),
        }
    }

    fn end_of_input(&mut self, ctx: &mut Context) -> Result<()> {
        ctx.emit(self.lists("end")?);
        Ok(())
    }
}

export_operator!(EveryState);
