//! The directory layer under fuzzing: a checkpoint directory built from
//! the input (directories, files, symbolic and hard links, FIFOs, modes and
//! owners, valid `_metadata` and state files among them), then opened,
//! listed, resumed from, cleaned up, written to and read as a savepoint as
//! the host does. Beside it lies a victim tree the links point into; it
//! must be byte for byte the same afterwards, whatever the tree held: the
//! host may refuse a directory, never follow a link out of it. A FIFO
//! that blocks a read shows up as a libFuzzer timeout.

use crate::checkpoint::restore::{self, Target};
use crate::checkpoint::storage::CheckpointStorage;
use crate::checkpoint::{inspect, leftovers, listing};
use crate::config::settings::{S3Settings, StorageSettings};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Entries of the fuzzed tree, relative to the job's directory: what the
/// host looks for and what it writes, with neighbours it does not.
const NAMES: &[&str] = &[
    "",
    "chk-1",
    "chk-2",
    "chk-3",
    "chk-1/_metadata",
    "chk-2/_metadata",
    "chk-3/_metadata",
    "chk-1/op-0.snap",
    "chk-2/op-0.snap",
    "chk-3/op-0.snap",
    "chk-1/_metadata#1",
    "chk-2/sub",
    "chk-2/sub/x",
    "shared",
    "shared/a.sst",
    "taskowned",
    "taskowned/op-0",
    "modules",
    "_restored-from",
    ".inprogress",
    "part-0",
    "_metadata",
    "op-0.snap",
    "chk-2/sub/_metadata",
    "chk-2/sub/op-0.snap",
];

/// Where links point: into the victim tree, above the job directory, at
/// the root, and at the job's own entries.
const LINK_TARGETS: &[&str] =
    &["@victim", "@victim/file", "@victim/sub", "..", "/", "chk-1", "@job/chk-2", "@victim/fifo"];

const MODES: &[u32] = &[0o700, 0o755, 0o777, 0o000, 0o600, 0o1777];

/// A state file `_metadata` templates name: every byte of it is read.
const SNAPSHOT: &[u8] = include_bytes!("../../../fuzz/seeds/snapshot/state-kinds.snap");

/// Builds a tree from `data`, runs the host's directory operations on it,
/// and panics if anything outside the tree changed.
pub fn run(data: &[u8]) {
    let Ok(root) = tempfile::tempdir() else { return };
    let victim = root.path().join("victim");
    let ck = root.path().join("ck");
    let job = ck.join("job");
    if plant_victim(&victim).is_err() || std::fs::create_dir_all(&job).is_err() {
        return;
    }
    let _ = std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o700));
    let _ = std::fs::set_permissions(&job, std::fs::Permissions::from_mode(0o700));
    build(data, &job, &victim);
    let before = fingerprint(&victim);
    exercise(&ck);
    let after = fingerprint(&victim);
    // Undo modes and owners so the temporary directory can be removed.
    let _ = restore_access(root.path());
    assert_eq!(before, after, "the host changed a tree outside the checkpoint directory");
}

fn plant_victim(victim: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(victim.join("sub"))?;
    std::fs::write(victim.join("file"), b"precious\n")?;
    std::fs::write(victim.join("sub/file2"), b"also precious\n")?;
    std::fs::write(victim.join("_metadata"), b"not a checkpoint\n")?;
    rustix::fs::mknodat(rustix::fs::CWD, victim.join("fifo"), rustix::fs::FileType::Fifo, 0o600.into(), 0)?;
    Ok(())
}

/// Interprets `data` as operations, two to four bytes each: what to make
/// and where.
fn build(data: &[u8], job: &Path, victim: &Path) {
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    while let (Some(op), Some(at)) = (next(), next()) {
        let rel = NAMES[at as usize % NAMES.len()];
        let path = job.join(rel);
        if !parents_are_plain(job, rel) {
            continue;
        }
        let _ = match op % 8 {
            0 => std::fs::create_dir(&path),
            1 => {
                let Some(which) = next() else { break };
                write_plain(&path, &contents(which, rel, &mut next))
            }
            2 => {
                let Some(to) = next() else { break };
                let target = LINK_TARGETS[to as usize % LINK_TARGETS.len()]
                    .replace("@victim", &victim.display().to_string())
                    .replace("@job", &job.display().to_string());
                std::os::unix::fs::symlink(target, &path)
            }
            3 => rustix::fs::mknodat(rustix::fs::CWD, &path, rustix::fs::FileType::Fifo, 0o600.into(), 0)
                .map_err(Into::into),
            4 => std::fs::hard_link(victim.join("file"), &path),
            5 => {
                let Some(m) = next() else { break };
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(MODES[m as usize % MODES.len()]))
            }
            6 => std::os::unix::fs::lchown(&path, Some(65534), Some(65534)),
            _ => std::fs::create_dir_all(&path),
        };
    }
}

/// Writes `bytes` to a file at `path`, neither following a link there
/// nor waiting on a FIFO there (with no reader, opening one to write
/// fails at once): building the tree must neither change the victim nor
/// hang.
fn write_plain(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32;
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(flags).open(path)?;
    file.write_all(bytes)
}

/// Whether every directory above `rel` is a real directory: the tree is
/// built without following its own links, so that building it cannot
/// change the victim.
fn parents_are_plain(job: &Path, rel: &str) -> bool {
    let mut at = job.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            _ => return false,
        }
    }
    true
}

/// A file's bytes: a valid `_metadata` naming the checkpoint's state file,
/// the state file itself, or bytes from the input.
fn contents(which: u8, rel: &str, next: &mut impl FnMut() -> Option<u8>) -> Vec<u8> {
    let id: u64 = rel.strip_prefix("chk-").and_then(|r| r.get(..1)).and_then(|d| d.parse().ok()).unwrap_or(1);
    match which % 4 {
        0 => metadata(id, false),
        1 => metadata(id, true),
        2 => SNAPSHOT.to_vec(),
        _ => {
            let len = next().unwrap_or(0);
            (0..len).map_while(|_| next()).collect()
        }
    }
}

/// `_metadata` of checkpoint `id` (or, `savepoint`, of a savepoint
/// directory) with one operator whose state is [`SNAPSHOT`].
fn metadata(id: u64, savepoint: bool) -> Vec<u8> {
    let path = if savepoint { "op-0.snap".to_string() } else { format!("chk-{id}/op-0.snap") };
    let json = serde_json::json!({
        "job": "job",
        "id": id,
        "triggered_at_ms": 1_796_037_871_491_i64,
        "duration_ms": 4,
        "finished": false,
        "savepoint": savepoint,
        "max_parallelism": 128,
        "operators": { "op": { "parallelism": 1, "subtasks": [
            { "type": "file", "path": path, "size": SNAPSHOT.len(), "crc32": crc32fast::hash(SNAPSHOT) }
        ] } },
        "sources": {},
        "sinks": {}
    });
    let json = serde_json::to_vec_pretty(&json).expect("json");
    let mut out = format!("WEIRMETA 1 {:08x}\n", crc32fast::hash(&json)).into_bytes();
    out.extend_from_slice(&json);
    out
}

/// What the host does with a checkpoint directory: open it (which checks
/// the tree), list it, resume from the latest usable checkpoint and
/// inspect it, clean up what earlier runs left, write and retire a
/// checkpoint, and read checkpoints as `--from-checkpoint`,
/// `--from-savepoint` and `inspect` do.
fn exercise(ck: &Path) {
    let settings = StorageSettings {
        dir: Some(format!("file://{}", ck.display())),
        inline_threshold: 1024,
        memory_max_state_size: 1 << 20,
        fsync: false,
        s3: S3Settings::default(),
        fenced_by: None,
        limits: crate::config::settings::ReadLimits::default(),
    };
    if let Ok(storage) = CheckpointStorage::open(&settings, "job") {
        let storage = Arc::new(storage);
        let _ = listing::list(&storage);
        let latest = match restore::load_latest(&storage, None, &settings) {
            Ok(Some(r)) => {
                let _ = inspect::summarize(&r);
                Some(r.metadata.id)
            }
            _ => None,
        };
        let _ = leftovers::take_over(&storage, latest, leftovers::Sweep::OnlyWriter);
        let _ = storage.delete_staged();
        let next = latest.unwrap_or(0) + 4;
        if storage.put_state(next, "op-0", "op-0.snap", SNAPSHOT.to_vec()).is_ok() {
            let _ = storage.write_metadata(next, metadata(next, false), None);
        }
        for id in [1, 2, 3, next] {
            let _ = storage.delete_checkpoint(id);
        }
    }
    for uri in ["job/chk-1", "job/chk-2", "job/chk-2/sub", "job"] {
        let uri = format!("file://{}/{uri}", ck.display());
        if let Ok(r) = Target::parse(&uri).load(&settings) {
            let _ = inspect::summarize(&r);
        }
    }
}

/// Every entry under `dir`, not following links: its kind, mode, owner,
/// size and bytes (a FIFO's are not read).
fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, (u32, u32, u64, Vec<u8>)> {
    let mut seen = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&at) else { continue };
        let bytes = if m.file_type().is_file() { std::fs::read(&at).unwrap_or_default() } else { Vec::new() };
        if m.file_type().is_dir() {
            for e in std::fs::read_dir(&at).into_iter().flatten().flatten() {
                stack.push(e.path());
            }
        }
        seen.insert(at, (m.mode(), m.uid(), m.len(), bytes));
    }
    seen
}

/// Gives the tree back to its owner, readable and writable, so the
/// temporary directory's removal does not fail on a mode the input set.
fn restore_access(dir: &Path) -> std::io::Result<()> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let m = std::fs::symlink_metadata(&at)?;
        if m.file_type().is_symlink() {
            continue;
        }
        let _ = std::os::unix::fs::lchown(&at, Some(rustix::process::geteuid().as_raw()), None);
        if m.file_type().is_dir() {
            let _ = std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o700));
            for e in std::fs::read_dir(&at)?.flatten() {
                stack.push(e.path());
            }
        }
    }
    Ok(())
}
