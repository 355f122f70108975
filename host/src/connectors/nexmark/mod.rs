//! `kind = "nexmark"` source: the Nexmark benchmark's online auction
//! (people, auctions and bids), made by the reference generator (the
//! `nexmark` crate, a port of the Java one), for the queries in
//! `guest-examples/nexmark/` and for measuring Weir against other stream
//! processors on the field's standard workload ([`docs/nexmark.md`]).
//!
//! Event `i` is a pure function of `i` and the generator settings, so a
//! stream can be split without coordination: the events are dealt into
//! `splits` interleaved splits (split `s` holds the events `i` with
//! `i mod splits == s`), and subtask `k` of `parallelism` reads the splits
//! `s` with `s mod parallelism == k`, merged back into index order. A
//! checkpoint records each split's next index (as a partitioned source,
//! topic `nexmark`), so a restore at another parallelism deals the splits
//! out again and resumes each where it stopped.
//!
//! Each event is one record: its payload the event in postcard (or JSON,
//! `format = "json"`), the layout `weir_sdk::nexmark::Event` reads; its key
//! an id in decimal ASCII (a person's id; an auction's id, seller or
//! category; a bid's auction or bidder); its timestamp the event time.
//!
//! With two rates (`rate_shape`), event times come from
//! [`event_time`], not the crate, whose times for a changing rate are
//! wrong (see there).
//!
//! [`docs/nexmark.md`]: ../../../docs/nexmark.md

mod event_time;

use super::{OptionsError, options};
use crate::config::ConnectorSpec;
use crate::config::units::HumanDuration;
use crate::runtime::error::ConnectorError;
use crate::runtime::source::{Halt, Source, SourceContext};
use nexmark::config::{NexmarkConfig, RateShape};
use nexmark::event::Event;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The topic name under which checkpoints record the splits' positions.
const TOPIC: &str = "nexmark";

/// Event time starts here unless `base_time` says otherwise (ms since the
/// epoch, 2025-01-01T00:00:00Z): fixed, so every run makes the same events.
pub const BASE_TIME: i64 = 1_735_689_600_000;

/// The most splits a stream may have.
const MAX_SPLITS: u32 = 1024;

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Events to make in all (of every kind, whether kept or not); unset,
    /// the stream never ends.
    events: Option<u64>,
    /// At most this many records (kept events) per second, over all
    /// subtasks.
    events_per_second: Option<f64>,
    /// The kinds of event to emit; the others are made (they take their
    /// place in the stream) but dropped.
    #[serde(default = "all_kinds")]
    kinds: Vec<Kind>,
    #[serde(default)]
    auction_key: AuctionKey,
    #[serde(default)]
    bid_key: BidKey,
    #[serde(default)]
    format: Format,
    /// How many interleaved splits the stream is dealt into: the most
    /// subtasks that can share it, fixed for the job's life (checkpoints
    /// record a position per split).
    #[serde(default = "default_splits")]
    splits: u32,
    /// Event time of the first event, ms since the epoch.
    base_time: Option<i64>,
    /// Picks another stream of the same shape and timing (0: the
    /// reference stream).
    seed: Option<u64>,
    /// Watermarks trail the largest timestamp by this much; unset, by what
    /// `out_of_order_group_size` can reorder.
    max_out_of_orderness: Option<HumanDuration>,
    // The reference generator's own settings, under its names, each
    // defaulting to the reference value.
    /// Events per second of event time (the generator's `firstEventRate`).
    first_event_rate: Option<u64>,
    /// The other rate of a rate that changes (`nextEventRate`).
    next_event_rate: Option<u64>,
    rate_shape: Option<Shape>,
    /// How long one round of rate changes takes in event time.
    rate_period: Option<HumanDuration>,
    /// Events are shuffled within groups of this many (1: in order).
    out_of_order_group_size: Option<usize>,
    person_proportion: Option<usize>,
    auction_proportion: Option<usize>,
    bid_proportion: Option<usize>,
    num_categories: Option<usize>,
    active_people: Option<usize>,
    in_flight_auctions: Option<usize>,
    avg_person_byte_size: Option<usize>,
    avg_auction_byte_size: Option<usize>,
    avg_bid_byte_size: Option<usize>,
    hot_seller_ratio: Option<usize>,
    hot_auction_ratio: Option<usize>,
    hot_bidder_ratio: Option<usize>,
}

/// A kind of event.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Person,
    Auction,
    Bid,
}

fn all_kinds() -> Vec<Kind> {
    vec![Kind::Person, Kind::Auction, Kind::Bid]
}

fn default_splits() -> u32 {
    16
}

/// What an auction is keyed by.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum AuctionKey {
    #[default]
    Id,
    Seller,
    Category,
}

/// What a bid is keyed by.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum BidKey {
    #[default]
    Auction,
    Bidder,
}

/// The payload's encoding.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Postcard,
    Json,
}

/// The generator's rate shape.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Shape {
    Square,
    Sine,
}

/// A configured Nexmark source.
pub struct Nexmark {
    config: NexmarkConfig,
    events: Option<u64>,
    rate: Option<f64>,
    kinds: [bool; 3],
    auction_key: AuctionKey,
    bid_key: BidKey,
    format: Format,
    splits: u32,
    lag_ms: i64,
}

/// Builds the source from its entry.
pub fn build(spec: &ConnectorSpec, _base: &Path) -> Result<Arc<dyn Source>, OptionsError> {
    let o: Options = options(spec, "source")?;
    let bad = |message: String| OptionsError { node: format!("source '{}'", spec.id), message };
    if !(1..=MAX_SPLITS).contains(&o.splits) {
        return Err(bad(format!("splits = {}: must be between 1 and {MAX_SPLITS}", o.splits)));
    }
    if spec.parallelism > o.splits {
        return Err(bad(format!(
            "parallelism {} is more than splits = {}: each subtask reads whole splits (raise splits, which a restore must keep)",
            spec.parallelism, o.splits
        )));
    }
    if let Some(problem) = super::file_source::rate_problem(o.events_per_second) {
        return Err(bad(problem.replace("records_per_second", "events_per_second")));
    }
    if o.kinds.is_empty() {
        return Err(bad("kinds = []: name at least one of \"person\", \"auction\", \"bid\"".into()));
    }
    let config = generator_config(&o, o.base_time.unwrap_or(BASE_TIME), &format!("source '{}'", spec.id))?;
    let lag_ms = match o.max_out_of_orderness {
        Some(d) => d.0.as_millis().min(i64::MAX as u128) as i64,
        None => reorder_span_ms(&config),
    };
    let mut kinds = [false; 3];
    for k in &o.kinds {
        kinds[*k as usize] = true;
    }
    Ok(Arc::new(Nexmark {
        config,
        events: o.events,
        // The context paces each subtask; the option is the whole stream's.
        rate: o.events_per_second.map(|r| r / f64::from(spec.parallelism.max(1))),
        kinds,
        auction_key: o.auction_key,
        bid_key: o.bid_key,
        format: o.format,
        splits: o.splits,
        lag_ms,
    }))
}

/// The generator's configuration, every value checked against what the
/// generator divides by, indexes with or allocates.
fn generator_config(g: &Options, base_time: i64, node: &str) -> Result<NexmarkConfig, OptionsError> {
    let bad = |message: String| OptionsError { node: node.to_string(), message };
    let base_time =
        u64::try_from(base_time).map_err(|_| bad(format!("base_time = {base_time}: must not be negative")))?;
    let mut c = NexmarkConfig { base_time, ..NexmarkConfig::default() };
    let at_least_one = |name: &str, v: Option<usize>, default: usize, max: usize| match v {
        None => Ok(default),
        Some(v) if (1..=max).contains(&v) => Ok(v),
        Some(v) => Err(bad(format!("{name} = {v}: must be between 1 and {max}"))),
    };
    const MILLION: usize = 1_000_000;
    c.out_of_order_group_size = at_least_one("out_of_order_group_size", g.out_of_order_group_size, 1, MILLION)?;
    c.person_proportion = at_least_one("person_proportion", g.person_proportion, c.person_proportion, 1000)?;
    c.auction_proportion = at_least_one("auction_proportion", g.auction_proportion, c.auction_proportion, 1000)?;
    c.bid_proportion = at_least_one("bid_proportion", g.bid_proportion, c.bid_proportion, 1000)?;
    c.num_categories = at_least_one("num_categories", g.num_categories, c.num_categories, MILLION)?;
    c.active_people = at_least_one("active_people", g.active_people, c.active_people, 1_000 * MILLION)?;
    c.in_flight_auctions = at_least_one("in_flight_auctions", g.in_flight_auctions, c.in_flight_auctions, MILLION)?;
    // Sizes bound what one event allocates.
    let size = |name: &str, v: Option<usize>, default: usize| match v {
        None => Ok(default),
        Some(v) if v <= 65_536 => Ok(v),
        Some(v) => Err(bad(format!("{name} = {v}: at most 65536 bytes"))),
    };
    c.avg_person_byte_size = size("avg_person_byte_size", g.avg_person_byte_size, c.avg_person_byte_size)?;
    c.avg_auction_byte_size = size("avg_auction_byte_size", g.avg_auction_byte_size, c.avg_auction_byte_size)?;
    c.avg_bid_byte_size = size("avg_bid_byte_size", g.avg_bid_byte_size, c.avg_bid_byte_size)?;
    c.hot_seller_ratio = at_least_one("hot_seller_ratio", g.hot_seller_ratio, c.hot_seller_ratio, MILLION)?;
    c.hot_auction_ratio = at_least_one("hot_auction_ratio", g.hot_auction_ratio, c.hot_auction_ratio, MILLION)?;
    c.hot_bidder_ratio = at_least_one("hot_bidder_ratio", g.hot_bidder_ratio, c.hot_bidder_ratio, MILLION)?;
    const MAX_RATE: usize = 1_000_000_000;
    let first = at_least_one("first_event_rate", g.first_event_rate.map(|r| r as usize), c.first_rate, MAX_RATE)?;
    let next = at_least_one("next_event_rate", g.next_event_rate.map(|r| r as usize), first, MAX_RATE)?;
    c.first_rate = first;
    c.next_rate = next;
    c.rate_shape = match g.rate_shape.unwrap_or(Shape::Sine) {
        Shape::Square => RateShape::Square,
        // The generator computes the sine's amplitude as first - next in
        // unsigned arithmetic.
        Shape::Sine if next > first => {
            return Err(bad(format!(
                "next_event_rate = {next} is above first_event_rate = {first}: a sine starts at the higher rate (swap them, or rate_shape = \"square\")"
            )));
        }
        Shape::Sine => RateShape::Sine,
    };
    if let Some(p) = g.rate_period {
        let secs = p.0.as_secs();
        if !(1..=86_400 * 365).contains(&secs) {
            return Err(bad(format!("rate_period = {p}: must be between 1 s and a year")));
        }
        c.rate_period = secs as usize;
    }
    // The generator seeds each event's data with the event's id, and ids
    // count from `first_event_id`: starting them a whole number of rounds
    // of kinds later makes other people, auctions and bids (ids included)
    // in the same pattern of kinds and event times.
    const MAX_SEED: u64 = 1 << 32;
    let seed = g.seed.unwrap_or(0);
    if seed > MAX_SEED {
        return Err(bad(format!("seed = {seed}: at most {MAX_SEED}")));
    }
    c.first_event_id = seed as usize * (c.person_proportion + c.auction_proportion + c.bid_proportion);
    Ok(c)
}

/// How far `out_of_order_group_size` can move an event in event time, in
/// ms: a group spans that many events at the slowest rate.
fn reorder_span_ms(c: &NexmarkConfig) -> i64 {
    if c.out_of_order_group_size <= 1 {
        return 0;
    }
    let slowest = c.first_rate.min(c.next_rate).max(1) as u128;
    (c.out_of_order_group_size as u128 * 1000).div_ceil(slowest).min(i64::MAX as u128) as i64
}

impl Source for Nexmark {
    fn watermark_lag_ms(&self) -> Option<i64> {
        Some(self.lag_ms)
    }

    fn records_per_second(&self) -> Option<f64> {
        self.rate
    }

    fn run(&self, ctx: &mut SourceContext) -> Result<(), Halt> {
        let (subtask, parallelism) = ctx.subtask();
        let restored = ctx.partitions.take();
        let mut splits = self.owned_splits(subtask, parallelism, restored.as_ref()).map_err(|e| ctx.fail(e))?;
        let mut positions = BTreeMap::new();
        for s in &splits {
            positions.insert(s.split as i32, s.next as i64);
        }
        ctx.partitions = Some(BTreeMap::from([(TOPIC.to_string(), positions)]));
        let end = self.events.unwrap_or(u64::MAX);
        let mut payload = Vec::with_capacity(1024);
        let mut key = itoa::Buffer::new();
        let times = event_time::EventTimes::new(&self.config);
        loop {
            // The owned split whose next event comes first: the subtask's
            // events in index order, so its event time never goes back.
            let Some(i) = (0..splits.len()).filter(|&i| splits[i].next < end).min_by_key(|&i| splits[i].next) else {
                return Ok(());
            };
            let split = &mut splits[i];
            let mut event = split.events.next().expect("the generator never ends");
            if let Some(times) = &times {
                retime(&mut event, times.of(event_time::event_number(&self.config, split.next)));
            }
            split.next += u64::from(self.splits);
            let next = split.next;
            let id = split.split as i32;
            if let Some(p) = ctx.partitions.as_mut().and_then(|t| t.get_mut(TOPIC)).and_then(|t| t.get_mut(&id)) {
                *p = next.min(i64::MAX as u64) as i64;
            }
            let (kind, key_id, time) = self.describe(&event);
            if !self.kinds[kind as usize] {
                continue;
            }
            payload.clear();
            self.encode(&event, &mut payload).map_err(|e| ctx.fail(e))?;
            let key = key.format(key_id).as_bytes();
            ctx.emit(crate::record::Record { payload: &payload, key: Some(key), timestamp: Some(time) })?;
        }
    }
}

/// Gives `event` the time `at`; an auction keeps the length the generator
/// drew for it (its `expires` moves with its start).
fn retime(event: &mut Event, at: u64) {
    match event {
        Event::Person(p) => p.date_time = at,
        Event::Auction(a) => {
            let length = a.expires.saturating_sub(a.date_time);
            a.date_time = at;
            a.expires = at.saturating_add(length);
        }
        Event::Bid(b) => b.date_time = at,
    }
}

/// One split being read: its index, the index of its next event, and the
/// generator positioned there.
struct Split {
    split: u32,
    next: u64,
    events: nexmark::EventGenerator,
}

impl Nexmark {
    /// The splits subtask `subtask` of `parallelism` reads, each at its
    /// restored position (or its first event).
    fn owned_splits(
        &self,
        subtask: u32,
        parallelism: u32,
        restored: Option<&crate::checkpoint::metadata::PartitionOffsets>,
    ) -> Result<Vec<Split>, ConnectorError> {
        let recorded = restored.and_then(|r| r.get(TOPIC));
        if let Some(r) = restored
            && let Some(other) = r.keys().find(|t| t.as_str() != TOPIC)
        {
            return Err(ConnectorError::Inconsistent(format!(
                "the checkpoint records positions in {other:?}, not a nexmark stream's splits"
            )));
        }
        if let Some(recorded) = recorded {
            let expected: Vec<i32> = (0..self.splits as i32).collect();
            let got: Vec<i32> = recorded.keys().copied().collect();
            if got != expected {
                return Err(ConnectorError::Inconsistent(format!(
                    "the checkpoint has positions for {} splits, but splits = {}: keep the number of splits the job started with",
                    got.len(),
                    self.splits
                )));
            }
        }
        let mut owned = Vec::new();
        for s in (subtask..self.splits).step_by(parallelism.max(1) as usize) {
            let next = match recorded.and_then(|r| r.get(&(s as i32))) {
                None => u64::from(s),
                Some(&o) if o >= 0 && (o as u64) % u64::from(self.splits) == u64::from(s) => o as u64,
                Some(&o) => {
                    return Err(ConnectorError::Inconsistent(format!(
                        "the checkpoint's position {o} for split {s} is not an event of that split"
                    )));
                }
            };
            let events =
                nexmark::EventGenerator::new(self.config.clone()).with_offset(next).with_step(u64::from(self.splits));
            owned.push(Split { split: s, next, events });
        }
        Ok(owned)
    }

    /// The event's kind, the id it is keyed by, and its event time.
    fn describe(&self, event: &Event) -> (Kind, u64, i64) {
        match event {
            Event::Person(p) => (Kind::Person, p.id as u64, p.date_time as i64),
            Event::Auction(a) => {
                let key = match self.auction_key {
                    AuctionKey::Id => a.id,
                    AuctionKey::Seller => a.seller,
                    AuctionKey::Category => a.category,
                };
                (Kind::Auction, key as u64, a.date_time as i64)
            }
            Event::Bid(b) => {
                let key = match self.bid_key {
                    BidKey::Auction => b.auction,
                    BidKey::Bidder => b.bidder,
                };
                (Kind::Bid, key as u64, b.date_time as i64)
            }
        }
    }

    fn encode(&self, event: &Event, out: &mut Vec<u8>) -> Result<(), ConnectorError> {
        let wire = Wire::from(event);
        let failed = |e: String| ConnectorError::Inconsistent(format!("cannot encode a Nexmark event: {e}"));
        match self.format {
            Format::Postcard => {
                *out = postcard::to_extend(&wire, std::mem::take(out)).map_err(|e| failed(e.to_string()))?;
            }
            Format::Json => serde_json::to_writer(&mut *out, &wire).map_err(|e| failed(e.to_string()))?,
        }
        Ok(())
    }
}

/// An event as operators read it (`weir_sdk::nexmark::Event`: the same
/// fields, in the same order; `docs/nexmark.md` specifies the bytes).
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum Wire<'a> {
    Person(PersonWire<'a>),
    Auction(AuctionWire<'a>),
    Bid(BidWire<'a>),
}

#[derive(Serialize)]
struct PersonWire<'a> {
    id: u64,
    name: &'a str,
    email_address: &'a str,
    credit_card: &'a str,
    city: &'a str,
    state: &'a str,
    date_time: i64,
    extra: &'a str,
}

#[derive(Serialize)]
struct AuctionWire<'a> {
    id: u64,
    item_name: &'a str,
    description: &'a str,
    initial_bid: u64,
    reserve: u64,
    date_time: i64,
    expires: i64,
    seller: u64,
    category: u64,
    extra: &'a str,
}

#[derive(Serialize)]
struct BidWire<'a> {
    auction: u64,
    bidder: u64,
    price: u64,
    channel: &'a str,
    url: &'a str,
    date_time: i64,
    extra: &'a str,
}

impl<'a> From<&'a Event> for Wire<'a> {
    fn from(e: &'a Event) -> Self {
        match e {
            Event::Person(p) => Wire::Person(PersonWire {
                id: p.id as u64,
                name: &p.name,
                email_address: &p.email_address,
                credit_card: &p.credit_card,
                city: &p.city,
                state: &p.state,
                date_time: p.date_time as i64,
                extra: &p.extra,
            }),
            Event::Auction(a) => Wire::Auction(AuctionWire {
                id: a.id as u64,
                item_name: &a.item_name,
                description: &a.description,
                initial_bid: a.initial_bid as u64,
                reserve: a.reserve as u64,
                date_time: a.date_time as i64,
                expires: a.expires as i64,
                seller: a.seller as u64,
                category: a.category as u64,
                extra: &a.extra,
            }),
            Event::Bid(b) => Wire::Bid(BidWire {
                auction: b.auction as u64,
                bidder: b.bidder as u64,
                price: b.price as u64,
                channel: &b.channel,
                url: &b.url,
                date_time: b.date_time as i64,
                extra: &b.extra,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(options: &str, parallelism: u32) -> ConnectorSpec {
        ConnectorSpec {
            id: "events".into(),
            kind: "nexmark".into(),
            options: toml::from_str(options).unwrap(),
            parallelism,
        }
    }

    fn defaults() -> Options {
        toml::from_str("").unwrap()
    }

    fn error(options: &str, parallelism: u32) -> String {
        build(&spec(options, parallelism), Path::new(".")).err().expect("an error").to_string()
    }

    #[test]
    fn bad_options_are_named() {
        assert!(error("splits = 0", 1).contains("splits = 0"));
        assert!(error("splits = 2", 3).contains("parallelism 3 is more than splits = 2"));
        assert!(error("kinds = []", 1).contains("kinds = []"));
        assert!(error("kinds = [\"bids\"]", 1).contains("unknown variant"));
        assert!(error("bid_proportion = 0", 1).contains("bid_proportion = 0"));
        assert!(error("out_of_order_group_size = 0", 1).contains("out_of_order_group_size"));
        assert!(error("avg_bid_byte_size = 100000000", 1).contains("at most 65536"));
        assert!(error("first_event_rate = 10\nnext_event_rate = 20", 1).contains("a sine starts"));
        assert!(error("base_time = -1", 1).contains("base_time"));
        assert!(error("seed = 4294967297", 1).contains("seed = 4294967297: at most 4294967296"));
        assert!(error("colour = 1", 1).contains("unknown field"));
    }

    #[test]
    fn splits_cover_every_event_once_whatever_the_parallelism() {
        let source = Nexmark {
            config: generator_config(&defaults(), BASE_TIME, "source").unwrap(),
            events: Some(100),
            rate: None,
            kinds: [true; 3],
            auction_key: AuctionKey::Id,
            bid_key: BidKey::Auction,
            format: Format::Postcard,
            splits: 16,
            lag_ms: 0,
        };
        let all: Vec<Event> = nexmark::EventGenerator::new(source.config.clone()).take(100).collect();
        for p in [1, 3, 16] {
            let mut seen = Vec::new();
            for k in 0..p {
                for mut s in source.owned_splits(k, p, None).unwrap() {
                    while s.next < 100 {
                        seen.push((s.next, s.events.next().unwrap()));
                        s.next += 16;
                    }
                }
            }
            seen.sort_by_key(|(i, _)| *i);
            assert_eq!(seen.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), all, "parallelism {p}");
        }
    }

    #[test]
    fn restored_positions_must_match_the_splits() {
        let source = build(&spec("events = 10", 1), Path::new(".")).unwrap();
        let _ = source; // built: the defaults are valid
        let s = Nexmark {
            config: generator_config(&defaults(), BASE_TIME, "source").unwrap(),
            events: None,
            rate: None,
            kinds: [true; 3],
            auction_key: AuctionKey::Id,
            bid_key: BidKey::Auction,
            format: Format::Postcard,
            splits: 2,
            lag_ms: 0,
        };
        let at = |pairs: &[(i32, i64)]| BTreeMap::from([(TOPIC.to_string(), pairs.iter().copied().collect())]);
        let ok = s.owned_splits(0, 1, Some(&at(&[(0, 10), (1, 7)]))).unwrap();
        assert_eq!(ok.iter().map(|s| s.next).collect::<Vec<_>>(), vec![10, 7]);
        let e = s.owned_splits(0, 1, Some(&at(&[(0, 10)]))).err().unwrap().to_string();
        assert!(e.contains("positions for 1 splits, but splits = 2"), "{e}");
        let e = s.owned_splits(0, 1, Some(&at(&[(0, 11), (1, 7)]))).err().unwrap().to_string();
        assert!(e.contains("not an event of that split"), "{e}");
        let e = s.owned_splits(0, 1, Some(&at(&[(0, -2), (1, 7)]))).err().unwrap().to_string();
        assert!(e.contains("not an event of that split"), "{e}");
    }

    #[test]
    fn out_of_order_groups_widen_the_watermark_lag() {
        let mut c = generator_config(&defaults(), 0, "source").unwrap();
        assert_eq!(reorder_span_ms(&c), 0);
        c.out_of_order_group_size = 1000;
        assert_eq!(reorder_span_ms(&c), 100); // 1000 events at 10 000/s
    }
}
