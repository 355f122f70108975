//! q4, an updating query: the job writes `category,avg` each time a
//! category's average changes, so its LAST line per category must equal the
//! reference's result, at parallelism 1 and 3 (where bids overtake their
//! auctions and the first stage buffers them).

use super::{EVENTS, run_query};
use std::collections::BTreeMap;
use weir_tests::nexmark::{events, q4, sorted};

#[test]
fn q4_last_average_per_category_matches_the_reference() {
    let expected = sorted(q4::q4(&events(EVENTS as usize)));
    // Five categories by default; each average is over thousands of auctions.
    assert!(expected.len() >= 5, "reference: {expected:?}");
    for p in [1, 3] {
        let lines = run_query("q4", EVENTS, p, &[]);
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        for line in &lines {
            let (category, _) = line.split_once(',').unwrap_or_else(|| panic!("q4 at parallelism {p}: line {line:?}"));
            last.insert(category.to_string(), line.clone());
        }
        assert!(lines.len() > 100, "q4 at parallelism {p}: only {} update lines", lines.len());
        let got = sorted(last.into_values());
        assert_eq!(got, expected, "q4 at parallelism {p}: last line per category differs from the reference");
    }
}
