//! End-to-end latency of the keyed count: a paced generator stamps each
//! record with the time it was due (`timestamps = "wall-clock-us"`, so a
//! record held back by a slow pipeline counts its wait), the word-count
//! counter passes the timestamp on, and the `latency` sink records arrival
//! minus timestamp in a histogram. Run by the real `host` binary, on the
//! hashmap backend and on incremental RocksDB, without checkpoints and with
//! one every second, at parallelism 1 and 2, at fixed rates and at half of
//! the configuration's measured maximum (an unpaced run without
//! checkpoints, in the same run of this benchmark).
//!
//! Reported per run: p50, p99, p99.9 and max latency, and with checkpoints
//! the synchronous pause (median / max) from the job's summary.
//!
//! Run: `cargo bench -p weir-tests --bench latency`
//! Sizes: `WEIR_BENCH_SECONDS` (per run, default 10), `WEIR_BENCH_KEYS`
//! (default 1 M), `WEIR_BENCH_RATES` (comma-separated records per second,
//! `half` for half the maximum; default `10000,100000,1000000,half`),
//! `WEIR_BENCH_BACKENDS` (default `hashmap,rocksdb`), `WEIR_BENCH_PARALLELISM`
//! (default `1,2`). The markdown table goes to stdout, and to
//! `WEIR_BENCH_OUT` if set.

use std::path::Path;

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name).unwrap_or_else(|_| default.into()).split(',').map(|s| s.trim().to_string()).collect()
}

/// The job: `rate` records per second (none: unpaced) for `count` records.
fn write_job(dir: &Path, backend: &str, parallelism: u32, checkpoints: bool, count: u64, keys: u64, rate: Option<u64>) {
    let state = match backend {
        "rocksdb" => format!(
            "[state.backend]\ntype = \"rocksdb\"\nincremental = true\nrocksdb.localdir = \"{}\"\n",
            dir.join("rocksdb").display()
        ),
        _ => "[state.backend]\ntype = \"hashmap\"\n".to_string(),
    };
    let checkpointing = if checkpoints {
        format!(
            "[checkpointing]\ninterval = \"1s\"\n\n[state.checkpoints]\ndir = \"file://{}\"\n",
            dir.join("ck").display()
        )
    } else {
        String::new()
    };
    let job = weir_tests::latency_job(parallelism, count, keys, rate, &format!("{state}\n{checkpointing}"));
    std::fs::write(dir.join("job.toml"), job).unwrap();
}

/// "median 1.527 ms, max 7.099 ms" after "sync pause" in a summary.
fn sync_pause(stderr: &str) -> String {
    stderr
        .split("sync pause ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .map(|s| s.replace("median ", "").replace(", max ", " / "))
        .unwrap_or_else(|| "-".into())
}

fn ms(report: &serde_json::Value, field: &str) -> String {
    format!("{:.2}", report[field].as_u64().expect("a latency field") as f64 / 1000.0)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("latency: bench");
        return;
    }
    let seconds: u64 = std::env::var("WEIR_BENCH_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let keys: u64 =
        std::env::var("WEIR_BENCH_KEYS").ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(1_000_000);
    let rates = env_list("WEIR_BENCH_RATES", "10000,100000,1000000,half");
    let mut table = String::from(
        "| backend | p | checkpoints | rate (records/s) | p50 ms | p99 ms | p99.9 ms | max ms | sync pause median / max |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for backend in env_list("WEIR_BENCH_BACKENDS", "hashmap,rocksdb") {
        for p in env_list("WEIR_BENCH_PARALLELISM", "1,2") {
            let p: u32 = p.parse().expect("WEIR_BENCH_PARALLELISM: numbers");
            // The maximum: unpaced, without checkpoints.
            let dir = tempfile::tempdir().unwrap();
            let count = 5_000_000;
            write_job(dir.path(), &backend, p, false, count, keys, None);
            let max = count as f64 / weir_tests::elapsed_secs(&weir_tests::run_quiet(dir.path()));
            eprintln!("{backend} p={p}: maximum {:.3} M records/s", max / 1e6);
            table.push_str(&format!("| {backend} | {p} | off | maximum: {:.0} (unpaced) | | | | | |\n", max));
            for checkpoints in [false, true] {
                for rate in &rates {
                    let rate: u64 = if rate == "half" { (max / 2.0) as u64 } else { rate.parse().expect("a rate") };
                    let dir = tempfile::tempdir().unwrap();
                    write_job(dir.path(), &backend, p, checkpoints, rate * seconds, keys, Some(rate));
                    let err = weir_tests::run_quiet(dir.path());
                    let report: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(dir.path().join("latency.json")).unwrap()).unwrap();
                    assert_eq!(report["count"].as_u64(), Some(rate * seconds), "every record measured: {report}");
                    let pause = if checkpoints { sync_pause(&err) } else { "-".into() };
                    let line = format!(
                        "| {backend} | {p} | {} | {rate} | {} | {} | {} | {} | {pause} |\n",
                        if checkpoints { "1 s" } else { "off" },
                        ms(&report, "p50_us"),
                        ms(&report, "p99_us"),
                        ms(&report, "p999_us"),
                        ms(&report, "max_us"),
                    );
                    eprint!("{line}");
                    table.push_str(&line);
                }
            }
        }
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
