//! Event times of a Nexmark stream whose rate changes (two rates and a
//! `rate_shape`), computed here rather than by the `nexmark` crate.
//!
//! The crate (0.2.0, `GeneratorConfig::event_timestamp`) finds an event's
//! step of the rate cycle by comparing `out_of_order_group_size` where the
//! event's index within the cycle is meant (upstream: risingwavelabs/
//! nexmark-rs, `config.rs`; the reference Java generator's
//! `timestampAndInterEventDelayUsForEvent` compares the index). With one
//! rate that branch is never taken and its times are right; with two, every
//! event is spaced at the first rate and each cycle then jumps to the next
//! cycle's start, so event time goes back at every rate change (square)
//! or the rate stays flat with a gap each period (sine). The source keeps
//! the crate's events and replaces their times with these.
//!
//! The rate cycle, as the reference generator defines it: `rate_period` is
//! cut into `n` steps of `ceil(rate_period / n)` whole seconds (`n` = 2 for
//! a square, `sine_approx_steps` for a sine); step `k` runs at
//! `first_event_rate` then `next_event_rate` (square), or at
//! `mid + amp * cos(2πk / n)` rounded (sine, `mid` and `amp` half the sum
//! and half the difference of the two rates). A step at rate `r` holds
//! `step_seconds * r` events `1000 / r` ms apart, so each step lasts its
//! seconds exactly and the cycle repeats without drift. Arithmetic is in
//! integers: no rounding accumulates over billions of events.

use nexmark::config::{NexmarkConfig, RateShape};

/// Times of the events of a stream with a changing rate.
#[derive(Debug, Clone)]
pub struct EventTimes {
    base_time: u64,
    /// Events per second of each step, in order.
    rates: Vec<u64>,
    /// Seconds each step lasts.
    step_seconds: u64,
    /// Events in one whole cycle of steps.
    events_per_cycle: u64,
    /// Generators sharing the stream (the crate's `num_event_generators`):
    /// each event is that many rate periods apart.
    generators: u64,
}

impl EventTimes {
    /// The times `config` asks for when its rate changes; `None` when it
    /// has one rate, whose times the crate computes right.
    pub fn new(config: &NexmarkConfig) -> Option<EventTimes> {
        if config.first_rate == config.next_rate {
            return None;
        }
        let (first, next) = (config.first_rate as f64, config.next_rate as f64);
        let rates: Vec<u64> = match config.rate_shape {
            RateShape::Square => vec![config.first_rate as u64, config.next_rate as u64],
            RateShape::Sine => {
                let steps = config.sine_approx_steps.max(1);
                let (mid, amp) = ((first + next) / 2.0, (first - next) / 2.0);
                (0..steps)
                    .map(|k| {
                        let phase = 2.0 * std::f64::consts::PI * k as f64 / steps as f64;
                        ((mid + amp * phase.cos()).round() as u64).max(1)
                    })
                    .collect()
            }
        };
        let step_seconds = (config.rate_period as u64).div_ceil(rates.len() as u64).max(1);
        let events_per_cycle = rates.iter().map(|r| r * step_seconds).sum();
        Some(EventTimes {
            base_time: config.base_time,
            rates,
            step_seconds,
            events_per_cycle,
            generators: config.num_event_generators.max(1) as u64,
        })
    }

    /// The time of event `number` (the generator's event number, after
    /// any out-of-order reshuffle), ms since the epoch.
    pub fn of(&self, number: u64) -> u64 {
        let cycle = number / self.events_per_cycle;
        let mut n = number % self.events_per_cycle;
        let cycle_ms = self.rates.len() as u64 * self.step_seconds * 1000;
        let mut at = self.base_time.saturating_add(cycle.saturating_mul(cycle_ms));
        for &rate in &self.rates {
            let events = rate * self.step_seconds;
            if n < events {
                let offset = (u128::from(n) * 1000 * u128::from(self.generators) / u128::from(rate)) as u64;
                return at.saturating_add(offset);
            }
            n -= events;
            at = at.saturating_add(self.step_seconds * 1000);
        }
        unreachable!("an event number modulo the cycle's events falls in one of its steps")
    }
}

/// The generator's event number of the event at `offset` of the stream
/// (what `EventGenerator` calls the events so far): the crate's reshuffle
/// of each group of `out_of_order_group_size` events, as the reference
/// generator's `nextAdjustedEventNumber`.
pub fn event_number(config: &NexmarkConfig, offset: u64) -> u64 {
    let n = config.out_of_order_group_size.max(1) as u64;
    let number = config.first_event_number as u64 + offset;
    (number / n) * n + (number.wrapping_mul(953)) % n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(shape: RateShape, first: usize, next: usize, period: usize) -> NexmarkConfig {
        NexmarkConfig {
            base_time: 1_700_000_000_000,
            rate_shape: shape,
            first_rate: first,
            next_rate: next,
            rate_period: period,
            ..NexmarkConfig::default()
        }
    }

    #[test]
    fn one_rate_is_left_to_the_crate() {
        assert!(EventTimes::new(&config(RateShape::Square, 1000, 1000, 60)).is_none());
    }

    #[test]
    fn a_square_alternates_its_two_rates_by_half_periods() {
        // 2000/s for 15 s, then 4000/s for 15 s: 90,000 events a cycle.
        let t = EventTimes::new(&config(RateShape::Square, 2000, 4000, 30)).unwrap();
        let base = 1_700_000_000_000;
        assert_eq!(t.of(0), base);
        assert_eq!(t.of(1), base);
        assert_eq!(t.of(2), base + 1);
        assert_eq!(t.of(29_999), base + 14_999);
        assert_eq!(t.of(30_000), base + 15_000, "the second half starts on time");
        assert_eq!(t.of(30_004), base + 15_001);
        assert_eq!(t.of(89_999), base + 29_999);
        assert_eq!(t.of(90_000), base + 30_000, "the next cycle starts where the first ended");
        // The event the crate 0.2.0 stamps 15 s back.
        assert_eq!(t.of(90_001), base + 30_000);
        let times: Vec<u64> = (0..400_000).map(|i| t.of(i)).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "time never goes back");
    }

    #[test]
    fn a_sine_steps_through_its_rates() {
        // 10 steps of 2 s: rates 3000 + 1000·cos(2πk/10).
        let t = EventTimes::new(&config(RateShape::Sine, 4000, 2000, 20)).unwrap();
        let expected: Vec<u64> = (0..10)
            .map(|k| (3000.0 + 1000.0 * (2.0 * std::f64::consts::PI * k as f64 / 10.0).cos()).round() as u64)
            .collect();
        assert_eq!(t.rates, expected);
        assert_eq!(expected[0], 4000);
        assert_eq!(expected[5], 2000);
        // Count the events of each second of event time over two cycles.
        let mut per_second = std::collections::BTreeMap::<u64, u64>::new();
        let mut i = 0;
        loop {
            let s = (t.of(i) - 1_700_000_000_000) / 1000;
            if s >= 40 {
                break;
            }
            *per_second.entry(s).or_default() += 1;
            i += 1;
        }
        for (s, n) in per_second {
            assert_eq!(n, expected[((s / 2) % 10) as usize], "second {s}");
        }
    }

    #[test]
    fn event_numbers_reshuffle_within_groups() {
        let c = NexmarkConfig { out_of_order_group_size: 1, ..NexmarkConfig::default() };
        assert_eq!((0..10).map(|o| event_number(&c, o)).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
        let c = NexmarkConfig { out_of_order_group_size: 10, ..NexmarkConfig::default() };
        let mut group: Vec<u64> = (10..20).map(|o| event_number(&c, o)).collect();
        group.sort_unstable();
        assert_eq!(group, (10..20).collect::<Vec<_>>(), "a group is a permutation of its events");
        assert_ne!(event_number(&c, 11), 11, "and is shuffled");
    }
}
