//! Nexmark q16, channel statistics report: per channel and day, the latest
//! minute with a bid and how many bids, distinct bidders and distinct
//! auctions there were, in all and per price rank. The reference SQL:
//!
//! ```sql
//! SELECT
//!     channel,
//!     DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
//!     max(DATE_FORMAT(`dateTime`, 'HH:mm')) as `minute`,
//!     count(*) AS total_bids,
//!     count(*) filter (where price < 10000) AS rank1_bids,
//!     count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
//!     count(*) filter (where price >= 1000000) AS rank3_bids,
//!     count(distinct bidder) AS total_bidders,
//!     count(distinct bidder) filter (where price < 10000) AS rank1_bidders,
//!     count(distinct bidder) filter (where price >= 10000 and price < 1000000) AS rank2_bidders,
//!     count(distinct bidder) filter (where price >= 1000000) AS rank3_bidders,
//!     count(distinct auction) AS total_auctions,
//!     count(distinct auction) filter (where price < 10000) AS rank1_auctions,
//!     count(distinct auction) filter (where price >= 10000 and price < 1000000) AS rank2_auctions,
//!     count(distinct auction) filter (where price >= 1000000) AS rank3_auctions
//! FROM bid
//! GROUP BY channel, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
//! ```
//!
//! The day is the bid's `date_time` as a UTC date, `yyyy-MM-dd` (the day
//! `[midnight, next midnight)`; years 0 to 9999 are written with four
//! digits); `minute` is the largest `HH:mm` (UTC, 24-hour) of the group's
//! bids, which within one day is the latest bid's minute. The ranks: 1 for
//! `price < 10000`, 2 for `10000 <= price < 1000000`, 3 for `price >=
//! 1000000` (cents). A bidder (or auction) counts once in `total_bidders`
//! and once in each rank it has a bid in. The channel is written as it is
//! (the generator's channels hold no comma).
//!
//! Output: `channel,day,minute,total_bids,rank1_bids,rank2_bids,rank3_bids,
//! total_bidders,rank1_bidders,rank2_bidders,rank3_bidders,total_auctions,
//! rank1_auctions,rank2_auctions,rank3_auctions`, one line per channel and
//! day.
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
//!   by `channel,day`, with the bid's time as the record's timestamp and a
//!   24-byte payload: price, bidder, auction (u64 little-endian). The
//!   second stage never decodes an event.
//! - `"stats"`, keyed by `channel,day`: every bid of a group reaches one
//!   subtask, which a distinct count needs. The generator sends half the
//!   bids to four hot channels, so a day has four hot keys (and up to
//!   10 000 cold ones, one per other channel).
//!
//! **State and cost per bid.** Per group: a value state with the latest
//! minute and the twelve counts, and two map states, `bidders` and
//! `auctions`, from an id to a 3-bit mask of the ranks it has been counted
//! in (present: counted in the total). A bid costs one value-state update
//! (the SDK reads and writes value state once per batch, not per record)
//! and one map lookup for its bidder and one for its auction; a map entry
//! is written only when the id is new to the group or to the bid's rank. No
//! value grows with the group: a value state holding the sets would be read
//! and written whole for every batch. The group's timer writes its row and
//! clears all three states, so state is bounded by the groups of the days
//! still open (one or two).

use nexmark_sql::calendar::{day_end, minute_of_day, push_date, push_hour_minute};
use nexmark_sql::ranks::{count_distinct, rank};
use serde::{Deserialize, Serialize};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, Error, MapState, OpenContext, Operator, Result, Timer, ValueState, export_operator};

/// Stage `"key"`: each bid keyed by `channel,day`.
struct Key {
    /// The key being built, reused.
    key: Vec<u8>,
}

impl Key {
    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        self.key.clear();
        self.key.extend_from_slice(b.channel.as_bytes());
        self.key.push(b',');
        push_date(&mut self.key, b.date_time);
        ctx.emit_with(Some(self.key.as_slice()), Some(b.date_time), |out| {
            for v in [b.price, b.bidder, b.auction] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        });
        Ok(())
    }
}

/// One group's latest minute of the day and counts: index 0 in all, 1 to
/// 3 per rank.
#[derive(Serialize, Deserialize, Default)]
struct Counts {
    minute: u16,
    bids: [u64; 4],
    bidders: [u64; 4],
    auctions: [u64; 4],
}

/// Stage `"stats"`: per channel and day, the counts and the sets behind the distinct ones.
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
                    // Late: the group's row is written and its state gone.
                    return Ok(());
                }
                ctx.register_event_time_timer(end)?;
                Counts::default()
            }
        };
        c.minute = c.minute.max(minute_of_day(t));
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
            out.push(b',');
            push_hour_minute(out, c.minute);
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

enum Q16 {
    Key(Key),
    Stats(Stats),
}

impl Operator for Q16 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            Some("key") => Ok(Q16::Key(Key { key: Vec::new() })),
            Some("stats") => Ok(Q16::Stats(Stats {
                counts: ctx.value_state("counts")?,
                bidders: ctx.map_state("bidders")?,
                auctions: ctx.map_state("auctions")?,
            })),
            other => Err(Error::msg(format!("params.stage must be \"key\" or \"stats\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        match self {
            Q16::Key(k) => k.process(ctx, input),
            Q16::Stats(s) => s.process(ctx, input),
        }
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer) -> Result<()> {
        match self {
            Q16::Key(_) => Ok(()),
            Q16::Stats(s) => s.on_timer(ctx, timer),
        }
    }
}

export_operator!(Q16);
