//! q8: persons who registered and sold in the same 10 s window, once per
//! (person, window), at parallelism 1 and 3 (where persons and their
//! auctions reach the operator in either order).

use super::{EVENTS, run_query};
use weir_tests::nexmark::{events, q8::q8, sorted};

#[test]
fn q8_finds_each_new_seller_once_per_window() {
    let expected = sorted(q8(&events(EVENTS as usize)));
    assert!(expected.len() >= 500, "too few q8 lines to mean something: {}", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q8", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q8 at parallelism {p}: line count");
        assert!(got == expected, "q8 at parallelism {p}: output differs from the reference");
    }
}

/// With a square rate (2000/s then 4000/s, 30 s period), event time must
/// still never go back: before the source timed events itself, times went
/// back 15 s at each cycle and q8 lost a quarter of its lines to late
/// events. The reference times the same events by walking the documented
/// steps.
#[test]
fn q8_is_exact_with_a_square_rate() {
    const N: u64 = 300_000;
    let config = nexmark::config::NexmarkConfig {
        first_rate: 2000,
        next_rate: 4000,
        rate_shape: nexmark::config::RateShape::Square,
        rate_period: 30,
        ..weir_tests::nexmark::config()
    };
    let expected = sorted(q8(&weir_tests::nexmark::stepped_events(N as usize, config, &[2000, 4000], 15)));
    assert!(expected.len() >= 500, "too few q8 lines to mean something: {}", expected.len());
    let copy = super::ExampleCopy::new("nexmark");
    copy.edit("q8.toml", "events = 1000000", &format!("events = {N}"));
    copy.edit(
        "q8.toml",
        "auction_key = \"seller\"",
        "auction_key = \"seller\"\nfirst_event_rate = 2000\nnext_event_rate = 4000\nrate_shape = \"square\"\nrate_period = \"30s\"",
    );
    copy.run("q8.toml", &["--parallelism", "1"]);
    let got = sorted(copy.take_output("q8.txt").lines().map(str::to_string));
    assert_eq!(got.len(), expected.len(), "q8 with a square rate: line count");
    assert!(got == expected, "q8 with a square rate: output differs from the reference");
}
