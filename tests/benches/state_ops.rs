//! Per-operation cost of state and timers through the WASM boundary on the
//! hashmap backend, beside the same operation in a native Rust loop, in the
//! same run.
//!
//! Each operation runs as a job of the real `host` binary: the generator
//! (`WEIR_BENCH_RECORDS`, default 2 M records over 100 k keys, event time
//! one millisecond apart) into `test-operators/op-bench` at parallelism 1,
//! which does one operation per record. The cost of an operation is the job's
//! time per record minus that of the `noop` job (same pipeline, no
//! operation). The native loop does the same operation on std collections
//! keyed by the same key bytes.
//!
//! Run: `cargo bench -p weir-tests --bench state_ops`

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hint::black_box;
use std::time::Instant;
use weir_host::connectors::generator::key_of;
use weir_tests::artifacts::OP_BENCH;
use weir_tests::bench::env_u64;

/// Nanoseconds per record of the op-bench job with `op`.
fn weir_ns(op: &str, count: u64, keys: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("job.toml"),
        format!(
            r#"name = "op-{op}"

[[sources]]
id = "gen"
kind = "generator"
count = {count}
keys = {keys}
event_time_step = "1ms"

[[operators]]
uid = "bench"
module = "{OP_BENCH}"
input = "gen"
partition = "key"
params = {{ op = "{op}" }}

[[sinks]]
id = "out"
kind = "discard"
input = "bench"
"#
        ),
    )
    .unwrap();
    let err = weir_tests::run_quiet(dir.path());
    let secs = weir_tests::elapsed_secs(&err);
    secs * 1e9 / count as f64
}

/// Nanoseconds per operation of the native equivalent.
fn native_ns(op: &str, count: u64, keys: u64) -> f64 {
    let key = |i: u64| key_of(0, i, keys).to_string().into_bytes();
    let started = Instant::now();
    match op {
        "value" => {
            let mut m: HashMap<Vec<u8>, u64> = HashMap::new();
            for i in 0..count {
                *m.entry(key(i)).or_insert(0) += 1;
            }
            black_box(m.len());
        }
        "list-add" => {
            let mut m: HashMap<Vec<u8>, Vec<Vec<u8>>> = HashMap::new();
            for i in 0..count {
                m.entry(key(i)).or_default().push(vec![1]);
            }
            black_box(m.len());
        }
        "map-put" | "map-get" => {
            let mut m: HashMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>> = HashMap::new();
            for i in 0..count {
                let inner = m.entry(key(i)).or_default();
                if op == "map-put" {
                    inner.insert(vec![7], vec![1]);
                } else {
                    black_box(inner.get(&[7u8][..]));
                }
            }
            black_box(m.len());
        }
        "timer" => {
            let mut timers: BTreeSet<(i64, Vec<u8>)> = BTreeSet::new();
            for i in 0..count {
                timers.insert((i as i64, key(i)));
                if i % 1024 == 0 {
                    while timers.first().is_some_and(|t| t.0 < i as i64) {
                        black_box(timers.pop_first());
                    }
                }
            }
            black_box(timers.len());
        }
        _ => {
            // The loop itself: making the key.
            for i in 0..count {
                black_box(key(i));
            }
        }
    }
    started.elapsed().as_nanos() as f64 / count as f64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("state_ops: bench");
        return;
    }
    let count = env_u64("WEIR_BENCH_RECORDS", 2_000_000);
    let keys = env_u64("WEIR_BENCH_KEYS", 100_000);
    eprintln!("state operations: {count} records over {keys} keys");
    let noop = weir_ns("noop", count, keys);
    let native_loop = native_ns("noop", count, keys);
    let mut table = format!(
        "| operation | Weir ns/op (job ns/record − noop) | native ns/op (loop − key making) | ratio |\n|---|---|---|---|\n\
         | (noop pipeline: generator → op-bench → discard) | {noop:.0} ns/record | {native_loop:.0} ns/key | |\n"
    );
    for (op, label) in [
        ("value", "value get + update (`ValueState<u64>`, batch fast path)"),
        ("list-add", "list append (`ListState::add`)"),
        ("map-put", "map put (`MapState::put`)"),
        ("map-get", "map get (`MapState::get`)"),
        ("timer", "event-time timer register + fire"),
    ] {
        let weir = (weir_ns(op, count, keys) - noop).max(0.0);
        let native = (native_ns(op, count, keys) - native_loop).max(0.0);
        eprintln!("{op}: weir {weir:.0} ns, native {native:.0} ns");
        table.push_str(&format!("| {label} | {weir:.0} | {native:.0} | {:.1}x |\n", weir / native.max(1.0)));
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
