//! Nexmark q15, bidding statistics report: per day, how many bids, distinct
//! bidders and distinct auctions there were, in all and per price rank. The
//! reference SQL:
//!
//! ```sql
//! SELECT
//!      DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
//!      count(*) AS total_bids,
//!      count(*) filter (where price < 10000) AS rank1_bids,
//!      count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
//!      count(*) filter (where price >= 1000000) AS rank3_bids,
//!      count(distinct bidder) AS total_bidders,
//!      count(distinct bidder) filter (where price < 10000) AS rank1_bidders,
//!      count(distinct bidder) filter (where price >= 10000 and price < 1000000) AS rank2_bidders,
//!      count(distinct bidder) filter (where price >= 1000000) AS rank3_bidders,
//!      count(distinct auction) AS total_auctions,
//!      count(distinct auction) filter (where price < 10000) AS rank1_auctions,
//!      count(distinct auction) filter (where price >= 10000 and price < 1000000) AS rank2_auctions,
//!      count(distinct auction) filter (where price >= 1000000) AS rank3_auctions
//! FROM bid
//! GROUP BY DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
//! ```
//!
//! The day is the bid's `date_time` as a UTC date, `yyyy-MM-dd` (the day
//! `[midnight, next midnight)`; years 0 to 9999 are written with four
//! digits). The ranks: 1 for `price < 10000`, 2 for `10000 <= price <
//! 1000000`, 3 for `price >= 1000000` (cents). A bidder (or auction) counts
//! once in `total_bidders` and once in each rank it has a bid in.
//!
//! Output: `day,total_bids,rank1_bids,rank2_bids,rank3_bids,total_bidders,
//! rank1_bidders,rank2_bidders,rank3_bidders,total_auctions,rank1_auctions,
//! rank2_auctions,rank3_auctions`, one line per day.
//!
//! **When.** The SQL has no window: Flink runs it as an updating table and
//! emits an update of the day's row for every bid. Weir writes each day's
//! row once, final, when the watermark passes the end of the day: an
//! event-time timer at the next midnight (UTC). With no late bids (in
//! order, or out of order within the watermark's lag, as a `nexmark`
//! source's stream always is) every bid of the day has arrived by then, so
//! the row equals the last value Flink's table holds for the day, and
//! nothing is updated afterwards. A bid whose day's row is already written
//! (a late bid, behind the watermark) is dropped, where Flink would update
//! the row.
//!
//! Two stages, one crate; `params.stage` picks one:
//!
//! - `"key"`, on each source subtask's bids as they come (`partition` left
//!   out: forward, no shuffle, no state). It decodes the bid and re-keys it
//!   by its day (`yyyy-MM-dd`), with the bid's time as the record's
//!   timestamp and a 24-byte payload: price, bidder, auction (u64
//!   little-endian). The second stage never decodes an event.
//! - `"stats"`, keyed by day: every bid of a day reaches one subtask, which
//!   a distinct count needs. This makes one hot key per day (at any
//!   parallelism one subtask counts a whole day's bids): that is the
//!   query's nature. Splitting the distinct counts by a hash of the bidder
//!   and adding the parts (Flink's `distinct-agg.split`) would spread it,
//!   at the price of a third stage.
//!
//! **State and cost per bid.** Per day: a value state with the twelve
//! counts, and two map states, `bidders` and `auctions`, from an id to a
//! 3-bit mask of the ranks it has been counted in (present: counted in the
//! total). A bid costs one value-state update (the SDK reads and writes
//! value state once per batch, not per record) and one map lookup for its
//! bidder and one for its auction; a map entry is written only when the id
//! is new to the day or to the bid's rank. No value grows with the day: a
//! value state holding the sets would be read and written whole for every
//! batch, and a day at the source's default 10 000 events/s of event time
//! holds 864 M events. The day's timer writes its row and clears all three
//! states, so state is bounded by the days still open (one or two).

use nexmark_sql::calendar::{day_end, push_date};
use nexmark_sql::ranks::{count_distinct, rank};
use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, Error, MapState, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// Stage `"key"`: each bid keyed by its day.
struct Key {
    /// The key being built, reused.
    key: Vec<u8>,
}

impl Key {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        self.key.clear();
        push_date(&mut self.key, b.date_time);
        ctx.emit_with(Some(self.key.as_slice()), Some(b.date_time), |out| {
            for v in [b.price, b.bidder, b.auction] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        });
        Ok(())
    }
}

/// One day's counts: index 0 in all, 1 to 3 per rank.
#[derive(Serialize, Deserialize, Default)]
struct Counts {
    bids: [u64; 4],
    bidders: [u64; 4],
    auctions: [u64; 4],
}

/// Stage `"stats"`: per day, the counts and the sets behind the distinct ones.
struct Stats {
    counts: ValueState<Counts>,
    /// Bidder -> the ranks (bits 1 to 3) it is counted in.
    bidders: MapState<u64, u8>,
    /// Auction -> the ranks (bits 1 to 3) it is counted in.
    auctions: MapState<u64, u8>,
}

impl Stats {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let (Some(t), Ok(p)) = (input.timestamp, <[u8; 24]>::try_from(input.payload)) else {
            return Err(Error::msg("stats: expected a bid from the key stage (24 bytes, with a timestamp)"));
        };
        let word = |i: usize| u64::from_le_bytes(p[i * 8..i * 8 + 8].try_into().unwrap());
        let (price, bidder, auction) = (word(0), word(1), word(2));
        let mut c = match self.counts.get()? {
            Some(c) => c,
            None => {
                let end = day_end(t);
                if end <= ctx.watermark() {
                    // Late: the day's row is written and its state gone.
                    return Ok(());
                }
                ctx.register_event_time_timer(end)?;
                Counts::default()
            }
        };
        let r = rank(price);
        c.bids[0] += 1;
        c.bids[r] += 1;
        count_distinct(&self.bidders, bidder, r, &mut c.bidders)?;
        count_distinct(&self.auctions, auction, r, &mut c.auctions)?;
        self.counts.set(&c)
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        let Some(c) = self.counts.get()? else { return Ok(()) };
        ctx.emit_with(None, Some(timer.time - 1), |out| {
            let mut n = itoa::Buffer::new();
            out.extend_from_slice(&timer.key);
            for v in c.bids.iter().chain(&c.bidders).chain(&c.auctions) {
                out.push(b',');
                out.extend_from_slice(n.format(*v).as_bytes());
            }
        });
        self.counts.clear()?;
        self.bidders.clear()?;
        self.auctions.clear()
    }
}

enum Q15 {
    Key(Key),
    Stats(Stats),
}

impl Operator for Q15 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            Some("key") => Ok(Q15::Key(Key { key: Vec::new() })),
            Some("stats") => Ok(Q15::Stats(Stats {
                counts: ctx.value_state("counts")?,
                bidders: ctx.map_state("bidders")?,
                auctions: ctx.map_state("auctions")?,
            })),
            other => Err(Error::msg(format!("params.stage must be \"key\" or \"stats\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q15::Key(k) => k.process(ctx, input),
            Q15::Stats(s) => s.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q15::Key(_) => Ok(()),
            Q15::Stats(s) => s.on_timer(ctx, timer),
        }
    }
}

export_operator!(Q15);
