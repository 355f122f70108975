//! Recovery: how long a job takes to come back with its state, beside how
//! long the same state takes to build from input. All in one run.
//!
//! - In process, on the hashmap backend: restoring a snapshot file of N
//!   values of 8 and of 100 bytes the way a subtask does (streamed, checked
//!   section by section), in MiB/s of snapshot and entries per second.
//! - In the real `host` binary, on the hashmap backend, RocksDB (full
//!   snapshots) and incremental RocksDB: the generator into the word-count
//!   counter (parallelism 1) until it has read 3 N records over N keys,
//!   then the next completed checkpoint, then SIGKILL; then `--resume`,
//!   timed from the command's start to the counter's log line "state
//!   restored; ready for the first record". Building is the time the first
//!   run took to read those 3 N records from its start.
//!
//! Run: `cargo bench -p weir-tests --bench recovery`
//! Sizes: `WEIR_BENCH_KEYS` (comma-separated, default 1000000,5000000,20000000);
//! `WEIR_BENCH_BACKENDS` (default hashmap,rocksdb,rocksdb-incremental). The
//! markdown table goes to stdout, and to `WEIR_BENCH_OUT` if set.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use weir_host::state::hashmap::HashMapBackend;
use weir_host::state::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use weir_host::state::snapshot::{OperatorShare, restore_snapshot_stream, write_snapshot};
use weir_host::state::ttl::TtlBackend;
use weir_host::state::{Accounting, KeyRef, Registry, Snapshots, StateKind, ValueState};
use weir_tests::host_command;

const MAX_PARALLELISM: u32 = 128;
const MIB: f64 = (1 << 20) as f64;

/// In process, `keys` values of `value_bytes` each: (snapshot bytes, best
/// restore time of three).
fn in_process(keys: u64, value_bytes: usize) -> (usize, Duration) {
    let range = KeyGroupRange { start: 0, end: MAX_PARALLELISM as u16 };
    let mut b = HashMapBackend::new(range);
    let s = b.register(StateKind::Value.descriptor("count")).unwrap();
    for k in 0..keys {
        let key = k.to_string();
        let hash = key_hash(key.as_bytes());
        let kr = KeyRef { key: key.as_bytes(), hash, key_group: key_group_of_hash(hash, MAX_PARALLELISM) };
        let mut value = vec![(k % 251) as u8; value_bytes];
        value[..8.min(value_bytes)].copy_from_slice(&k.to_le_bytes()[..8.min(value_bytes)]);
        b.value_set(s, kr, &value).unwrap();
    }
    let bytes = write_snapshot(b.freeze().as_mut(), MAX_PARALLELISM).unwrap();
    drop(b);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snapshot");
    std::fs::write(&path, &bytes).unwrap();
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let file = std::fs::File::open(&path).unwrap();
        let mut backend = TtlBackend::new(HashMapBackend::new(range), weir_host::clock::system(), MAX_PARALLELISM);
        let mut r = BufReader::with_capacity(1 << 20, file);
        restore_snapshot_stream(&mut r, &mut backend, range, MAX_PARALLELISM, OperatorShare::All).unwrap();
        best = best.min(t.elapsed());
        assert_eq!(backend.key_count(0), keys as usize);
    }
    (bytes.len(), best)
}

fn write_job(dir: &Path, keys: u64, backend: &str) {
    let backend = match backend {
        "hashmap" => "state.backend = \"hashmap\"".to_string(),
        "rocksdb" => "state.backend = \"rocksdb\"".to_string(),
        _ => "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true".to_string(),
    };
    let settings = format!(
        "{backend}\n\n[checkpointing]\ninterval = \"5s\"\n\n[state.checkpoints]\ndir = \"file://{}\"\n",
        dir.join("ck").display()
    );
    // More records than any run reads: the first run is killed.
    let job = weir_tests::counter_job("recovery", 1 << 40, keys, 7, &settings);
    std::fs::write(dir.join("job.toml"), job).unwrap();
}

fn status(dir: &Path) -> Option<serde_json::Value> {
    let out = host_command(dir, &["status", "recovery", "--json"]).output().unwrap();
    out.status.success().then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// Polls the job until `done` holds for its status.
fn wait_for(dir: &Path, what: &str, done: impl Fn(&serde_json::Value) -> bool) {
    let until = Instant::now() + Duration::from_secs(1800);
    loop {
        if status(dir).is_some_and(|s| done(&s)) {
            return;
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct EndToEnd {
    build: Duration,
    ready: Duration,
    entries: u64,
    size: String,
}

fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn end_to_end(keys: u64, backend: &str) -> EndToEnd {
    let dir = tempfile::tempdir().unwrap();
    write_job(dir.path(), keys, backend);
    let t = Instant::now();
    let child = host_command(dir.path(), &["run", "job.toml"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(dir.path(), "3 N records", |s| s["records_read"].as_u64().unwrap_or(0) >= 3 * keys);
    let build = t.elapsed();
    let after = status(dir.path()).and_then(|s| s["latest_checkpoint"].as_u64()).unwrap_or(0);
    wait_for(dir.path(), "a checkpoint", |s| s["latest_checkpoint"].as_u64().is_some_and(|c| c > after));
    kill(child);

    let t = Instant::now();
    let mut child = host_command(dir.path(), &["run", "job.toml", "--resume"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = loop {
        let line = lines.next().expect("the resumed job logs its restore").unwrap();
        if line.contains("state restored; ready for the first record") {
            break line;
        }
    };
    let ready = t.elapsed();
    kill(child);
    // `... entries=283000 size=3.0 MiB took_ms=...`: a value runs to the
    // next field's name.
    let field = |name: &str, next: &str| {
        let rest = line.split(&format!("{name}=")).nth(1).unwrap_or("?");
        rest[..rest.find(next).unwrap_or(rest.len())].trim().trim_matches('"').to_string()
    };
    EndToEnd {
        build,
        ready,
        entries: field("entries", " size=").parse().expect("entries in the restore line"),
        size: field("size", " took_ms="),
    }
}

fn list(var: &str, default: &str) -> Vec<String> {
    std::env::var(var).unwrap_or_else(|_| default.into()).split(',').map(|s| s.trim().replace('_', "")).collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("recovery: bench");
        return;
    }
    let keys: Vec<u64> = list("WEIR_BENCH_KEYS", "1000000,5000000,20000000")
        .iter()
        .map(|k| k.parse().expect("WEIR_BENCH_KEYS: numbers"))
        .collect();
    let backends = list("WEIR_BENCH_BACKENDS", "hashmap,rocksdb,rocksdb-incremental");
    let mut table = String::from(
        "In process, hashmap backend:\n\n| keys | value | snapshot | restore | MiB/s | M entries/s |\n|---|---|---|---|---|---|\n",
    );
    for value_bytes in [8, 100] {
        for &n in &keys {
            let (bytes, took) = in_process(n, value_bytes);
            let s = took.as_secs_f64();
            table.push_str(&format!(
                "| {n} | {value_bytes} B | {:.1} MiB | {:.0} ms | **{:.0}** | {:.1} |\n",
                bytes as f64 / MIB,
                s * 1e3,
                bytes as f64 / MIB / s,
                n as f64 / s / 1e6
            ));
            eprintln!("{table}");
        }
    }
    table.push_str(
        "\nThe real host, `--resume` after SIGKILL:\n\n| backend | keys | state restored | build from input (3 N records) | `--resume` to ready | **ratio** build / resume |\n|---|---|---|---|---|---|\n",
    );
    for backend in &backends {
        for &n in &keys {
            let e = end_to_end(n, backend);
            table.push_str(&format!(
                "| {backend} | {n} | {} ({} entries) | {:.1} s | {:.2} s | **{:.1}** |\n",
                e.size,
                e.entries,
                e.build.as_secs_f64(),
                e.ready.as_secs_f64(),
                e.build.as_secs_f64() / e.ready.as_secs_f64()
            ));
            eprintln!("{table}");
        }
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
