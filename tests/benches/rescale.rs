//! The pause a live rescale causes, beside the downtime of a stop with
//! savepoint plus a restart at the new parallelism, on the same job: the
//! generator into the word-count counter at parallelism 2, paced so that
//! the counter holds `WEIR_BENCH_KEYS` keys (default 1 M) when the rescales
//! come, on `WEIR_BENCH_BACKEND` (`hashmap`, the default, `rocksdb` or
//! `rocksdb-incremental`).
//! All in one run of the real `host` binary.
//!
//! - `host rescale -p 3`, then, 2 s later, `-p 1`: the pause each reports
//!   (from the first old subtask's barrier to the last new subtask ready);
//! - `host savepoint --stop`, then `host run --from-savepoint -p 3` of a job
//!   that has no records left, so its wall time is startup plus restore.
//!
//! Run: `cargo bench -p weir-tests --bench rescale`. The markdown table goes
//! to stdout, and to `WEIR_BENCH_OUT` if set. `WEIR_BENCH_LOG=<file>` keeps
//! the running job's log there, with the rescales' debug lines (where each
//! pause went).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{artifacts, host_command};

const SEED: u64 = 5;

fn job(dir: &Path, backend: &str, count: u64, keys: u64, rate: u64) -> String {
    format!(
        r#"name = "rescalebench"
parallelism = 2
{backend}

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
        root = dir.display(),
        module = artifacts::WORD_COUNT_COUNTER,
        backend = match backend {
            "rocksdb-incremental" => "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true".to_string(),
            other => format!("state.backend = \"{other}\""),
        },
    )
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let out = host_command(dir, args).env("RUST_LOG", "error").output().unwrap();
    assert!(out.status.success(), "host {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn records_read(dir: &Path) -> u64 {
    let out = host_command(dir, &["status", "rescalebench", "--json"]).output().unwrap();
    if !out.status.success() {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records_read"].as_u64().unwrap_or(0)
}

/// The pause `host rescale` reports, in milliseconds.
fn rescale(dir: &Path, p: u32) -> f64 {
    let out = run(dir, &["rescale", "rescalebench", "--operator", "counter", "-p", &p.to_string()]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let after = said.split("pause ").nth(1).unwrap_or_else(|| panic!("no pause in {said:?}"));
    after.split(" ms").next().unwrap().trim().parse().unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("rescale: bench");
        return;
    }
    let keys: u64 = std::env::var("WEIR_BENCH_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let backend = std::env::var("WEIR_BENCH_BACKEND").unwrap_or_else(|_| "hashmap".into());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Paced so the job is still running after the counter saw most keys.
    let (count, rate) = (keys * 8, keys / 2);
    std::fs::write(d.join("job.toml"), job(d, &backend, count, keys, rate)).unwrap();
    let log = std::env::var_os("WEIR_BENCH_LOG");
    let mut child = host_command(d, &["run", "job.toml"])
        .env("RUST_LOG", if log.is_some() { "error,weir_host::runtime::rescale=debug" } else { "error" })
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, |f| std::fs::File::create(f).expect("WEIR_BENCH_LOG").into()))
        .spawn()
        .unwrap();
    // Three keys' worth of records: about 95% of the keys seen.
    while records_read(d) < keys * 3 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let up = rescale(d, 3);
    eprintln!("rescale 2 -> 3: paused {up:.1} ms");
    // The job first catches up with the records queued during that pause:
    // a barrier right away would wait behind them in some channels, which
    // is the previous rescale's cost, not this one's.
    std::thread::sleep(Duration::from_secs(2));
    let down = rescale(d, 1);
    eprintln!("rescale 3 -> 1: paused {down:.1} ms");

    let started = Instant::now();
    let out = run(d, &["savepoint", "rescalebench", "--stop"]);
    let location = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(child.wait().unwrap().success());
    let stop_ms = started.elapsed().as_secs_f64() * 1e3;
    let meta = std::fs::read_to_string(format!("{}/_metadata", location.trim_start_matches("file://"))).unwrap();
    let json: serde_json::Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    let position = json["sources"]["gen"].as_u64().unwrap();
    // Restart at parallelism 3 with nothing left to read: startup and
    // restore only.
    std::fs::write(d.join("job.toml"), job(d, &backend, position, keys, rate)).unwrap();
    let started = Instant::now();
    let status = Command::new(weir_tests::host_binary())
        .args(["run", "job.toml", "-p", "3", "--from-savepoint", &location])
        .current_dir(d)
        .env("RUST_LOG", "error")
        .env("WEIR_RUN_DIR", d.join(".run"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let restart_ms = started.elapsed().as_secs_f64() * 1e3;
    eprintln!("stop with savepoint {stop_ms:.0} ms + restart at 3 {restart_ms:.0} ms");
    let table = format!(
        "| backend | keys | rescale 2 → 3 | rescale 3 → 1 | stop with savepoint + restart at 3 | **ratio (stop+restart) / rescale 2 → 3** |\n|---|---|---|---|---|---|\n| {backend} | {keys} | {up:.1} ms | {down:.1} ms | {stop_ms:.0} + {restart_ms:.0} ms | **{:.0}x** |\n",
        (stop_ms + restart_ms) / up
    );
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
