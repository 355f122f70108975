//! Nexmark q1, currency conversion: every bid with its price in euros,
//! `auction,bidder,price,date_time,extra` where price is `0.908 * price`
//! written exactly with three decimals (`SELECT auction, bidder, 0.908 *
//! price, dateTime, extra FROM bid`; the SQL's DECIMAL, not a float).

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct Convert;

impl Operator for Convert {
    fn open(_: &mut OpenContext) -> Result<Self> {
        Ok(Convert)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        if let Event::Bid(b) = Event::decode(input.payload)? {
            // 0.908 * price, in thousandths of a dollar-cent: exact.
            let milli = u128::from(b.price) * 908;
            ctx.emit_with(None, input.timestamp, |out| {
                let mut n = itoa::Buffer::new();
                for v in [b.auction, b.bidder] {
                    out.extend_from_slice(n.format(v).as_bytes());
                    out.push(b',');
                }
                out.extend_from_slice(n.format(milli / 1000).as_bytes());
                out.push(b'.');
                let frac = (milli % 1000) as u16;
                out.extend_from_slice(&[
                    b'0' + (frac / 100) as u8,
                    b'0' + (frac / 10 % 10) as u8,
                    b'0' + (frac % 10) as u8,
                ]);
                out.push(b',');
                out.extend_from_slice(n.format(b.date_time).as_bytes());
                out.push(b',');
                out.extend_from_slice(b.extra.as_bytes());
            });
        }
        Ok(())
    }
}

export_operator!(Convert);
