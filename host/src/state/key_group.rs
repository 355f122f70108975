//! Key groups: the unit in which keyed state is partitioned, snapshotted and
//! redistributed.
//!
//! `key_group(key) = xxh3_64(key, seed 0) % max_parallelism`. XXH3-64 is a
//! fixed, specified function, so a key lands in the same group in every
//! version of Weir and in every savepoint; it is part of the state format.
//! Subtask `i` of an operator at parallelism `p` owns the contiguous range
//! of key groups computed by [`KeyGroupRange::for_subtask`] (the same split
//! as Flink's `KeyGroupRangeAssignment`).

use xxhash_rust::xxh3::xxh3_64;

/// The stable 64-bit hash of a key.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// The key group of a key with hash `hash`.
#[inline]
pub fn key_group_of_hash(hash: u64, max_parallelism: u32) -> u16 {
    debug_assert!((1..=1 << 15).contains(&max_parallelism));
    (hash % u64::from(max_parallelism)) as u16
}

/// The subtask that owns key group `key_group`.
#[inline]
pub fn subtask_for_key_group(key_group: u16, max_parallelism: u32, parallelism: u32) -> u32 {
    debug_assert!(u32::from(key_group) < max_parallelism);
    (u32::from(key_group) * parallelism) / max_parallelism
}

/// An inclusive-exclusive range of key groups `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyGroupRange {
    /// First key group.
    pub start: u16,
    /// One past the last key group.
    pub end: u16,
}

impl KeyGroupRange {
    /// The key groups subtask `index` of `parallelism` owns.
    pub fn for_subtask(index: u32, parallelism: u32, max_parallelism: u32) -> Self {
        debug_assert!(index < parallelism && parallelism <= max_parallelism);
        let start = (index * max_parallelism).div_ceil(parallelism);
        let end = ((index + 1) * max_parallelism).div_ceil(parallelism);
        KeyGroupRange { start: start as u16, end: end as u16 }
    }

    /// Whether `kg` is in the range.
    #[inline]
    pub fn contains(&self, kg: u16) -> bool {
        (self.start..self.end).contains(&kg)
    }

    /// Number of key groups.
    pub fn len(&self) -> usize {
        usize::from(self.end - self.start)
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The key groups both ranges hold (empty, at `self.start`, if none).
    pub fn intersect(&self, other: KeyGroupRange) -> KeyGroupRange {
        let start = self.start.max(other.start);
        let end = self.end.min(other.end);
        if start < end { KeyGroupRange { start, end } } else { KeyGroupRange { start: self.start, end: self.start } }
    }

    /// Whether every key group of `other` is in this range.
    pub fn covers(&self, other: KeyGroupRange) -> bool {
        other.is_empty() || (self.start <= other.start && other.end <= self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable() {
        // Pinned: changing the hash would move every key of every savepoint.
        assert_eq!(key_hash(b""), 0x2d06800538d394c2);
        assert_eq!(key_hash(b"weir"), key_hash(b"weir"));
        assert_ne!(key_hash(b"weir"), key_hash(b"Weir"));
    }

    #[test]
    fn ranges_partition_all_key_groups_contiguously() {
        for max in [1u32, 7, 128, 1000, 32768] {
            for p in [1u32, 2, 3, 5, 7, 64, 128] {
                if p > max {
                    continue;
                }
                let mut next = 0u32;
                for i in 0..p {
                    let r = KeyGroupRange::for_subtask(i, p, max);
                    assert_eq!(u32::from(r.start), next, "max {max} p {p} subtask {i}");
                    assert!(!r.is_empty(), "max {max} p {p} subtask {i} owns nothing");
                    next = u32::from(r.end);
                }
                assert_eq!(next, max);
            }
        }
    }

    #[test]
    fn key_group_owner_matches_range() {
        for max in [1u32, 10, 128, 4096] {
            for p in [1u32, 2, 3, 10] {
                if p > max {
                    continue;
                }
                for kg in 0..max {
                    let owner = subtask_for_key_group(kg as u16, max, p);
                    assert!(owner < p);
                    assert!(KeyGroupRange::for_subtask(owner, p, max).contains(kg as u16), "max {max} p {p} kg {kg}");
                }
            }
        }
    }

    #[test]
    fn keys_spread_over_key_groups() {
        let mut counts = vec![0u32; 128];
        for i in 0..128_000u32 {
            counts[usize::from(key_group_of_hash(key_hash(i.to_string().as_bytes()), 128))] += 1;
        }
        // Every group within 20% of the mean of 1000.
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }
}
