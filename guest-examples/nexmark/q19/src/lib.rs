//! Nexmark q19, auction top-10 price: per auction, the ten bids with the
//! highest price, ranked. The reference SQL:
//!
//! ```sql
//! SELECT * FROM
//! (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid)
//! WHERE rank_number <= 10;
//! ```
//!
//! An updating query, as Flink runs it (a Top-N): a bid that enters an
//! auction's top 10 pushes the rows below it down a rank, and the row at
//! rank 10 out. Here, when a bid enters at rank `r`, the operator writes a
//! line for every row whose rank changed, ranks `r` to the last (at most
//! 10), each with its new rank:
//! `auction,bidder,price,channel,url,date_time,extra,rank_number`. The last
//! line per (auction, rank_number) is the query's result; a row pushed out
//! needs no line of its own, since rank 10's new row replaces it. A bid
//! that does not enter writes nothing.
//!
//! Ties: the SQL leaves the order of bids at the same price open (Flink
//! ranks them by arrival, which across source subtasks is not defined).
//! Here the rule does not depend on arrival: at the same price the earlier
//! bid (smaller `date_time`) ranks higher, and at the same price and time
//! the smaller bid line `auction,bidder,price,channel,url,date_time,extra`
//! (compared byte by byte). Identical bids take consecutive ranks.
//!
//! Keyed by auction, the source's default `bid_key` (a bid whose key is
//! not its auction id fails the job: the rows would be split). State per auction: at
//! most 10 rows (price, time and the bid's line) in one value, and, once
//! there are 10, the 10th row's price and time in a second, small value,
//! so a bid that cannot enter (most bids, once an auction has ten) is
//! dropped after reading that small value, without decoding the rows. As the SQL
//! (without a state TTL), it keeps every auction's rows: a bid can name any
//! auction, expired or not, so the state grows with the number of auctions
//! bid on, at most 10 rows each.
//!
//! `params.stage = "key"` runs a helper stage instead: it keys each bid by
//! its auction id, as the `nexmark` source does, for an input without keys
//! (the tests feed hand-made events from a jsonl file through it).

use nexmark_sql::columns::bid_line;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use weir_sdk::nexmark::{Bid, Event};
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, ValueState, export_operator};

/// How many rows each auction keeps (`rank_number <= 10`).
const N: usize = 10;

/// One ranked bid.
#[derive(Serialize, Deserialize)]
struct Row {
    price: u64,
    date_time: i64,
    /// `auction,bidder,price,channel,url,date_time,extra`.
    line: String,
}

/// The rank order: `Less` when `a` ranks above `b`.
fn rank_order(a: &Row, b: &Row) -> Ordering {
    b.price.cmp(&a.price).then(a.date_time.cmp(&b.date_time)).then_with(|| a.line.cmp(&b.line))
}

struct TopN {
    /// The auction's rows, best first; at most `N`.
    top: ValueState<Vec<Row>>,
    /// With `N` rows: the last one's `(price, date_time)`, the bar to pass.
    bar: ValueState<(u64, i64)>,
}

impl TopN {
    fn bid(&mut self, ctx: &mut Context, b: &Bid<'_>, timestamp: Option<i64>) -> Result<()> {
        if let Some((price, date_time)) = self.bar.get()?
            && (b.price < price || (b.price == price && b.date_time > date_time))
        {
            return Ok(());
        }
        let mut rows = self.top.get()?.unwrap_or_default();
        let row = Row { price: b.price, date_time: b.date_time, line: bid_line(b) };
        let at = rows.partition_point(|r| rank_order(r, &row) != Ordering::Greater);
        if at >= N {
            return Ok(());
        }
        rows.insert(at, row);
        rows.truncate(N);
        let mut n = itoa::Buffer::new();
        for (i, r) in rows.iter().enumerate().skip(at) {
            ctx.emit_with(None, timestamp, |out| {
                out.extend_from_slice(r.line.as_bytes());
                out.push(b',');
                out.extend_from_slice(n.format(i + 1).as_bytes());
            });
        }
        if let Some(last) = rows.get(N - 1) {
            self.bar.set(&(last.price, last.date_time))?;
        }
        self.top.set(&rows)
    }
}

enum Q19 {
    /// Keys bids by auction id (for inputs without keys).
    Key,
    /// The query.
    Top(TopN),
}

impl Operator for Q19 {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        match ctx.param("stage") {
            None | Some("top") => Ok(Q19::Top(TopN { top: ctx.value_state("top")?, bar: ctx.value_state("bar")? })),
            Some("key") => Ok(Q19::Key),
            Some(other) => Err(Error::msg(format!("params.stage must be \"top\" or \"key\", not {other:?}"))),
        }
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        match self {
            Q19::Key => {
                let mut key = itoa::Buffer::new();
                ctx.emit_with(Some(key.format(b.auction).as_bytes()), input.timestamp, |out| {
                    out.extend_from_slice(input.payload)
                });
                Ok(())
            }
            Q19::Top(t) => {
                if input.key != Some(itoa::Buffer::new().format(b.auction).as_bytes()) {
                    return Err(Error::msg(format!(
                        "a bid on auction {} came keyed {:?}: q19 needs bids keyed by auction (bid_key = \"auction\", partition = \"key\")",
                        b.auction,
                        input.key_str()
                    )));
                }
                t.bid(ctx, &b, input.timestamp)
            }
        }
    }
}

export_operator!(Q19);
