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

use nexmark_sql::calendar::{minute_of_day, push_date, push_hour_minute};
use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct Partition;

/// `dt=yyyy-MM-dd/hm=HH:mm` of the UTC time `ms` (milliseconds since the
/// epoch) into `out`.
fn partition(ms: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"dt=");
    push_date(out, ms);
    out.extend_from_slice(b"/hm=");
    push_hour_minute(out, minute_of_day(ms));
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
