//! Nexmark q13, bounded side input join: every bid enriched with the value
//! a side table holds for its auction id modulo 10000. The reference SQL:
//!
//! ```sql
//! CREATE TABLE side_input (key BIGINT, `value` VARCHAR)
//!   WITH ('connector.type' = 'filesystem', ..., 'format.type' = 'csv');
//! SELECT B.auction, B.bidder, B.price, B.`dateTime`, S.`value`
//! FROM (SELECT *, PROCTIME() as p_time FROM bid) B
//! JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
//! ON mod(B.auction, 10000) = S.key;
//! ```
//!
//! Output per bid and matching row: `auction,bidder,price,dateTime,value`,
//! with the bid's timestamp.
//!
//! **Inputs.** The main input is the bids, keyed (`partition = "key"`; the
//! key is not read, any key does). The broadcast input is the side table,
//! one `key,value` line per row (`guest-examples/nexmark/side_input.csv`,
//! read by a `kind = "file"` source): the key is the text before the first
//! comma, a decimal integer; the value is the rest of the line, unquoted
//! (no CSV quoting). Empty lines are skipped; any other line without a
//! comma or with a key that is not an integer fails the job. Several rows
//! may share a key: a bid joins each (the lookup returns them all), one
//! line per row. A bid whose `auction mod 10000` has no row is dropped (an
//! inner join).
//!
//! **Every bid meets the whole table.** Flink's lookup join against a
//! filesystem table loads the whole file before it answers, so each bid is
//! joined with the complete table. Here the table arrives as a stream,
//! possibly after many bids. A bid is joined once the table is complete,
//! and the table is complete once the operator's watermark has moved: an
//! operator's watermark is the minimum over its inputs, and a file source
//! without `timestamp_field` sends no watermark until it ends, so the
//! watermark stays at its start (`i64::MIN`) until the side input has
//! ended. A bid that comes earlier is held in keyed list state with an
//! event-time timer at `i64::MIN + 1`, which fires at the first watermark
//! after the side input's end (at the latest, the one every source sends
//! when it ends), before that watermark goes downstream: the held bids are
//! joined then and are not late for an event-time operator after this one.
//! The result is the same whatever order the two inputs arrive in. (With
//! `pipeline.idle_timeout`, a side input silent that long stops holding the
//! watermark back and bids would meet a partial table: do not set it for
//! this job.)
//!
//! Once complete, the table is read into memory once per subtask (it no
//! longer changes), and each bid costs a lookup there.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use weir_sdk::nexmark::{Bid, Event};
use weir_sdk::{
    BroadcastMapState, Context, Element, Error, ListState, OpenContext, Operator, Result, Timer, export_operator,
};

/// The event-time timer of a key's held bids: the first watermark reaches it.
const RELEASE: i64 = i64::MIN + 1;
/// `mod(auction, 10000)`.
const KEYS: u64 = 10_000;

/// A bid waiting for the side input: the fields the output needs.
#[derive(Serialize, Deserialize)]
struct Held {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time: i64,
    timestamp: Option<i64>,
}

struct Q13 {
    /// The side table: key -> its rows' values, in arrival order.
    side: BroadcastMapState<i64, Vec<String>>,
    /// The current key's bids that came before the table was complete.
    held: ListState<Held>,
    /// The complete table, read from `side` once the watermark has moved.
    table: Option<HashMap<i64, Vec<String>>>,
}

impl Q13 {
    /// The complete table, read into memory the first time.
    fn table(&mut self) -> Result<&HashMap<i64, Vec<String>>> {
        if self.table.is_none() {
            let rows = self.side.entries().collect::<Result<HashMap<_, _>>>()?;
            self.table = Some(rows);
        }
        Ok(self.table.as_ref().expect("read above"))
    }

    /// Joins one bid with the complete table.
    fn join(&mut self, ctx: &mut Context, b: &Held) -> Result<()> {
        let key = (b.auction % KEYS) as i64;
        let Some(values) = self.table()?.get(&key) else { return Ok(()) };
        for value in values {
            ctx.emit_with(None, b.timestamp, |out| {
                let mut n = itoa::Buffer::new();
                for v in [b.auction, b.bidder, b.price] {
                    out.extend_from_slice(n.format(v).as_bytes());
                    out.push(b',');
                }
                out.extend_from_slice(n.format(b.date_time).as_bytes());
                out.push(b',');
                out.extend_from_slice(value.as_bytes());
            });
        }
        Ok(())
    }
}

fn held(b: &Bid<'_>, timestamp: Option<i64>) -> Held {
    Held { auction: b.auction, bidder: b.bidder, price: b.price, date_time: b.date_time, timestamp }
}

impl Operator for Q13 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        Ok(Q13 { side: ctx.broadcast_map_state("side-input")?, held: ctx.list_state("held")?, table: None })
    }

    fn process_broadcast(&mut self, _ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let line = input.payload_str();
        if line.trim().is_empty() {
            return Ok(());
        }
        let parsed = line.split_once(',').and_then(|(k, v)| Some((k.parse::<i64>().ok()?, v)));
        let Some((key, value)) = parsed else {
            return Err(Error::msg(format!("side input line {line:?} is not key,value with an integer key")));
        };
        let mut values = self.side.get(&key)?.unwrap_or_default();
        values.push(value.to_string());
        self.side.put(&key, &values)?;
        // Only with an idle timeout can a row come after the table was read.
        self.table = None;
        Ok(())
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        let bid = held(&b, input.timestamp);
        if ctx.watermark() == i64::MIN {
            // The side input has not ended: wait for it.
            self.held.add(&bid)?;
            return ctx.register_event_time_timer(RELEASE);
        }
        self.join(ctx, &bid)
    }

    fn on_timer(&mut self, ctx: &mut Context, _timer: Timer) -> Result<()> {
        let waiting = self.held.get()?;
        self.held.clear()?;
        for bid in &waiting {
            self.join(ctx, bid)?;
        }
        Ok(())
    }
}

export_operator!(Q13);
