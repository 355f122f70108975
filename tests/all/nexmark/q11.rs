//! q11: bid counts per bidder session, at parallelism 1 and 3 (where one
//! bidder's bids come from several source subtasks, out of order, and
//! sessions merge), with the standard 10 s gap and with a 1 s gap that
//! makes many short sessions.

use super::{ExampleCopy, run_query};
use weir_tests::nexmark::{events, q11, sorted};

/// 100 s of event time: bidders have several sessions.
const EVENTS: u64 = 1_000_000;

#[test]
fn q11_counts_each_bidders_bids_per_session() {
    let events = events(EVENTS as usize);
    let expected = sorted(q11::q11(&events, q11::GAP));
    assert!(expected.len() >= 1000, "too few q11 sessions to mean something: {}", expected.len());
    for p in [1, 3] {
        let got = sorted(run_query("q11", EVENTS, p, &[]));
        assert_eq!(got.len(), expected.len(), "q11 at parallelism {p}: session count");
        assert!(got == expected, "q11 at parallelism {p}: output differs from the reference");
    }
    // A short gap: most bidders have many sessions.
    let sessions = expected.len();
    let expected = sorted(q11::q11(&events, 1_000));
    assert!(expected.len() > sessions * 3 / 2, "a 1 s gap splits sessions: {} against {sessions}", expected.len());
    let copy = ExampleCopy::new("nexmark");
    copy.edit("q11.toml", "events = 1000000", &format!("events = {EVENTS}"));
    copy.edit("q11.toml", "partition = \"key\"", "partition = \"key\"\nparams = { gap_ms = 1000 }");
    copy.run("q11.toml", &["--parallelism", "3"]);
    let got = sorted(copy.take_output("q11.txt").lines().map(str::to_string));
    assert!(got == expected, "q11 with a 1 s gap at parallelism 3: output differs from the reference");
}

/// q11 over hand-made bids from a file (bidder as the key, `t` the event
/// time), with a watermark after every record (`batch_size = 1`).
fn run_edges(bids: &[(u64, i64)], out_of_orderness: &str, parallelism: u32) -> Vec<String> {
    let copy = ExampleCopy::new("nexmark");
    let lines: String = bids.iter().map(|(b, t)| format!("{{\"bidder\":{b},\"t\":{t}}}\n")).collect();
    copy.write("edges.jsonl", &lines);
    copy.write(
        "edges.toml",
        &format!(
            r#"name = "q11-edges"
[pipeline]
batch_size = 1
[[sources]]
id = "bids"
kind = "file"
path = "edges.jsonl"
format = "jsonl"
key_field = "bidder"
timestamp_field = "t"
max_out_of_orderness = "{out_of_orderness}"
[[operators]]
uid = "q11"
module = "../../target/wasm/nexmark_q11.wasm"
input = "bids"
partition = "key"
[[sinks]]
id = "out"
kind = "file"
input = "q11"
path = "output/q11.txt"
"#
        ),
    );
    copy.run("edges.toml", &["--parallelism", &parallelism.to_string()]);
    sorted(copy.take_output("q11.txt").lines().map(str::to_string))
}

/// Sessions at the gap's edges, as Flink's session windows give them:
/// windows `[t, t + gap)` that intersect or touch merge
/// (`TimeWindow.intersects`), so bids exactly the gap apart share a
/// session and bids a millisecond further apart do not. The expected lines
/// are written out by hand from that rule.
#[test]
fn q11_sessions_at_the_gap_merge_as_flinks_touching_windows() {
    const T: i64 = 1_800_000_000_000;
    let in_order = [
        (7, T),
        (8, T),
        (9, T),
        (11, T),
        (13, T),
        (9, T + 9_999),
        // Bidder 14's bid moves the watermark to T + 9999 before bidder 13's
        // second bid: the session must still be open for it.
        (14, T + 10_000),
        (7, T + 10_000),
        (11, T + 10_000),
        (13, T + 10_000),
        (8, T + 10_001),
        (11, T + 20_000),
        (11, T + 30_000),
        (12, T + 50_000),
    ];
    let expected = sorted(
        [
            "7,2,1800000000000,1800000020000",
            "8,1,1800000000000,1800000010000",
            "8,1,1800000010001,1800000020001",
            "9,2,1800000000000,1800000019999",
            "11,4,1800000000000,1800000040000",
            "12,1,1800000050000,1800000060000",
            "13,2,1800000000000,1800000020000",
            "14,1,1800000010000,1800000020000",
        ]
        .map(str::to_string),
    );
    for p in [1, 3] {
        assert_eq!(run_edges(&in_order, "0ms", p), expected, "in order, parallelism {p}");
    }
    // A late bid between two sessions bridges them: both touch it.
    let bridged = [(10, T), (10, T + 20_000), (10, T + 10_000)];
    for p in [1, 3] {
        assert_eq!(
            run_edges(&bridged, "30s", p),
            vec!["10,3,1800000000000,1800000030000".to_string()],
            "a bridging bid, parallelism {p}"
        );
    }
}
