//! A hostile local checkpoint directory, against the real binary: links
//! planted where Weir keeps `chk-<n>`, `shared` and state files (before a
//! first run and before `--resume`), a savepoint whose state file links
//! out, FIFOs as `_metadata` and as a state file, directories another user
//! owns or anyone may write, and a transactional sink's directory holding
//! the user's own `part-notes`. Each must end with a non-zero exit and an
//! error naming the path, within seconds, and leave every tree outside the
//! job's directory exactly as it was (names and contents hashed before and
//! after).

use super::support::JobDir;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use weir_tests::{artifacts, host_command};

/// A word-count job reading `input.txt` at 100 lines a second, its
/// checkpoints under `ck/` with every state in a file of its own, into
/// sink `sink` (a TOML entry body).
fn write_job(dir: &JobDir, sink: &str) {
    dir.write("input.txt", "one two two\nthree three three\n".repeat(150));
    dir.write(
        "job.toml",
        format!(
            r#"name = "wc"

[checkpointing]
interval = "100ms"

[state.checkpoints]
dir = "file://{root}/ck"
inline_threshold = "0B"

[restart-strategy]
type = "none"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"
records_per_second = 100

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
input = "counter"
{sink}
"#,
            root = dir.path().display(),
            tokenizer = artifacts::WORD_COUNT_TOKENIZER,
            counter = artifacts::WORD_COUNT_COUNTER,
        ),
    );
}

const FILE_SINK: &str = "kind = \"file\"\npath = \"out.txt\"";

/// Runs `host <args>` in `dir`, killed (and the test failed) if it runs
/// past `limit`: a host that waits on a FIFO must not hang the suite.
/// Returns (exit code, stderr).
fn run_within(dir: &Path, args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let mut child = host_command(dir, args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
        s
    });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("host {args:?} still ran after {limit:?}: it hangs\n{}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait().unwrap().code(), reader.join().unwrap())
}

/// Asserts `host <args>` fails cleanly within 60 s, naming `needles`.
fn refused(dir: &Path, args: &[&str], needles: &[&str]) -> String {
    let (code, err) = run_within(dir, args, Duration::from_secs(60));
    assert_eq!(code, Some(1), "{args:?} must fail cleanly:\n{err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in:\n{err}");
    }
    err
}

/// Every name under `root` (links as their target's name, not followed)
/// with its contents: equal before and after means untouched.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                out.insert(format!("{name}/"), Vec::new());
                dirs.push(p);
            } else if meta.file_type().is_symlink() {
                out.insert(format!("{name} ->"), std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes());
            } else {
                out.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A victim tree: files and a subdirectory a careless host would empty.
fn victim(dir: &JobDir, name: &str) -> std::path::PathBuf {
    let v = dir.path().join(name);
    std::fs::create_dir_all(v.join("sub")).unwrap();
    std::fs::write(v.join("precious"), "keep me").unwrap();
    std::fs::write(v.join("sub/nested"), "and me").unwrap();
    std::fs::write(v.join("000009.sst"), "a name Weir could write").unwrap();
    v
}

fn symlink(target: &Path, at: &Path) {
    std::os::unix::fs::symlink(target, at).unwrap();
}

fn mkfifo(at: &Path) {
    let ok = std::process::Command::new("mkfifo").arg(at).status().unwrap().success();
    assert!(ok, "mkfifo {}", at.display());
}

/// Runs the job until a checkpoint holds a state file, then kills it
/// (SIGKILL): the job's directory then holds what a resume reads.
fn run_until_a_state_file(dir: &JobDir) {
    let mut child =
        host_command(dir.path(), &["run", "job.toml"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest_state_file(dir).is_none() {
        assert!(Instant::now() < deadline, "no checkpoint with a state file within 60 s");
        assert!(child.try_wait().unwrap().is_none(), "the job ended before a checkpoint held a state file");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A state file of the latest complete checkpoint, if it has one.
fn latest_state_file(dir: &JobDir) -> Option<std::path::PathBuf> {
    let latest = *checkpoints(dir).last()?;
    std::fs::read_dir(dir.path().join(format!("ck/wc/chk-{latest}")))
        .ok()?
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "snap"))
}

/// The ids of the complete checkpoints under `ck/wc`.
fn checkpoints(dir: &JobDir) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir.path().join("ck/wc")) else { return Vec::new() };
    let mut ids: Vec<u64> = entries
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .filter(|id| dir.path().join(format!("ck/wc/chk-{id}/_metadata")).exists())
        .collect();
    ids.sort();
    ids
}

/// `_metadata` of a checkpoint, as JSON.
fn read_metadata(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap();
    let body = &text[text.iter().position(|&b| b == b'\n').unwrap() + 1..];
    serde_json::from_slice(body).unwrap()
}

/// Writes `m` as a `_metadata` file at `path`, with a valid header.
fn write_metadata(path: &Path, m: &Value) {
    let body = serde_json::to_vec_pretty(m).unwrap();
    let mut file = format!("WEIRMETA 1 {:08x}\n", crc32fast::hash(&body)).into_bytes();
    file.extend_from_slice(&body);
    std::fs::write(path, file).unwrap();
}

#[test]
fn a_chk_link_planted_before_the_first_run_is_refused_and_its_target_untouched() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    let v = victim(&dir, "victim");
    let before = tree(&v);
    std::fs::create_dir_all(dir.path().join("ck/wc")).unwrap();
    symlink(&v, &dir.path().join("ck/wc/chk-1"));
    let path = format!("{}/ck/wc/chk-1", dir.path().display());
    refused(dir.path(), &["run", "job.toml"], &[&path, "is a symbolic link"]);
    assert_eq!(tree(&v), before, "the link's target changed");
}

#[test]
fn links_planted_before_resume_are_refused_and_their_targets_untouched() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    run_until_a_state_file(&dir);
    let ck = dir.path().join("ck/wc");
    let v = victim(&dir, "victim");
    let before = tree(&v);
    // A checkpoint directory without `_metadata` (the clean-up deletes
    // such), the shared directory, and a state file of the checkpoint a
    // resume reads.
    let state = latest_state_file(&dir).unwrap();
    let saved = std::fs::read(&state).unwrap();
    let plants = [(v.clone(), ck.join("chk-50")), (v.clone(), ck.join("shared")), (v.join("precious"), state.clone())];
    for (target, at) in plants {
        let _ = std::fs::remove_file(&at);
        symlink(&target, &at);
        let path = at.display().to_string();
        refused(dir.path(), &["run", "job.toml", "--resume"], &[&path, "is a symbolic link"]);
        refused(dir.path(), &["checkpoints", "job.toml"], &[&path]);
        assert_eq!(tree(&v), before, "{} changed the link's target", at.display());
        std::fs::remove_file(&at).unwrap();
    }
    std::fs::write(&state, saved).unwrap();
    dir.succeeds(&["--resume"]);
}

#[test]
fn a_savepoint_whose_state_file_links_out_is_refused() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    run_until_a_state_file(&dir);
    let latest = *checkpoints(&dir).last().unwrap();
    let chk = dir.path().join(format!("ck/wc/chk-{latest}"));
    // The savepoint a checkpoint would make, its state file moved out of
    // it and linked back: a read would follow the link out of the
    // savepoint's directory.
    let mut m = read_metadata(&chk.join("_metadata"));
    m["savepoint"] = json!(true);
    let sp = dir.path().join("sp");
    std::fs::create_dir(&sp).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let ops = m["operators"].as_object_mut().unwrap();
    let mut linked = Vec::new();
    for op in ops.values_mut() {
        for handle in op["subtasks"].as_array_mut().unwrap() {
            if handle["type"] == "file" {
                let path = handle["path"].as_str().unwrap().to_string();
                let name = path.rsplit('/').next().unwrap().to_string();
                std::fs::copy(dir.path().join("ck/wc").join(&path), outside.join(&name)).unwrap();
                symlink(&outside.join(&name), &sp.join(&name));
                handle["path"] = json!(name);
                linked.push(name);
            }
        }
    }
    assert!(!linked.is_empty(), "the checkpoint holds state files");
    write_metadata(&sp.join("_metadata"), &m);
    let before = tree(&outside);
    let uri = format!("file://{}", sp.display());
    let named = format!("{}/", sp.display());
    for args in [vec!["inspect", uri.as_str()], vec!["run", "job.toml", "--from-savepoint", uri.as_str()]] {
        refused(dir.path(), &args, &[&named, "is a symbolic link"]);
    }
    assert_eq!(tree(&outside), before);
}

/// Found by the `checkpoint_tree` fuzz target: reading a savepoint or a
/// checkpoint whose directory does not exist created it, through a link
/// planted above it.
#[test]
fn reading_a_savepoint_or_checkpoint_that_is_not_there_creates_nothing_through_a_planted_link() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    let v = victim(&dir, "victim");
    let before = tree(&v);
    // Outside the job's own checkpoint directory, which a run checks
    // whole before it reads anything.
    let through = dir.path().join("elsewhere/chk-7");
    std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
    symlink(&v, &through);
    let missing = format!("{}/sp does not exist", through.display());
    for (flag, uri) in [
        ("--from-savepoint", format!("file://{}/sp", through.display())),
        ("--from-checkpoint", format!("file://{}/sp/job/chk-3", through.display())),
    ] {
        for args in [vec!["inspect", uri.as_str()], vec!["run", "job.toml", flag, uri.as_str()]] {
            refused(dir.path(), &args, &[&missing]);
            assert_eq!(tree(&v), before, "{args:?} changed the link's target");
        }
    }
}

#[test]
fn a_fifo_as_metadata_or_state_file_is_refused_at_once_not_waited_on() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    run_until_a_state_file(&dir);
    let latest = *checkpoints(&dir).last().unwrap();
    let ck = dir.path().join("ck/wc");
    // A copy of the latest checkpoint with `_metadata` a FIFO.
    let chk = ck.join(format!("chk-{}", latest + 1));
    std::fs::create_dir(&chk).unwrap();
    mkfifo(&chk.join("_metadata"));
    let uri = format!("file://{}", chk.display());
    let fifo = format!("{}/_metadata", chk.display());
    for args in [vec!["inspect", uri.as_str()], vec!["run", "job.toml", "--from-checkpoint", uri.as_str()]] {
        let (code, err) = run_within(dir.path(), &args, Duration::from_secs(20));
        assert_eq!(code, Some(1), "{args:?}:\n{err}");
        assert!(err.contains(&fifo) && err.contains("is a FIFO"), "{args:?}:\n{err}");
    }
    std::fs::remove_dir_all(&chk).unwrap();
    // A state file of the latest checkpoint as a FIFO.
    let chk = ck.join(format!("chk-{latest}"));
    let state = latest_state_file(&dir).unwrap();
    std::fs::remove_file(&state).unwrap();
    mkfifo(&state);
    let uri = format!("file://{}", chk.display());
    let fifo = state.display().to_string();
    for args in [vec!["inspect", uri.as_str()], vec!["run", "job.toml", "--from-checkpoint", uri.as_str()]] {
        let (code, err) = run_within(dir.path(), &args, Duration::from_secs(20));
        assert_eq!(code, Some(1), "{args:?}:\n{err}");
        assert!(err.contains(&fifo) && err.contains("is a FIFO"), "{args:?}:\n{err}");
    }
}

#[test]
fn a_job_directory_another_user_owns_or_anyone_may_write_is_refused() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    dir.succeeds(&[]);
    let ck = dir.path().join("ck/wc");
    let job_dir = ck.display().to_string();
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(dir.path(), &["run", "job.toml", "--resume"], &[&job_dir, "is writable by others (mode 777)"]);
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o700)).unwrap();
    // `nobody`: the directory is another user's.
    std::os::unix::fs::chown(&ck, Some(65534), Some(65534)).unwrap();
    refused(dir.path(), &["run", "job.toml", "--resume"], &[&job_dir, "belongs to user 65534"]);
    refused(dir.path(), &["checkpoints", "job.toml"], &[&job_dir, "belongs to user 65534"]);
    std::os::unix::fs::chown(&ck, Some(0), Some(0)).unwrap();
    dir.succeeds(&["--resume"]);
}

#[test]
fn checkpoint_directories_are_0700_and_files_0600() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    run_until_a_state_file(&dir);
    let ck = dir.path().join("ck");
    let mut seen = 0;
    let mut dirs = vec![ck.clone()];
    while let Some(d) = dirs.pop() {
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700, "{}", d.display());
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                dirs.push(p);
            } else {
                assert_eq!(meta.mode() & 0o777, 0o600, "{}", p.display());
                seen += 1;
            }
        }
    }
    assert!(seen >= 2, "the run wrote checkpoint files");
}

#[test]
fn the_rocksdb_directory_is_per_user_private_and_checked() {
    let dir = JobDir::new();
    write_job(&dir, FILE_SINK);
    let job = std::fs::read_to_string(dir.path().join("job.toml")).unwrap();
    let rocks = job.replace("[restart-strategy]", "[state.backend]\ntype = \"rocksdb\"\n\n[restart-strategy]");
    dir.write("job.toml", &rocks);
    // The default: under $TMPDIR, the user's own, 0700.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let run = |tmpdir: &Path| {
        let _ = std::fs::remove_dir_all(dir.path().join("ck"));
        let out = host_command(dir.path(), &["run", "job.toml"]).env("TMPDIR", tmpdir).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (code, err) = run(&tmp);
    assert_eq!(code, Some(0), "{err}");
    let uid = std::fs::metadata(dir.path()).unwrap().uid();
    let default = tmp.join(format!("weir-rocksdb-{uid}"));
    assert_eq!(std::fs::metadata(&default).unwrap().mode() & 0o777, 0o700, "{}", default.display());
    // Planted first by someone else, or open to all: refused by name.
    std::fs::set_permissions(&default, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, err) = run(&tmp);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&default.display().to_string()) && err.contains("is writable by others"), "{err}");
    std::fs::remove_dir_all(&default).unwrap();
    let v = victim(&dir, "victim");
    let before = tree(&v);
    symlink(&v, &default);
    let (code, err) = run(&tmp);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&default.display().to_string()) && err.contains("is a symbolic link"), "{err}");
    assert_eq!(tree(&v), before);
}

#[test]
fn the_transactional_sink_deletes_only_names_it_writes() {
    let dir = JobDir::new();
    write_job(&dir, "kind = \"transactional-file\"\ndir = \"out\"");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mine = ["part-notes", ".part-notes", ".inprogress-notes", ".part-1.pending.bak"];
    for name in mine {
        std::fs::write(out.join(name), "the user's own").unwrap();
    }
    // A fresh run: the user's files are neither output nor deleted.
    dir.succeeds(&[]);
    for name in mine {
        assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), "the user's own", "{name}");
    }
    let published: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with("part-") && *n != "part-notes")
        .collect();
    assert!(!published.is_empty(), "the run published its output");
    // A savepoint numbered 0, made from the latest checkpoint: a restore
    // withdraws the sink's own later output, never the user's files.
    let latest = *checkpoints(&dir).last().unwrap();
    let mut m = read_metadata(&dir.path().join(format!("ck/wc/chk-{latest}/_metadata")));
    m["savepoint"] = json!(true);
    m["id"] = json!(0);
    m["finished"] = json!(false);
    let sp = dir.path().join("sp");
    std::fs::create_dir(&sp).unwrap();
    for op in m["operators"].as_object_mut().unwrap().values_mut() {
        for handle in op["subtasks"].as_array_mut().unwrap() {
            if handle["type"] == "file" {
                let path = handle["path"].as_str().unwrap().to_string();
                let name = path.rsplit('/').next().unwrap().to_string();
                std::fs::copy(dir.path().join("ck/wc").join(&path), sp.join(&name)).unwrap();
                handle["path"] = json!(name);
            }
        }
    }
    write_metadata(&sp.join("_metadata"), &m);
    let uri = format!("file://{}", sp.display());
    let (code, err) = run_within(dir.path(), &["run", "job.toml", "--from-savepoint", &uri], Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    for name in mine {
        assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), "the user's own", "{name}");
    }
}
