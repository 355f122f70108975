//! The pause a live module swap causes, beside the downtime of a stop with
//! savepoint plus a restart, on the same job: the generator into the
//! word-count counter (hashmap backend, parallelism 1), paced so that the
//! counter holds `WEIR_BENCH_KEYS` keys (default 1 M) when the swaps come.
//! All in one run of the real `host` binary.
//!
//! - swap to the same module (state carried over as it is);
//! - swap to `counter-v2` (every value migrated through `migrate-value`);
//! - `host savepoint --stop`, then `host run --from-savepoint` of a job that
//!   has no records left, so its wall time is startup plus restore.
//!
//! Run: `cargo bench -p weir-tests --bench swap`. The markdown table goes
//! to stdout, and to `WEIR_BENCH_OUT` if set.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{artifacts, host_command};

const SEED: u64 = 3;

fn job(dir: &Path, count: u64, keys: u64, rate: u64, module: &str) -> String {
    format!(
        r#"name = "swapbench"
[checkpointing]
interval = "1h"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "gen"
kind = "generator"
count = {count}
keys = {keys}
seed = {SEED}
records_per_second = {rate}

[[operators]]
uid = "counter"
module = "{module}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#,
        root = dir.display()
    )
}

fn host(dir: &Path, args: &[&str]) -> Output {
    let out = host_command(dir, args).env("RUST_LOG", "error").output().unwrap();
    assert!(out.status.success(), "host {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn read_so_far(dir: &Path) -> u64 {
    let out = host_command(dir, &["status", "swapbench", "--json"]).output().unwrap();
    if !out.status.success() {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records_read"].as_u64().unwrap_or(0)
}

/// The pause `host swap` reports, in milliseconds.
fn swap(dir: &Path, module: &str) -> f64 {
    let out = host(dir, &["swap", "swapbench", "--operator", "counter", "--module", module]);
    let said = String::from_utf8_lossy(&out.stderr);
    let after = said.split("paused ").nth(1).expect("the pause is reported");
    after.split(" ms").next().unwrap().trim().parse().unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("swap: bench");
        return;
    }
    let keys: u64 = std::env::var("WEIR_BENCH_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Paced so the job is still running after the counter saw most keys.
    let (count, rate) = (keys * 6, keys / 2);
    std::fs::write(d.join("job.toml"), job(d, count, keys, rate, artifacts::WORD_COUNT_COUNTER)).unwrap();
    let mut child: Child = host_command(d, &["run", "job.toml"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Three keys' worth of records: about 95% of the keys seen.
    while read_so_far(d) < keys * 3 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let same = swap(d, artifacts::WORD_COUNT_COUNTER);
    eprintln!("swap to the same module: paused {same:.1} ms");
    let migrated = swap(d, artifacts::WORD_COUNT_COUNTER_V2);
    eprintln!("swap to counter-v2 (migrating every value): paused {migrated:.1} ms");

    let started = Instant::now();
    let out = host(d, &["savepoint", "swapbench", "--stop"]);
    let location = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(child.wait().unwrap().success());
    let stop_ms = started.elapsed().as_secs_f64() * 1e3;
    let meta = std::fs::read_to_string(format!("{}/_metadata", location.trim_start_matches("file://"))).unwrap();
    let json: serde_json::Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    let position = json["sources"]["gen"].as_u64().unwrap();
    // Restart with nothing left to read: startup and restore only.
    std::fs::write(d.join("job.toml"), job(d, position, keys, rate, artifacts::WORD_COUNT_COUNTER_V2)).unwrap();
    let started = Instant::now();
    let status = Command::new(weir_tests::host_binary())
        .args(["run", "job.toml", "--from-savepoint", &location])
        .current_dir(d)
        .env("RUST_LOG", "error")
        .env("WEIR_RUN_DIR", d.join(".run"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let restart_ms = started.elapsed().as_secs_f64() * 1e3;
    eprintln!("stop with savepoint {stop_ms:.0} ms + restart {restart_ms:.0} ms");
    let table = format!(
        "| keys | swap, same module | swap to v2, migrating every value | stop with savepoint + restart | **ratio (stop+restart) / swap** |\n|---|---|---|---|---|\n| {keys} | {same:.1} ms | {migrated:.1} ms | {stop_ms:.0} + {restart_ms:.0} ms | **{:.0}x** |\n",
        (stop_ms + restart_ms) / same
    );
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
