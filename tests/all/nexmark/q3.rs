//! q3: the unwindowed join of category-10 auctions with their sellers in
//! or, id or ca, at parallelism 1 and 3 (where persons and their auctions
//! reach the join in either order).

use super::{EVENTS, run_query};
use weir_tests::nexmark::{events, q3::q3, sorted};

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
