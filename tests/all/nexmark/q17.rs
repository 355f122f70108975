//! q17, auction statistics per auction and day: over the slow stream of
//! q15's test (four days, three midnights; in order at parallelism 1 and 3,
//! shuffled at 3) and over the hand-made edge bids.

use super::q15::{check_edges, check_slow};
use weir_tests::nexmark::q17;

#[test]
fn q17_prices_per_auction_and_day() {
    // Thousands of auctions a day.
    check_slow("q17", q17::q17, 5_000);
}

#[test]
fn q17_days_price_ranks_and_integer_averages_at_their_edges() {
    check_edges(
        "q17",
        q17::q17,
        &[
            "1,2025-02-28,2,1,1,0,9999,10000,9999,19999",
            // 2999998 / 3 = 999999.33: the average rounds down.
            "2,2025-02-28,3,0,2,1,999999,1000000,999999,2999998",
            "1,2025-03-01,3,1,1,1,2,1000000,336667,1010002",
            "3,2025-03-01,2,1,1,0,9999,999999,504999,1009998",
            "5,2024-12-31,1,1,0,0,500,500,500,500",
            "5,2025-01-01,1,1,0,0,500,500,500,500",
            "6,2024-02-29,1,1,0,0,100,100,100,100",
        ],
    );
}
