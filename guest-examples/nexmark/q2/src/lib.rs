//! Nexmark q2, selection: `auction,price` of the bids on every auction
//! whose id is a multiple of `modulus` (default 123; `SELECT auction,
//! price FROM bid WHERE MOD(auction, 123) = 0`).

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, Error, OpenContext, Operator, Result, export_operator};

struct Select {
    modulus: u64,
}

impl Operator for Select {
    fn open(ctx: &mut OpenContext) -> Result<Self> {
        let modulus = ctx.param_or("modulus", 123u64)?;
        if modulus == 0 {
            return Err(Error::msg("params.modulus must be at least 1"));
        }
        Ok(Select { modulus })
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        if let Event::Bid(b) = Event::decode(input.payload)?
            && b.auction % self.modulus == 0
        {
            ctx.emit_with(None, input.timestamp, |out| {
                let mut n = itoa::Buffer::new();
                out.extend_from_slice(n.format(b.auction).as_bytes());
                out.push(b',');
                out.extend_from_slice(n.format(b.price).as_bytes());
            });
        }
        Ok(())
    }
}

export_operator!(Select);
