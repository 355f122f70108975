//! q16, channel statistics per channel and day: over the slow stream of
//! q15's test (four days, three midnights; in order at parallelism 1 and 3,
//! shuffled at 3) and over the hand-made edge bids.

use super::q15::{check_edges, check_slow};
use weir_tests::nexmark::q16;

#[test]
fn q16_counts_per_channel_and_day() {
    // Four hot channels and most of the 10 000 others, each day.
    check_slow("q16", q16::q16, 10_000);
}

#[test]
fn q16_channels_days_minutes_and_price_ranks_at_their_edges() {
    check_edges(
        "q16",
        q16::q16,
        &[
            // 23:59:59.999 twice and 00:00:00.000 of the same day: 23:59.
            "A,2025-02-28,23:59,3,1,1,1,1,1,1,1,2,1,1,1",
            "B,2025-02-28,23:59,2,0,2,0,1,0,1,0,1,0,1,0",
            // 00:00, 12:34, then 08:00 in file order: the latest is 12:34.
            "A,2025-03-01,12:34,3,1,1,1,3,1,1,1,1,1,1,1",
            "B,2025-03-01,00:00,2,1,1,0,1,1,1,0,1,1,1,0",
            "C,2024-12-31,23:59,1,1,0,0,1,1,0,0,1,1,0,0",
            "C,2025-01-01,00:00,1,1,0,0,1,1,0,0,1,1,0,0",
            "C,2024-02-29,12:00,1,1,0,0,1,1,0,0,1,1,0,0",
        ],
    );
}
