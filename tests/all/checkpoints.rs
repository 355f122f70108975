//! Checkpoints end to end: exactly-once output through SIGKILL crash loops
//! on file:// and on a real S3-compatible server, restarts after a guest
//! trap, fallback past damaged checkpoints, an S3 outage mid-run, and what
//! at-least-once mode gives up against exactly-once across a restart.
//!
//! The job is word count with the transactional file sink: the counter
//! emits `word n` on every update, so the committed output is exactly-once
//! only if every word's lines are exactly 1, 2, ..., n, with n its count in
//! the input.

use crate::support::{JobDir, final_counts};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{S3_BUCKET, S3Server, artifacts, host_binary, host_command};

/// Deterministic words: `lines` lines of three words from a vocabulary of
/// 40, plus `poison` once at line `poison_at`, if given.
fn input(lines: usize, poison_at: Option<usize>) -> (String, BTreeMap<String, u64>) {
    let mut text = String::new();
    let mut counts = BTreeMap::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..lines {
        let mut words = Vec::new();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            words.push(format!("w{}", x % 40));
        }
        if poison_at == Some(i) {
            words.push("poison".into());
        }
        for w in &words {
            *counts.entry(w.clone()).or_insert(0) += 1;
        }
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    (text, counts)
}

pub struct Job {
    /// `[checkpointing]` and `[state.checkpoints]` lines.
    pub checkpointing: String,
    /// Records per second the source reads.
    pub rate: u32,
    /// A `misbehave` operator between tokenizer and counter, trapping on
    /// `poison` on the first run only.
    pub trap_once: bool,
    /// The plain `file` sink (`out.txt`) instead of `transactional-file`.
    pub plain_sink: bool,
    /// The generator (count, keys) instead of the file source.
    pub generator: Option<(u64, u64)>,
    /// `state.backend`.
    pub backend: &'static str,
}

impl Job {
    pub fn new(checkpointing: String, rate: u32) -> Self {
        Job { checkpointing, rate, trap_once: false, plain_sink: false, generator: None, backend: "hashmap" }
    }
}

pub fn write_job(dir: &JobDir, job: &Job, lines: usize, poison_at: Option<usize>) -> BTreeMap<String, u64> {
    let (source, counts) = match job.generator {
        None => {
            let (text, counts) = input(lines, poison_at);
            dir.write("input.txt", text);
            ("kind = \"file\"\npath = \"input.txt\"\nformat = \"lines\"".to_string(), counts)
        }
        Some((count, keys)) => {
            let mut counts = BTreeMap::new();
            for i in 0..count {
                *counts.entry(weir_host::connectors::generator::key_of(1, i, keys).to_string()).or_insert(0) += 1;
            }
            (format!("kind = \"generator\"\ncount = {count}\nkeys = {keys}\nseed = 1"), counts)
        }
    };
    let sink = if job.plain_sink {
        "kind = \"file\"\npath = \"out.txt\""
    } else {
        "kind = \"transactional-file\"\ndir = \"out\""
    };
    let (counter_input, extra) = if job.trap_once {
        (
            "flaky",
            format!(
                r#"
[[operators]]
uid = "flaky"
module = "{}"
input = "tokenizer"
partition = "forward"
params = {{ mode = "trap-once", on = "poison" }}
"#,
                artifacts::MISBEHAVE
            ),
        )
    } else {
        ("tokenizer", String::new())
    };
    dir.write(
        "job.toml",
        format!(
            r#"
name = "eo"
parallelism = 2
{backend}

{checkpointing}

[[sources]]
id = "lines"
{source}
records_per_second = {rate}

[[operators]]
uid = "tokenizer"
module = "{tokenizer}"
input = "lines"
partition = "rebalance"
{extra}
[[operators]]
uid = "counter"
module = "{counter}"
input = "{counter_input}"
partition = "key"

[[sinks]]
id = "out"
input = "counter"
{sink}
"#,
            checkpointing = job.checkpointing,
            backend = match job.backend {
                "rocksdb-incremental" =>
                    "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true".to_string(),
                b => format!("state.backend = \"{b}\""),
            },
            rate = job.rate,
            tokenizer = artifacts::WORD_COUNT_TOKENIZER,
            counter = artifacts::WORD_COUNT_COUNTER,
        ),
    );
    counts
}

/// The published output, part files in name order; asserts nothing
/// unpublished is left.
pub fn committed(dir: &Path) -> String {
    let mut names: Vec<String> =
        std::fs::read_dir(dir.join("out")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let stray: Vec<_> = names.iter().filter(|n| !n.starts_with("part-")).collect();
    assert!(stray.is_empty(), "unpublished files left after the job finished: {stray:?}");
    names.iter().map(|n| std::fs::read_to_string(dir.join("out").join(n)).unwrap()).collect()
}

pub fn spawn(dir: &JobDir, args: &[&str], env: &[(&'static str, String)]) -> Child {
    let mut all = vec!["run", "job.toml"];
    all.extend_from_slice(args);
    host_command(dir.path(), &all)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start host")
}

/// Waits for `child` up to `limit`; `Some(stderr)` if it exited, asserting
/// success.
fn wait_for(child: &mut Child, limit: Duration) -> Option<String> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            assert!(status.success(), "the job failed:\n{err}");
            return Some(err);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// What a crash loop did: its seed, the kills, and each run's log.
pub struct CrashLoop {
    pub seed: u64,
    pub kills: u32,
    pub logs: Vec<String>,
}

impl CrashLoop {
    /// Asserts that the loop proved recovery: at least `min_kills` kills,
    /// every resumed run that got as far as choosing where to start says
    /// where, and at least one restored a checkpoint.
    pub fn assert_recovered(&self, min_kills: u32) {
        let seed = self.seed;
        assert!(
            self.kills >= min_kills,
            "only {} kills: the job ran too fast to test recovery (WEIR_TEST_SEED={seed})",
            self.kills
        );
        let mut restored = Vec::new();
        for (run, log) in self.logs.iter().enumerate().skip(1) {
            if let Some(at) = log.find("INFO restoring checkpoint=") {
                let location = log[at..].split_whitespace().nth(2).unwrap_or("");
                let id: u64 = location.rsplit_once("/chk-").and_then(|(_, id)| id.parse().ok()).unwrap_or(0);
                restored.push((run, id));
            } else if log.contains("job started") {
                // It got past choosing: it must have said it had nothing.
                assert!(
                    log.contains("--resume: no checkpoint yet"),
                    "resumed run {run} started without naming a checkpoint (WEIR_TEST_SEED={seed}):\n{log}"
                );
            }
        }
        assert!(
            restored.iter().any(|(_, id)| *id > 0),
            "no resumed run restored a checkpoint (WEIR_TEST_SEED={seed}): {restored:?}"
        );
    }
}

/// Runs the job, killing it with SIGKILL at pseudo-random points and
/// resuming it each time, until it finishes on its own.
pub fn crash_loop(dir: &JobDir, env: &[(&'static str, String)], seed: u64) -> CrashLoop {
    let mut x = seed | 1;
    let mut logs = Vec::new();
    // Every round but the last ends in a kill: the round number counts them.
    for kills in 0..40 {
        let args: &[&str] = if kills == 0 { &[] } else { &["--resume"] };
        let mut child = spawn(dir, args, env);
        if kills >= 6 {
            // The rest of the input, on a 2-core machine that runs the rest
            // of the suite beside it: a margin, not a measurement.
            let log = wait_for(&mut child, Duration::from_secs(300)).expect("the last run finishes");
            dir.write(&format!("run-{kills}.log"), &log);
            logs.push(log);
            return CrashLoop { seed, kills, logs };
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut after = Duration::from_millis(250 + x % 700);
        // On a loaded machine a run may be killed before its first
        // checkpoint completes, again and again; then no run would test a
        // restore. Until one has completed, each run lives longer.
        if kills >= 2 && !logs.iter().any(|l: &String| l.contains("checkpoint complete")) {
            after *= 1 + kills;
        }
        if let Some(log) = wait_for(&mut child, after) {
            dir.write(&format!("run-{kills}.log"), &log);
            logs.push(log);
            return CrashLoop { seed, kills, logs };
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut log = String::new();
        use std::io::Read;
        child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
        // Each run's log stays beside the job, for a failed test's kept
        // directory.
        dir.write(&format!("run-{kills}.log"), &log);
        logs.push(log);
    }
    panic!("the job never finished (WEIR_TEST_SEED={seed})");
}

/// The kill schedule's seed: `WEIR_TEST_SEED` to replay a failing run,
/// else the clock.
pub fn seed() -> u64 {
    let s = std::env::var("WEIR_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("crash loop seed {s} (replay with WEIR_TEST_SEED={s})");
    s
}

pub fn checkpointing(dir: &str, extra: &str) -> String {
    format!("[checkpointing]\ninterval = \"100ms\"\n{extra}\n\n[state.checkpoints]\ndir = \"{dir}\"\n")
}

/// The crash loop on file:// storage, on `backend`.
fn crash_loop_on_file_storage(backend: &'static str) {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let mut job = Job::new(checkpointing(&ck, ""), 3000);
    job.backend = backend;
    let expected = write_job(&dir, &job, 9000, None);
    let run = crash_loop(&dir, &[], seed());
    run.assert_recovered(3);
    assert_eq!(final_counts(&committed(dir.path())), expected, "WEIR_TEST_SEED={}", run.seed);
    // retained = 1: the last run's final checkpoint and the one it resumed
    // from, whatever the kills before left.
    let kept = nothing_left_behind(&dir);
    assert!(kept.len() <= 2, "checkpoints {kept:?} kept (WEIR_TEST_SEED={})", run.seed);
}

/// What the job's checkpoint directory (`ck/eo`) holds after a run that
/// ended: only complete checkpoints (`chk-<n>/` with `_metadata`) and
/// `shared/` files some `_metadata` names (found as text, not read by the
/// host's code), no half-written file (object_store's `<name>#<n>`); and
/// `_restored-from` when a run started from a savepoint or checkpoint.
/// Returns the checkpoints' ids, in order.
pub fn nothing_left_behind(dir: &JobDir) -> Vec<u64> {
    let root = dir.path().join("ck/eo");
    let mut ids = Vec::new();
    let mut named = String::new();
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let relative = path.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(relative);
            }
        }
    }
    for f in &files {
        assert!(!f.contains('#'), "{f}: a half-written file left");
        if let Some(id) = f.strip_suffix("/_metadata").and_then(|d| d.strip_prefix("chk-")) {
            ids.push(id.parse::<u64>().unwrap());
            named.push_str(&std::fs::read_to_string(root.join(f)).unwrap());
        }
    }
    for f in &files {
        match f.split_once('/') {
            Some(("shared", _)) => assert!(named.contains(&format!("\"{f}\"")), "{f}: no checkpoint uses it"),
            Some((chk, _)) if chk.starts_with("chk-") => {
                assert!(root.join(chk).join("_metadata").is_file(), "{f}: in a checkpoint never completed")
            }
            // What the last run started from, for --resume.
            None if f == "_restored-from" => {}
            _ => panic!("{f}: not a checkpoint's file"),
        }
    }
    ids.sort();
    ids
}

#[test]
fn sigkill_crash_loop_on_file_storage_gives_exactly_once_output() {
    crash_loop_on_file_storage("hashmap");
}

#[test]
fn sigkill_crash_loop_on_file_storage_gives_exactly_once_output_on_rocksdb() {
    crash_loop_on_file_storage("rocksdb");
}

#[test]
fn sigkill_crash_loop_on_file_storage_gives_exactly_once_output_on_incremental_rocksdb() {
    crash_loop_on_file_storage("rocksdb-incremental");
}

/// Incremental RocksDB, every run killed as soon as it logs its first
/// completed checkpoint, so that each run restores the previous run's first
/// checkpoint and stores its own first one. Each of those checkpoints holds
/// the values written since the last as a layer file, and layer files are
/// numbered anew in each process: a restored layer's name comes back in the
/// next run with newer values (and, now and then, the same size), which
/// must be stored, not taken for the restored file.
#[test]
fn runs_killed_after_their_first_checkpoint_resume_exactly_on_incremental_rocksdb() {
    use std::io::{BufRead, BufReader};
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    // 6 s of input: on a loaded machine a run takes up to a second or so
    // to its first checkpoint.
    let mut job = Job::new(checkpointing(&ck, ""), 1500);
    job.backend = "rocksdb-incremental";
    let expected = write_job(&dir, &job, 9000, None);
    let mut chained = 0;
    for run in 0..6 {
        let args: &[&str] = if run == 0 { &[] } else { &["--resume"] };
        let mut child = spawn(&dir, args, &[]);
        let mut log = String::new();
        for line in BufReader::new(child.stderr.take().unwrap()).lines() {
            let line = line.unwrap();
            log.push_str(&line);
            log.push('\n');
            if line.contains("checkpoint complete") {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
        child.wait().unwrap();
        dir.write(&format!("run-{run}.log"), &log);
        if log.contains("final checkpoint complete") {
            break; // the input ran out: no more runs to chain
        }
        assert!(log.contains("checkpoint complete"), "run {run} ended before its first checkpoint:\n{log}");
        if run > 0 {
            assert!(log.contains("restoring checkpoint="), "run {run} restored nothing:\n{log}");
            chained += 1;
        }
    }
    assert!(chained >= 3, "only {chained} runs restored a run's first checkpoint before the input ran out");
    dir.succeeds(&["--resume"]);
    assert_eq!(final_counts(&committed(dir.path())), expected);
}

#[test]
fn sigkill_crash_loop_with_the_generator_and_the_plain_file_sink_ends_exactly_once() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let mut job = Job::new(checkpointing(&ck, ""), 10_000);
    job.generator = Some((30_000, 60));
    job.plain_sink = true;
    let expected = write_job(&dir, &job, 0, None);
    let run = crash_loop(&dir, &[], seed());
    run.assert_recovered(3);
    // The generator resumed at its index, the file was cut back to its
    // checkpointed length each time: every count exactly once.
    assert_eq!(final_counts(&dir.read("out.txt")), expected, "WEIR_TEST_SEED={}", run.seed);
}

#[test]
fn retention_keeps_the_runs_latest_and_never_deletes_a_checkpoint_it_restored_from() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let job = Job::new(checkpointing(&ck, "retained = 1"), 3000);
    let expected = write_job(&dir, &job, 9000, None);
    // Each run dies just after its third checkpoint's `_metadata` is
    // written, before retention deletes the one before: both are left.
    let crash = [("WEIR_CRASH_AT", "checkpoint.metadata-written:3".to_string())];
    let died = |args: &[&str]| {
        let out = spawn(&dir, args, &crash).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success() && err.contains("crashing at checkpoint.metadata-written"), "{err}");
    };
    died(&[]);
    let first = completed_ids(&dir);
    assert_eq!(first.len(), 2, "retained = 1, and the one the crash kept from retention: {first:?}");
    // The resumed run keeps the checkpoint it restored from (no-claim) and
    // deletes, as its own checkpoints complete, the one the crash left.
    died(&["--resume"]);
    let second = completed_ids(&dir);
    assert_eq!(second.len(), 3, "{first:?} then {second:?}");
    assert_eq!(second[0], first[1], "the checkpoint restored from is kept (no-claim): {second:?}");
    assert!(second[1] > first[1], "ids continue after the restored one, the older one is gone: {second:?}");
    // An explicit older checkpoint: later published output is withdrawn and
    // written again, so the result is still exactly-once.
    let uri = format!("{ck}/eo/chk-{}", second[0]);
    let err = dir.succeeds(&["--from-checkpoint", &uri]);
    assert!(err.contains(&format!("restored from {uri}")), "{err}");
    assert_eq!(final_counts(&committed(dir.path())), expected);
    // Checkpoints newer than an explicit one are not this run's to delete.
    let last = nothing_left_behind(&dir);
    assert!(second.iter().all(|id| last.contains(id)), "{second:?} then {last:?}");
}

#[test]
fn a_resumed_job_takes_its_first_checkpoint_an_interval_after_it_started() {
    // Its state is stored already: a checkpoint before it read anything
    // would store it again and hold up the one that publishes its output.
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let interval = Duration::from_millis(1500);
    let job =
        Job::new(format!("[checkpointing]\ninterval = \"1500ms\"\n\n[state.checkpoints]\ndir = \"{ck}\"\n"), 3000);
    write_job(&dir, &job, 30_000, None);
    let until_new = |child: &mut Child, known: usize, started: Instant| loop {
        let ids = completed_ids(&dir);
        if ids.len() > known {
            return (ids, started.elapsed());
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no checkpoint within 60 s: {ids:?}");
        assert!(child.try_wait().unwrap().is_none(), "the job ended before a checkpoint");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut first = spawn(&dir, &[], &[]);
    until_new(&mut first, 0, Instant::now());
    kill_after(first, 0);
    let ids = completed_ids(&dir);
    let started = Instant::now();
    let mut resumed = spawn(&dir, &["--resume"], &[]);
    let (after, took) = until_new(&mut resumed, ids.len(), started);
    kill_after(resumed, 0);
    assert!(after.last() > ids.last(), "{ids:?} then {after:?}");
    assert!(took >= interval, "the resumed run checkpointed {took:?} after it started, within its interval");
}

/// The mode test's job: the word-count lines (with `poison` at line
/// `POISON`) paced at 1000 lines/s through the tokenizer and a `misbehave`
/// operator that traps on `poison` on the first run only, and a generator
/// paced at one record per second, both into the counter (two inputs), into
/// the transactional file sink. A paced source handles a checkpoint trigger
/// with its next record, so the generator's barrier reaches the counter up
/// to a second after the lines' one; `min_pause` puts each trigger half a
/// second after the last checkpoint ended, i.e. half a second before the
/// generator's next record. In at-least-once mode the counter keeps reading
/// lines meanwhile, so each checkpoint's counts include about 500 lines its
/// source position does not: the restart after the trap counts them again.
/// Exactly-once mode holds those lines back until the barriers align.
fn write_mode_job(dir: &JobDir, mode: &str) -> BTreeMap<String, u64> {
    const LINES: usize = 5000;
    const POISON: usize = 3500;
    const TICKS: u64 = 10;
    let (text, mut counts) = input(LINES, Some(POISON));
    dir.write("input.txt", text);
    for i in 0..TICKS {
        *counts.entry(weir_host::connectors::generator::key_of(1, i, TICKS).to_string()).or_insert(0) += 1;
    }
    dir.write(
        "job.toml",
        format!(
            r#"name = "alo"
parallelism = 1

[checkpointing]
interval = "100ms"
min_pause = "500ms"
mode = "{mode}"

[state.checkpoints]
dir = "file://{root}/ck"

[restart-strategy]
type = "fixed-delay"
attempts = 1
delay = "100ms"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"
format = "lines"
records_per_second = 1000

[[sources]]
id = "ticks"
kind = "generator"
count = {TICKS}
keys = {TICKS}
seed = 1
records_per_second = 1

[[operators]]
uid = "tokenizer"
module = "{tokenizer}"
input = "lines"
partition = "forward"

[[operators]]
uid = "flaky"
module = "{misbehave}"
input = "tokenizer"
partition = "forward"
params = {{ mode = "trap-once", on = "poison" }}

[[operators]]
uid = "counter"
module = "{counter}"
inputs = [
    {{ from = "flaky", partition = "key" }},
    {{ from = "ticks", partition = "key" }},
]

[[sinks]]
id = "out"
kind = "transactional-file"
input = "counter"
dir = "out"
"#,
            root = dir.path().display(),
            tokenizer = artifacts::WORD_COUNT_TOKENIZER,
            misbehave = artifacts::MISBEHAVE,
            counter = artifacts::WORD_COUNT_COUNTER,
        ),
    );
    counts
}

/// Runs the mode job; returns each key's final count (asserting its lines
/// are 1, 2, ..., n: no line of the committed output lost or repeated).
fn run_mode_job(dir: &JobDir) -> BTreeMap<String, u64> {
    let err = dir.succeeds(&[]);
    assert!(err.contains("misbehave: trap on \"poison\"") && err.contains("restart 1 of 1"), "{err}");
    let ck = format!("file://{}/ck/alo/chk-", dir.path().display());
    assert!(err.contains(&format!("from {ck}")), "restarted from a checkpoint, not the beginning:\n{err}");
    final_counts(&committed(dir.path()))
}

#[test]
fn at_least_once_may_count_twice_after_a_restart_but_loses_nothing_where_exactly_once_is_exact() {
    let (alo, eo) = (JobDir::new(), JobDir::new());
    let expected = write_mode_job(&alo, "at-least-once");
    write_mode_job(&eo, "exactly-once");
    // The two runs side by side: both are paced, mostly waiting.
    let (alo_counts, eo_counts) = std::thread::scope(|s| {
        let a = s.spawn(|| run_mode_job(&alo));
        let e = s.spawn(|| run_mode_job(&eo));
        (a.join().unwrap(), e.join().unwrap())
    });
    assert_eq!(eo_counts, expected, "exactly-once: every record counted once across the restart");
    // At least once: every key is there and no count fell short (its
    // lines 1..=expected were all published), ...
    assert_eq!(alo_counts.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    let short: Vec<_> = expected.iter().filter(|(k, n)| alo_counts[*k] < **n).collect();
    assert!(short.is_empty(), "at-least-once lost records of {short:?}");
    // ... and records between the barriers were counted twice.
    let (got, want) = (alo_counts.values().sum::<u64>(), expected.values().sum::<u64>());
    eprintln!("at-least-once counted {got} records of {want}");
    assert!(got > want + 100, "at-least-once counted {got} records of {want}: no record counted twice");
}

#[test]
fn sigkill_crash_loop_on_s3_storage_gives_exactly_once_output() {
    crash_loop_on_s3_storage("hashmap");
}

#[test]
fn sigkill_crash_loop_on_s3_storage_gives_exactly_once_output_on_incremental_rocksdb() {
    crash_loop_on_s3_storage("rocksdb-incremental");
}

/// The crash loop on a real S3-compatible server, on `backend`.
fn crash_loop_on_s3_storage(backend: &'static str) {
    let s3 = S3Server::start();
    let dir = JobDir::new();
    let ck = format!("s3://{S3_BUCKET}/crash-loop-{backend}");
    let s3_settings = format!("\n[state.checkpoints.s3]\nendpoint = \"{}\"\n", s3.endpoint());
    let mut job = Job::new(checkpointing(&ck, "") + &s3_settings, 3000);
    job.backend = backend;
    let expected = write_job(&dir, &job, 9000, None);
    let run = crash_loop(&dir, &s3.env(), seed());
    run.assert_recovered(3);
    assert_eq!(final_counts(&committed(dir.path())), expected, "WEIR_TEST_SEED={}", run.seed);
    // The checkpoints are in the bucket, listed by the CLI.
    let out = Command::new(host_binary())
        .args(["checkpoints", "job.toml"])
        .current_dir(dir.path())
        .envs(s3.env())
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(listing.contains(&format!("s3://{S3_BUCKET}/crash-loop-{backend}/eo")), "{listing}");
    assert!(listing.contains("complete (job finished)"), "{listing}");
}

#[test]
fn a_guest_trap_restarts_the_job_from_its_latest_checkpoint() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let mut job = Job::new(checkpointing(&ck, ""), 4000);
    job.trap_once = true;
    let expected = write_job(&dir, &job, 6000, Some(4000));
    let err = dir.succeeds(&[]);
    assert!(err.contains("misbehave: trap on \"poison\""), "the trap is reported:\n{err}");
    assert!(err.contains("restart 1 of 3"), "{err}");
    assert!(err.contains(&format!("from {ck}/eo/chk-")), "restored from a checkpoint, not the beginning:\n{err}");
    assert!(err.contains("restarted 1 time(s)"), "{err}");
    assert_eq!(final_counts(&committed(dir.path())), expected);
}

#[test]
fn a_trap_without_restarts_left_fails_the_job() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let mut job = Job::new(checkpointing(&ck, ""), 100_000);
    job.trap_once = true;
    job.checkpointing.push_str("\n[restart-strategy]\ntype = \"fixed-delay\"\nattempts = 0\n");
    write_job(&dir, &job, 200, Some(100));
    let err = dir.fails();
    assert!(err.contains("misbehave: trap on \"poison\"") && err.contains("gave up after 0 restart(s)"), "{err}");
}

fn files_under(p: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push((e.path().display().to_string(), e.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

fn flip_byte(path: &Path, from_end: usize) {
    let mut b = std::fs::read(path).unwrap();
    let at = b.len() - from_end;
    b[at] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

/// Runs the job for about a second, then kills it: several checkpoints.
fn killed_run(dir: &JobDir) -> Vec<u64> {
    kill_after(spawn(dir, &[], &[]), 1200);
    let ids = completed_ids(dir);
    assert!(ids.len() >= 3, "too few checkpoints to test fallback: {ids:?}");
    ids
}

/// SIGKILLs `child` after `ms` milliseconds.
fn kill_after(mut child: Child, ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Ids of the job's checkpoints with a `_metadata`, in order (none before
/// the job's checkpoint directory exists).
pub fn completed_ids(dir: &JobDir) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir.path().join("ck/eo")) else { return Vec::new() };
    let mut ids: Vec<u64> = entries
        .filter_map(|e| e.unwrap().file_name().into_string().unwrap().strip_prefix("chk-")?.parse().ok())
        .filter(|id| dir.path().join(format!("ck/eo/chk-{id}/_metadata")).is_file())
        .collect();
    ids.sort();
    ids
}

#[test]
fn resume_falls_back_past_a_corrupt_metadata_and_a_corrupt_state_file() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    // Every state handle a file of its own, ten checkpoints kept.
    let mut job = Job::new(checkpointing(&ck, "retained = 10"), 3000);
    job.checkpointing.push_str("inline_threshold = \"0B\"\n");
    let expected = write_job(&dir, &job, 6000, None);
    let ids = killed_run(&dir);
    let (last, before) = (ids[ids.len() - 1], ids[ids.len() - 2]);
    flip_byte(&dir.path().join(format!("ck/eo/chk-{last}/_metadata")), 20);
    let snap = dir.path().join(format!("ck/eo/chk-{before}/counter-0.snap"));
    flip_byte(&snap, 3);

    let listing =
        Command::new(host_binary()).args(["checkpoints", "job.toml"]).current_dir(dir.path()).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
    assert!(listing.contains("unusable: _metadata is corrupt (checksum mismatch)"), "{listing}");

    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains(&format!("checkpoint={last}")) && err.contains("checksum mismatch"), "{err}");
    assert!(
        err.contains(&format!("checkpoint={before}"))
            && err.contains("counter-0.snap: state of operator 'counter' subtask 0")
            && err.contains("is corrupt (checksum mismatch)"),
        "{err}"
    );
    assert!(err.contains(&format!("chk-{}", ids[ids.len() - 3])), "restored from the third latest:\n{err}");
    assert_eq!(final_counts(&committed(dir.path())), expected);
}

#[test]
fn when_every_checkpoint_is_corrupt_resume_fails_and_deletes_nothing() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let job = Job::new(checkpointing(&ck, "retained = 10"), 3000);
    write_job(&dir, &job, 6000, None);
    let ids = killed_run(&dir);
    for id in &ids {
        flip_byte(&dir.path().join(format!("ck/eo/chk-{id}/_metadata")), 20);
    }
    let before = files_under(&dir.path().join("ck"));
    let err = dir.run(&["--resume"]);
    assert!(!err.0, "resume must fail:\n{}", err.1);
    assert!(err.1.contains("no usable checkpoint in") && err.1.contains("nothing was deleted"), "{}", err.1);
    assert_eq!(files_under(&dir.path().join("ck")), before, "nothing was deleted or changed");
    // A fresh start would collide with them: refused, with what to do.
    let fresh = dir.fails();
    assert!(fresh.contains("already has checkpoints") && fresh.contains("--resume"), "{fresh}");
}

#[test]
fn an_s3_outage_fails_checkpoints_but_not_the_job() {
    let mut s3 = S3Server::start();
    let dir = JobDir::new();
    let ck = format!("s3://{S3_BUCKET}/outage");
    let job = Job::new(
        checkpointing(&ck, "tolerable_failures = 1000")
            + &format!("\n[state.checkpoints.s3]\nendpoint = \"{}\"\n", s3.endpoint()),
        2500,
    );
    // Eight seconds of input: the store is back (a restarted moto takes
    // seconds on a loaded machine) long before the job's last checkpoint,
    // which must complete: the restarted moto lost every checkpoint before
    // the outage, so a job that restores from one fails.
    let expected = write_job(&dir, &job, 20_000, None);
    let mut child = spawn(&dir, &[], &s3.env());
    std::thread::sleep(Duration::from_millis(800));
    s3.stop();
    std::thread::sleep(Duration::from_millis(1000));
    s3.resume();
    assert!(child.try_wait().unwrap().is_none(), "the input ended before the store was back: make it longer");
    let err = wait_for(&mut child, Duration::from_secs(120)).expect("the job finishes");
    assert!(err.contains("checkpoint failed"), "checkpoints failed during the outage:\n{err}");
    let summary =
        err.lines().find_map(|l| l.strip_prefix("  checkpoints: ")).unwrap_or_else(|| panic!("no summary:\n{err}"));
    let completed: u32 = summary.split(' ').next().unwrap().parse().unwrap();
    assert!(completed >= 3, "checkpoints completed before and after the outage: {summary}");
    assert!(!summary.contains(" 0 failed"), "{summary}");
    assert_eq!(final_counts(&committed(dir.path())), expected);
}

#[test]
fn without_a_directory_checkpoints_live_in_memory_with_a_size_limit() {
    let dir = JobDir::new();
    let settings = "[checkpointing]\ninterval = \"50ms\"\n\n[state.checkpoints]\nmemory_max_state_size = \"100B\"\n";
    let mut job = Job::new(settings.into(), 20_000);
    job.checkpointing.push_str("\n[restart-strategy]\ntype = \"none\"\n");
    write_job(&dir, &job, 4000, None);
    let err = dir.fails();
    assert!(err.contains("over the 100-byte limit of in-memory checkpoint storage"), "{err}");
    assert!(err.contains("checkpoints failed in a row (tolerable_failures = 0)"), "{err}");
}

#[test]
fn checkpoint_settings_are_checked() {
    let dir = JobDir::new();
    let cases = [
        ("[checkpointing]\ninterval = \"1s\"\nmode = \"sometimes\"\n", "execution.checkpointing.mode = \"sometimes\""),
        ("[checkpointing]\nretained = 2\n", "interval"),
        ("[checkpointing]\ninterval = \"1s\"\n[state.checkpoints]\ndir = \"/var/ck\"\n", "must start with file://"),
        ("[restart-strategy]\ntype = \"always\"\n", "restart-strategy.type = \"always\""),
    ];
    for (settings, expected) in cases {
        let job = Job::new(settings.into(), 1000);
        write_job(&dir, &job, 10, None);
        let err = dir.fails();
        assert!(err.contains(expected) && err.contains("job.toml"), "{settings}: {err}");
    }
    let job = Job::new(String::new(), 1000);
    write_job(&dir, &job, 10, None);
    let (ok, err) = dir.run(&["--resume"]);
    assert!(!ok && err.contains("--resume needs state.checkpoints.dir"), "{err}");
}

#[test]
fn on_s3_metadata_is_create_only_so_two_hosts_cannot_both_commit() {
    use weir_host::checkpoint::storage::{CheckpointStorage, StorageError};
    use weir_host::config::{S3Settings, StorageSettings};
    let s3 = S3Server::start();
    let settings = StorageSettings {
        dir: Some(format!("s3://{S3_BUCKET}/create-only")),
        inline_threshold: 0,
        memory_max_state_size: 0,
        fsync: true,
        s3: S3Settings {
            endpoint: Some(s3.endpoint()),
            region: Some("us-east-1".into()),
            access_key_id: Some("test".into()),
            secret_access_key: Some("test".into()),
            allow_http: true,
        },
        fenced_by: None,
        limits: weir_host::config::settings::ReadLimits::default(),
    };
    let first = CheckpointStorage::open(&settings, "job").unwrap();
    let second = CheckpointStorage::open(&settings, "job").unwrap();
    first.write_metadata(1, b"first host".to_vec(), None).unwrap();
    let err = second.write_metadata(1, b"second host".to_vec(), None).unwrap_err();
    assert!(matches!(err, StorageError::AlreadyCommitted { id: 1, .. }), "{err}");
    assert_eq!(first.read_metadata(1).unwrap(), &b"first host"[..]);
    let handle = first.put_state(2, "op#0", "op-0.snap", vec![9u8; 100]).unwrap();
    assert_eq!(second.read_state(&handle).unwrap(), vec![9u8; 100]);
    second.write_metadata(2, b"m".to_vec(), None).unwrap();
    assert_eq!(first.list_checkpoints().unwrap(), vec![1, 2]);
    first.delete_checkpoint(1).unwrap();
    assert_eq!(second.list_checkpoints().unwrap(), vec![2]);

    // Cluster mode's commit log on S3: a member that claimed a partition
    // fences every later commit of the member it took it from.
    let member = |name: &str| {
        let s = StorageSettings { fenced_by: Some(name.into()), ..settings.clone() };
        CheckpointStorage::open(&s, "job-p0").unwrap()
    };
    let old = member("old");
    let claimed = old.claim().unwrap();
    assert_eq!(claimed.checkpoint, None);
    let mut old_log = claimed.position();
    old.write_metadata(1, b"1".to_vec(), Some(&mut old_log)).unwrap();
    let new = member("new");
    let claimed = new.claim().unwrap();
    assert_eq!(claimed.checkpoint, Some(1));
    let err = old.write_metadata(2, b"2".to_vec(), Some(&mut old_log)).unwrap_err();
    assert!(matches!(err, StorageError::Fenced { .. }) && err.to_string().contains("new took the job over"), "{err}");
    assert_eq!(new.list_checkpoints().unwrap(), vec![1], "the refused checkpoint does not stay behind");
    new.write_metadata(3, b"3".to_vec(), Some(&mut claimed.position())).unwrap();
    assert_eq!(member("third").claim().unwrap().checkpoint, Some(3));
}

#[test]
fn incremental_checkpoints_share_files_and_never_point_at_a_missing_one() {
    let dir = JobDir::new();
    let ck = format!("file://{}/ck", dir.path().display());
    let mut job = Job::new(checkpointing(&ck, "retained = 3"), 3000);
    job.backend = "rocksdb-incremental";
    let expected = write_job(&dir, &job, 9000, None);
    kill_after(spawn(&dir, &[], &[]), 1500);
    let (checkpoints, uses) = files_of_incremental_checkpoints(&dir);
    assert!(checkpoints >= 2, "{checkpoints} checkpoints");
    assert!(
        uses.iter().any(|(p, n)| p.starts_with("shared/") && *n > 1),
        "some SST file is used by more than one checkpoint: {uses:?}"
    );
    dir.succeeds(&["--resume"]);
    assert_eq!(final_counts(&committed(dir.path())), expected);
}

/// Asserts that every file a checkpoint under `ck/eo` names exists with
/// its size; returns how many checkpoints there are and how many of them
/// use each file.
pub fn files_of_incremental_checkpoints(dir: &JobDir) -> (u32, BTreeMap<String, u32>) {
    let mut uses: BTreeMap<String, u32> = BTreeMap::new();
    let mut checkpoints = 0;
    for e in std::fs::read_dir(dir.path().join("ck/eo")).unwrap() {
        let meta = e.unwrap().path().join("_metadata");
        let Ok(text) = std::fs::read_to_string(&meta) else { continue };
        checkpoints += 1;
        let json: serde_json::Value = serde_json::from_str(text.split_once('\n').unwrap().1).unwrap();
        for op in json["operators"].as_object().unwrap().values() {
            for h in op["subtasks"].as_array().unwrap() {
                assert_eq!(h["type"], "rocksdb", "{h}");
                for f in h["files"].as_array().unwrap() {
                    let path = f["path"].as_str().unwrap();
                    let on_disk = dir.path().join("ck/eo").join(path);
                    assert!(on_disk.is_file(), "{} names {path}, which is missing", meta.display());
                    assert_eq!(std::fs::metadata(&on_disk).unwrap().len(), f["size"].as_u64().unwrap());
                    *uses.entry(path.to_string()).or_default() += 1;
                }
            }
        }
    }
    (checkpoints, uses)
}
