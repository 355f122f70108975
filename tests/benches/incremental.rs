//! Incremental RocksDB checkpoints against full ones, in process: a
//! RocksDB backend holding `N` counters is frozen (a RocksDB checkpoint, as
//! at a barrier), 1% of the keys change, and it is frozen again. Reported:
//! the bytes an incremental checkpoint uploads (files not stored by the
//! previous one) against the whole checkpoint and against the canonical
//! full snapshot; the freeze (synchronous) time; and restore time, by
//! adopting the checkpoint's files against replaying the canonical snapshot.
//!
//! Run: `cargo bench -p weir-tests --bench incremental`
//! Size: `WEIR_BENCH_KEYS` (default 1 M). The table goes to stdout.

use std::collections::HashSet;
use std::time::Instant;
use weir_host::state::key_group::{KeyGroupRange, key_group_of_hash, key_hash};
use weir_host::state::rocksdb::{RocksDbBackend, RocksDbMemory};
use weir_host::state::snapshot::{OperatorShare, restore_snapshot, write_snapshot};
use weir_host::state::{Accounting, FrozenState, KeyRef, Registry, Snapshots, StateKind, ValueState};

const MAX_PARALLELISM: u32 = 128;

fn set(b: &mut RocksDbBackend, k: u64, v: u64) {
    let key = k.to_string();
    let hash = key_hash(key.as_bytes());
    let kr = KeyRef { key: key.as_bytes(), hash, key_group: key_group_of_hash(hash, MAX_PARALLELISM) };
    b.value_set(0, kr, &v.to_le_bytes()).unwrap();
}

/// (name, bytes) of every file an incremental checkpoint of `frozen`
/// stores: its RocksDB checkpoint directory's, and the write-back cache's
/// layers its database had not taken in. An SST file whose bytes were
/// stored before is not stored again, whatever its name, as the uploader
/// does (a layer comes back as a database file once ingested).
fn stored_files(frozen: &mut dyn FrozenState) -> Vec<(String, Vec<u8>)> {
    let native = frozen.native_checkpoint().unwrap().unwrap();
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&native.dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    out.extend(native.layers.iter().map(|(name, path)| (name.clone(), std::fs::read(path).unwrap())));
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("incremental: bench");
        return;
    }
    let n: u64 =
        std::env::var("WEIR_BENCH_KEYS").ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let range = KeyGroupRange { start: 0, end: MAX_PARALLELISM as u16 };
    let mut b = RocksDbBackend::open(tmp.path(), "bench", range, RocksDbMemory::default()).unwrap();
    b.register(StateKind::Value.descriptor("count")).unwrap();
    for k in 0..n {
        set(&mut b, k, 1);
    }
    let t = Instant::now();
    let mut first = b.freeze();
    let freeze_full = t.elapsed();
    let first_files = stored_files(first.as_mut());
    let full_bytes: u64 = first_files.iter().map(|f| f.1.len() as u64).sum();
    let canonical = write_snapshot(first.as_mut(), MAX_PARALLELISM).unwrap();
    let stored: HashSet<Vec<u8>> = first_files.into_iter().filter(|f| f.0.ends_with(".sst")).map(|f| f.1).collect();
    drop(first);

    // 1% of the keys change.
    let changed = n / 100;
    for i in 0..changed {
        set(&mut b, i.wrapping_mul(7919) % n, 2);
    }
    let t = Instant::now();
    let mut second = b.freeze();
    let freeze_incremental = t.elapsed();
    let second_files = stored_files(second.as_mut());
    let whole: u64 = second_files.iter().map(|f| f.1.len() as u64).sum();
    let uploaded: u64 = second_files.iter().filter(|f| !stored.contains(&f.1)).map(|f| f.1.len() as u64).sum();

    // Restore: adopt the files, or replay the canonical snapshot.
    let copy = tmp.path().join("restore-copy");
    std::fs::create_dir_all(&copy).unwrap();
    for (name, bytes) in &second_files {
        std::fs::write(copy.join(name), bytes).unwrap();
    }
    drop(second);
    let mut descriptors = b.descriptors().to_vec();
    descriptors.iter_mut().for_each(|d| d.ttl = None);
    let t = Instant::now();
    let adopted =
        RocksDbBackend::adopt(tmp.path(), "adopted", range, RocksDbMemory::default(), &copy, descriptors).unwrap();
    let adopt_time = t.elapsed();
    assert_eq!(adopted.key_count(0), n as usize);
    let t = Instant::now();
    let mut replayed = RocksDbBackend::open(tmp.path(), "replayed", range, RocksDbMemory::default()).unwrap();
    restore_snapshot(&canonical, &mut replayed, range, MAX_PARALLELISM, OperatorShare::All).unwrap();
    let replay_time = t.elapsed();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "| keys | full checkpoint (all files) | canonical full snapshot | incremental after 1% changed: uploaded / whole | freeze full / incremental | restore: adopt files / replay canonical |\n|---|---|---|---|---|---|\n| {n} | {:.1} MiB | {:.1} MiB | {:.2} MiB / {:.1} MiB (**{:.1}%**) | {:.0} / {:.0} ms | {:.0} / {:.0} ms |",
        mib(full_bytes),
        mib(canonical.len() as u64),
        mib(uploaded),
        mib(whole),
        100.0 * uploaded as f64 / whole as f64,
        freeze_full.as_secs_f64() * 1e3,
        freeze_incremental.as_secs_f64() * 1e3,
        adopt_time.as_secs_f64() * 1e3,
        replay_time.as_secs_f64() * 1e3,
    );
}
