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
