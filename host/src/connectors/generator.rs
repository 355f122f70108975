//! The generator source: a deterministic stream of `count` records over
//! `keys` distinct keys, for tests and benchmarks.
//!
//! Record `i` has key `k = splitmix64(seed + i) % keys`, written as decimal
//! ASCII, and the same bytes as payload; with `event_time_step`, its event
//! time is `i * step` milliseconds. The same (count, keys, seed) always
//! gives the same stream.

use super::SourceContext;
use crate::runtime::batch::Record;
use crate::runtime::events::{Counters, TaskError};

/// SplitMix64: a fixed, well-known mixer, so streams are reproducible.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key id of record `i`.
#[inline]
pub fn key_of(seed: u64, i: u64, keys: u64) -> u64 {
    splitmix64(seed.wrapping_add(i)) % keys
}

/// Produces the stream.
pub fn run(
    mut ctx: SourceContext,
    count: u64,
    keys: u64,
    seed: u64,
    step_ms: Option<i64>,
) -> Result<Counters, TaskError> {
    let mut buf = itoa_buf();
    // The position is the index of the next record.
    for i in ctx.position..count {
        ctx.position = i + 1;
        let k = key_of(seed, i, keys);
        let key = format_u64(&mut buf, k);
        let timestamp = step_ms.map(|s| (i as i64).saturating_mul(s));
        ctx.emit(Record { payload: key, key: Some(key), timestamp })?;
    }
    ctx.finish()
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

fn format_u64(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_decimal() {
        let mut b = itoa_buf();
        assert_eq!(format_u64(&mut b, 0), b"0");
        assert_eq!(format_u64(&mut b, 1234567890), b"1234567890");
        assert_eq!(format_u64(&mut b, u64::MAX), u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn stream_is_deterministic_and_covers_keys() {
        let a: Vec<u64> = (0..1000).map(|i| key_of(7, i, 10)).collect();
        let b: Vec<u64> = (0..1000).map(|i| key_of(7, i, 10)).collect();
        assert_eq!(a, b);
        assert!((0..10).all(|k| a.contains(&k)));
        assert_ne!(a, (0..1000).map(|i| key_of(8, i, 10)).collect::<Vec<_>>());
    }
}
