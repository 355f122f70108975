//! Untrusted inputs, tried as an attacker would, against the real binary:
//! crafted checkpoints (names that climb out, a uid that is a path, bad
//! hex, no key groups, a section claiming 512 MiB, truncated and oversized
//! files) on `host inspect` and on restore; the module cache named by a
//! job file or open to others; a guest that sleeps past its deadline or
//! emits far more than allowed; the control API flooded by a local user
//! without the token; stored names that carry escape sequences to the
//! terminal; a job file's Kafka properties that would run a command. Each
//! must end with a clear error and a non-zero exit, nothing written or
//! deleted outside the host's own directories, and bounded memory and
//! threads.

use super::support::JobDir;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{artifacts, host_command};

/// A word-count job reading `input.txt`, its checkpoints under `ck/`.
fn write_job(dir: &JobDir, extra: &str) {
    dir.write("input.txt", "one two two\nthree three three\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "wc"
{extra}

[checkpointing]
interval = "100ms"

[state.checkpoints]
dir = "file://{root}/ck"

[restart-strategy]
type = "none"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"

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

/// A `_metadata` a checkpoint Weir wrote could hold, for `handle`.
fn metadata(handle: Value) -> Value {
    json!({
        "job": "wc", "id": 1, "triggered_at_ms": 0, "duration_ms": 0, "finished": false,
        "savepoint": false, "max_parallelism": 128,
        "operators": { "counter": { "parallelism": 1, "subtasks": [handle] } },
        "sources": { "lines": 0 }, "sinks": {}
    })
}

/// Writes `m` as checkpoint `m.id` of job `wc` under `dir/ck`, with a
/// valid header and checksum; returns its URI.
fn write_checkpoint(dir: &JobDir, m: &Value) -> String {
    let chk = dir.path().join(format!("ck/wc/chk-{}", m["id"]));
    std::fs::create_dir_all(&chk).unwrap();
    let body = serde_json::to_vec_pretty(m).unwrap();
    let mut file = format!("WEIRMETA 1 {:08x}\n", crc32fast::hash(&body)).into_bytes();
    file.extend_from_slice(&body);
    std::fs::write(chk.join("_metadata"), file).unwrap();
    format!("file://{}", chk.display())
}

/// Stores `bytes` as `relative` in the checkpoint directory; returns its
/// (size, crc32).
fn store(dir: &JobDir, relative: &str, bytes: &[u8]) -> (u64, u32) {
    let path = dir.path().join("ck/wc").join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    (bytes.len() as u64, crc32fast::hash(bytes))
}

/// Runs `host <args>` to its end, sampling its peak resident memory;
/// returns (exit code, stderr, peak RSS in bytes).
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

/// A crafted checkpoint must fail both `host inspect` and a restore with a
/// message naming it, exit 1 (a panic exits 101), and stay within `rss`.
fn refused_everywhere(dir: &JobDir, uri: &str, needle: &str, rss: u64) {
    for args in [vec!["inspect", uri], vec!["run", "job.toml", "--from-checkpoint", uri]] {
        let (code, err, peak) = run_sampled(dir.path(), &args);
        assert_eq!(code, Some(1), "{args:?} must fail cleanly:\n{err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in:\n{err}");
        assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
        assert!(peak < rss, "{args:?} peaked at {} MiB", peak >> 20);
    }
}

#[test]
fn stored_file_names_that_leave_the_scratch_directory_write_nothing() {
    let dir = JobDir::new();
    write_job(&dir, "");
    let (size, crc32) = store(&dir, "shared/x/000009.sst", b"the attacker's bytes");
    let outside = dir.path().join("escaped");
    for name in ["../../../../escaped".to_string(), outside.display().to_string()] {
        let files = json!([{ "name": name, "path": "shared/x/000009.sst", "size": size, "crc32": crc32 }]);
        let uri = write_checkpoint(&dir, &metadata(json!({ "type": "rocksdb", "files": files })));
        refused_everywhere(&dir, &uri, "_metadata is invalid", 512 << 20);
        assert!(!outside.exists(), "{name} wrote {}", outside.display());
    }
    let climbing = metadata(json!({ "type": "file", "path": "../../../escaped.snap", "size": 1, "crc32": 0 }));
    refused_everywhere(&dir, &write_checkpoint(&dir, &climbing), "leaves the checkpoint's directory", 512 << 20);
}

#[test]
fn a_uid_that_is_a_path_deletes_nothing() {
    let dir = JobDir::new();
    write_job(&dir, "");
    let victim = dir.path().join("victim");
    for v in [victim.clone(), dir.path().join("victim-0")] {
        std::fs::create_dir_all(&v).unwrap();
        std::fs::write(v.join("precious"), "keep me").unwrap();
    }
    let mut m = metadata(json!({ "type": "inline", "data": "" }));
    m["operators"] = json!({ victim.display().to_string(): m["operators"]["counter"].clone() });
    let uri = write_checkpoint(&dir, &m);
    let restore = ["run", "job.toml", "--from-checkpoint", &uri, "--allow-non-restored-state"];
    for args in [&["inspect", &uri][..], &restore[..]] {
        let (code, err, _) = run_sampled(dir.path(), args);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("is not a uid"), "{err}");
    }
    assert!(victim.join("precious").exists() && dir.path().join("victim-0/precious").exists());
}

#[test]
fn malformed_metadata_and_state_files_are_named_not_panicked_on() {
    let dir = JobDir::new();
    write_job(&dir, "");
    let bad_hex = metadata(json!({ "type": "inline", "data": "é1" }));
    refused_everywhere(&dir, &write_checkpoint(&dir, &bad_hex), "_metadata is corrupt", 512 << 20);
    let mut no_groups = metadata(json!({ "type": "inline", "data": "" }));
    no_groups["max_parallelism"] = json!(0);
    refused_everywhere(&dir, &write_checkpoint(&dir, &no_groups), "max_parallelism 0", 512 << 20);

    // 19 bytes whose header section claims 512 MiB (under the limit on a
    // section, so it is read: what is there, not what is claimed).
    let mut claim = b"WEIRSNAP\x01\x00H".to_vec();
    claim.extend_from_slice(&(512u32 << 20).to_le_bytes());
    claim.extend_from_slice(b"abcd");
    let (size, crc32) = store(&dir, "chk-1/counter-0.snap", &claim);
    let m = metadata(json!({ "type": "file", "path": "chk-1/counter-0.snap", "size": size, "crc32": crc32 }));
    refused_everywhere(&dir, &write_checkpoint(&dir, &m), "truncated", 256 << 20);

    // A file shorter than _metadata says, and one far longer.
    let m = metadata(json!({ "type": "file", "path": "chk-1/counter-0.snap", "size": size + 1000, "crc32": crc32 }));
    refused_everywhere(&dir, &write_checkpoint(&dir, &m), "truncated", 256 << 20);
    // The claim again, followed by 64 MiB: reading must stop at the size
    // _metadata states, not at the claim nor at the end of the file.
    let mut huge = claim.clone();
    huge.resize(64 << 20, 7);
    store(&dir, "chk-1/counter-0.snap", &huge);
    let m = metadata(json!({ "type": "file", "path": "chk-1/counter-0.snap", "size": 100, "crc32": 0 }));
    refused_everywhere(&dir, &write_checkpoint(&dir, &m), "more than the 100 bytes", 200 << 20);
}

#[test]
fn resume_passes_over_a_crafted_metadata_to_the_checkpoint_before() {
    let dir = JobDir::new();
    write_job(&dir, "");
    dir.succeeds(&[]);
    let published = dir.read("out.txt");
    let mut bad_hex = metadata(json!({ "type": "inline", "data": "é1" }));
    let mut no_groups = metadata(json!({ "type": "inline", "data": "" }));
    no_groups["max_parallelism"] = json!(0);
    let mut climbing = metadata(json!({ "type": "file", "path": "../../escaped.snap", "size": 1, "crc32": 0 }));
    let mut uid_path = metadata(json!({ "type": "inline", "data": "" }));
    uid_path["operators"] = json!({ "/tmp/x": uid_path["operators"]["counter"].clone() });
    for m in [&mut bad_hex, &mut no_groups, &mut climbing, &mut uid_path] {
        m["id"] = json!(99);
        write_checkpoint(&dir, m);
        let err = dir.succeeds(&["--resume"]);
        assert!(err.contains("checkpoint is unusable") && err.contains("checkpoint=99"), "{err}");
        assert!(err.contains("already finished"), "resumed from the checkpoint before:\n{err}");
        assert_eq!(dir.read("out.txt"), published, "the output stands");
    }
}

/// A snapshot holding one value state, `name`, of `encoding`, and no keys.
fn snapshot_with_state(name: &str, encoding: &str) -> Vec<u8> {
    let mut snapshot = b"WEIRSNAP\x01\x00".to_vec();
    let mut header = vec![128u8, 1, 1]; // max_parallelism 128 (varint), one state
    header.push(name.len() as u8);
    header.extend_from_slice(name.as_bytes());
    header.push(1); // value
    header.extend_from_slice(&1u32.to_le_bytes());
    header.push(encoding.len() as u8);
    header.extend_from_slice(encoding.as_bytes());
    header.extend_from_slice(&[0, 0]); // no TTL, no redistribution
    snapshot.push(b'H');
    snapshot.extend_from_slice(&(header.len() as u32).to_le_bytes());
    snapshot.extend_from_slice(&header);
    snapshot.extend_from_slice(&crc32fast::hash(&header).to_le_bytes());
    snapshot.push(b'E');
    snapshot
}

#[test]
fn inspect_prints_no_terminal_control_codes_from_stored_text() {
    let dir = JobDir::new();
    write_job(&dir, "");
    // A state whose name and encoding carry escape sequences.
    let snapshot = snapshot_with_state("\x1b]0;pwned\x07count", "\x1b[2J");
    let uri = write_checkpoint(&dir, &metadata(json!({ "type": "inline", "data": hex(&snapshot) })));
    let out = host_command(dir.path(), &["inspect", &uri]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(shown.contains("pwned") && !shown.contains('\x1b') && !shown.contains('\x07'), "{shown:?}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A stored name as an attacker would write it: an OSC that retitles the
/// terminal and rings its bell, a colour, a carriage return that rewrites
/// the line, and a right-to-left override that reverses what follows.
const HOSTILE: &str = "\x1b]0;pwned\x07\x1b[31mred\r\u{202e}txt.exe";
/// `HOSTILE` as `host inspect` shows it.
const HOSTILE_SHOWN: &str = "\\u{1b}]0;pwned\\u{7}\\u{1b}[31mred\\u{d}\\u{202e}txt.exe";

/// Runs `host <args>` in `dir` to its end and checks that neither of its
/// streams carries ESC, BEL, a carriage return or U+202E raw; returns
/// (exit code, stdout, stderr).
fn shown_escaped(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = host_command(dir, args).output().unwrap();
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let raw: Vec<String> = [("ESC", "\x1b"), ("BEL", "\x07"), ("CR", "\r"), ("U+202E", "\u{202e}")]
            .iter()
            .filter(|(_, c)| bytes.windows(c.len()).any(|w| w == c.as_bytes()))
            .map(|(name, _)| name.to_string())
            .collect();
        assert!(raw.is_empty(), "{args:?}: {stream} carries {raw:?} raw:\n{}", String::from_utf8_lossy(bytes));
    }
    assert_ne!(out.status.code(), Some(101), "{args:?} panicked");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn stored_names_reach_the_terminal_escaped_in_errors_logs_and_inspect() {
    let dir = JobDir::new();
    write_job(&dir, "");
    dir.succeeds(&[]);
    let savepoint = |name: &str, handle: Value| {
        let sp = dir.path().join(name);
        std::fs::create_dir_all(&sp).unwrap();
        let mut m = metadata(handle);
        m["savepoint"] = json!(true);
        let body = serde_json::to_vec_pretty(&m).unwrap();
        let mut file = format!("WEIRMETA 1 {:08x}\n", crc32fast::hash(&body)).into_bytes();
        file.extend_from_slice(&body);
        std::fs::write(sp.join("_metadata"), file).unwrap();
        format!("file://{}", sp.display())
    };

    // A state named HOSTILE, its encoding too: `inspect` prints them
    // escaped; a restore names them however it goes.
    let named = savepoint("sp-named", json!({ "type": "inline", "data": hex(&snapshot_with_state(HOSTILE, HOSTILE)) }));
    let (code, out, err) = shown_escaped(dir.path(), &["inspect", &named]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(HOSTILE_SHOWN), "the name is shown, escaped:\n{out}");

    // A state file named HOSTILE that is not there: the error quotes the
    // name, on inspect and on a restore.
    let missing = json!({ "type": "file", "path": format!("{HOSTILE}.snap"), "size": 10, "crc32": 0 });
    let uri = savepoint("sp-missing", missing.clone());
    for args in [vec!["inspect", uri.as_str()], vec!["run", "job.toml", "--from-savepoint", uri.as_str()]] {
        let (code, _, err) = shown_escaped(dir.path(), &args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        // Escaped as Rust writes it, whether the message quotes the name
        // or shows it.
        assert!(
            err.contains("\\u{1b}]0;pwned") && err.contains("txt.exe"),
            "{args:?}: the error names the file:\n{err}"
        );
    }

    // The same as the latest checkpoint: `--resume` logs it as unusable
    // (text and JSON logs) and resumes from the one before.
    let mut latest = metadata(missing);
    latest["id"] = json!(99);
    write_checkpoint(&dir, &latest);
    for log in [&["run"][..], &["--log-format", "json", "run"]] {
        let args = [log, &["job.toml", "--resume"][..]].concat();
        let (code, _, err) = shown_escaped(dir.path(), &args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(err.contains("checkpoint is unusable"), "{args:?}: {err}");
        assert!(err.contains("]0;pwned") && err.contains("txt.exe"), "{args:?}: the log names the file:\n{err}");
    }

    // A restore of the state named HOSTILE is refused, naming it.
    let restore = ["run", "job.toml", "--from-savepoint", &named];
    let (code, _, err) = shown_escaped(dir.path(), &restore);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("\\u{1b}]0;pwned") && err.contains("is invalid"), "{err}");
}

#[test]
fn the_module_cache_is_the_hosts_own_and_only_if_others_cannot_write_it() {
    let dir = JobDir::new();
    write_job(&dir, &format!("[wasm.cache]\ndir = \"{}/planted\"\n", dir.path().display()));
    let err = dir.fails();
    assert!(err.contains("job.toml") && err.contains("host setting"), "{err}");

    write_job(&dir, "");
    let open = dir.path().join("open-cache");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir.write("host.toml", format!("wasm.cache.dir = \"{}\"\n", open.display()));
    let err = dir.succeeds(&["--config", "host.toml"]);
    assert!(err.contains("compiled-module cache disabled") && err.contains("writable by others"), "{err}");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "nothing cached in a directory others can write");
}

/// The misbehave operator in `mode` behind the lines source, with
/// `settings`; returns (its directory, success, stderr, elapsed, peak RSS).
fn misbehave(mode: &str, settings: &str) -> (JobDir, bool, String, Duration, u64) {
    let dir = JobDir::new();
    dir.write("input.txt", "a\nb\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "bad"
{settings}

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"

[[operators]]
uid = "bad-apple"
module = "{module}"
input = "lines"
params = {{ mode = "{mode}" }}

[[sinks]]
id = "out"
kind = "file"
input = "bad-apple"
path = "out.txt"
"#,
            module = artifacts::MISBEHAVE
        ),
    );
    let started = Instant::now();
    let (code, err, peak) = run_sampled(dir.path(), &["run", "job.toml"]);
    (dir, code == Some(0), err, started.elapsed(), peak)
}

#[test]
fn a_guest_that_sleeps_past_its_deadline_is_stopped_at_the_deadline() {
    let (_dir, ok, err, elapsed, _) = misbehave("sleep", "[wasm]\ncall_timeout = \"500ms\"\n");
    assert!(!ok, "{err}");
    assert!(err.contains("operator 'bad-apple'") && err.contains("ran past wasm.call_timeout"), "{err}");
    // The sleep is an hour; the deadline half a second (startup aside).
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}:\n{err}");
}

#[test]
fn a_guest_cannot_make_the_host_allocate_past_its_output_limit() {
    let (_dir, ok, err, _, peak) = misbehave("flood", "[wasm]\nmemory_limit = \"64MiB\"\n");
    assert!(!ok, "{err}");
    assert!(err.contains("operator 'bad-apple'") && err.contains("wasm.max_output_bytes"), "{err}");
    assert!(peak < 512 << 20, "peaked at {} MiB for 4 GiB referenced", peak >> 20);
}

#[test]
fn a_guest_emitting_a_malformed_batch_index_fails_with_the_entry_named() {
    let (dir, ok, err, _, _) = misbehave("bad-index", "");
    assert!(!ok, "{err}");
    assert!(
        err.contains("operator 'bad-apple'")
            && err.contains("emit-batch: entry 1 sets bits the layout leaves zero (0x8)"),
        "{err}"
    );
    assert!(!dir.path().join("out.txt").exists() || dir.read("out.txt").is_empty(), "nothing of the batch is output");
}

#[test]
fn emit_text_batch_is_held_to_the_same_index_checks_and_output_limit() {
    let (dir, ok, err, _, _) = misbehave("bad-text-index", "");
    assert!(!ok, "{err}");
    assert!(
        err.contains("operator 'bad-apple'")
            && err.contains("emit-text-batch: entry 0 lies outside the 2-byte data buffer"),
        "{err}"
    );
    assert!(!dir.path().join("out.txt").exists() || dir.read("out.txt").is_empty(), "nothing of the batch is output");
    let (_dir, ok, err, _, peak) = misbehave("text-flood", "[wasm]\nmemory_limit = \"64MiB\"\n");
    assert!(!ok, "{err}");
    assert!(err.contains("operator 'bad-apple'") && err.contains("wasm.max_output_bytes"), "{err}");
    assert!(peak < 512 << 20, "peaked at {} MiB for 4 GiB referenced", peak >> 20);
}

#[test]
fn a_guests_clocks_read_the_calls_processing_time() {
    let (dir, ok, err, _, _) = misbehave("clock", "");
    assert!(ok, "{err}");
    // One line per record: WASI's wall clock, then the contract's
    // processing time; the same instant, read from the call's start.
    let out = dir.read("out.txt");
    assert_eq!(out.lines().count(), 2, "{out}");
    for line in out.lines() {
        let (wasi, processing) = line.split_once(' ').unwrap();
        assert_eq!(wasi, processing, "{line}");
        let ms: i64 = processing.parse().unwrap();
        assert!((ms - weir_host::clock::now_ms()).abs() < 60_000, "{line} is processing time");
    }
}

#[test]
fn the_control_api_holds_against_floods_without_the_token() {
    let dir = JobDir::new();
    dir.write(
        "job.toml",
        format!(
            r#"name = "flooded"

[[sources]]
id = "gen"
kind = "generator"
count = 1000000
keys = 10
records_per_second = 2000

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
    let mut child = host_command(dir.path(), &["run", "job.toml"]).stderr(Stdio::null()).spawn().unwrap();
    let status = || host_command(dir.path(), &["status", "flooded"]).output().unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !status().status.success() {
        assert!(Instant::now() < until, "the job never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let run: Value = serde_json::from_slice(&std::fs::read(dir.path().join(".run/flooded.json")).unwrap()).unwrap();
    let port = run["port"].as_u64().unwrap() as u16;
    // 300 connections that say nothing, and one request line of 64 MiB.
    let idle: Vec<_> = (0..300).filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok()).collect();
    let mut big = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    big.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let line = vec![b'A'; 64 << 20];
    let _ = big.write_all(b"GET /").and_then(|_| big.write_all(&line));
    let answered = status();
    assert!(answered.status.success(), "status under the flood: {}", String::from_utf8_lossy(&answered.stderr));
    let proc_status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let field = |name: &str| -> u64 {
        let line = proc_status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(field("Threads:") < 100, "threads under the flood:\n{proc_status}");
    assert!(field("VmHWM:") < 400 << 10, "peak memory under the flood: {} kB", field("VmHWM:"));
    drop(idle);
    let cancelled = host_command(dir.path(), &["cancel", "flooded"]).output().unwrap();
    assert!(cancelled.status.success(), "{}", String::from_utf8_lossy(&cancelled.stderr));
    let _ = child.wait();
}

/// A job whose source and sink entries end with `source` and `sink`.
fn kafka_job(source: &str, sink: &str) -> String {
    format!(
        r#"name = "kinit"

[[operators]]
uid = "counter"
module = "{counter}"
input = "in"
partition = "key"

[[sources]]
id = "in"
{source}

[[sinks]]
id = "out"
input = "counter"
{sink}
"#,
        counter = artifacts::WORD_COUNT_COUNTER
    )
}

#[test]
fn a_job_file_cannot_make_librdkafka_run_a_command() {
    let dir = JobDir::new();
    let marker = dir.path().join("kinit-ran");
    // The command itself, and a principal that librdkafka's default kinit
    // command would run a second command from (with GSSAPI, in a build
    // with it: this one is refused by name whatever the build).
    let attacks = [
        (
            "sasl.kerberos.kinit.cmd",
            format!("touch {}", marker.display()),
            "librdkafka would run it as a shell command",
        ),
        ("sasl.kerberos.principal", format!("x; touch {}", marker.display()), "kinit shell command"),
        ("plugin.library.paths", "/tmp/evil.so".to_string(), "would load each library it names"),
    ];
    let kafka = |topic: &str, role: &str, property: &str, value: &str| {
        format!(
            "kind = \"kafka\"\nbootstrap_servers = \"127.0.0.1:1\"\ntopic = \"{topic}\"\nrequest_timeout = \"1s\"\n\n\
             [{role}.properties]\n\"security.protocol\" = \"sasl_plaintext\"\n\"sasl.mechanisms\" = \"GSSAPI\"\n\
             \"{property}\" = \"{value}\""
        )
    };
    for (property, value, why) in &attacks {
        let jobs = [
            ("source 'in'", kafka_job(&kafka("in", "sources", property, value), "kind = \"discard\"")),
            ("sink 'out'", kafka_job("kind = \"generator\"\ncount = 10", &kafka("out", "sinks", property, value))),
        ];
        for (node, job) in jobs {
            dir.write("job.toml", job);
            let out = host_command(dir.path(), &["run", "job.toml"]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{property} in {node}: {err}");
            assert!(
                err.contains(&format!("{node}: properties.{property}: ")) && err.contains(why),
                "{property} in {node}: {err}"
            );
            assert!(err.contains("a job file may not set it"), "{err}");
            assert!(!marker.exists(), "{property} in {node} ran its command");
        }
    }
}
