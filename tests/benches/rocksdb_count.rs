//! Keyed count on the RocksDB backend: the generator into the word-count
//! counter (a `ValueState<u64>` per key) and a discard sink at parallelism
//! 1, run by the real `host` binary on `state.backend = "rocksdb"` and on
//! `"hashmap"`, beside a native Rust loop doing one RocksDB get and one put
//! per record with default options (write-ahead log off, as the backend
//! runs), over the same key sequence, in the same run.
//!
//! With `WEIR_BENCH_CHECKPOINTS=1` the question is checkpoints instead: the
//! RocksDB job without checkpoints and with incremental checkpoints every
//! second to a `file://` directory (throughput, and the synchronous pause
//! per checkpoint, median / max, from the job's summary). With
//! `WEIR_BENCH_BASELINE=<path of another host binary>` (an earlier build),
//! that binary runs the same jobs too, in the same run, for a before/after
//! table.
//!
//! Run: `cargo bench -p weir-tests --bench rocksdb_count`
//! Sizes: `WEIR_BENCH_RECORDS` (default 5 M), `WEIR_BENCH_KEYS` (default
//! 1 M, comma-separated for several). The markdown table goes to stdout,
//! and to `WEIR_BENCH_OUT` if set.

use std::path::{Path, PathBuf};
use std::time::Instant;
use weir_host::connectors::generator::key_of;

const SEED: u64 = 1;

/// One get and one put per record on a default RocksDB: records per second.
fn native(dir: &Path, count: u64, keys: u64) -> f64 {
    let db = rocksdb::DB::open_default(dir.join("native")).unwrap();
    let mut write = rocksdb::WriteOptions::default();
    write.disable_wal(true);
    let started = Instant::now();
    for i in 0..count {
        let key = key_of(SEED, i, keys).to_string();
        let n = match db.get(key.as_bytes()).unwrap() {
            Some(v) => u64::from_le_bytes(v[..8].try_into().unwrap()),
            None => 0,
        };
        db.put_opt(key.as_bytes(), (n + 1).to_le_bytes(), &write).unwrap();
    }
    count as f64 / started.elapsed().as_secs_f64()
}

fn weir(count: u64, keys: u64, backend: &str) -> f64 {
    weir_run(&weir_tests::host_binary(), count, keys, backend, false).0
}

/// Runs the job with the host binary `bin`: records per second, and with
/// `checkpoints` (incremental, every second) the summary's sync pause.
fn weir_run(bin: &Path, count: u64, keys: u64, backend: &str, checkpoints: bool) -> (f64, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = format!(
        "[state.backend]\ntype = \"{backend}\"\nrocksdb.localdir = \"{}\"\n",
        dir.path().join("rocksdb").display()
    );
    if checkpoints {
        settings.push_str(&format!(
            "incremental = true\n\n[checkpointing]\ninterval = \"1s\"\n\n[state.checkpoints]\ndir = \"file://{}\"\n",
            dir.path().join("ck").display()
        ));
    }
    std::fs::write(dir.path().join("job.toml"), weir_tests::counter_job("rocks-count", count, keys, SEED, &settings))
        .unwrap();
    let err = weir_tests::run_quiet_with(bin, dir.path());
    assert!(err.contains(&format!("counter                     1 {count:>14}")), "{err}");
    let pause = err
        .split("sync pause ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .map(|p| p.replace("median ", "").replace(", max ", " / "))
        .unwrap_or_else(|| "-".into());
    (count as f64 / weir_tests::elapsed_secs(&err), pause)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("rocksdb_count: bench");
        return;
    }
    let count: u64 = std::env::var("WEIR_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000_000);
    let keys: Vec<u64> = std::env::var("WEIR_BENCH_KEYS")
        .unwrap_or_else(|_| "1000000".into())
        .split(',')
        .map(|k| k.trim().replace('_', "").parse().expect("WEIR_BENCH_KEYS: numbers"))
        .collect();
    let checkpoints = std::env::var("WEIR_BENCH_CHECKPOINTS").is_ok_and(|v| v == "1");
    let baseline = std::env::var("WEIR_BENCH_BASELINE").ok().map(PathBuf::from);
    // The native comparison, unless the run is about checkpoints or builds.
    let native_keys = if checkpoints || baseline.is_some() { &[][..] } else { &keys[..] };
    let mut table = String::from(
        "| keys | native RocksDB get+put | Weir on RocksDB | **ratio Weir-RocksDB / native** | Weir on hashmap |\n|---|---|---|---|---|\n",
    );
    for &k in native_keys {
        let dir = tempfile::tempdir().unwrap();
        eprintln!("{count} records over {k} keys");
        let n = native(dir.path(), count, k);
        eprintln!("  native get+put: {:.3} M/s", n / 1e6);
        let r = weir(count, k, "rocksdb");
        eprintln!("  weir on rocksdb: {:.3} M/s", r / 1e6);
        let h = weir(count, k, "hashmap");
        eprintln!("  weir on hashmap: {:.3} M/s", h / 1e6);
        table.push_str(&format!(
            "| {k} | {:.3} M rec/s | {:.3} M rec/s | **{:.2}** (target ≥ 1.25) | {:.2} M rec/s |\n",
            n / 1e6,
            r / 1e6,
            r / n,
            h / 1e6
        ));
    }
    if checkpoints || baseline.is_some() {
        table = String::from(
            "| keys | build | RocksDB, no checkpoints | RocksDB, incremental checkpoints every 1 s | sync pause median / max |\n|---|---|---|---|---|\n",
        );
        let mut builds = vec![("this", weir_tests::host_binary())];
        builds.extend(baseline.map(|b| ("baseline", b)));
        for k in &keys {
            for (name, bin) in &builds {
                let (plain, _) = weir_run(bin, count, *k, "rocksdb", false);
                let (with, pause) =
                    if checkpoints { weir_run(bin, count, *k, "rocksdb", true) } else { (f64::NAN, "-".into()) };
                let line =
                    format!("| {k} | {name} | {:.3} M rec/s | {:.3} M rec/s | {pause} |\n", plain / 1e6, with / 1e6);
                eprint!("{line}");
                table.push_str(&line);
            }
        }
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
