//! Who may set what (docs/security.md, "Who sets what"), on the real
//! binary: a job file asking past one of the host's ceilings (guest memory,
//! call time, output, state, timers, RocksDB memory, parallelism, tasks)
//! is refused when it is loaded, before any task starts, with an error
//! naming the job file, the key, its value, the ceiling and the host-file
//! key that raises it; a host file raising a ceiling lets the same job run,
//! and one contradicting its own ceilings is named. A sink may write only
//! beneath the job file's directory and the host's `limits.sink_roots`:
//! the `.bashrc` attack (a relative climb, an absolute path, `~`, a
//! symlinked directory, a link at the end of the path) is refused and the
//! victim file is left as it was, byte for byte. A job file may not open
//! the control API (`rest.auth = "none"`, a bind beyond loopback), nor set
//! `[limits]`; a live rescale past the host's ceiling is refused.

use super::live_job::{counts_of_first, write_counter_job};
use super::support::{JobDir, final_counts, text};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use weir_tests::artifacts::{WORD_COUNT_COUNTER, WORD_COUNT_TOKENIZER};
use weir_tests::host_command;

/// The input every word-count job here reads.
const INPUT: &str = "the cat sat on the mat\nthe dog sat on the log\n";

/// How long a refused job may take: loading a job file is milliseconds;
/// a host that starts the job's tasks instead spends many seconds on them.
const REFUSED_WITHIN: Duration = Duration::from_secs(10);

/// INPUT's words counted directly.
fn expected() -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for w in INPUT.split_whitespace() {
        *m.entry(w.to_string()).or_insert(0) += 1;
    }
    m
}

/// Word count over [`INPUT`] with `settings` before the graph and `sink`
/// as the sink's own fields.
fn word_count(dir: &JobDir, settings: &str, sink: &str) {
    dir.write("input.txt", INPUT);
    dir.write(
        "job.toml",
        format!(
            r#"name = "limits"
{settings}

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"

[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"
partition = "rebalance"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "counts"
input = "counter"
{sink}
"#
        ),
    );
}

/// The file sink the jobs use unless a test is about the sink.
const OUT: &str = "kind = \"file\"\npath = \"out/counts.txt\"";

/// `host run job.toml <args>` in `dir` with `env` added; the run must end
/// within `limit` or it is killed and the test fails. Its exit code and
/// stderr.
fn run(dir: &JobDir, args: &[&str], env: &[(&str, &Path)], limit: Duration) -> (Option<i32>, String, Duration) {
    let mut all = vec!["run", "job.toml"];
    all.extend_from_slice(args);
    let mut command = host_command(dir.path(), &all);
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("the run did not end within {limit:?}:\n{}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out.stderr), started.elapsed())
}

/// Runs and asserts a refusal at load: exit 1 within [`REFUSED_WITHIN`],
/// nothing written. Returns stderr.
fn refused(dir: &JobDir, args: &[&str], env: &[(&str, &Path)]) -> String {
    let (code, err, took) = run(dir, args, env, REFUSED_WITHIN);
    assert_eq!(code, Some(1), "the job should have been refused:\n{err}");
    assert!(!dir.path().join("out").exists(), "a refused job wrote output:\n{err}");
    eprintln!("refused in {} ms", took.as_millis());
    err
}

/// Runs and asserts success and the exact counts in `output`.
fn counts_exactly(dir: &JobDir, args: &[&str], output: &Path) {
    let (code, err, _) = run(dir, args, &[], Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(final_counts(&std::fs::read_to_string(output).unwrap()), expected(), "{err}");
}

#[test]
fn a_job_file_asking_past_a_ceiling_is_refused_naming_the_key_the_value_and_the_ceiling() {
    for (settings, says) in [
        (
            "[wasm]\nmemory_limit = \"8GiB\"",
            "wasm.memory_limit = 8.0 GiB is above the host's ceiling limits.wasm.memory_limit = 4.0 GiB",
        ),
        (
            "[wasm]\ncall_timeout = \"1h\"",
            "wasm.call_timeout = 1h is above the host's ceiling limits.wasm.call_timeout = 5m",
        ),
        (
            "[wasm]\nmax_output_bytes = \"1GiB\"",
            "wasm.max_output_bytes = 1.0 GiB is above the host's ceiling limits.wasm.max_output_bytes = 256.0 MiB",
        ),
        (
            "[wasm]\nmax_output_records = 50000000",
            "wasm.max_output_records = 50000000 is above the host's ceiling limits.wasm.max_output_records = 10000000",
        ),
        (
            "[wasm]\nmax_state_bytes = \"64GiB\"",
            "wasm.max_state_bytes = 64.0 GiB is above the host's ceiling limits.wasm.max_state_bytes = 8.0 GiB",
        ),
        (
            "[wasm]\nmax_timers = 100000000",
            "wasm.max_timers = 100000000 is above the host's ceiling limits.wasm.max_timers",
        ),
        (
            "[wasm]\nmax_log_lines = 1000000",
            "wasm.max_log_lines = 1000000 is above the host's ceiling limits.wasm.max_log_lines",
        ),
        (
            "[state.backend]\ntype = \"rocksdb\"\nrocksdb.write_cache = \"64GiB\"",
            "state.backend.rocksdb.write_cache = 64.0 GiB is above the host's ceiling limits.rocksdb.write_cache = 4.0 GiB",
        ),
    ] {
        let dir = JobDir::new();
        word_count(&dir, settings, OUT);
        let err = refused(&dir, &[], &[]);
        assert!(err.contains(&format!("error: job.toml: {says}")), "{settings}: {err}");
        assert!(err.contains("the built-in ceiling; a host settings file"), "{settings}: where to raise it: {err}");
    }
}

#[test]
fn parallelism_8192_is_refused_before_any_task_starts() {
    let dir = JobDir::new();
    word_count(&dir, "max_parallelism = 8192\nparallelism = 8192", OUT);
    let err = refused(&dir, &[], &[]);
    assert!(
        err.contains(
            "job.toml: operator 'tokenizer': parallelism 8192 is above the host's ceiling limits.parallelism = 128"
        ),
        "{err}"
    );
    // The same through the command line.
    word_count(&dir, "max_parallelism = 8192", OUT);
    let err = refused(&dir, &["--parallelism", "8192"], &[]);
    assert!(err.contains("--parallelism 8192 is above the host's ceiling limits.parallelism = 128"), "{err}");
    // Tasks in all, with a ceiling from the host file: 1 source, 2 + 2
    // operator subtasks, 1 sink.
    dir.write("host.toml", "[limits]\ntasks = 5\n");
    word_count(&dir, "parallelism = 2", OUT);
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("the job would run 6 tasks, one thread each (1 source, 4 operator and 1 sink subtasks), above the host's ceiling limits.tasks = 5 (set in host.toml)"),
        "{err}"
    );
}

#[test]
fn a_host_file_raises_its_ceilings_lowers_them_and_must_agree_with_them() {
    let dir = JobDir::new();
    let out = dir.path().join("out/counts.txt");
    // Raised: the job that was refused runs, and counts exactly.
    word_count(&dir, "max_parallelism = 256\nparallelism = 130\n[wasm]\nmemory_limit = \"8GiB\"", OUT);
    dir.write("host.toml", "[limits]\nparallelism = 256\nthreads = 300\n");
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(err.contains("host.toml") && err.contains("unknown field `threads`"), "a misspelt ceiling is named: {err}");
    dir.write("host.toml", "[limits]\nparallelism = 256\n[limits.wasm]\nmemory_limit = \"8GiB\"\n");
    counts_exactly(&dir, &["--config", "host.toml"], &out);
    std::fs::remove_dir_all(dir.path().join("out")).unwrap();
    // Lowered: a job asking between the host's value and its old ceiling
    // hears the host's ceiling and where it was set.
    dir.write("host.toml", "wasm.call_timeout = \"1s\"\n[limits.wasm]\ncall_timeout = \"2s\"\n");
    word_count(&dir, "[wasm]\ncall_timeout = \"3s\"", OUT);
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("job.toml: wasm.call_timeout = 3s is above the host's ceiling limits.wasm.call_timeout = 2s (set in host.toml)"),
        "{err}"
    );
    dir.write("host.toml", "[limits]\nmin_checkpoint_interval = \"1s\"\n");
    word_count(&dir, "[checkpointing]\ninterval = \"100ms\"", OUT);
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("job.toml: [checkpointing] interval = 100ms is below the host's floor limits.min_checkpoint_interval = 1s (set in host.toml)"),
        "{err}"
    );
    // A host file past its own ceiling, or below a built-in default it
    // leaves in force, is named with what to change.
    word_count(&dir, "", OUT);
    dir.write("host.toml", "wasm.memory_limit = \"8GiB\"\n");
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("host.toml: wasm.memory_limit = 8.0 GiB is above limits.wasm.memory_limit = 4.0 GiB")
            && err.contains("set wasm.memory_limit to at most 4.0 GiB, or raise limits.wasm.memory_limit"),
        "{err}"
    );
    dir.write("host.toml", "[limits.wasm]\nmemory_limit = \"128MiB\"\n");
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("host.toml: limits.wasm.memory_limit = 128.0 MiB is below the built-in default wasm.memory_limit = 256.0 MiB"),
        "{err}"
    );
    // A bare job file runs on the built-in defaults.
    counts_exactly(&dir, &[], &out);
}

#[test]
fn a_job_file_cannot_set_limits_nor_read_limits_nor_open_the_control_api() {
    let dir = JobDir::new();
    for (settings, says) in [
        ("[limits]\nparallelism = 8192", "job.toml: [limits]: the ceilings and roots are the host's"),
        ("limits.wasm.memory_limit = \"64GiB\"", "job.toml: [limits]: the ceilings and roots are the host's"),
        (
            "[rest]\nauth = \"none\"",
            "job.toml: rest.auth = \"none\": only the host settings file may open the control API",
        ),
        (
            "[rest]\nbind = \"0.0.0.0:0\"",
            "job.toml: rest.bind = \"0.0.0.0:0\": a job file may bind the control API only to a loopback address",
        ),
        (
            "[state.checkpoints]\nmax_section_size = \"64GiB\"",
            "job.toml: state.checkpoints.max_section_size: it bounds what the host reads from stored checkpoints",
        ),
        (
            "state.checkpoints.max_file_size = \"1TiB\"",
            "job.toml: state.checkpoints.max_file_size: it bounds what the host reads from stored checkpoints",
        ),
        (
            "[rest]\nbind = \"[::]:0\"",
            "rest.bind = \"[::]:0\": a job file may bind the control API only to a loopback address",
        ),
    ] {
        word_count(&dir, settings, OUT);
        let err = refused(&dir, &[], &[]);
        assert!(err.contains(says), "{settings}: {err}");
    }
    // Loopback and the token from a job file, and reads opened by the host
    // file, run.
    let out = dir.path().join("out/counts.txt");
    word_count(&dir, "[rest]\nbind = \"127.0.0.1:0\"\nauth = \"token\"", OUT);
    counts_exactly(&dir, &[], &out);
    std::fs::remove_dir_all(dir.path().join("out")).unwrap();
    dir.write("host.toml", "rest.auth = \"none\"\n");
    word_count(&dir, "", OUT);
    counts_exactly(&dir, &["--config", "host.toml"], &out);
}

/// A home directory beside the job's, with a `.bashrc` to protect.
struct Victim {
    home: tempfile::TempDir,
}

const BASHRC: &[u8] = b"# the victim's own\nexport PATH=/usr/bin:/bin\n";

impl Victim {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(".bashrc"), BASHRC).unwrap();
        Victim { home }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    /// The home holds its `.bashrc`, unchanged, and nothing else.
    fn untouched(&self, what: &str) {
        assert_eq!(std::fs::read(self.path().join(".bashrc")).unwrap(), BASHRC, "{what}: .bashrc changed");
        let names: Vec<_> = std::fs::read_dir(self.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [".bashrc"], "{what}: written into the home directory");
    }
}

#[test]
fn a_sink_cannot_write_a_bashrc_outside_the_job_directory() {
    let victim = Victim::new();
    let home = victim.path();
    let dir = JobDir::new();
    let job_dir = std::fs::canonicalize(dir.path()).unwrap();
    let climb = format!("../{}/.bashrc", home.file_name().unwrap().to_str().unwrap());
    let absolute = home.join(".bashrc").display().to_string();
    std::os::unix::fs::symlink(home, dir.path().join("link")).unwrap();
    for (sink, says) in [
        (format!("kind = \"file\"\npath = \"{climb}\""), "leads to"),
        (format!("kind = \"file\"\npath = \"{absolute}\""), "leads to"),
        ("kind = \"file\"\npath = \"~/.bashrc\"".to_string(), "the host does not expand ~"),
        ("kind = \"file\"\npath = \"link/.bashrc\"".to_string(), "leads to"),
        (
            format!("kind = \"transactional-file\"\ndir = \"../{}\"", home.file_name().unwrap().to_str().unwrap()),
            "leads to",
        ),
        ("kind = \"latency\"\noutput = \"link/.bashrc\"".to_string(), "leads to"),
    ] {
        word_count(&dir, "", &sink);
        let err = refused(&dir, &[], &[("HOME", home)]);
        assert!(err.contains("error: job.toml: sink 'counts': ") && err.contains(says), "{sink}: {err}");
        if says == "leads to" {
            assert!(
                err.contains(&format!(
                    "outside the directories a job may write beneath: {} (the job file's directory, and limits.sink_roots in the host settings file)",
                    job_dir.display()
                )),
                "{sink}: {err}"
            );
        }
        victim.untouched(&sink);
    }
}

#[test]
fn a_link_at_the_end_of_a_sink_path_is_judged_where_it_leads() {
    let victim = Victim::new();
    let dir = JobDir::new();
    // An existing link to the victim, and a dangling one to a file the
    // sink would create beside it.
    std::os::unix::fs::symlink(victim.path().join(".bashrc"), dir.path().join("counts.txt")).unwrap();
    std::os::unix::fs::symlink(victim.path().join("planted"), dir.path().join("dangling.txt")).unwrap();
    for (path, says) in [("counts.txt", "leads to"), ("dangling.txt", "cannot be resolved")] {
        word_count(&dir, "", &format!("kind = \"file\"\npath = \"{path}\""));
        let err = refused(&dir, &[], &[]);
        assert!(err.contains(&format!("sink 'counts': path = \"{path}\"")) && err.contains(says), "{path}: {err}");
        victim.untouched(path);
    }
}

#[test]
fn the_host_file_chooses_the_roots() {
    let dir = JobDir::new();
    let shared = tempfile::tempdir().unwrap();
    let target = shared.path().join("counts.txt");
    // Outside the job's directory: refused until the host lists the root.
    word_count(&dir, "", &format!("kind = \"file\"\npath = \"{}\"", target.display()));
    let err = refused(&dir, &[], &[]);
    assert!(err.contains("sink 'counts': path = ") && err.contains("limits.sink_roots"), "{err}");
    assert!(!target.exists());
    dir.write("host.toml", format!("[limits]\nsink_roots = [\"{}\"]\n", shared.path().display()));
    counts_exactly(&dir, &["--config", "host.toml"], &target);
    // A host that takes the job's directory off the roots.
    dir.write("host.toml", "[limits]\njob_dir_is_root = false\n");
    word_count(&dir, "", OUT);
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("beneath: none (limits.sink_roots in the host settings file; limits.job_dir_is_root = false leaves out the job file's directory)"),
        "{err}"
    );
    // Reads are confined only when the host lists source roots.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("input.txt"), INPUT).unwrap();
    let job = dir
        .read("job.toml")
        .replace("path = \"input.txt\"", &format!("path = \"{}\"", elsewhere.path().join("input.txt").display()));
    dir.write("job.toml", &job);
    dir.write("host.toml", "[limits]\nsource_roots = []\n");
    let err = refused(&dir, &["--config", "host.toml"], &[]);
    assert!(
        err.contains("source 'lines': path = ") && err.contains("outside the directories a job may read beneath"),
        "{err}"
    );
    counts_exactly(&dir, &[], &dir.path().join("out/counts.txt"));
}

#[test]
fn a_live_rescale_past_the_hosts_ceiling_is_refused_and_one_within_it_is_exact() {
    let dir = JobDir::new();
    dir.write("host.toml", "[limits]\nparallelism = 2\n");
    let (records, keys) = (6_000, 50);
    write_counter_job(&dir, "capped", records, keys, 1_500, "");
    let child = dir.start(&["--config", "host.toml"]);
    dir.wait_for_output("capped");
    let out = dir.host(&["rescale", "capped", "--operator", "counter", "-p", "3"]);
    assert!(!out.status.success(), "past the ceiling must be refused");
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "'counter' cannot run on 3 subtasks: the host's ceiling is 2 (limits.parallelism in the host settings file)"
        ),
        "{err}"
    );
    let out = dir.host(&["rescale", "capped", "--operator", "counter", "-p", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert_eq!(final_counts(&dir.published()), counts_of_first(records, keys));
}
