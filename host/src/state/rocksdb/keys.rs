//! How RocksDB keys and values are laid out (see the layout in the
//! backend's header): key-group prefixes, map keys, timer keys, list
//! values and their merge, column family names.

use crate::state::{StateId, TimeDomain};
use ::rocksdb::MergeOperands;

/// The column family of timers.
pub(super) const TIMERS: &str = "timers";

/// List values: `len(u32 LE) bytes`, repeated.
pub(super) fn encode_list(out: &mut Vec<u8>, values: &[&[u8]]) {
    for v in values {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}

pub(super) fn decode_list(mut b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let n = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        let end = (4 + n).min(b.len());
        out.push(&b[4..end]);
        b = &b[end..];
    }
    out
}

/// The list merge: concatenation, which is associative.
pub(super) fn list_append(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands.iter() {
        out.extend_from_slice(op);
    }
    Some(out)
}

pub(super) fn keyed_key(kg: u16, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + key.len());
    k.extend_from_slice(&kg.to_be_bytes());
    k.extend_from_slice(key);
    k
}

pub(super) fn map_prefix(kg: u16, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(6 + key.len());
    k.extend_from_slice(&kg.to_be_bytes());
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Splits a map key into (key group, key, user key).
pub(super) fn split_map_key(k: &[u8]) -> Option<(u16, &[u8], &[u8])> {
    let kg = u16::from_be_bytes(k.get(..2)?.try_into().ok()?);
    let n = u32::from_be_bytes(k.get(2..6)?.try_into().ok()?) as usize;
    let key = k.get(6..6 + n)?;
    Some((kg, key, &k[6 + n..]))
}

pub(super) fn timer_key(d: TimeDomain, time: i64, kg: u16, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(11 + key.len());
    k.push(domain_byte(d));
    k.extend_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    k.extend_from_slice(&kg.to_be_bytes());
    k.extend_from_slice(key);
    k
}

pub(super) fn split_timer_key(k: &[u8]) -> Option<(TimeDomain, i64, u16, &[u8])> {
    let d = match *k.first()? {
        0 => TimeDomain::EventTime,
        _ => TimeDomain::ProcessingTime,
    };
    let time = (u64::from_be_bytes(k.get(1..9)?.try_into().ok()?) ^ (1 << 63)) as i64;
    let kg = u16::from_be_bytes(k.get(9..11)?.try_into().ok()?);
    Some((d, time, kg, &k[11..]))
}

pub(super) fn domain_byte(d: TimeDomain) -> u8 {
    match d {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

/// The smallest key after every key starting with `prefix`, if any.
pub(super) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

pub(super) fn cf_name(id: StateId) -> String {
    format!("state-{id}")
}
