//! A bid's columns as the queries that select them all write them (q18,
//! q19, q20): `auction,bidder,price,channel,url,date_time,extra`, times in
//! milliseconds since the epoch, strings as they are.

use weir_sdk::nexmark::Bid;

/// `auction,bidder,price,channel,url,date_time,extra` of `b`.
pub fn bid_line(b: &Bid<'_>) -> String {
    let mut n = itoa::Buffer::new();
    let mut line = String::with_capacity(64 + b.channel.len() + b.url.len() + b.extra.len());
    for v in [b.auction, b.bidder, b.price] {
        line.push_str(n.format(v));
        line.push(',');
    }
    for s in [&b.channel, &b.url] {
        line.push_str(s);
        line.push(',');
    }
    line.push_str(n.format(b.date_time));
    line.push(',');
    line.push_str(&b.extra);
    line
}
