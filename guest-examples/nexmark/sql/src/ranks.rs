//! The price ranks of the bid statistics reports (q15, q16, q17: `price <
//! 10000`, `10000 <= price < 1000000`, `price >= 1000000`, in cents) and
//! their `count(distinct ...) filter (where <rank>)` columns, kept as a map
//! state from an id to the ranks it has been counted in, so no value grows
//! with a group.

use weir_sdk::{MapState, Result};

/// The SQL's price rank of `price`: 1, 2 or 3.
pub fn rank(price: u64) -> usize {
    if price < 10_000 {
        1
    } else if price < 1_000_000 {
        2
    } else {
        3
    }
}

/// Counts `id` in `counts[0]` if the group has not seen it, and in
/// `counts[rank]` if the group has not seen it at that rank. `seen` maps
/// each id of the group to a mask of its ranks (bits 1 to 3; present:
/// counted in the total); an entry is written only when it changes.
pub fn count_distinct(seen: &MapState<u64, u8>, id: u64, rank: usize, counts: &mut [u64; 4]) -> Result<()> {
    let bit = 1u8 << rank;
    let mask = match seen.get(&id)? {
        Some(m) => m,
        None => {
            counts[0] += 1;
            0
        }
    };
    if mask & bit == 0 {
        counts[rank] += 1;
        seen.put(&id, &(mask | bit))?;
    }
    Ok(())
}
