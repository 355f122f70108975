//! The checkpoint benchmark, on the hashmap backend, for 100 K, 1 M and 5 M
//! keys:
//! - in the real `host` binary (generator into the word-count counter, a
//!   `ValueState<u64>` per key, parallelism 1): throughput with a checkpoint
//!   every second to a file:// directory, as a ratio to the same job without
//!   checkpoints, in the same run, with and without fsync
//!   (`state.checkpoints.fsync`); the synchronous pause per checkpoint
//!   (median, max), checkpoint duration and size, from the job's summary;
//! - in process, on the same state: the synchronous pause (`freeze`), the
//!   time to write and store a full snapshot, and restore time per GB.
//!
//! Run: `cargo bench -p weir-tests --bench checkpoint`
//! Sizes: `WEIR_BENCH_KEYS` (comma-separated), `WEIR_BENCH_RECORDS`. The
//! markdown table goes to stdout, and to `WEIR_BENCH_OUT` if set.

use std::path::Path;
use std::time::{Duration, Instant};
use weir_host::checkpoint::storage::CheckpointStorage;
use weir_host::config::{S3Settings, StorageSettings};
use weir_host::state::hashmap::HashMapBackend;
use weir_host::state::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use weir_host::state::snapshot::{OperatorShare, restore_snapshot, write_snapshot};
use weir_host::state::{Accounting, KeyRef, Registry, Snapshots, StateKind, ValueState};

const MAX_PARALLELISM: u32 = 128;

/// Checkpoints: none, or every second with fsync on or off.
#[derive(Clone, Copy)]
enum Checkpoints {
    Off,
    On { fsync: bool },
}

fn write_job(dir: &Path, count: u64, keys: u64, checkpoints: Checkpoints) {
    let checkpointing = match checkpoints {
        Checkpoints::On { fsync } => format!(
            "[checkpointing]\ninterval = \"1s\"\n\n[state.checkpoints]\ndir = \"file://{}\"\nfsync = {fsync}\n",
            dir.join("ck").display()
        ),
        Checkpoints::Off => String::new(),
    };
    std::fs::write(dir.join("job.toml"), weir_tests::counter_job("ckbench", count, keys, 1, &checkpointing)).unwrap();
}

/// The job's rate and, with checkpoints, its summary's checkpoint line.
fn job(count: u64, keys: u64, checkpoints: Checkpoints) -> (f64, String) {
    let dir = tempfile::tempdir().unwrap();
    write_job(dir.path(), count, keys, checkpoints);
    let err = weir_tests::run_quiet(dir.path());
    let rate = count as f64 / weir_tests::elapsed_secs(&err);
    let line = err.lines().find(|l| l.contains("checkpoints:")).unwrap_or("").trim().to_string();
    assert!(matches!(checkpoints, Checkpoints::Off) || line.contains(" completed"), "no checkpoint line:\n{err}");
    (rate, line)
}

/// A field of the summary's checkpoint line, e.g. "sync pause median".
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(name).nth(1).map(|r| r.trim_start().split([',', ';']).next().unwrap_or("?")).unwrap_or("?")
}

struct InProcess {
    freeze_median: Duration,
    freeze_max: Duration,
    write: Duration,
    store: Duration,
    bytes: usize,
    restore: Duration,
}

/// One backend with `keys` counters, as the job would hold them.
fn in_process(keys: u64) -> InProcess {
    let range = KeyGroupRange { start: 0, end: MAX_PARALLELISM as u16 };
    let mut b = HashMapBackend::new(range);
    let s = b.register(StateKind::Value.descriptor("count")).unwrap();
    for k in 0..keys {
        let key = k.to_string();
        let hash = key_hash(key.as_bytes());
        let kr = KeyRef { key: key.as_bytes(), hash, key_group: key_group_of_hash(hash, MAX_PARALLELISM) };
        b.value_set(s, kr, &(k % 1000).to_le_bytes()).unwrap();
    }
    let mut pauses = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let frozen = b.freeze();
        pauses.push(t.elapsed());
        drop(frozen);
    }
    pauses.sort();
    let mut frozen = b.freeze();
    let t = Instant::now();
    let bytes = write_snapshot(frozen.as_mut(), MAX_PARALLELISM).unwrap();
    let write = t.elapsed();
    let dir = tempfile::tempdir().unwrap();
    let settings = StorageSettings {
        dir: Some(format!("file://{}", dir.path().display())),
        inline_threshold: 0,
        memory_max_state_size: 0,
        fsync: true,
        s3: S3Settings::default(),
        fenced_by: None,
        limits: weir_host::config::settings::ReadLimits::default(),
    };
    let storage = CheckpointStorage::open(&settings, "bench").unwrap();
    let len = bytes.len();
    let t = Instant::now();
    let handle = storage.put_state(1, "counter#0", "counter-0.snap", bytes).unwrap();
    let store = t.elapsed();
    let t = Instant::now();
    let read = storage.read_state(&handle).unwrap();
    let mut restored = HashMapBackend::new(range);
    restore_snapshot(&read, &mut restored, range, MAX_PARALLELISM, OperatorShare::All).unwrap();
    let restore = t.elapsed();
    assert_eq!(restored.key_count(0), keys as usize);
    InProcess {
        freeze_median: pauses[pauses.len() / 2],
        freeze_max: *pauses.last().unwrap(),
        write,
        store,
        bytes: len,
        restore,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("checkpoint: bench");
        return;
    }
    let keys: Vec<u64> = std::env::var("WEIR_BENCH_KEYS")
        .unwrap_or_else(|_| "100000,1000000,5000000".into())
        .split(',')
        .map(|k| k.trim().replace('_', "").parse().expect("WEIR_BENCH_KEYS: numbers"))
        .collect();
    let count: u64 = std::env::var("WEIR_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000_000);
    let mut table = String::from(
        "| keys | throughput without / with 1 s checkpoints (fsync on) / with (fsync off) | **ratio** fsync on / off | sync pause median / max (job) | checkpoint duration median / max | checkpoint size | freeze median / max (in process) | write + store snapshot | restore | restore per GB |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for &k in &keys {
        eprintln!("{k} keys: {count} records without, then with checkpoints (fsync on, then off)");
        let (plain, _) = job(count, k, Checkpoints::Off);
        let (with, line) = job(count, k, Checkpoints::On { fsync: true });
        let (unsynced, _) = job(count, k, Checkpoints::On { fsync: false });
        eprintln!("  {line}");
        let p = in_process(k);
        let gb = p.bytes as f64 / (1u64 << 30) as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        table.push_str(&format!(
            "| {k} | {:.2} / {:.2} / {:.2} M rec/s | **{:.2}** / {:.2} | {} / {} | {} / {} | {} | {:.3} / {:.3} ms | {:.0} + {:.0} ms | {:.0} ms ({:.1} MiB) | {:.1} s |\n",
            plain / 1e6,
            with / 1e6,
            unsynced / 1e6,
            with / plain,
            unsynced / plain,
            field(&line, "sync pause median"),
            field(&line, ", max"),
            field(&line, "duration median"),
            field(line.split("duration median").nth(1).unwrap_or(""), ", max"),
            field(&line, "last size"),
            ms(p.freeze_median),
            ms(p.freeze_max),
            ms(p.write),
            ms(p.store),
            ms(p.restore),
            p.bytes as f64 / (1 << 20) as f64,
            p.restore.as_secs_f64() / gb,
        ));
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
