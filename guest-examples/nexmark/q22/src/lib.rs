//! Nexmark q22, URL directories: every bid with the first three
//! directories of its URL. The reference SQL:
//!
//! ```sql
//! SELECT auction, bidder, price, channel,
//!     SPLIT_INDEX(url, '/', 3) as dir1,
//!     SPLIT_INDEX(url, '/', 4) as dir2,
//!     SPLIT_INDEX(url, '/', 5) as dir3 FROM bid;
//! ```
//!
//! Output per bid: `auction,bidder,price,channel,dir1,dir2,dir3`.
//!
//! `SPLIT_INDEX(url, '/', n)` is Flink's: the URL split at every `/`,
//! keeping empty parts (`https://www.nexmark.com/a/b/c/item.htm` is
//! `https:`, `""`, `www.nexmark.com`, `a`, `b`, `c`, `item.htm`), and part `n`
//! counted from 0; `NULL` when there is no part `n` (an empty URL has no
//! parts at all). `NULL` is written as an empty field, as Flink's CSV
//! format writes it by default, so it looks like an empty part: `https://x//`
//! splits into `https:`, `""`, `x`, `""`, `""`, so `dir1` and `dir2` are empty
//! parts and `dir3` is `NULL`, and all three are written empty. A generated
//! URL always has all three.
//!
//! Stateless: one line per bid, emitted as the bid is processed.

use weir_sdk::nexmark::Event;
use weir_sdk::{Context, Element, OpenContext, Operator, Result, export_operator};

struct UrlDirectories;

impl Operator for UrlDirectories {
    fn open(_: &mut OpenContext) -> Result<Self> {
        Ok(UrlDirectories)
    }

    fn process(&mut self, ctx: &mut Context, input: Element<'_>) -> Result<()> {
        let Event::Bid(b) = Event::decode(input.payload)? else { return Ok(()) };
        // Parts 3, 4 and 5. (Flink splits an empty URL into no parts, Rust
        // into one empty part: either way there is no part 3.)
        let mut parts = b.url.split('/').skip(3);
        let dirs = [parts.next(), parts.next(), parts.next()];
        ctx.emit_with(None, input.timestamp, |out| {
            let mut n = itoa::Buffer::new();
            for v in [b.auction, b.bidder, b.price] {
                out.extend_from_slice(n.format(v).as_bytes());
                out.push(b',');
            }
            out.extend_from_slice(b.channel.as_bytes());
            for dir in dirs {
                out.push(b',');
                // NULL: an empty field.
                out.extend_from_slice(dir.unwrap_or_default().as_bytes());
            }
        });
        Ok(())
    }
}

export_operator!(UrlDirectories);
