//! Nexmark q14, calculation: the bids whose price in euros is between one
//! and fifty million, with the time of day they came at and how many `c`s
//! their `extra` holds. The reference SQL:
//!
//! ```sql
//! SELECT auction, bidder, 0.908 * price as price,
//!     CASE
//!         WHEN HOUR(`dateTime`) >= 8 AND HOUR(`dateTime`) <= 18 THEN 'dayTime'
//!         WHEN HOUR(`dateTime`) <= 6 OR HOUR(`dateTime`) >= 20 THEN 'nightTime'
//!         ELSE 'otherTime'
//!     END AS bidTimeType,
//!     `dateTime`, extra, count_char(extra, 'c') AS c_counts
//! FROM bid
//! WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
//! ```
//!
//! Output per bid kept: `auction,bidder,price,bidTimeType,dateTime,extra,c_counts`.
//!
//! - `0.908 * price` is the SQL's `DECIMAL(23, 3)`, as q1 writes it: the
//!   integer `908 * price` in thousandths, written with three decimals. The
//!   filter compares that integer with `1000000000` and `50000000000` (the
//!   bounds in thousandths), so no float rounds a price across a bound.
//!   (No integer price is exactly at a bound: 1000000 / 0.908 and
//!   50000000 / 0.908 are not integers.)
//! - `HOUR(dateTime)` is the hour of the day in UTC of the bid's time
//!   (milliseconds since the epoch): hours 8-18 are `dayTime`, 0-6 and 20-23
//!   `nightTime`, 7 and 19 `otherTime`.
//! - `count_char(extra, 'c')` is the Nexmark UDF: the bytes of `extra`'s
//!   UTF-8 that equal `c`.
//! - `dateTime` is written as milliseconds since the epoch, as in the other
//!   queries.
//!
//! Stateless: one line per bid kept, emitted as the bid is processed.

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

/// `0.908 * price > 1000000`, in thousandths.
const LOW_MILLI: u128 = 1_000_000_000;
/// `0.908 * price < 50000000`, in thousandths.
const HIGH_MILLI: u128 = 50_000_000_000;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The SQL's `bidTimeType` of a time (ms since the epoch, UTC).
fn bid_time_type(date_time: i64) -> &'static str {
    match date_time.rem_euclid(DAY_MS) / HOUR_MS {
        8..=18 => "dayTime",
        0..=6 | 20..=23 => "nightTime",
        _ => "otherTime",
    }
}

struct Calculation;

impl Operator for Calculation {
    fn open(_: &mut OpenContext) -> Result<Self> {
        Ok(Calculation)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        let milli = u128::from(b.price) * 908;
        if milli <= LOW_MILLI || milli >= HIGH_MILLI {
            return Ok(());
        }
        let c_counts = b.extra.bytes().filter(|&c| c == b'c').count() as u64;
        ctx.emit_with(None, input.timestamp, |out| {
            let mut n = itoa::Buffer::new();
            for v in [b.auction, b.bidder] {
                out.extend_from_slice(n.format(v).as_bytes());
                out.push(b',');
            }
            out.extend_from_slice(n.format(milli / 1000).as_bytes());
            let frac = (milli % 1000) as u16;
            out.extend_from_slice(&[
                b'.',
                b'0' + (frac / 100) as u8,
                b'0' + (frac / 10 % 10) as u8,
                b'0' + (frac % 10) as u8,
                b',',
            ]);
            out.extend_from_slice(bid_time_type(b.date_time).as_bytes());
            out.push(b',');
            out.extend_from_slice(n.format(b.date_time).as_bytes());
            out.push(b',');
            out.extend_from_slice(b.extra.as_bytes());
            out.push(b',');
            out.extend_from_slice(n.format(c_counts).as_bytes());
        });
        Ok(())
    }
}

export_operator!(Calculation);
