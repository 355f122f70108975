//! q12, processing-time windows: which 10 s window of the wall clock a bid
//! falls in depends on when it is processed, so the test checks what does
//! not: every window is aligned to 10 s, a bidder has at most one line per
//! window, its counts add up to its bids (the windows still open when the
//! input ends are written too), and a source paced over more than 20 s
//! spreads the bids over several windows. At parallelism 1 and 3, run side
//! by side (each run mostly waits for its paced source).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};
use weir_tests::nexmark::{events, q12};

/// 50 000 events hold 46 000 bids: 23 s at 2000 bids per second.
const EVENTS: u64 = 50_000;
const BIDS_PER_SECOND: u64 = 2000;
const SIZE: i64 = 10_000;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A run's output lines and the wall clock (ms) before and after it.
type Run = (Vec<String>, i64, i64);

/// Runs q12 at `p` with the paced source.
fn run(p: u32) -> Run {
    let before = now_ms();
    let paced = format!("{EVENTS}\nevents_per_second = {BIDS_PER_SECOND}");
    let copy = super::ExampleCopy::new("nexmark");
    copy.edit("q12.toml", "events = 1000000", &format!("events = {paced}"));
    copy.run("q12.toml", &["--parallelism", &p.to_string()]);
    let lines = copy.take_output("q12.txt").lines().map(str::to_string).collect();
    (lines, before, now_ms())
}

#[test]
fn q12_counts_each_bidders_bids_per_processing_time_window() {
    let expected = q12::bids_per_bidder(&events(EVENTS as usize));
    let total: u64 = expected.values().sum();
    assert!(total >= 40_000 && expected.len() >= 500, "{total} bids of {} bidders", expected.len());
    let runs: Vec<(u32, Run)> = std::thread::scope(|s| {
        let handles = [1, 3].map(|p| (p, s.spawn(move || run(p))));
        handles.into_iter().map(|(p, h)| (p, h.join().unwrap())).collect()
    });
    for (p, (lines, before, after)) in runs {
        assert!(after - before >= 20_000, "the paced run took only {} ms", after - before);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        let mut windows = HashSet::new();
        let mut starts = BTreeSet::new();
        for line in &lines {
            let f: Vec<i64> = line.split(',').map(|v| v.parse().unwrap()).collect();
            let [bidder, count, start, end] = f[..] else { panic!("q12 at parallelism {p}: bad line {line:?}") };
            assert!(count >= 1, "q12 at parallelism {p}: {line}");
            assert_eq!(start.rem_euclid(SIZE), 0, "q12 at parallelism {p}: a window not aligned to 10 s: {line}");
            assert_eq!(end, start + SIZE, "q12 at parallelism {p}: {line}");
            assert!(
                start >= before - before.rem_euclid(SIZE) && start <= after,
                "q12 at parallelism {p}: a window outside the run ({before}..{after}): {line}"
            );
            assert!(windows.insert((bidder, start)), "q12 at parallelism {p}: two lines for one window: {line}");
            *counts.entry(bidder as u64).or_insert(0) += count as u64;
            starts.insert(start);
        }
        assert_eq!(counts.len(), expected.len(), "q12 at parallelism {p}: bidders");
        for (bidder, n) in &expected {
            assert_eq!(counts.get(bidder), Some(n), "q12 at parallelism {p}: the bids of bidder {bidder}");
        }
        // More than 20 s of bids: at least three windows, and bidders who
        // bid throughout have several.
        assert!(starts.len() >= 3, "q12 at parallelism {p}: windows {starts:?}");
        let per_bidder = windows.iter().fold(HashMap::<i64, u32>::new(), |mut m, (b, _)| {
            *m.entry(*b).or_default() += 1;
            m
        });
        let spread = per_bidder.values().filter(|&&n| n >= 3).count();
        assert!(spread >= 10, "q12 at parallelism {p}: only {spread} bidders in three windows or more");
    }
}
