//! Entry points for the fuzz targets in `fuzz/` and for their regression
//! tests: each hands arbitrary bytes to one parser of untrusted input,
//! which must answer (an error is an answer) without panicking and without
//! allocating more than the input can justify.

use crate::checkpoint::metadata::CheckpointMetadata;
use crate::config::units::{ByteSize, HumanDuration};
use crate::state::hashmap::HashMapBackend;
use crate::state::key_group::KeyGroupRange;
use crate::state::snapshot::{OperatorShare, restore_snapshot, verify_snapshot, visit_snapshot};
use std::path::Path;

mod checkpoint_tree;

/// `_metadata` as read from a checkpoint directory.
pub fn metadata(data: &[u8]) {
    let _ = CheckpointMetadata::decode(data);
}

/// A state file: checked, visited, and restored into a backend, both into
/// the same key groups and into others (re-hashed, rescaled).
pub fn snapshot(data: &[u8]) {
    let _ = verify_snapshot(&mut &data[..]);
    let _ = visit_snapshot(&mut &data[..], &mut |_, _| {});
    for (range, max_parallelism, share) in [
        (KeyGroupRange { start: 0, end: 128 }, 128, OperatorShare::All),
        (KeyGroupRange { start: 4, end: 8 }, 16, OperatorShare::Rescaled { from: 1, to: 0, parallelism: 3 }),
    ] {
        let mut backend = HashMapBackend::new(range);
        let _ = restore_snapshot(data, &mut backend, range, max_parallelism, share);
    }
}

/// A recorded segment (`host replay` reads them from a checkpoint
/// directory): decoded as it is, and again with a valid checksum over
/// everything after its first 12 bytes, so that mutations reach the header
/// and the steps; every step is read.
pub fn recording(data: &[u8]) {
    use crate::checkpoint::recording::Segment;
    let read = |bytes: Vec<u8>| {
        if let Ok(segment) = Segment::decode(bytes.into(), "fuzz".into()) {
            for step in segment.steps() {
                if step.is_err() {
                    break;
                }
            }
        }
    };
    read(data.to_vec());
    if data.len() >= 12 {
        let mut wrapped = data[..8].to_vec();
        wrapped.extend_from_slice(&crc32fast::hash(&data[12..]).to_le_bytes());
        wrapped.extend_from_slice(&data[12..]);
        read(wrapped);
    }
}

/// Bytes sent to a running job's control port.
pub fn control_request(data: &[u8]) {
    let _ = crate::control::server::answer_raw(data);
}

/// A job file's text, parsed and validated.
pub fn job_file(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crate::config::parse_job(Path::new("fuzz.toml"), text, Path::new("/nonexistent"), None);
    }
}

/// Durations and sizes.
pub fn units(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = HumanDuration::parse(text);
        let _ = ByteSize::parse(text);
    }
}

/// A checkpoint directory built from the input (files, links, FIFOs, modes,
/// owners), then opened, listed, resumed from, cleaned up and read as the
/// host does; nothing outside it may change ([`checkpoint_tree`]).
pub fn checkpoint_tree(data: &[u8]) {
    checkpoint_tree::run(data);
}
