//! Savepoints end to end, through the control API of a running `host`:
//! `host savepoint` (with and without `--stop`), `host status`,
//! `host cancel`, and `host run --from-savepoint` into another backend and
//! parallelism, from file:// and from a copy on S3. Counts are checked
//! against the generator's stream computed directly, and output lines are
//! counted, so a lost or repeated record fails the test.

use super::support::{JobDir, counts_by_key, final_counts, text};
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::Duration;
use weir_host::connectors::generator::key_of;
use weir_tests::{S3_BUCKET, S3Server, artifacts, host_command};

pub const RECORDS: u64 = 60_000;
const KEYS: u64 = 500;
const SEED: u64 = 7;

/// The counter job: the generator (paced, so it runs for a few seconds)
/// into the counter at parallelism `p` on `backend` (`hashmap`, `rocksdb`
/// or `rocksdb-incremental`), into a transactional file sink; checkpoints
/// every 200 ms; savepoints under `sp/`.
pub fn write_job(dir: &JobDir, p: u32, backend: &str, rate: u32) {
    let root = dir.path().display();
    let backend = match backend {
        "rocksdb-incremental" => "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true".to_string(),
        b => format!("state.backend = \"{b}\""),
    };
    dir.write(
        "job.toml",
        format!(
            r#"name = "sp"
parallelism = {p}
{backend}

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "gen"
kind = "generator"
count = {RECORDS}
keys = {KEYS}
seed = {SEED}
records_per_second = {rate}

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

/// Each key's count over the whole stream.
pub fn expected() -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for i in 0..RECORDS {
        *m.entry(key_of(SEED, i, KEYS).to_string()).or_default() += 1;
    }
    m
}

/// Waits until the job `sp` completed a checkpoint after `after`.
pub fn wait_for_checkpoint_after(dir: &JobDir, after: u64) {
    let what = format!("a checkpoint after {after}");
    dir.wait_for_status("sp", &what, |s| s["latest_checkpoint"].as_u64().is_some_and(|c| c > after));
}

#[test]
fn stop_with_savepoint_at_parallelism_2_then_restore_at_3_on_rocksdb_is_exact() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let status = dir.host(&["status", "job.toml"]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    let shown = text(&status.stdout);
    assert!(shown.contains("job 'sp' running") && shown.contains("counter"), "{shown}");

    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(location.starts_with(&format!("file://{}/sp/savepoint-sp-", dir.path().display())), "{location}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert!(err.contains(&format!("stopped with savepoint {location}")), "{err}");
    let before = dir.published();
    let lines_before = before.lines().count() as u64;
    assert!(lines_before > 0 && lines_before < RECORDS, "stopped part-way: {lines_before} lines");
    let meta = std::fs::read_to_string(format!("{}/_metadata", location.trim_start_matches("file://"))).unwrap();
    assert!(meta.contains("\"savepoint\": true"), "{meta}");
    assert!(!dir.host(&["status", "sp"]).status.success(), "the stopped job is gone");

    // Inspect agrees with what was published up to the savepoint: as many
    // keys, and each key's stored count is its last published count.
    let so_far = final_counts(&before);
    let out = dir.host(&["inspect", &location]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains(&format!("state 'count': value v1 (postcard), {} keys", so_far.len())), "{shown}");
    assert!(shown.contains("operator 'counter' (parallelism 2)"), "{shown}");
    for (k, n) in so_far.iter().take(5) {
        let out = dir.host(&["inspect", &location, "--operator", "counter", "--state", "count", "--key", k]);
        let value = text(&out.stdout);
        assert!(value.contains(&format!("(postcard: {n} if an unsigned integer)")), "key {k}: {value}");
    }
    let out = dir.host(&["inspect", &location, "--operator", "counter", "--state", "nope", "--key", "1"]);
    assert!(!out.status.success() && text(&out.stderr).contains("no state 'nope'"), "{}", text(&out.stderr));

    // Another backend, another parallelism.
    write_job(&dir, 3, "rocksdb", 1_000_000);
    let err = dir.succeeds(&["--from-savepoint", &location]);
    assert!(err.contains("restoring"), "{err}");
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record, none lost or repeated");
    assert_eq!(final_counts(&all), expected());

    // Parallelism 1 with 64 key groups instead of 128: keys are re-hashed.
    let fresh = JobDir::new();
    write_job(&fresh, 1, "hashmap", 1_000_000);
    let job = fresh.read("job.toml").replacen("parallelism = 1", "parallelism = 1\nmax_parallelism = 64", 1);
    fresh.write("job.toml", job);
    let err = fresh.succeeds(&["--from-savepoint", &location]);
    assert!(err.contains("re-hashed"), "{err}");
    assert_continues_from(&location, &fresh);
}

/// The generator's position recorded in the savepoint at `location`.
fn savepoint_position(location: &str) -> u64 {
    let local = std::path::PathBuf::from(location.trim_start_matches("file://"));
    let meta = std::fs::read_to_string(local.join("_metadata")).unwrap();
    let json: serde_json::Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    let position = json["sources"]["gen"].as_u64().unwrap();
    assert!(position > 0 && position < RECORDS, "taken mid-stream: {position}");
    position
}

/// Asserts that `fresh`, restored from the savepoint at `location` into
/// an empty output directory, published exactly the records after the
/// savepoint's source position, each key counting on from where the
/// savepoint left it to its total.
fn assert_continues_from(location: &str, fresh: &JobDir) {
    let local = std::path::PathBuf::from(location.trim_start_matches("file://"));
    let meta = std::fs::read_to_string(local.join("_metadata")).unwrap();
    let json: serde_json::Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    let position = json["sources"]["gen"].as_u64().unwrap();
    assert!(position > 0 && position < RECORDS, "taken mid-stream: {position}");
    let want = expected();
    let mut lines = 0;
    for (k, updates) in counts_by_key(&fresh.published()) {
        let first = updates[0];
        assert_eq!(updates, (first..=want[&k]).collect::<Vec<_>>(), "key {k}");
        lines += updates.len() as u64;
    }
    assert_eq!(lines, RECORDS - position);
}

#[test]
fn a_savepoint_leaves_the_job_running_and_restores_elsewhere_from_s3() {
    let s3 = S3Server::start();
    let dir = JobDir::new();
    write_job(&dir, 2, "rocksdb", 20_000);
    // State files rather than state inlined in _metadata, streamed out.
    let job = dir.read("job.toml").replacen("[state.checkpoints]", "[state.checkpoints]\ninline_threshold = \"0B\"", 1);
    dir.write("job.toml", job);
    let mut cmd = host_command(dir.path(), &["run", "job.toml"]);
    let child = cmd.envs(s3.env()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "job.toml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    // Straight into the bucket too (a multipart upload per state file).
    let direct = dir.host(&["savepoint", "sp", "--dir", &format!("s3://{S3_BUCKET}/direct")]);
    assert!(direct.status.success(), "{}", text(&direct.stderr));
    let direct = text(&direct.stdout).trim().to_string();
    assert!(direct.starts_with(&format!("s3://{S3_BUCKET}/direct/savepoint-sp-")), "{direct}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "the job goes on to the end after a savepoint: {err}");
    assert!(!err.contains("stopped with savepoint"), "{err}");
    assert_eq!(final_counts(&dir.published()), expected());

    let inspect = host_command(dir.path(), &["inspect", &direct]).envs(s3.env()).output().unwrap();
    assert!(inspect.status.success(), "{}", text(&inspect.stderr));
    assert!(text(&inspect.stdout).contains("state 'count': value v1"), "{}", text(&inspect.stdout));

    // Copy the savepoint directory into a bucket and restore a fresh job
    // from there: paths inside are relative.
    let local = std::path::PathBuf::from(location.trim_start_matches("file://"));
    let name = local.file_name().unwrap().to_str().unwrap().to_string();
    assert!(local.join("counter-0.snap").is_file() && local.join("counter-1.snap").is_file());
    for e in std::fs::read_dir(&local).unwrap() {
        let e = e.unwrap();
        s3.put(&format!("copied/{name}/{}", e.file_name().to_str().unwrap()), &std::fs::read(e.path()).unwrap());
    }
    let fresh = JobDir::new();
    write_job(&fresh, 1, "hashmap", 1_000_000);
    let uri = format!("s3://{S3_BUCKET}/copied/{name}");
    let mut cmd = host_command(fresh.path(), &["run", "job.toml", "--from-savepoint", &uri]);
    let out = cmd.envs(s3.env()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_continues_from(&location, &fresh);
}

#[test]
fn cancel_ends_the_job_without_restarting_it() {
    let dir = JobDir::new();
    write_job(&dir, 1, "hashmap", 5_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["cancel", "sp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, err) = dir.finish(child);
    assert!(!ok, "a cancelled job exits non-zero");
    assert!(err.contains("cancelled on request"), "{err}");
    assert!(!err.contains("restart 1"), "no restart after a cancel: {err}");
    // Its checkpoints stay: the job can be resumed.
    write_job(&dir, 1, "hashmap", 1_000_000);
    dir.succeeds(&["--resume"]);
    assert_eq!(final_counts(&dir.published()), expected());
}

#[test]
fn control_errors_name_the_job_and_what_to_do() {
    let dir = JobDir::new();
    let out = dir.host(&["status", "nosuchjob"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("job 'nosuchjob' is not running"), "{}", text(&out.stderr));

    write_job(&dir, 1, "hashmap", 5_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    // A second run of the same job is refused while the first runs.
    let (ok, err) = dir.run(&["--resume"]);
    assert!(!ok && err.contains("job 'sp' is already running"), "{err}");
    // A savepoint into a store Weir does not know (a plain path would be
    // taken as a local directory).
    let out = dir.host(&["savepoint", "sp", "--dir", "ftp://host/savepoints"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("must start with file:// or s3://"), "{}", text(&out.stderr));
    dir.host(&["cancel", "sp"]);
    dir.finish(child);
}

#[test]
fn restoring_checks_operators_and_the_savepoint_itself() {
    let dir = JobDir::new();
    write_job(&dir, 1, "hashmap", 10_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);

    // The operator's uid changed: refused, then dropped on request.
    let job = dir.read("job.toml");
    dir.write(
        "job.toml",
        job.replace("uid = \"counter\"", "uid = \"counter-v2\"")
            .replace("input = \"counter\"", "input = \"counter-v2\""),
    );
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok && err.contains("'counter'") && err.contains("--allow-non-restored-state"), "{err}");
    assert!(!dir.path().join("out-v2").exists(), "a refused restore runs nothing");
    // Dropped on request, into a new output directory: the source goes on
    // from the savepoint's position, and `counter-v2`, restored from
    // nothing, counts every key from zero.
    let job = dir.read("job.toml");
    dir.write("job.toml", job.replace("dir = \"out\"", "dir = \"out-v2\""));
    let (ok, err) = dir.run(&["--from-savepoint", &location, "--allow-non-restored-state"]);
    assert!(ok, "{err}");
    assert!(err.contains("not restored") && err.contains("counter"), "{err}");
    let position = savepoint_position(&location);
    let mut from_zero: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for i in position..RECORDS {
        let updates = from_zero.entry(key_of(SEED, i, KEYS).to_string()).or_default();
        updates.push(updates.len() as u64 + 1);
    }
    let got = counts_by_key(&dir.published_in("out-v2"));
    if let Some((k, want)) = from_zero.iter().find(|(k, want)| got.get(*k) != Some(*want)) {
        let seen = got.get(k).map(|u| (u.len(), u.first().copied(), u.last().copied()));
        panic!(
            "key {k}: (updates, first, last) {seen:?}, not 1..={} (counting from zero after {position})",
            want.len()
        );
    }
    assert_eq!(got.len(), from_zero.len(), "only keys read after the savepoint");

    // A checkpoint is not a savepoint.
    let chk = std::fs::read_dir(dir.path().join("ck/sp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("_metadata").is_file())
        .expect("a checkpoint");
    let (ok, err) = dir.run(&["--from-savepoint", &format!("file://{}", chk.display())]);
    assert!(!ok && err.contains("is not a savepoint directory"), "{err}");

    // Damage: a flipped byte in _metadata, then a truncated state file.
    let path = std::path::PathBuf::from(location.trim_start_matches("file://"));
    let meta = path.join("_metadata");
    let original = std::fs::read(&meta).unwrap();
    let mut bad = original.clone();
    let at = bad.len() - 10;
    bad[at] ^= 0x55;
    std::fs::write(&meta, &bad).unwrap();
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok && err.contains("_metadata"), "{err}");
    assert_eq!(std::fs::read(&meta).unwrap(), bad, "nothing overwritten");
    std::fs::write(&meta, &original).unwrap();
    let version = String::from_utf8_lossy(&original).replacen("WEIRMETA 1", "WEIRMETA 9", 1);
    std::fs::write(&meta, version.as_bytes()).unwrap();
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok && err.contains("_metadata") && err.contains("version 9"), "{err}");
    std::fs::write(&meta, &original).unwrap();
}

#[test]
fn a_truncated_or_altered_state_file_is_named_and_nothing_is_overwritten() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 10_000);
    // Every snapshot in a file of its own, none inlined in _metadata.
    let job = dir.read("job.toml").replacen("[state.checkpoints]", "[state.checkpoints]\ninline_threshold = \"0B\"", 1);
    dir.write("job.toml", job);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    let snap = std::path::PathBuf::from(location.trim_start_matches("file://")).join("counter-1.snap");
    let original = std::fs::read(&snap).unwrap();
    let published_before = dir.published();

    std::fs::write(&snap, &original[..original.len() / 2]).unwrap();
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok && err.contains("counter-1.snap") && err.contains("truncated"), "{err}");

    let mut flipped = original.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x10;
    std::fs::write(&snap, &flipped).unwrap();
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok && err.contains("counter-1.snap") && err.contains("checksum"), "{err}");
    assert_eq!(std::fs::read(&snap).unwrap(), flipped, "the savepoint is left as it was");
    assert_eq!(dir.published(), published_before, "no output was touched by the failed restores");
}

#[test]
fn a_new_module_version_migrates_the_restored_values_and_a_changed_kind_is_refused() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    let v1 = dir.read("job.toml");

    // Version 2 declares `count` as a map: refused, naming operator and state.
    dir.write("job.toml", v1.replace(artifacts::WORD_COUNT_COUNTER, artifacts::COUNT_AS_MAP));
    let (ok, err) = dir.run(&["--from-savepoint", &location]);
    assert!(!ok, "{err}");
    assert!(err.contains("operator 'counter'") && err.contains("'count'") && err.contains("map"), "{err}");

    // Version 2 keeps a Tally (state version 2) and writes `word=count`:
    // every u64 count of the savepoint goes through its migrate-value (on
    // RocksDB, whose restored values sit in its write-back cache).
    let v2 = v1.replace(artifacts::WORD_COUNT_COUNTER, artifacts::WORD_COUNT_COUNTER_V2);
    dir.write("job.toml", v2.replace("state.backend = \"hashmap\"", "state.backend = \"rocksdb\""));
    let err = dir.succeeds(&["--from-savepoint", &location]);
    assert!(err.contains("state migrated"), "{err}");
    let all = dir.published();
    assert!(all.lines().any(|l| l.contains('=')) && all.lines().any(|l| l.contains(' ')), "both formats");
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    // Each word counts on across the versions: 1..=n over both formats.
    assert_eq!(final_counts(&all.replace('=', " ")), expected());

    // Back to version 1 from a version-2 savepoint: it has no migration
    // from version 2, and says so.
    let dir2 = JobDir::new();
    write_job(&dir2, 1, "hashmap", 15_000);
    dir2.write(
        "job.toml",
        dir2.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, artifacts::WORD_COUNT_COUNTER_V2),
    );
    let child = dir2.start(&[]);
    dir2.wait_for_output("sp");
    let out = dir2.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    write_job(&dir2, 1, "hashmap", 15_000);
    let (ok, err) = dir2.run(&["--from-savepoint", &location]);
    assert!(!ok, "{err}");
    assert!(err.contains("migrate-value from version 2 failed") && err.contains("'count'"), "{err}");
}

/// Migration across languages: a savepoint of the Rust counter (version 1,
/// u64 counts) restored into the JavaScript counter version 2
/// (`word-count-js/counter-v2`, a Tally struct in state version 2), whose
/// `migrateValue` converts every count; a savepoint of that run restored
/// into the Rust counter version 2, which reads the structs JavaScript
/// wrote. Each word counts on across the three runs.
#[test]
fn a_javascript_migrate_value_converts_a_rust_savepoint_and_its_structs_restore_into_rust() {
    let js_v2 = weir_tests::script_guest("word_count_js_counter_v2");
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    let stop = |dir: &JobDir, child: Child| {
        dir.wait_for_output("sp");
        let out = dir.host(&["savepoint", "sp", "--stop"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(dir.finish(child).0);
        text(&out.stdout).trim().to_string()
    };
    let v1 = stop(&dir, dir.start(&[]));
    let after_v1 = dir.published().lines().count();

    write_job(&dir, 2, "rocksdb", 15_000);
    dir.write("job.toml", dir.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, &js_v2));
    let js = stop(&dir, dir.start(&["--from-savepoint", &v1]));
    let all = dir.published();
    assert!(all.lines().count() > after_v1, "the JavaScript version 2 ran");
    assert_eq!(all.lines().filter(|l| !l.contains('=')).count(), after_v1, "version 2 writes word=count");

    write_job(&dir, 3, "hashmap", 1_000_000);
    dir.write(
        "job.toml",
        dir.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, artifacts::WORD_COUNT_COUNTER_V2),
    );
    dir.succeeds(&["--from-savepoint", &js]);
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all.replace('=', " ")), expected());
}

/// Sessions (a 60 s gap, so none closes on its own) over generated clicks,
/// stopped with a savepoint with or without `--drain`: returns the
/// savepoint's `host inspect`, the sessions written and the generator's
/// position in the savepoint.
fn stop_sessions(drain: bool) -> (String, String, u64) {
    let dir = JobDir::new();
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "sp"
[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "gen"
kind = "generator"
count = 100000
keys = 50
seed = 1
event_time_step = "1ms"
records_per_second = 5000

[[operators]]
uid = "sessions"
module = "{module}"
input = "gen"
partition = "key"
params = {{ gap_ms = 60000 }}

[[sinks]]
id = "out"
kind = "file"
input = "sessions"
path = "sessions.txt"
"#,
            module = artifacts::SESSION_WINDOWS
        ),
    );
    let child = dir.start(&[]);
    dir.wait_for_status("sp", "1000 records read", |s| s["records_read"].as_u64().unwrap_or(0) > 1000);
    let mut args = vec!["savepoint", "sp", "--stop"];
    if drain {
        args.push("--drain");
    }
    let out = dir.host(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    let inspect = dir.host(&["inspect", &location]);
    assert!(inspect.status.success(), "{}", text(&inspect.stderr));
    let local = std::path::PathBuf::from(location.trim_start_matches("file://"));
    let meta = std::fs::read_to_string(local.join("_metadata")).unwrap();
    let json: serde_json::Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    let position = json["sources"]["gen"].as_u64().unwrap();
    (text(&inspect.stdout), dir.read("sessions.txt"), position)
}

/// The sessions of the generator's first `records` clicks (click `i` at
/// `i` ms), computed directly: per key, sorted `key start end clicks`,
/// split where two clicks are more than 60 s apart.
fn expected_sessions(records: u64) -> Vec<String> {
    expected_sessions_with_gap(records, 60_000)
}

/// The same, split where two clicks are more than `gap` ms apart.
fn expected_sessions_with_gap(records: u64, gap: u64) -> Vec<String> {
    let mut by_key: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for i in 0..records {
        by_key.entry(key_of(1, i, 50)).or_default().push(i);
    }
    let mut out = Vec::new();
    for (k, ts) in by_key {
        let (mut start, mut end, mut n) = (ts[0], ts[0], 0);
        for t in ts {
            if t - end > gap {
                out.push(format!("{k} {start} {end} {n}"));
                (start, n) = (t, 0);
            }
            end = t;
            n += 1;
        }
        out.push(format!("{k} {start} {end} {n}"));
    }
    out.sort();
    out
}

#[test]
fn stop_with_drain_fires_every_event_time_timer_before_the_savepoint() {
    let (inspect, sessions, _) = stop_sessions(false);
    assert!(inspect.contains("operator 'sessions' (parallelism 1), 50 timers"), "{inspect}");
    assert_eq!(sessions.lines().count(), 0, "no session closed without a drain: {sessions}");

    let (inspect, sessions, position) = stop_sessions(true);
    assert!(inspect.contains("operator 'sessions' (parallelism 1), 0 timers"), "{inspect}");
    assert!(inspect.contains("state 'sessions': map v1 (postcard), 0 keys"), "{inspect}");
    assert!(position > 1000 && position < 100_000, "stopped mid-stream: {position}");
    // Every open session closed by the drain, each with exactly the clicks
    // read before the savepoint's position.
    let mut got: Vec<String> = sessions.lines().map(str::to_string).collect();
    got.sort();
    let expected = expected_sessions(position);
    assert_eq!(expected.len(), 50, "one open session per key");
    assert_eq!(got, expected);
}

#[test]
fn a_savepoint_of_the_rust_counter_restores_into_the_python_counter() {
    rust_savepoint_restores_into(&weir_tests::script_guest("word_count_py_counter"));
}

#[test]
fn a_savepoint_of_the_rust_counter_restores_into_the_javascript_counter() {
    rust_savepoint_restores_into(&weir_tests::script_guest("word_count_js_counter"));
}

#[test]
fn a_savepoint_of_the_javascript_counter_restores_into_the_rust_counter() {
    savepoint_restores_across(&weir_tests::script_guest("word_count_js_counter"), artifacts::WORD_COUNT_COUNTER);
}

#[test]
fn a_savepoint_of_the_rust_counter_restores_into_the_c_counter() {
    rust_savepoint_restores_into(&weir_tests::script_guest("word_count_c_counter"));
}

/// A stop savepoint of the Rust counter at p=2 on hashmap, restored into
/// `module` (a counter in another language) at p=3 on RocksDB: exact.
fn rust_savepoint_restores_into(module: &str) {
    savepoint_restores_across(artifacts::WORD_COUNT_COUNTER, module);
}

/// A stop savepoint of the counter `from` at p=2 on hashmap, restored into
/// the counter `into` (another language's) at p=3 on RocksDB: exact.
fn savepoint_restores_across(from: &str, into: &str) {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    dir.write("job.toml", dir.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, from));
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    // The same state, `count` as a postcard u64, read by the other
    // language at p=3.
    write_job(&dir, 3, "rocksdb", 1_000_000);
    dir.write("job.toml", dir.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, into));
    dir.succeeds(&["--from-savepoint", &location]);
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all), expected());
}

/// The counter in `module` under checkpoints: killed with SIGKILL mid-run,
/// then `--resume`d from its latest checkpoint, the output is exact, one
/// line per record.
fn killed_and_resumed_with(module: &str) {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 10_000);
    dir.write("job.toml", dir.read("job.toml").replace(artifacts::WORD_COUNT_COUNTER, module));
    let mut child = dir.start(&[]);
    dir.wait_for_output("sp");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let ck = std::fs::read_dir(dir.path().join("ck/sp")).unwrap().count();
    assert!(ck > 0, "checkpoints were taken before the kill");
    let before = dir.published().lines().count() as u64;
    assert!(before < RECORDS, "killed mid-run: {before} lines published");
    dir.succeeds(&["--resume"]);
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all), expected());
}

#[test]
fn a_killed_rust_counter_resumes_exactly() {
    killed_and_resumed_with(artifacts::WORD_COUNT_COUNTER);
}

#[test]
fn a_killed_python_counter_resumes_exactly() {
    killed_and_resumed_with(&weir_tests::script_guest("word_count_py_counter"));
}

#[test]
fn a_killed_javascript_counter_resumes_exactly() {
    killed_and_resumed_with(&weir_tests::script_guest("word_count_js_counter"));
}

#[test]
fn a_killed_c_counter_resumes_exactly() {
    killed_and_resumed_with(&weir_tests::script_guest("word_count_c_counter"));
}

/// Clicks in the sessions job: 100 000 generated clicks over 50 users, one
/// per ms of event time, so a 150 ms gap closes thousands of sessions while
/// the job runs.
const SESSION_CLICKS: u64 = 100_000;
const SESSION_GAP_MS: u64 = 150;

/// The sessions job with the sessionizer `module`: checkpoints every 200 ms,
/// a transactional sink, paced to run for a few seconds.
fn write_sessions_job(dir: &JobDir, module: &str, p: u32) {
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "sp"
parallelism = {p}

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "gen"
kind = "generator"
count = {SESSION_CLICKS}
keys = 50
seed = 1
event_time_step = "1ms"
records_per_second = 25000

[[operators]]
uid = "sessions"
module = "{module}"
input = "gen"
partition = "key"
params = {{ gap_ms = {SESSION_GAP_MS} }}

[[sinks]]
id = "out"
kind = "transactional-file"
input = "sessions"
dir = "out"
"#
        ),
    );
}

fn sorted_published(dir: &JobDir) -> Vec<String> {
    let mut got: Vec<String> = dir.published().lines().map(str::to_string).collect();
    got.sort();
    got
}

#[test]
fn a_killed_python_sessionizer_resumes_with_exactly_the_expected_sessions() {
    // Open sessions (map state) and their event-time timers come back from
    // the checkpoint: no session lost, split or repeated.
    let dir = JobDir::new();
    write_sessions_job(&dir, &weir_tests::script_guest("session_windows_py_sessionizer"), 2);
    let mut child = dir.start(&[]);
    dir.wait_for_output("sp");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = dir.published().lines().count();
    let expected = expected_sessions_with_gap(SESSION_CLICKS, SESSION_GAP_MS);
    assert!(expected.len() > 1000, "many sessions: {}", expected.len());
    assert!(before < expected.len(), "killed mid-run: {before} sessions published");
    dir.succeeds(&["--resume"]);
    assert_eq!(sorted_published(&dir), expected);
}

#[test]
fn a_sessionizer_savepoint_restores_from_rust_into_python_and_back() {
    // The open sessions, `map<i64, (i64, u64)>`, and the timers written by
    // one language's sessionizer, finished by the other's: exact sessions.
    let rust = artifacts::SESSION_WINDOWS.to_string();
    let python = weir_tests::script_guest("session_windows_py_sessionizer");
    for (first, second) in [(&rust, &python), (&python, &rust)] {
        let dir = JobDir::new();
        write_sessions_job(&dir, first, 2);
        let child = dir.start(&[]);
        dir.wait_for_output("sp");
        let out = dir.host(&["savepoint", "sp", "--stop"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let location = text(&out.stdout).trim().to_string();
        assert!(dir.finish(child).0);
        let before = dir.published().lines().count();
        let expected = expected_sessions_with_gap(SESSION_CLICKS, SESSION_GAP_MS);
        assert!(before < expected.len(), "stopped mid-run: {before} sessions published");
        write_sessions_job(&dir, second, 3);
        dir.succeeds(&["--from-savepoint", &location]);
        assert_eq!(sorted_published(&dir), expected, "{first} into {second}");
    }
}

/// A job stopped with a savepoint on incremental RocksDB at parallelism 2,
/// then started from it on the hashmap backend at parallelism 3. Such a run
/// checkpoints at once, so that `--resume` never goes back past the
/// savepoint; here it dies as that checkpoint commits (its `_metadata`
/// written, nothing told). `--resume` restores that checkpoint and every
/// count is exact, one line per record: the savepoint's output is neither
/// published twice nor lost.
#[test]
fn a_run_from_a_savepoint_that_dies_at_its_first_checkpoint_resumes_exactly() {
    let dir = JobDir::new();
    write_job(&dir, 2, "rocksdb-incremental", 5_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    wait_for_checkpoint_after(&dir, 1);
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let at_savepoint = dir.published().lines().count() as u64;
    assert!(at_savepoint > 0 && at_savepoint < RECORDS, "stopped part-way: {at_savepoint} lines");

    write_job(&dir, 3, "hashmap", 5_000);
    let out = host_command(dir.path(), &["run", "job.toml", "--from-savepoint", &location])
        .env("WEIR_CRASH_AT", "checkpoint.metadata-written")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "the run was to die at its first checkpoint:\n{err}");
    assert!(err.contains(&format!("restoring checkpoint={location}")), "{err}");
    assert_eq!(dir.published().lines().count() as u64, at_savepoint, "nothing published since the savepoint");

    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains("restoring checkpoint="), "{err}");
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record, none lost or repeated");
    assert_eq!(final_counts(&all), expected());
}
