//! The native loops of the Nexmark benchmark: each query written directly
//! over the generator's events in one thread with hash maps, its lines
//! formatted into one reused buffer ([`Blackhole`]), so Weir's figures have
//! the machine's limit beside them. Each loop computes what the query's
//! operators compute (`docs/nexmark.md`), on the in-order stream the
//! benchmark generates.

use nexmark::event::{Auction, Bid, Event};
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use weir_tests::nexmark::config;
use weir_tests::repo_root;

/// Events/s of the plain loop for `query` over the first `events` events.
pub fn run_native(query: &str, events: u64) -> f64 {
    let generator = nexmark::EventGenerator::new(config()).take(events as usize);
    // q13's side table, read before the clock starts.
    let side = (query == "q13").then(side_table);
    let started = Instant::now();
    let mut sink = Blackhole::default();
    match query {
        "q0" | "q1" | "q2" => {
            for e in generator {
                if let Event::Bid(b) = e {
                    stateless(query, &b, &mut sink);
                }
            }
        }
        "q3" => q3(generator, &mut sink),
        "q4" => q4(generator, &mut sink),
        "q5" => q5(generator, &mut sink),
        "q6" => q6(generator, &mut sink),
        "q7" => q7(generator, &mut sink),
        "q8" => q8(generator, &mut sink),
        "q9" => q9(generator, &mut sink),
        "q10" => q10(generator, &mut sink),
        "q11" => q11(generator, &mut sink),
        "q12" => q12(generator, &mut sink),
        "q13" => q13(generator, side.as_ref().unwrap(), &mut sink),
        "q14" => q14(generator, &mut sink),
        "q15" => q15(generator, &mut sink),
        "q16" => q16(generator, &mut sink),
        "q17" => q17(generator, &mut sink),
        "q18" => q18(generator, &mut sink),
        "q19" => q19(generator, &mut sink),
        "q20" => q20(generator, &mut sink),
        "q21" => q21(generator, &mut sink),
        "q22" => q22(generator, &mut sink),
        other => panic!("no native loop for {other}"),
    }
    let secs = started.elapsed().as_secs_f64();
    std::hint::black_box(sink.bytes);
    events as f64 / secs
}

/// Where the native loops write their results: one reused line buffer.
#[derive(Default)]
struct Blackhole {
    line: String,
    bytes: usize,
}

impl Blackhole {
    fn emit(&mut self, f: impl FnOnce(&mut String)) {
        self.line.clear();
        f(&mut self.line);
        self.bytes += self.line.len();
    }
}

fn stateless(query: &str, b: &Bid, sink: &mut Blackhole) {
    match query {
        "q0" => sink.emit(|l| write!(l, "{},{},{},{},{}", b.auction, b.bidder, b.price, b.date_time, b.extra).unwrap()),
        "q1" => {
            let milli = b.price as u128 * 908;
            sink.emit(|l| {
                write!(l, "{},{},{}.{:03},{},{}", b.auction, b.bidder, milli / 1000, milli % 1000, b.date_time, b.extra)
                    .unwrap()
            })
        }
        _ if b.auction.is_multiple_of(123) => sink.emit(|l| write!(l, "{},{}", b.auction, b.price).unwrap()),
        _ => {}
    }
}

/// q3: category-10 auctions joined with their sellers from OR, ID, CA.
fn q3(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    let mut people: HashMap<usize, Option<(String, String, String)>> = HashMap::new();
    let mut waiting: HashMap<usize, Vec<usize>> = HashMap::new();
    for e in events {
        match e {
            Event::Person(p) => {
                let keep = matches!(p.state.as_str(), "or" | "id" | "ca");
                let pending = waiting.remove(&p.id).unwrap_or_default();
                if keep {
                    for a in pending {
                        sink.emit(|l| write!(l, "{},{},{},{a}", p.name, p.city, p.state).unwrap());
                    }
                }
                people.insert(p.id, keep.then_some((p.name, p.city, p.state)));
            }
            Event::Auction(a) if a.category == 10 => match people.get(&a.seller) {
                Some(Some((name, city, state))) => sink.emit(|l| write!(l, "{name},{city},{state},{}", a.id).unwrap()),
                Some(None) => {}
                None => waiting.entry(a.seller).or_default().push(a.id),
            },
            _ => {}
        }
    }
}

/// q4: the average winning bid per category, updated as maxima change.
fn q4(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    struct Open {
        category: usize,
        start: u64,
        expires: u64,
        max: Option<usize>,
    }
    let mut auctions: HashMap<usize, Open> = HashMap::new();
    let mut early: HashMap<usize, Vec<(u64, usize)>> = HashMap::new();
    let mut categories: HashMap<usize, (u128, u64)> = HashMap::new();
    let mut bid = |a: &mut Open, time: u64, price: usize, sink: &mut Blackhole| {
        if time < a.start || time > a.expires || a.max.is_some_and(|m| m >= price) {
            return;
        }
        let c = categories.entry(a.category).or_default();
        match a.max.replace(price) {
            Some(old) => c.0 = c.0 - old as u128 + price as u128,
            None => *c = (c.0 + price as u128, c.1 + 1),
        }
        let avg = c.0 / u128::from(c.1);
        sink.emit(|l| write!(l, "{},{avg}", a.category).unwrap());
    };
    for e in events {
        match e {
            Event::Auction(a) => {
                let mut open = Open { category: a.category, start: a.date_time, expires: a.expires, max: None };
                for (time, price) in early.remove(&a.id).unwrap_or_default() {
                    bid(&mut open, time, price, sink);
                }
                auctions.insert(a.id, open);
            }
            Event::Bid(b) => match auctions.get_mut(&b.auction) {
                Some(a) => bid(a, b.date_time, b.price, sink),
                None => early.entry(b.auction).or_default().push((b.date_time, b.price)),
            },
            Event::Person(_) => {}
        }
    }
}

/// q5: per 10 s window sliding by 2 s, the auctions with the most bids.
fn q5(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    let mut windows: BTreeMap<u64, HashMap<usize, u64>> = BTreeMap::new();
    let close = |windows: &mut BTreeMap<u64, HashMap<usize, u64>>, before: u64, sink: &mut Blackhole| {
        while let Some(entry) = windows.first_entry() {
            if *entry.key() + 10_000 > before {
                break;
            }
            let (start, counts) = entry.remove_entry();
            let max = counts.values().copied().max().unwrap_or(0);
            for (auction, n) in counts.into_iter().filter(|(_, n)| *n == max) {
                sink.emit(|l| write!(l, "{start},{auction},{n}").unwrap());
            }
        }
    };
    for e in events {
        if let Event::Bid(b) = e {
            let t = b.date_time;
            close(&mut windows, t + 1, sink);
            let last = t - t % 2_000;
            for start in (0..5).map(|i| last.saturating_sub(i * 2_000)) {
                *windows.entry(start).or_default().entry(b.auction).or_default() += 1;
            }
        }
    }
    close(&mut windows, u64::MAX, sink);
}

/// q6: per seller, the average (rounded down) of the final prices of its
/// last 11 closed auctions, one `seller,avg` line per auction with a
/// final price (its highest bid between its start and expiry, both
/// inclusive), written when the stream passes its expiry, in the order
/// auctions close (`expires`, then id).
fn q6(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    struct Open {
        seller: usize,
        start: u64,
        expires: u64,
        max: Option<usize>,
    }
    let mut open: HashMap<usize, Open> = HashMap::new();
    let mut closing: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    // The highest price bid in the current millisecond on an auction not
    // seen yet: valid if the auction comes in the same millisecond.
    let mut early: HashMap<usize, usize> = HashMap::new();
    let mut now = 0;
    // Per seller, the final prices of its last 10 closed auctions.
    let mut sellers: HashMap<usize, VecDeque<usize>> = HashMap::new();
    let mut close = |a: Open, sink: &mut Blackhole| {
        let Some(price) = a.max else { return };
        let last = sellers.entry(a.seller).or_default();
        let avg = (last.iter().sum::<usize>() + price) / (last.len() + 1);
        sink.emit(|l| write!(l, "{},{avg}", a.seller).unwrap());
        if last.len() == 10 {
            last.pop_front();
        }
        last.push_back(price);
    };
    for e in events {
        let t = e.timestamp();
        if t > now {
            now = t;
            early.clear();
        }
        while let Some(&Reverse((expires, id))) = closing.peek()
            && expires < t
        {
            closing.pop();
            close(open.remove(&id).unwrap(), sink);
        }
        match e {
            Event::Auction(a) => {
                let max = early.remove(&a.id);
                closing.push(Reverse((a.expires, a.id)));
                open.insert(a.id, Open { seller: a.seller, start: a.date_time, expires: a.expires, max });
            }
            Event::Bid(b) => match open.get_mut(&b.auction) {
                Some(a) => {
                    if a.start <= t && t <= a.expires && a.max.is_none_or(|m| m < b.price) {
                        a.max = Some(b.price);
                    }
                }
                None => {
                    let max = early.entry(b.auction).or_default();
                    *max = (*max).max(b.price);
                }
            },
            Event::Person(_) => {}
        }
    }
    while let Some(Reverse((_, id))) = closing.pop() {
        close(open.remove(&id).unwrap(), sink);
    }
}

/// q7: per 10 s tumbling window, the bids at the window's highest price
/// (from the window's first millisecond minus one to its last).
fn q7(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    // The open window: start, max, the bids at it; and the bids of the
    // previous window's last millisecond.
    let mut open: Option<(u64, usize, Vec<Bid>)> = None;
    let mut edge: Vec<Bid> = Vec::new();
    let close = |w: (u64, usize, Vec<Bid>), edge: &[Bid], sink: &mut Blackhole| {
        for b in edge.iter().filter(|b| b.price == w.1).chain(&w.2) {
            sink.emit(|l| write!(l, "{},{},{},{},{}", b.auction, b.price, b.bidder, b.date_time, b.extra).unwrap());
        }
    };
    for e in events {
        let Event::Bid(b) = e else { continue };
        let start = b.date_time - b.date_time % 10_000;
        if open.as_ref().is_some_and(|w| w.0 != start) {
            let w = open.take().unwrap();
            close(w, &edge, sink);
            edge.clear();
        }
        let w = open.get_or_insert_with(|| (start, 0, Vec::new()));
        if b.date_time == start + 9_999 {
            edge.push(b.clone());
        }
        if b.price > w.1 {
            w.1 = b.price;
            w.2.clear();
        }
        if b.price == w.1 {
            w.2.push(b);
        }
    }
    if let Some(w) = open {
        close(w, &[], sink);
    }
}

/// q8: people who opened an auction in the 10 s window they registered in.
fn q8(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    let mut people: HashMap<usize, (String, u64, bool)> = HashMap::new();
    let mut sellers: HashSet<(usize, u64)> = HashSet::new();
    for e in events {
        match e {
            Event::Person(p) => {
                let w = p.date_time - p.date_time % 10_000;
                let sold = sellers.contains(&(p.id, w));
                if sold {
                    sink.emit(|l| write!(l, "{},{},{w}", p.id, p.name).unwrap());
                }
                people.insert(p.id, (p.name, w, sold));
            }
            Event::Auction(a) => {
                let w = a.date_time - a.date_time % 10_000;
                sellers.insert((a.seller, w));
                if let Some((name, pw, done)) = people.get_mut(&a.seller)
                    && *pw == w
                    && !*done
                {
                    *done = true;
                    sink.emit(|l| write!(l, "{},{name},{w}", a.seller).unwrap());
                }
            }
            Event::Bid(_) => {}
        }
    }
}

/// q9: per auction, its winning bid (the highest price between its start
/// and expiry, both inclusive; ties: the earliest, the lower bidder, the
/// first `extra`), the auction's columns then the bid's, written when the
/// stream passes its expiry.
fn q9(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    // Whether `b` ranks above `than`.
    fn better(b: &Bid, than: &Bid) -> bool {
        let rank = |b: &Bid| (Reverse(b.price), b.date_time, b.bidder);
        (rank(b), b.extra.as_bytes()) < (rank(than), than.extra.as_bytes())
    }
    let mut open: HashMap<usize, (Auction, Option<Bid>)> = HashMap::new();
    let mut closing: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    // The best bid in the current millisecond on an auction not seen yet:
    // valid if the auction comes in the same millisecond.
    let mut early: HashMap<usize, Bid> = HashMap::new();
    let mut now = 0;
    let close = |(a, best): (Auction, Option<Bid>), sink: &mut Blackhole| {
        let Some(b) = best else { return };
        sink.emit(|l| {
            write!(
                l,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                a.id,
                a.item_name,
                a.description,
                a.initial_bid,
                a.reserve,
                a.date_time,
                a.expires,
                a.seller,
                a.category,
                a.extra,
                b.auction,
                b.bidder,
                b.price,
                b.date_time,
                b.extra
            )
            .unwrap()
        })
    };
    for e in events {
        let t = e.timestamp();
        if t > now {
            now = t;
            early.clear();
        }
        while let Some(&Reverse((expires, id))) = closing.peek()
            && expires < t
        {
            closing.pop();
            close(open.remove(&id).unwrap(), sink);
        }
        match e {
            Event::Auction(a) => {
                let best = early.remove(&a.id);
                closing.push(Reverse((a.expires, a.id)));
                open.insert(a.id, (a, best));
            }
            Event::Bid(b) => match open.get_mut(&b.auction) {
                Some((a, best)) => {
                    if a.date_time <= t && t <= a.expires && best.as_ref().is_none_or(|w| better(&b, w)) {
                        *best = Some(b);
                    }
                }
                None => match early.entry(b.auction) {
                    Entry::Occupied(mut w) if better(&b, w.get()) => {
                        w.insert(b);
                    }
                    Entry::Occupied(_) => {}
                    Entry::Vacant(v) => {
                        v.insert(b);
                    }
                },
            },
            Event::Person(_) => {}
        }
    }
    while let Some(Reverse((_, id))) = closing.pop() {
        close(open.remove(&id).unwrap(), sink);
    }
}

/// q10: every bid's line `auction,bidder,price,date_time,extra` with its
/// directory `dt=yyyy-MM-dd/hm=HH:mm` (UTC), both into the blackhole. No
/// files: Weir's job writes them through a `transactional-file` sink,
/// which the benchmark replaces with a discard sink (`run_weir`).
fn q10(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    for e in events {
        if let Event::Bid(b) = e {
            sink.emit(|l| {
                l.push_str("dt=");
                write_date(l, b.date_time / DAY_MS);
                l.push_str("/hm=");
                write_minute(l, b.date_time);
                write!(l, "{},{},{},{},{}", b.auction, b.bidder, b.price, b.date_time, b.extra).unwrap()
            });
        }
    }
}

/// q11: bids per bidder session (10 s gap), each session written when a
/// bid comes more than the gap after it (the generator's bids are in time
/// order) or at the end.
fn q11(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    const GAP: u64 = 10_000;
    // bidder -> (start, last, bids)
    let mut open: HashMap<usize, (u64, u64, u64)> = HashMap::new();
    let write = |bidder: usize, (start, last, n): (u64, u64, u64), sink: &mut Blackhole| {
        sink.emit(|l| write!(l, "{bidder},{n},{start},{}", last + GAP).unwrap())
    };
    for e in events {
        if let Event::Bid(b) = e {
            let t = b.date_time;
            match open.get_mut(&b.bidder) {
                Some(s) if t < s.1 + GAP => {
                    s.1 = s.1.max(t);
                    s.2 += 1;
                }
                Some(s) => {
                    let done = std::mem::replace(s, (t, t, 1));
                    write(b.bidder, done, sink);
                }
                None => {
                    open.insert(b.bidder, (t, t, 1));
                }
            }
        }
    }
    for (bidder, s) in open {
        write(bidder, s, sink);
    }
}

/// q12: per bidder and 10 s of wall-clock time, its bids, as
/// `bidder,bid_count,starttime,endtime`; the clock is read once per 1024
/// events (the host reads it once per call), and when its window moves
/// on, every open window is written (the host's processing-time timers),
/// the rest at the end.
fn q12(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    const SIZE: u64 = 10_000;
    let mut counts: HashMap<usize, u64> = HashMap::new();
    let mut start = 0;
    let flush = |counts: &mut HashMap<usize, u64>, start: u64, sink: &mut Blackhole| {
        for (bidder, n) in counts.drain() {
            sink.emit(|l| write!(l, "{bidder},{n},{start},{}", start + SIZE).unwrap());
        }
    };
    for (i, e) in events.enumerate() {
        if i % 1024 == 0 {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
            if now - now % SIZE > start {
                flush(&mut counts, start, sink);
                start = now - now % SIZE;
            }
        }
        if let Event::Bid(b) = e {
            *counts.entry(b.bidder).or_default() += 1;
        }
    }
    flush(&mut counts, start, sink);
}

/// q13's side table, `guest-examples/nexmark/side_input.csv`: key -> the
/// values of its `key,value` lines.
fn side_table() -> HashMap<u64, Vec<String>> {
    let text = std::fs::read_to_string(repo_root().join("guest-examples/nexmark/side_input.csv")).unwrap();
    let mut table: HashMap<u64, Vec<String>> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line.split_once(',').unwrap();
        table.entry(key.parse().unwrap()).or_default().push(value.to_string());
    }
    table
}

/// q13: every bid joined with the side table's rows for `auction mod
/// 10000`, `auction,bidder,price,date_time,value` per row.
fn q13(events: impl Iterator<Item = Event>, side: &HashMap<u64, Vec<String>>, sink: &mut Blackhole) {
    for e in events {
        if let Event::Bid(b) = e {
            for value in side.get(&(b.auction as u64 % 10_000)).into_iter().flatten() {
                sink.emit(|l| write!(l, "{},{},{},{},{value}", b.auction, b.bidder, b.price, b.date_time).unwrap());
            }
        }
    }
}

/// q14: bids whose price in euros (× 0.908, exact) is strictly between 1
/// and 50 million, with the time of day of their UTC hour and the `c`s in
/// `extra`.
fn q14(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    for e in events {
        let Event::Bid(b) = e else { continue };
        let milli = b.price as u128 * 908;
        if milli <= 1_000_000_000 || milli >= 50_000_000_000 {
            continue;
        }
        let kind = match b.date_time / 3_600_000 % 24 {
            8..=18 => "dayTime",
            7 | 19 => "otherTime",
            _ => "nightTime",
        };
        let cs = b.extra.bytes().filter(|&c| c == b'c').count();
        sink.emit(|l| {
            write!(
                l,
                "{},{},{}.{:03},{kind},{},{},{cs}",
                b.auction,
                b.bidder,
                milli / 1000,
                milli % 1000,
                b.date_time,
                b.extra
            )
            .unwrap()
        });
    }
}

const DAY_MS: u64 = 86_400_000;

/// Writes `yyyy-MM-dd`, the UTC date `days` after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn write_date(out: &mut String, days: u64) {
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    write!(out, "{year:04}-{month:02}-{day:02}").unwrap();
}

/// Writes `HH:mm`, the UTC time of day of `ms`.
fn write_minute(out: &mut String, ms: u64) {
    let minute = ms % DAY_MS / 60_000;
    write!(out, "{:02}:{:02}", minute / 60, minute % 60).unwrap();
}

/// The price rank of q15-q17: 1 below 10 000, 2 below 1 000 000, else 3.
fn rank(price: usize) -> usize {
    match price {
        0..10_000 => 1,
        10_000..1_000_000 => 2,
        _ => 3,
    }
}

/// q15 and q16's counts of one group: bids, distinct bidders and distinct
/// auctions, in all (index 0) and per rank, with the ranks each bidder and
/// auction has been counted in (a bit per rank).
#[derive(Default)]
struct Distinct {
    bids: [u64; 4],
    bidders: [u64; 4],
    auctions: [u64; 4],
    bidder_ranks: HashMap<usize, u8>,
    auction_ranks: HashMap<usize, u8>,
}

impl Distinct {
    fn add(&mut self, price: usize, bidder: usize, auction: usize) {
        let r = rank(price);
        self.bids[0] += 1;
        self.bids[r] += 1;
        for (seen, counts, id) in [
            (&mut self.bidder_ranks, &mut self.bidders, bidder),
            (&mut self.auction_ranks, &mut self.auctions, auction),
        ] {
            let ranks = seen.entry(id).or_insert_with(|| {
                counts[0] += 1;
                0
            });
            if *ranks & (1 << r) == 0 {
                *ranks |= 1 << r;
                counts[r] += 1;
            }
        }
    }

    /// `,` and the twelve counts.
    fn write(&self, out: &mut String) {
        for n in self.bids.iter().chain(&self.bidders).chain(&self.auctions) {
            write!(out, ",{n}").unwrap();
        }
    }
}

/// q15: per UTC day, bids, distinct bidders and distinct auctions, in all
/// and per price rank, written when the stream passes the day's end.
fn q15(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    let mut open: Option<(u64, Distinct)> = None;
    let close = |(day, stats): (u64, Distinct), sink: &mut Blackhole| {
        sink.emit(|l| {
            write_date(l, day);
            stats.write(l);
        })
    };
    for e in events {
        let Event::Bid(b) = e else { continue };
        let day = b.date_time / DAY_MS;
        if open.as_ref().is_some_and(|o| o.0 != day) {
            close(open.take().unwrap(), sink);
        }
        open.get_or_insert_with(|| (day, Distinct::default())).1.add(b.price, b.bidder, b.auction);
    }
    if let Some(o) = open {
        close(o, sink);
    }
}

/// q16: per channel and UTC day, the latest minute, and q15's counts,
/// written when the stream passes the day's end.
fn q16(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    // The open day's groups: channel -> (latest time, counts).
    let mut day = 0;
    let mut groups: HashMap<String, (u64, Distinct)> = HashMap::new();
    let close = |day: u64, groups: &mut HashMap<String, (u64, Distinct)>, sink: &mut Blackhole| {
        for (channel, (latest, stats)) in groups.drain() {
            sink.emit(|l| {
                write!(l, "{channel},").unwrap();
                write_date(l, day);
                l.push(',');
                write_minute(l, latest);
                stats.write(l);
            });
        }
    };
    for e in events {
        let Event::Bid(b) = e else { continue };
        if b.date_time / DAY_MS != day {
            close(day, &mut groups, sink);
            day = b.date_time / DAY_MS;
        }
        let (latest, stats) = groups.entry(b.channel).or_default();
        *latest = (*latest).max(b.date_time);
        stats.add(b.price, b.bidder, b.auction);
    }
    close(day, &mut groups, sink);
}

/// q17: per auction and UTC day, bids in all and per price rank, and the
/// lowest, highest, average and total price, written when the stream
/// passes the day's end.
fn q17(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    struct Stats {
        bids: [u64; 4],
        min: usize,
        max: usize,
        sum: usize,
    }
    // The open day's groups by auction.
    let mut day = 0;
    let mut groups: HashMap<usize, Stats> = HashMap::new();
    let close = |day: u64, groups: &mut HashMap<usize, Stats>, sink: &mut Blackhole| {
        for (auction, s) in groups.drain() {
            sink.emit(|l| {
                write!(l, "{auction},").unwrap();
                write_date(l, day);
                let [n, r1, r2, r3] = s.bids;
                write!(l, ",{n},{r1},{r2},{r3},{},{},{},{}", s.min, s.max, s.sum as u64 / n, s.sum).unwrap();
            });
        }
    };
    for e in events {
        let Event::Bid(b) = e else { continue };
        if b.date_time / DAY_MS != day {
            close(day, &mut groups, sink);
            day = b.date_time / DAY_MS;
        }
        let s = groups.entry(b.auction).or_insert(Stats { bids: [0; 4], min: usize::MAX, max: 0, sum: 0 });
        s.bids[0] += 1;
        s.bids[rank(b.price)] += 1;
        s.min = s.min.min(b.price);
        s.max = s.max.max(b.price);
        s.sum += b.price;
    }
    close(day, &mut groups, sink);
}

/// `auction,bidder,price,channel,url,date_time,extra`.
fn bid_line(b: &Bid) -> String {
    format!("{},{},{},{},{},{},{}", b.auction, b.bidder, b.price, b.channel, b.url, b.date_time, b.extra)
}

/// q18: per bidder and auction, the latest bid (ties: the higher price,
/// then the greater line), its line written each time it changes; every
/// pair's latest is kept, as the SQL forgets nothing.
fn q18(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    let mut latest: HashMap<(usize, usize), (u64, usize, String)> = HashMap::new();
    for e in events {
        let Event::Bid(b) = e else { continue };
        let line = bid_line(&b);
        match latest.entry((b.bidder, b.auction)) {
            Entry::Occupied(mut o) => {
                let l = o.get_mut();
                if (b.date_time, b.price, line.as_bytes()) > (l.0, l.1, l.2.as_bytes()) {
                    sink.emit(|out| out.push_str(&line));
                    *l = (b.date_time, b.price, line);
                }
            }
            Entry::Vacant(v) => {
                sink.emit(|out| out.push_str(&line));
                v.insert((b.date_time, b.price, line));
            }
        }
    }
}

/// q19: per auction, its 10 highest bids (ties: the earlier, then the
/// smaller line); when a bid enters at a rank, every row from that rank
/// down is written with its new rank, `line,rank`. Every auction's rows
/// are kept, as the SQL forgets nothing.
fn q19(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    // Per auction, (price, time, line) best first, at most 10.
    let mut top: HashMap<usize, Vec<(usize, u64, String)>> = HashMap::new();
    for e in events {
        let Event::Bid(b) = e else { continue };
        let rows = top.entry(b.auction).or_default();
        if rows.len() == 10 && rows.last().is_some_and(|r| (Reverse(r.0), r.1) < (Reverse(b.price), b.date_time)) {
            continue;
        }
        let row = (b.price, b.date_time, bid_line(&b));
        let ranks_above = |r: &(usize, u64, String)| (Reverse(r.0), r.1, &r.2) <= (Reverse(row.0), row.1, &row.2);
        let at = rows.partition_point(ranks_above);
        if at == 10 {
            continue;
        }
        rows.insert(at, row);
        rows.truncate(10);
        for (i, r) in rows.iter().enumerate().skip(at) {
            sink.emit(|l| write!(l, "{},{}", r.2, i + 1).unwrap());
        }
    }
}

/// q20: every bid on a category-10 auction, the bid's columns then the
/// auction's, whichever comes first (bids on auctions not seen yet wait);
/// every auction is kept, as the SQL's join forgets nothing.
fn q20(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    // Auction id -> its part of the line for category 10, None for others.
    let mut auctions: HashMap<usize, Option<String>> = HashMap::new();
    // Bids that came before their auction: their part of the line.
    let mut waiting: HashMap<usize, Vec<String>> = HashMap::new();
    let bid_part = |b: &Bid, l: &mut String| {
        write!(l, "{},{},{},{},{},{},{},", b.auction, b.bidder, b.price, b.channel, b.url, b.date_time, b.extra)
            .unwrap()
    };
    for e in events {
        match e {
            Event::Auction(a) => {
                let part = (a.category == 10).then(|| {
                    format!(
                        "{},{},{},{},{},{},{},{},{}",
                        a.item_name,
                        a.description,
                        a.initial_bid,
                        a.reserve,
                        a.date_time,
                        a.expires,
                        a.seller,
                        a.category,
                        a.extra
                    )
                });
                let bids = waiting.remove(&a.id).unwrap_or_default();
                if let Some(part) = &part {
                    for bid in bids {
                        sink.emit(|l| {
                            l.push_str(&bid);
                            l.push_str(part)
                        });
                    }
                }
                auctions.insert(a.id, part);
            }
            Event::Bid(b) => match auctions.get(&b.auction) {
                Some(Some(part)) => sink.emit(|l| {
                    bid_part(&b, l);
                    l.push_str(part)
                }),
                Some(None) => {}
                None => {
                    let mut line = String::new();
                    bid_part(&b, &mut line);
                    waiting.entry(b.auction).or_default().push(line);
                }
            },
            Event::Person(_) => {}
        }
    }
}

/// q21: bids with a channel id, from the channel's name for the four known
/// ones (Unicode lower case), else from the URL's `channel_id` parameter
/// (at the start or after a `&`); bids with neither are dropped.
fn q21(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    const KNOWN: [(&str, &str); 4] = [("apple", "0"), ("google", "1"), ("facebook", "2"), ("baidu", "3")];
    const PARAM: &str = "channel_id=";
    for e in events {
        let Event::Bid(b) = e else { continue };
        let known = if b.channel.is_ascii() {
            KNOWN.iter().find(|(name, _)| b.channel.eq_ignore_ascii_case(name))
        } else {
            let lower = b.channel.to_lowercase();
            KNOWN.iter().find(|(name, _)| lower == *name)
        };
        let id = known.map(|(_, id)| *id).or_else(|| {
            let from = match b.url.strip_prefix(PARAM) {
                Some(_) => PARAM.len(),
                None => b.url.find("&channel_id=")? + 1 + PARAM.len(),
            };
            let rest = &b.url[from..];
            Some(rest.split('&').next().unwrap_or_default())
        });
        if let Some(id) = id {
            sink.emit(|l| write!(l, "{},{},{},{},{id}", b.auction, b.bidder, b.price, b.channel).unwrap());
        }
    }
}

/// q22: every bid with the URL's parts 3, 4 and 5 split at `/` (Flink's
/// `SPLIT_INDEX`), a missing part as an empty field.
fn q22(events: impl Iterator<Item = Event>, sink: &mut Blackhole) {
    for e in events {
        let Event::Bid(b) = e else { continue };
        let mut dirs = b.url.split('/').skip(3);
        let mut dir = || dirs.next().unwrap_or_default();
        let (d1, d2, d3) = (dir(), dir(), dir());
        sink.emit(|l| write!(l, "{},{},{},{},{d1},{d2},{d3}", b.auction, b.bidder, b.price, b.channel).unwrap());
    }
}
