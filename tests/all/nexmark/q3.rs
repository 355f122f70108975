//! q3: the unwindowed join of category-10 auctions with their sellers in
//! or, id or ca, at parallelism 1 and 3 (where persons and their auctions
//! reach the join in either order).

use super::{EVENTS, ExampleCopy, run_query};
use weir_tests::nexmark::{events, q3::q3, seeded_events, sorted};

#[test]
fn q3_joins_category_10_auctions_with_their_local_sellers() {
    let expected = sorted(q3(&events(EVENTS as usize)));
    assert!(expected.len() >= 500, "too few q3 lines to mean something: {}", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q3", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q3 at parallelism {p}: line count");
        assert!(got == expected, "q3 at parallelism {p}: output differs from the reference");
    }
}

/// `seed` makes other people and auctions, which still join: the same
/// query over a seeded source matches the reference over the events the
/// generator makes with ids `seed` rounds later, and differs from the
/// unseeded answer.
#[test]
fn q3_over_a_seeded_source_matches_the_reference_over_those_events() {
    let seed = 7;
    let expected = sorted(q3(&seeded_events(EVENTS as usize, seed)));
    assert!(expected.len() >= 500, "too few q3 lines to mean something: {}", expected.len());
    assert_ne!(expected, sorted(q3(&events(EVENTS as usize))), "the seed changes the stream");
    let copy = ExampleCopy::new("nexmark");
    copy.edit("q3.toml", "events = 1000000", &format!("events = {EVENTS}\nseed = {seed}"));
    copy.run("q3.toml", &["--parallelism", "2"]);
    let got = sorted(copy.take_output("q3.txt").lines().map(str::to_string));
    assert!(got == expected, "q3 with seed = {seed}: output differs from the reference");
}
