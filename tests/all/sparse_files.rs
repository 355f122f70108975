//! Sparse and huge stored files, as an attacker crafts them: a 3 GiB
//! RocksDB file named by an incremental checkpoint's `_metadata`, a
//! snapshot section claiming 2 GiB over 2 GiB of holes, RocksDB files in a
//! savepoint, and key-group sections repeated or outside the snapshot's
//! key groups, each on `host inspect` and on a restore. The files are
//! sparse (`File::set_len`): gigabytes claimed, none written. Each must end
//! with exit 1 and a clear error naming the file, within 512 MiB of
//! memory: a stored file is streamed, never held whole, and what is over a
//! setting's limit is refused unread.

use super::support::JobDir;
use serde_json::{Value, json};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;
use weir_tests::{artifacts, host_command};

const GIB: u64 = 1 << 30;
/// The most memory any run here may take.
const RSS: u64 = 512 << 20;

/// A word-count job reading `input.txt` (100 lines, 50 a second) on
/// `backend` (TOML under `[state.backend]`), its checkpoints under `ck/`,
/// the last 100 kept.
fn write_job(dir: &JobDir, backend: &str) {
    dir.write("input.txt", "one two two\nthree three three\n".repeat(50));
    dir.write(
        "job.toml",
        format!(
            r#"name = "wc"

[state.backend]
{backend}

[checkpointing]
interval = "100ms"
retained = 100

[state.checkpoints]
dir = "file://{root}/ck"

[restart-strategy]
type = "none"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"
records_per_second = 50

[[operators]]
uid = "tokenizer"
module = "{tokenizer}"
input = "lines"

[[operators]]
uid = "counter"
module = "{counter}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "out.txt"
"#,
            root = dir.path().display(),
            tokenizer = artifacts::WORD_COUNT_TOKENIZER,
            counter = artifacts::WORD_COUNT_COUNTER,
        ),
    );
}

/// Host settings in `config/host.toml`, which every run in `dir` reads.
fn host_settings(dir: &JobDir, toml: &str) {
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    dir.write("config/host.toml", toml);
}

/// A `_metadata` a checkpoint Weir wrote could hold, with `handle` as the
/// counter's one subtask's state.
fn metadata(handle: Value) -> Value {
    json!({
        "job": "wc", "id": 1, "triggered_at_ms": 0, "duration_ms": 0, "finished": false,
        "savepoint": false, "max_parallelism": 128,
        "operators": { "counter": { "parallelism": 1, "subtasks": [handle] } },
        "sources": { "lines": 0 }, "sinks": {}
    })
}

/// Writes `m` as `dir/_metadata` with a valid header and checksum.
fn write_metadata(dir: &Path, m: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    let body = serde_json::to_vec_pretty(m).unwrap();
    let mut file = format!("WEIRMETA 1 {:08x}\n", crc32fast::hash(&body)).into_bytes();
    file.extend_from_slice(&body);
    std::fs::write(dir.join("_metadata"), file).unwrap();
}

/// Writes `m` as checkpoint `m.id` of job `wc` under `dir/ck`; returns its
/// URI.
fn write_checkpoint(dir: &JobDir, m: &Value) -> String {
    let chk = dir.path().join(format!("ck/wc/chk-{}", m["id"]));
    write_metadata(&chk, m);
    format!("file://{}", chk.display())
}

/// Writes `prefix`, `zeros` bytes of holes and `suffix` to `path`, sparse;
/// returns (size, CRC-32), the checksum computed here over zeros of our
/// own, not read back from the file.
fn sparse(path: &Path, prefix: &[u8], zeros: u64, suffix: &[u8]) -> (u64, u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(prefix).unwrap();
    f.set_len(prefix.len() as u64 + zeros).unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write_all(suffix).unwrap();
    let size = f.metadata().unwrap().len();
    assert!(f.metadata().unwrap().blocks() * 512 < 16 << 20, "{} is not sparse", path.display());
    let mut crc = crc32fast::Hasher::new();
    crc.update(prefix);
    update_with_zeros(&mut crc, zeros);
    crc.update(suffix);
    (size, crc.finalize())
}

fn update_with_zeros(crc: &mut crc32fast::Hasher, mut n: u64) {
    let zeros = vec![0u8; 1 << 20];
    while n > 0 {
        let k = n.min(zeros.len() as u64) as usize;
        crc.update(&zeros[..k]);
        n -= k as u64;
    }
}

/// Runs `host <args>` in `dir` to its end, sampling its peak resident
/// memory; returns (exit code, stderr, peak RSS in bytes).
fn run_sampled(dir: &Path, args: &[&str]) -> (Option<i32>, String, u64) {
    let mut child = host_command(dir, args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).unwrap();
        s
    });
    let peak = sample_until_exit(&mut child);
    (child.wait().unwrap().code(), reader.join().unwrap(), peak)
}

/// The peak resident set (VmHWM) of `child`, sampled until it exits.
fn sample_until_exit(child: &mut Child) -> u64 {
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kb) = text.lines().find_map(|l| l.strip_prefix("VmHWM:"))
        {
            peak = peak.max(kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) * 1024);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    peak
}

/// `host <args>` must fail cleanly (exit 1: a panic exits 101), within
/// [`RSS`], with every one of `needles` in its error.
fn refused(dir: &JobDir, args: &[&str], needles: &[&str]) -> String {
    let (code, err, peak) = run_sampled(dir.path(), args);
    assert_eq!(code, Some(1), "{args:?} must fail cleanly:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in:\n{err}");
    }
    assert!(peak < RSS, "{args:?} peaked at {} MiB", peak >> 20);
    eprintln!("{args:?}: peak RSS {} MiB", peak >> 20);
    err
}

/// The same on `host inspect` and on a restore from `uri` (`flag` is
/// `--from-checkpoint` or `--from-savepoint`).
fn refused_everywhere(dir: &JobDir, uri: &str, flag: &str, needles: &[&str]) {
    refused(dir, &["inspect", uri], needles);
    refused(dir, &["run", "job.toml", flag, uri], needles);
}

/// The `_metadata` of the latest checkpoint of job `wc` under `dir/ck`
/// that holds the counter's state (a finished job's last holds none).
fn latest_with_state(dir: &JobDir) -> Value {
    let mut all: Vec<(u64, Value)> = std::fs::read_dir(dir.path().join("ck/wc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("_metadata").is_file())
        .map(|p| {
            let id = p.file_name().unwrap().to_string_lossy()[4..].parse().unwrap();
            let text = std::fs::read_to_string(p.join("_metadata")).unwrap();
            (id, serde_json::from_str(text.split_once('\n').unwrap().1).unwrap())
        })
        .collect();
    all.sort_by_key(|(id, _)| *id);
    all.into_iter()
        .rev()
        .map(|(_, m)| m)
        .find(|m| m["operators"]["counter"].is_object())
        .expect("a checkpoint with state")
}

#[test]
fn a_3_gib_sparse_rocksdb_file_is_streamed_or_refused_never_held_in_memory() {
    let dir = JobDir::new();
    let localdir = dir.path().join("rocksdb");
    write_job(&dir, &format!("type = \"rocksdb\"\nincremental = true\nrocksdb.localdir = \"{}\"", localdir.display()));
    dir.succeeds(&[]);
    // The job's last checkpoint, not finished (so that a restore opens the
    // counter's state), with one of its RocksDB files now 3 GiB of holes.
    let mut m = latest_with_state(&dir);
    m["id"] = json!(100);
    m["finished"] = json!(false);
    let files = m["operators"]["counter"]["subtasks"][0]["files"].as_array_mut().expect("incremental RocksDB state");
    let file = files.iter_mut().find(|f| f["name"].as_str().unwrap().ends_with(".sst")).expect("an SST file");
    let (name, path) = (file["name"].as_str().unwrap().to_string(), file["path"].as_str().unwrap().to_string());
    let (size, crc32) = sparse(&dir.path().join("ck/wc").join(&path), b"", 3 * GIB, b"");
    file["size"] = json!(size);
    file["crc32"] = json!(crc32);
    let uri = write_checkpoint(&dir, &m);

    // Streamed, checked on the way, into a file RocksDB then refuses.
    let err = refused(&dir, &["inspect", &uri], &[&name]);
    assert!(err.contains("Corruption") || err.contains("corrupt"), "{err}");
    refused(&dir, &["run", "job.toml", "--from-checkpoint", &uri], &[&name]);

    // Over the file-size limit: refused before anything is fetched.
    host_settings(&dir, "state.checkpoints.max_file_size = \"1GiB\"\n");
    let over = [path.as_str(), "_metadata gives it 3221225472 bytes, over state.checkpoints.max_file_size"];
    refused_everywhere(&dir, &uri, "--from-checkpoint", &over);
    // No scratch copy is left behind in the RocksDB directory.
    let left: Vec<_> = std::fs::read_dir(&localdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("restore-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A snapshot of 128 key groups and the counter's one value state: its
/// header section, as bytes.
fn snapshot_head() -> Vec<u8> {
    let mut header = vec![128u8, 1, 1]; // max_parallelism 128 (varint), one state
    header.push(5);
    header.extend_from_slice(b"count");
    header.push(1); // value
    header.extend_from_slice(&1u32.to_le_bytes());
    header.push(0); // no encoding
    header.extend_from_slice(&[0, 0]); // no TTL, no redistribution
    let mut out = b"WEIRSNAP\x01\x00H".to_vec();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&crc32fast::hash(&header).to_le_bytes());
    out
}

/// A key group's section head: tag, key group, payload length.
fn section_head(key_group: u16, len: u32) -> Vec<u8> {
    let mut out = vec![b'K'];
    out.extend_from_slice(&key_group.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out
}

#[test]
fn a_snapshot_section_claiming_2_gib_is_refused_before_it_is_read() {
    let dir = JobDir::new();
    write_job(&dir, "type = \"hashmap\"");
    // The claim is true: 2 GiB of zeros follow, then their checksum.
    let mut crc = crc32fast::Hasher::new();
    update_with_zeros(&mut crc, 2 * GIB);
    let mut tail = crc.finalize().to_le_bytes().to_vec();
    tail.push(b'E');
    let mut head = snapshot_head();
    head.extend_from_slice(&section_head(5, (2 * GIB) as u32));
    let (size, crc32) = sparse(&dir.path().join("ck/wc/chk-1/counter-0.snap"), &head, 2 * GIB, &tail);
    let m = metadata(json!({ "type": "file", "path": "chk-1/counter-0.snap", "size": size, "crc32": crc32 }));
    let uri = write_checkpoint(&dir, &m);
    let needles = [
        "chk-1/counter-0.snap",
        "section key group 5 claims 2147483648 bytes",
        "over the 1073741824-byte limit",
        "state.checkpoints.max_section_size",
    ];
    refused_everywhere(&dir, &uri, "--from-checkpoint", &needles);
    // Under a file-size limit below the file's size, not even opened.
    host_settings(&dir, "state.checkpoints.max_file_size = \"1GiB\"\n");
    let needles = ["chk-1/counter-0.snap", "over state.checkpoints.max_file_size"];
    refused_everywhere(&dir, &uri, "--from-checkpoint", &needles);
}

#[test]
fn rocksdb_files_in_a_savepoint_are_refused_unread() {
    let dir = JobDir::new();
    write_job(&dir, "type = \"hashmap\"");
    let savepoint = dir.path().join("sp/savepoint-wc-1");
    let (size, crc32) = sparse(&savepoint.join("000009.sst"), b"", 3 * GIB, b"");
    let files = json!([{ "name": "000009.sst", "path": "000009.sst", "size": size, "crc32": crc32 }]);
    let mut m = metadata(json!({ "type": "rocksdb", "files": files }));
    m["savepoint"] = json!(true);
    write_metadata(&savepoint, &m);
    let uri = format!("file://{}", savepoint.display());
    let needles = ["_metadata is invalid", "operator 'counter': RocksDB files in a savepoint"];
    refused_everywhere(&dir, &uri, "--from-savepoint", &needles);
    // A RocksDB handle in a checkpoint passes that check, to fail later on
    // what it lists: it is the savepoint that is refused.
    let m = metadata(json!({ "type": "rocksdb", "files": [] }));
    refused(&dir, &["inspect", &write_checkpoint(&dir, &m)], &["the checkpoint lists no WEIR-DESCRIPTORS"]);
}

/// A snapshot file with one value entry in a section for each of
/// `groups`, stored as the counter's state in checkpoint 1; its URI.
fn checkpoint_with_sections(dir: &JobDir, groups: &[u16]) -> String {
    let mut bytes = snapshot_head();
    for &kg in groups {
        let entry = [1, 0, 3, b'o', b'n', b'e', 1, 1]; // value, state 0, key "one", value [1]
        bytes.extend_from_slice(&section_head(kg, entry.len() as u32));
        bytes.extend_from_slice(&entry);
        bytes.extend_from_slice(&crc32fast::hash(&entry).to_le_bytes());
    }
    bytes.push(b'E');
    let path = dir.path().join("ck/wc/chk-1/counter-0.snap");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let handle = json!({ "type": "file", "path": "chk-1/counter-0.snap", "size": bytes.len(), "crc32": crc32fast::hash(&bytes) });
    write_checkpoint(dir, &metadata(handle))
}

#[test]
fn key_group_sections_repeated_or_outside_the_key_groups_are_refused() {
    let dir = JobDir::new();
    write_job(&dir, "type = \"hashmap\"");
    // One section each for key groups 5 and 127, the last of 128: read.
    let uri = checkpoint_with_sections(&dir, &[5, 127]);
    let out = host_command(dir.path(), &["inspect", "--key-groups", &uri]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(shown.contains("key group     5: 1 keys") && shown.contains("key group   127: 1 keys"), "{shown}");

    for (groups, needle) in [
        (&[5, 5][..], "a second section for key group 5"),
        (&[5, 9, 5], "a second section for key group 5"),
        (&[128], "a section for key group 128, outside the snapshot's 128 key groups (0 to 127)"),
        (&[3, 65535], "a section for key group 65535, outside"),
    ] {
        let uri = checkpoint_with_sections(&dir, groups);
        refused_everywhere(&dir, &uri, "--from-checkpoint", &["chk-1/counter-0.snap", needle]);
    }
}
