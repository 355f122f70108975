//! Data is on disk before it is published: the real host under `strace`,
//! its renames, links, fsyncs and unlinks in the order the kernel saw them.
//! For every checkpoint: each state file it names is fsynced, then its
//! directory, before `_metadata` is linked into place; `_metadata` and its
//! directory are fsynced before any older checkpoint is deleted and before
//! the transactional sink publishes what the checkpoint covers; every part
//! file's rename is followed by an fsync of the sink's directory.

use super::support::JobDir;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use weir_tests::{artifacts, host_command};

/// One system call, as strace printed it.
#[derive(Debug)]
struct Call {
    name: String,
    /// The paths it names: the quoted ones, and an fsync's file.
    paths: Vec<String>,
    /// Where it started and where it returned, in trace order.
    started: usize,
    returned: usize,
}

/// Runs `host run job.toml` in `dir` under strace; returns the successful
/// calls of interest.
fn traced_run(dir: &JobDir) -> Vec<Call> {
    let host = host_command(dir.path(), &["run", "job.toml"]);
    let trace = dir.path().join("trace.txt");
    let mut c = Command::new("strace");
    c.args(["-f", "-y", "-qq", "-s", "4096", "-o"])
        .arg(&trace)
        .args(["-e", "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat,unlink,unlinkat"])
        .arg(host.get_program())
        .args(host.get_args())
        .current_dir(dir.path());
    for (k, v) in host.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let out = c.output().expect("strace is installed (scripts/test installs it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    parse(&std::fs::read_to_string(trace).unwrap(), &dir.path().canonicalize().unwrap())
}

/// The calls that returned 0, with where each started and returned; paths
/// relative to `cwd` made absolute.
fn parse(trace: &str, cwd: &Path) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    // Calls another thread interrupted: pid -> index in `calls`.
    let mut open: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed = Vec::new();
    for (i, line) in trace.lines().enumerate() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        if let Some(resumed) = rest.strip_prefix("<... ") {
            if let Some(at) = open.remove(pid) {
                calls[at].returned = i;
                if !resumed.trim_end().ends_with("= 0") {
                    failed.push(at);
                }
            }
            continue;
        }
        let Some((name, args)) = rest.split_once('(') else { continue };
        let absolute = |p: &str| match p.strip_prefix("./") {
            Some(rest) => cwd.join(rest).display().to_string(),
            None if !p.starts_with('/') => cwd.join(p).display().to_string(),
            None => p.to_string(),
        };
        // A path an *at call names is relative to a directory descriptor,
        // which `-y` prints before it as `5</abs/dir>`.
        let pieces: Vec<&str> = args.split('"').collect();
        let mut paths: Vec<String> = Vec::new();
        for k in (1..pieces.len()).step_by(2) {
            let before = pieces[k - 1].trim_end().trim_end_matches(',').trim_end();
            let dir = before.strip_suffix('>').and_then(|b| b.rsplit_once('<')).map(|(_, d)| d);
            paths.push(match dir {
                Some(d) if !pieces[k].starts_with('/') => format!("{d}/{}", pieces[k]),
                _ => absolute(pieces[k]),
            });
        }
        if name == "fsync" || name == "fdatasync" {
            // fsync(7</path/to/file>)
            if let Some(p) = args.split_once('<').and_then(|(_, p)| p.split_once('>')).map(|(p, _)| p) {
                paths.push(p.to_string());
            }
        }
        let at = calls.len();
        calls.push(Call { name: name.to_string(), paths, started: i, returned: i });
        if rest.ends_with("<unfinished ...>") {
            open.insert(pid.to_string(), at);
        } else if !rest.trim_end().ends_with("= 0") {
            failed.push(at);
        }
    }
    let mut kept = Vec::new();
    for (i, c) in calls.into_iter().enumerate() {
        if !failed.contains(&i) {
            kept.push(c);
        }
    }
    kept
}

/// The first `name` call naming `path` (as its destination, for a rename or
/// link: its last path).
fn find<'a>(calls: &'a [Call], names: &[&str], path: &str) -> Option<&'a Call> {
    calls.iter().find(|c| names.contains(&c.name.as_str()) && c.paths.last().is_some_and(|p| p == path))
}

fn fsync_after<'a>(calls: &'a [Call], path: &str, after: usize) -> Option<&'a Call> {
    calls.iter().find(|c| {
        (c.name == "fsync" || c.name == "fdatasync") && c.started > after && c.paths.last().is_some_and(|p| p == path)
    })
}

const MOVES: &[&str] = &["rename", "renameat", "renameat2", "link", "linkat"];

fn job(dir: &JobDir, backend: &str) {
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "dur"
parallelism = 2
state.backend = "{backend}"

[checkpointing]
interval = "100ms"
retained = 2

[state.checkpoints]
dir = "file://{root}/ck"
inline_threshold = "0B"

[[sources]]
id = "gen"
kind = "generator"
count = 6000
keys = 200
records_per_second = 4000

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "transactional-file"
input = "counter"
dir = "out"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
}

/// Checks the durable order of one traced run whose checkpoints are in
/// `ck/dur` and whose sink writes `out/`.
fn check_order(dir: &JobDir, calls: &[Call], incremental: bool) {
    let root = dir.path().canonicalize().unwrap();
    let job_dir = root.join("ck/dur");
    let out_dir = root.join("out").display().to_string();
    // When each checkpoint's _metadata was linked in, and when it was
    // durable (itself and its directory fsynced).
    let mut committed: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    for c in calls.iter().filter(|c| MOVES.contains(&c.name.as_str())) {
        let Some(to) = c.paths.last() else { continue };
        let Some(rest) = to.strip_prefix(&format!("{}/chk-", job_dir.display())) else { continue };
        let Some(id) = rest.strip_suffix("/_metadata").and_then(|n| n.parse::<u64>().ok()) else { continue };
        let meta = fsync_after(calls, to, c.returned).unwrap_or_else(|| panic!("{to} never fsynced"));
        let chk = job_dir.join(format!("chk-{id}")).display().to_string();
        let dir_sync =
            fsync_after(calls, &chk, meta.returned).unwrap_or_else(|| panic!("{chk} not fsynced after _metadata"));
        committed.insert(id, (c.started, dir_sync.returned));
    }
    assert!(committed.len() >= 3, "too few checkpoints to judge: {committed:?}");

    // Every state file a checkpoint's _metadata names (those retention
    // kept), and every chk-<n>/ file the trace shows written, is durable
    // before that _metadata is linked in.
    let mut checked = 0;
    let mut durable_before = |file: &Path, id: u64| {
        let file = file.display().to_string();
        let (linked, _) = committed[&id];
        let written = find(calls, MOVES, &file).unwrap_or_else(|| panic!("{file} never renamed into place"));
        let synced = fsync_after(calls, &file, written.returned).unwrap_or_else(|| panic!("{file} never fsynced"));
        let parent = Path::new(&file).parent().unwrap().display().to_string();
        let dir_synced =
            fsync_after(calls, &parent, synced.returned).unwrap_or_else(|| panic!("{parent} never fsynced"));
        assert!(dir_synced.returned < linked, "{file} was not durable before chk-{id}/_metadata was linked");
        checked += 1;
    };
    for c in calls.iter().filter(|c| MOVES.contains(&c.name.as_str())) {
        let Some(to) = c.paths.last() else { continue };
        let Some(rest) = to.strip_prefix(&format!("{}/chk-", job_dir.display())) else { continue };
        if let Some((id, name)) = rest.split_once('/')
            && name != "_metadata"
            && let Ok(id) = id.parse::<u64>()
            && committed.contains_key(&id)
        {
            durable_before(Path::new(to), id);
        }
    }
    let mut shared = 0;
    for (&id, _) in committed.iter() {
        let Ok(text) = std::fs::read(job_dir.join(format!("chk-{id}/_metadata"))) else { continue };
        let body = &text[text.iter().position(|&b| b == b'\n').unwrap() + 1..];
        let m: Value = serde_json::from_slice(body).unwrap();
        for op in m["operators"].as_object().unwrap().values() {
            for handle in op["subtasks"].as_array().unwrap() {
                for f in handle["files"].as_array().into_iter().flatten() {
                    let path = f["path"].as_str().unwrap();
                    if path.starts_with("shared/") {
                        durable_before(&job_dir.join(path), id);
                        shared += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no state file was checked");
    assert_eq!(shared > 0, incremental, "shared files checked: {shared}");

    // Retention deletes a checkpoint only once two newer ones are durable.
    for c in calls.iter().filter(|c| c.name.starts_with("unlink")) {
        let Some(p) = c.paths.last() else { continue };
        let Some(rest) = p.strip_prefix(&format!("{}/chk-", job_dir.display())) else { continue };
        let Some(id) = rest.strip_suffix("/_metadata").and_then(|n| n.parse::<u64>().ok()) else { continue };
        let newer = committed.range(id + 1..).filter(|(_, (_, durable))| *durable < c.started).count();
        assert!(newer >= 2, "chk-{id} deleted when {newer} newer checkpoints were durable");
    }

    // The sink: a sealed file's rename is followed by an fsync of the
    // directory before its checkpoint commits; a publish comes after the
    // checkpoint is durable and is itself followed by an fsync.
    let mut published = 0;
    for c in calls.iter().filter(|c| MOVES.contains(&c.name.as_str())) {
        let Some(to) = c.paths.last() else { continue };
        let Some(name) = to.strip_prefix(&format!("{out_dir}/")) else { continue };
        let synced =
            fsync_after(calls, &out_dir, c.returned).unwrap_or_else(|| panic!("{to}: directory never fsynced"));
        if let Some(tag) = name.strip_prefix(".part-").and_then(|n| n.strip_suffix(".pending")) {
            if let Ok(id) = tag.parse::<u64>()
                && let Some((linked, _)) = committed.get(&id)
            {
                assert!(synced.returned < *linked, "{name} sealed but not durable before chk-{id} committed");
            }
        } else if let Some(tag) = name.strip_prefix("part-")
            && let Ok(id) = tag.parse::<u64>()
            && let Some((_, durable)) = committed.get(&id)
        {
            assert!(c.started > *durable, "{name} published before chk-{id} was durable");
            published += 1;
        }
    }
    assert!(published > 0, "no part file published");
}

#[test]
fn checkpoints_and_part_files_are_on_disk_before_they_are_published() {
    let dir = JobDir::new();
    job(&dir, "hashmap");
    let calls = traced_run(&dir);
    check_order(&dir, &calls, false);
}

#[test]
fn incremental_rocksdb_files_are_on_disk_before_the_checkpoint_that_names_them() {
    let dir = JobDir::new();
    job(&dir, "rocksdb");
    let text = dir
        .read("job.toml")
        .replace("state.backend = \"rocksdb\"", "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true");
    dir.write("job.toml", text);
    let calls = traced_run(&dir);
    check_order(&dir, &calls, true);
}
