//! Nexmark q10, log to a file system: every bid written to files
//! partitioned by the date and the minute of its event time. The reference
//! SQL:
//!
//! ```sql
//! INSERT INTO nexmark_q10   -- PARTITIONED BY (dt, hm), 'connector' = 'filesystem'
//! SELECT auction, bidder, price, dateTime, extra,
//!        DATE_FORMAT(dateTime, 'yyyy-MM-dd'), DATE_FORMAT(dateTime, 'HH:mm')
//! FROM bid;
//! ```
//!
//! As the filesystem connector lays out partitions, the partition columns
//! name the directory (`dt=2025-01-01/hm=00:00`, UTC) and each line holds
//! the other columns, `auction,bidder,price,date_time,extra`. The operator
//! emits each bid under that directory as its key; the job's
//! `transactional-file` sink with `buckets = "key"` writes each key's lines
//! into that directory, exactly once, published at each checkpoint.
//! Stateless.

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct Partition;

/// `(year, month, day)` of the UTC date `days` after 1970-01-01 (the
/// proleptic Gregorian calendar, as `java.time`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's `civil_from_days`: eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `dt=yyyy-MM-dd/hm=HH:mm` of the UTC time `ms` (milliseconds since the
/// epoch) into `out`.
fn partition(ms: i64, out: &mut Vec<u8>) {
    let minutes = ms.div_euclid(60_000);
    let (y, m, d) = civil_from_days(minutes.div_euclid(1440));
    let minute_of_day = minutes.rem_euclid(1440);
    let two = |v: i64| [b'0' + (v / 10) as u8, b'0' + (v % 10) as u8];
    out.extend_from_slice(b"dt=");
    let mut n = itoa::Buffer::new();
    let year = n.format(y);
    // Four digits at least, as yyyy.
    out.extend(std::iter::repeat_n(b'0', 4usize.saturating_sub(year.len())));
    out.extend_from_slice(year.as_bytes());
    out.push(b'-');
    out.extend_from_slice(&two(i64::from(m)));
    out.push(b'-');
    out.extend_from_slice(&two(i64::from(d)));
    out.extend_from_slice(b"/hm=");
    out.extend_from_slice(&two(minute_of_day / 60));
    out.push(b':');
    out.extend_from_slice(&two(minute_of_day % 60));
}

impl Operator for Partition {
    fn open(_: &mut OpenContext) -> Result<Self> {
        Ok(Partition)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        if let Event::Bid(b) = Event::decode(input.payload)? {
            let mut key = Vec::with_capacity(24);
            partition(b.date_time, &mut key);
            ctx.emit_with(Some(&key), input.timestamp, |out| {
                let mut n = itoa::Buffer::new();
                for v in [b.auction, b.bidder, b.price] {
                    out.extend_from_slice(n.format(v).as_bytes());
                    out.push(b',');
                }
                out.extend_from_slice(n.format(b.date_time).as_bytes());
                out.push(b',');
                out.extend_from_slice(b.extra.as_bytes());
            });
        }
        Ok(())
    }
}

export_operator!(Partition);
