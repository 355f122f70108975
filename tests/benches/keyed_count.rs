//! The keyed-count benchmark: the generator (20 M records over 1 M keys by
//! default) into the word-count counter operator (a `ValueState<u64>` per key)
//! and a discard sink, on the hashmap backend at parallelism 1, beside a
//! native Rust loop counting the same key sequence in a `HashMap<u64, u64>`
//! with foldhash, in the same run. Also: per-record calls (`process`) against
//! batched calls (`process-batch`), and cold start with and without the
//! compiled-module cache.
//!
//! Run: `cargo bench -p weir-tests --bench keyed_count`
//! Sizes: `WEIR_BENCH_RECORDS`, `WEIR_BENCH_KEYS`. The markdown table goes to
//! stdout, and to `WEIR_BENCH_OUT` if set.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use weir_host::connectors::generator::key_of;
use weir_tests::bench::{env_u64, median};

const SEED: u64 = 1;

fn native(count: u64, keys: u64) -> f64 {
    let started = Instant::now();
    let mut map: HashMap<u64, u64, foldhash::fast::RandomState> = HashMap::default();
    for i in 0..count {
        *map.entry(key_of(SEED, i, keys)).or_insert(0) += 1;
    }
    let elapsed = started.elapsed();
    black_box(map.len());
    count as f64 / elapsed.as_secs_f64()
}

fn write_job(dir: &Path, count: u64, keys: u64, batch_size: usize) {
    let settings = format!("[pipeline]\nbatch_size = {batch_size}\n");
    std::fs::write(dir.join("job.toml"), weir_tests::counter_job("keyed-count", count, keys, SEED, &settings)).unwrap();
}

/// Records per second of the Weir job, run by the real `host` binary (its
/// summary's time from the first task start to the end).
fn weir(count: u64, keys: u64, batch_size: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    write_job(dir.path(), count, keys, batch_size);
    let err = weir_tests::run_quiet(dir.path());
    let counted = format!("counter                     1 {count:>14}");
    assert!(err.contains(&counted), "every record reached the counter:\n{err}");
    let secs = weir_tests::elapsed_secs(&err);
    count as f64 / secs
}

/// Wall time of `host run` on a one-record job: process start, config,
/// engine, module load (compile or cache), first record, exit.
fn cold_start(cache_warm: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    write_job(dir.path(), 1, 1, 1024);
    if cache_warm {
        let warm = Command::new(weir_tests::host_binary())
            .args(["run", "job.toml"])
            .current_dir(dir.path())
            .env("XDG_CACHE_HOME", dir.path().join(".cache"))
            .output()
            .unwrap();
        assert!(warm.status.success());
    }
    let started = Instant::now();
    let out = Command::new(weir_tests::host_binary())
        .args(["run", "job.toml"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let t = started.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    t
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("keyed_count: bench");
        return;
    }
    let count = env_u64("WEIR_BENCH_RECORDS", 20_000_000);
    let keys = env_u64("WEIR_BENCH_KEYS", 1_000_000);
    eprintln!("keyed count: {count} records over {keys} keys");

    let native_rate = native(count, keys);
    eprintln!("native HashMap<u64,u64> (foldhash): {:.2} M records/s", native_rate / 1e6);
    let weir_rate = weir(count, keys, 1024);
    eprintln!("weir, hashmap backend, batches of 1024: {:.2} M records/s", weir_rate / 1e6);
    let small = (count / 10).max(1);
    let per_record = weir(small, keys.min(small), 1);
    let batched_small = weir(small, keys.min(small), 1024);
    eprintln!(
        "weir on {small} records: per-record calls {:.2} M/s, batched {:.2} M/s",
        per_record / 1e6,
        batched_small / 1e6
    );
    let cold: Vec<f64> = (0..3).map(|_| cold_start(false).as_secs_f64() * 1e3).collect();
    let warm: Vec<f64> = (0..3).map(|_| cold_start(true).as_secs_f64() * 1e3).collect();

    let table = format!(
        "| measurement | value |\n|---|---|\n\
         | native `HashMap<u64,u64>` + foldhash, 1 core | {:.2} M records/s |\n\
         | Weir, hashmap backend, parallelism 1 (batches of 1024) | {:.2} M records/s |\n\
         | **ratio Weir / native** | **{:.3}** (target ≥ 0.08) |\n\
         | Weir, one `process` call per record ({small} records) | {:.2} M records/s |\n\
         | Weir, `process-batch` of 1024 ({small} records) | {:.2} M records/s |\n\
         | ratio batched / per-record | {:.2} |\n\
         | cold start, empty module cache (`host run` to exit, 1 record; median of 3) | {:.0} ms |\n\
         | cold start, warm module cache (median of 3) | {:.0} ms |\n",
        native_rate / 1e6,
        weir_rate / 1e6,
        weir_rate / native_rate,
        per_record / 1e6,
        batched_small / 1e6,
        batched_small / per_record,
        median(cold),
        median(warm),
    );
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
