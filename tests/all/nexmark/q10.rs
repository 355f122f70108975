//! q10: bids written into `dt=<date>/hm=<minute>` directories by the
//! transactional file sink with `buckets = "key"`, exactly once across a
//! SIGKILL and a resume, at parallelism 2; the stream starts two minutes
//! before midnight, so it crosses a day. The expected partitions are named
//! from `humantime`'s UTC formatting, not the operator's calendar code.

use crate::checkpoints::spawn;
use crate::support::{JobDir, PATIENCE, wait_until};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};
use weir_tests::artifacts;
use weir_tests::nexmark::{q10::q10, sorted};

/// Bids spread over about 7 minutes of event time (200 events/s of event
/// time), read at 10 000 events/s of wall time: about 6 s, long enough to
/// be killed mid-stream.
const EVENTS: u64 = 60_000;
const RATE: u64 = 200;
/// 2024-12-31 23:58:00 UTC.
const BASE_TIME: u64 = 1_735_689_600_000 - 120_000;

/// `dt=yyyy-MM-dd/hm=HH:mm` of `ms`, from the RFC 3339 form.
fn partition(ms: u64) -> String {
    let t = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string();
    // 2024-12-31T23:58:00.000Z
    format!("dt={}/hm={}", &t[..10], &t[11..16])
}

/// Every published line under `out/`, as `<bucket>\t<line>`, sorted;
/// asserts nothing unpublished is left.
fn published(out: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let mut dirs = vec![String::new()];
    while let Some(bucket) = dirs.pop() {
        for e in std::fs::read_dir(out.join(&bucket)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let rel = if bucket.is_empty() { name.clone() } else { format!("{bucket}/{name}") };
            if e.file_type().unwrap().is_dir() {
                dirs.push(rel);
            } else {
                assert!(name.starts_with("part-"), "{rel} left after the job finished");
                let text = std::fs::read_to_string(e.path()).unwrap();
                lines.extend(text.lines().map(|l| format!("{bucket}\t{l}")));
            }
        }
    }
    lines.sort();
    lines
}

#[test]
fn q10_writes_each_bid_once_into_its_minutes_directory_across_a_kill() {
    let config = nexmark::config::NexmarkConfig {
        base_time: BASE_TIME,
        first_rate: RATE as usize,
        next_rate: RATE as usize,
        ..weir_tests::nexmark::config()
    };
    let events: Vec<_> = nexmark::EventGenerator::new(config).take(EVENTS as usize).collect();
    let expected = sorted(q10(&events).into_iter().map(|(t, line)| format!("{}\t{line}", partition(t))));
    let partitions: BTreeMap<&str, usize> = expected.iter().fold(BTreeMap::new(), |mut m, l| {
        *m.entry(l.split('\t').next().unwrap()).or_default() += 1;
        m
    });
    assert!(partitions.len() >= 5, "the stream spans several minutes: {partitions:?}");
    assert!(partitions.keys().any(|p| p.starts_with("dt=2025-01-01")), "and crosses midnight: {partitions:?}");

    let dir = JobDir::new();
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "q10"
parallelism = 2

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[[sources]]
id = "events"
kind = "nexmark"
events = {EVENTS}
kinds = ["bid"]
base_time = {BASE_TIME}
first_event_rate = {RATE}
events_per_second = 10000

[[operators]]
uid = "q10"
module = "{module}"
input = "events"

[[sinks]]
id = "out"
kind = "transactional-file"
input = "q10"
dir = "out"
buckets = "key"
"#,
            module = artifacts::NEXMARK_Q10
        ),
    );
    let mut child = spawn(&dir, &[], &[]);
    // Killed once some output is published, before the input ends.
    wait_until("published output in a minute's directory", PATIENCE, || {
        std::fs::read_dir(dir.path().join("out/dt=2024-12-31/hm=23:58"))
            .is_ok_and(|d| d.filter_map(Result::ok).any(|e| e.file_name().to_string_lossy().starts_with("part-")))
    });
    assert!(child.try_wait().unwrap().is_none(), "killed mid-stream");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    dir.succeeds(&["--resume"]);
    let got = published(&dir.path().join("out"));
    assert_eq!(got.len(), expected.len(), "every bid once across the kill");
    assert!(got == expected, "the published lines or their directories differ from the reference");
}
