//! The RocksDB backend end to end: state several times its memory budget
//! runs to completion with bounded memory, and gives the hashmap backend's
//! output, line for line.

use super::support::JobDir;
use std::process::Stdio;
use std::time::Duration;
use weir_tests::host_command;

/// Generator (`keys` distinct keys, each seen once or twice) into the
/// counter, on `backend` with 2 MiB each of block cache, memtables and
/// write-back cache, into `out.txt`.
fn write_job(dir: &JobDir, backend: &str, keys: u64) {
    let settings = format!(
        "[state.backend]\ntype = \"{backend}\"\nrocksdb.localdir = \"{}\"\nrocksdb.block_cache = \"2MiB\"\nrocksdb.write_buffers = \"2MiB\"\nrocksdb.write_cache = \"2MiB\"\n",
        dir.path().join("rocksdb").display()
    );
    let job = weir_tests::counter_job("big", keys * 3 / 2, keys, 3, &settings);
    let job = job.replace("kind = \"discard\"", "kind = \"file\"\npath = \"out.txt\"");
    assert!(job.contains("path = \"out.txt\""), "{job}");
    dir.write("job.toml", job);
}

/// Runs the job; returns (peak RSS in bytes, largest size of the RocksDB
/// directory seen), sampled every 20 ms.
fn run_sampled(dir: &JobDir) -> (u64, u64) {
    let mut child = host_command(dir.path(), &["run", "job.toml"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let (mut peak, mut disk) = (0u64, 0u64);
    loop {
        if let Ok(text) = std::fs::read_to_string(&status) {
            // VmHWM: the process's peak resident set so far.
            if let Some(kb) = text.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                peak = peak.max(kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) * 1024);
            }
        }
        disk = disk.max(dir_size(&dir.path().join("rocksdb")));
        if let Some(s) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            assert!(s.success(), "{err}");
            return (peak, disk);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn dir_size(p: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(p) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

#[test]
fn state_several_times_the_memory_budget_runs_with_bounded_memory() {
    const KEYS: u64 = 3_000_000;
    let rocks = JobDir::new();
    write_job(&rocks, "rocksdb", KEYS);
    let (rocks_rss, rocks_disk) = run_sampled(&rocks);
    let heap = JobDir::new();
    write_job(&heap, "hashmap", KEYS);
    let (heap_rss, _) = run_sampled(&heap);
    eprintln!(
        "peak RSS: rocksdb {} MiB (disk {} MiB), hashmap {} MiB",
        rocks_rss >> 20,
        rocks_disk >> 20,
        heap_rss >> 20
    );
    // 6 MiB of RocksDB memory budget; the state is over 5 times that.
    assert!(rocks_disk > 5 * (6 << 20), "the state on disk grew past 5x the budget: {} MiB", rocks_disk >> 20);
    assert!(
        rocks_rss + (64 << 20) < heap_rss,
        "RocksDB keeps memory below the in-memory backend's: {} vs {} MiB",
        rocks_rss >> 20,
        heap_rss >> 20
    );
    assert!(
        !rocks.path().join("rocksdb").read_dir().unwrap().any(|e| e.unwrap().path().is_dir()),
        "working directories removed at the end"
    );
    // The same output as on the heap, line for line: at parallelism 1 the
    // counter's updates come out in the generator's order on either
    // backend. Each of the 4.5 M records gives one line.
    let (on_rocks, on_heap) =
        (std::fs::read(rocks.path().join("out.txt")).unwrap(), std::fs::read(heap.path().join("out.txt")).unwrap());
    let lines = on_heap.iter().filter(|b| **b == b'\n').count() as u64;
    assert_eq!(lines, KEYS * 3 / 2, "one line per record on the hashmap backend");
    if on_rocks != on_heap {
        let first = on_rocks.split(|b| *b == b'\n').zip(on_heap.split(|b| *b == b'\n')).position(|(a, b)| a != b);
        panic!(
            "RocksDB output differs from the hashmap backend's ({} vs {} bytes), first at line {first:?}",
            on_rocks.len(),
            on_heap.len()
        );
    }
}
