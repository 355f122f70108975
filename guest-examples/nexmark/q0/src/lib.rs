//! Nexmark q0, pass-through: every bid as
//! `auction,bidder,price,date_time,extra` (`SELECT auction, bidder, price,
//! dateTime, extra FROM bid`). It measures what decoding events and
//! writing results costs, with no state.

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct PassThrough;

impl Operator for PassThrough {
    fn open(_: &mut OpenContext) -> Result<Self> {
        Ok(PassThrough)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        if let Event::Bid(b) = Event::decode(input.payload)? {
            ctx.emit_with(None, input.timestamp, |out| {
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

export_operator!(PassThrough);
