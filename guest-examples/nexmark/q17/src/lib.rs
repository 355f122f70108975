//! Nexmark q17, auction statistics report: per auction and day, how many
//! bids it had, in all and per price rank, and their lowest, highest,
//! average and total price. The reference SQL:
//!
//! ```sql
//! SELECT
//!      auction,
//!      DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
//!      count(*) AS total_bids,
//!      count(*) filter (where price < 10000) AS rank1_bids,
//!      count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
//!      count(*) filter (where price >= 1000000) AS rank3_bids,
//!      min(price) AS min_price,
//!      max(price) AS max_price,
//!      avg(price) AS avg_price,
//!      sum(price) AS sum_price
//! FROM bid
//! GROUP BY auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
//! ```
//!
//! The day is the bid's `date_time` as a UTC date, `yyyy-MM-dd` (the day
//! `[midnight, next midnight)`; years 0 to 9999 are written with four
//! digits). The ranks: 1 for `price < 10000`, 2 for `10000 <= price <
//! 1000000`, 3 for `price >= 1000000` (cents). `avg_price` is a `BIGINT`,
//! as Flink's `AVG` over `BIGINT` gives it: `sum_price / total_bids` in
//! integer division (prices are not negative: rounded down).
//!
//! Output: `auction,day,total_bids,rank1_bids,rank2_bids,rank3_bids,
//! min_price,max_price,avg_price,sum_price`, one line per auction and day.
//!
//! **When.** The SQL has no window: Flink runs it as an updating table and
//! emits an update of the group's row for every bid. Weir writes each
//! group's row once, final, when the watermark passes the end of its day:
//! an event-time timer at the next midnight (UTC). With no late bids (in
//! order, or out of order within the watermark's lag, as a `nexmark`
//! source's stream always is) every bid of the group has arrived by then,
//! so the row equals the last value Flink's table holds for it, and nothing
//! is updated afterwards. A bid whose group's row is already written (a
//! late bid, behind the watermark) is dropped, where Flink would update the
//! row.
//!
//! Two stages, one crate; `params.stage` picks one:
//!
//! - `"key"`, on each source subtask's bids as they come (`partition` left
//!   out: forward, no shuffle, no state). It decodes the bid and re-keys it
//!   by `auction,day` (the auction in decimal), with the bid's time as the
//!   record's timestamp and the price (u64 little-endian) as the payload.
//!   The source's own bid key, the auction, would also bring a group's bids
//!   together, but the shuffle to a keyed stage happens either way: this
//!   one carries 8 bytes in place of the bid, the second stage never
//!   decodes an event, and the job runs over any source of Nexmark bids
//!   (a file of JSON bids has no key).
//! - `"stats"`, keyed by `auction,day`: one value state per group, the four
//!   counts, the lowest and highest price and the sum; a bid costs one
//!   value-state update (the SDK reads and writes value state once per
//!   batch, not per record) and nothing else. The group's first bid sets
//!   the timer; the timer writes the row and clears the state, so state is
//!   bounded by the auctions with bids in the days still open.

use nexmark_sql::calendar::{day_end, push_date};
use nexmark_sql::ranks::rank;
use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// Stage `"key"`: each bid keyed by `auction,day`.
struct Key {
    /// The key being built, reused.
    key: Vec<u8>,
}

impl Key {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        self.key.clear();
        self.key.extend_from_slice(itoa::Buffer::new().format(b.auction).as_bytes());
        self.key.push(b',');
        push_date(&mut self.key, b.date_time);
        ctx.emit_with(Some(self.key.as_slice()), Some(b.date_time), |out| {
            out.extend_from_slice(&b.price.to_le_bytes())
        });
        Ok(())
    }
}

/// One auction's bids of one day.
#[derive(Serialize, Deserialize)]
struct Prices {
    /// Bids: index 0 in all, 1 to 3 per rank.
    bids: [u64; 4],
    min: u64,
    max: u64,
    sum: u64,
}

/// Stage `"stats"`: per auction and day, the counts and prices.
struct Stats {
    prices: ValueState<Prices>,
}

impl Stats {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let (Some(t), Ok(p)) = (input.timestamp, <[u8; 8]>::try_from(input.payload)) else {
            return Err(Error::msg("stats: expected a price from the key stage (8 bytes, with a timestamp)"));
        };
        let price = u64::from_le_bytes(p);
        let mut s = match self.prices.get()? {
            Some(s) => s,
            None => {
                let end = day_end(t);
                if end <= ctx.watermark() {
                    // Late: the group's row is written and its state gone.
                    return Ok(());
                }
                ctx.register_event_time_timer(end)?;
                Prices { bids: [0; 4], min: price, max: price, sum: 0 }
            }
        };
        s.bids[0] += 1;
        s.bids[rank(price)] += 1;
        s.min = s.min.min(price);
        s.max = s.max.max(price);
        s.sum = s.sum.checked_add(price).ok_or_else(|| Error::msg("sum of prices overflows"))?;
        self.prices.set(&s)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(s) = self.prices.get()? else { return Ok(()) };
        let avg = s.sum / s.bids[0].max(1);
        ctx.emit_with(None, Some(timer.time - 1), |out| {
            let mut n = itoa::Buffer::new();
            out.extend_from_slice(&timer.key);
            for v in s.bids.iter().chain(&[s.min, s.max, avg, s.sum]) {
                out.push(b',');
                out.extend_from_slice(n.format(*v).as_bytes());
            }
        });
        self.prices.clear()
    }
}

enum Q17 {
    Key(Key),
    Stats(Stats),
}

impl Operator for Q17 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            Some("key") => Ok(Q17::Key(Key { key: Vec::new() })),
            Some("stats") => Ok(Q17::Stats(Stats { prices: ctx.value_state("prices")? })),
            other => Err(Error::msg(format!("params.stage must be \"key\" or \"stats\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q17::Key(k) => k.process(ctx, input),
            Q17::Stats(s) => s.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q17::Key(_) => Ok(()),
            Q17::Stats(s) => s.on_timer(ctx, timer),
        }
    }
}

export_operator!(Q17);
