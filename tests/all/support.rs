//! The test kit: temporary job directories and what a test does in one
//! (run the host, ask a running job's status, read what its sinks
//! published), one way to wait for something with a deadline, and output
//! parsing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{host_command, run_host, stderr};

/// How long a test waits for what a running job does: first output, a
/// checkpoint, a status. Generous for a loaded 2-core machine, where a
/// JavaScript component compiled cold takes tens of seconds to start.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// What a wait's probe says: a condition (`bool`), or a value once there
/// is one (`Option`).
pub trait Ready {
    type Value;
    fn ready(self) -> Option<Self::Value>;
}

impl Ready for bool {
    type Value = ();
    fn ready(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Ready for Option<T> {
    type Value = T;
    fn ready(self) -> Option<T> {
        self
    }
}

/// Polls `probe` until it holds (or gives a value, which is returned); at
/// `limit`, panics saying it waited for `what`. Polls often at first, then
/// every 100 ms, so a quick event is seen quickly and a slow one costs
/// little.
pub fn wait_until<R: Ready>(what: &str, limit: Duration, probe: impl FnMut() -> R) -> R::Value {
    poll(what, limit, probe, &String::new)
}

/// [`wait_until`], with what `context` says at the deadline in the panic.
fn poll<R: Ready>(what: &str, limit: Duration, mut probe: impl FnMut() -> R, context: &dyn Fn() -> String) -> R::Value {
    let until = Instant::now() + limit;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = probe().ready() {
            return v;
        }
        assert!(Instant::now() < until, "waited {:.0} s for {what}, in vain{}", limit.as_secs_f64(), context());
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Bytes (a command's output) as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A temporary directory holding one job.
pub struct JobDir {
    pub dir: tempfile::TempDir,
}

/// A failed test's directory stays (its path printed), for the job's
/// files, checkpoints and output to be looked at.
impl Drop for JobDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!("kept the failed test's directory {}", self.path().display());
        }
    }
}

impl JobDir {
    pub fn new() -> Self {
        JobDir { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    /// Runs `host run job.toml` plus `extra` args; returns (success, stderr).
    pub fn run(&self, extra: &[&str]) -> (bool, String) {
        let mut args = vec!["run", "job.toml"];
        args.extend_from_slice(extra);
        let out = run_host(self.path(), &args);
        (out.status.success(), stderr(&out))
    }

    /// Runs and asserts failure; returns stderr.
    pub fn fails(&self) -> String {
        let (ok, err) = self.run(&[]);
        assert!(!ok, "the job should have failed; stderr:\n{err}");
        err
    }

    /// Runs and asserts success; returns stderr.
    pub fn succeeds(&self, extra: &[&str]) -> String {
        let (ok, err) = self.run(extra);
        assert!(ok, "the job failed; stderr:\n{err}");
        err
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).unwrap()
    }

    /// `host run job.toml <args>` in the background; its stderr goes to
    /// `run.log` in the job directory (a pipe nobody reads could fill up
    /// and stall the host).
    pub fn start(&self, args: &[&str]) -> Child {
        let mut all = vec!["run", "job.toml"];
        all.extend_from_slice(args);
        let log = std::fs::File::create(self.path().join("run.log")).unwrap();
        host_command(self.path(), &all).stdout(Stdio::null()).stderr(Stdio::from(log)).spawn().unwrap()
    }

    /// Waits for a run to end: (success, its log). The log is `run.log`
    /// for a run started with [`JobDir::start`], or the run's stderr if it
    /// was spawned with its stderr piped (read to its end before the wait,
    /// so a full pipe cannot stall the host).
    pub fn finish(&self, mut child: Child) -> (bool, String) {
        let piped = child.stderr.take().map(|mut pipe| {
            let mut log = String::new();
            std::io::Read::read_to_string(&mut pipe, &mut log).unwrap();
            log
        });
        let status = child.wait().unwrap();
        (status.success(), piped.unwrap_or_else(|| self.read("run.log")))
    }

    /// Waits until job `job` answers `host status` and its sinks wrote
    /// something.
    pub fn wait_for_output(&self, job: &str) {
        self.wait_for_status(job, "output", |s| s["records_written"].as_u64().unwrap_or(0) > 0);
    }

    /// `host <args>` in the job directory, to completion.
    pub fn host(&self, args: &[&str]) -> Output {
        host_command(self.path(), args).output().unwrap()
    }

    /// `host status <job> --json`, if the job answers.
    pub fn status(&self, job: &str) -> Option<serde_json::Value> {
        let out = self.host(&["status", job, "--json"]);
        out.status.success().then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    /// Waits (up to [`PATIENCE`]) until `host status <job>` shows `done`,
    /// and returns that status; the job's `run.log`, if it has one, is in
    /// the message of a wait in vain.
    pub fn wait_for_status(
        &self,
        job: &str,
        what: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        self.wait_until(&format!("{what} in `host status {job}`"), || self.status(job).filter(&done))
    }

    /// [`wait_until`] with [`PATIENCE`]; a wait in vain shows the job's
    /// `run.log`, if it has one.
    pub fn wait_until<R: Ready>(&self, what: &str, probe: impl FnMut() -> R) -> R::Value {
        let log = || match std::fs::read_to_string(self.path().join("run.log")) {
            Ok(log) => format!("; the job's log:\n{log}"),
            Err(_) => String::new(),
        };
        poll(what, PATIENCE, probe, &log)
    }

    /// Every line the transactional file sink published in `out/`: its part
    /// files in name order (checkpoint ids are zero-padded, `part-end`
    /// last); empty before the first.
    pub fn published(&self) -> String {
        self.published_in("out")
    }

    /// As [`JobDir::published`], for the sink writing to `sub`.
    pub fn published_in(&self, sub: &str) -> String {
        let out = self.path().join(sub);
        let Ok(entries) = std::fs::read_dir(&out) else { return String::new() };
        let mut names: Vec<String> = entries.map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.retain(|n| n.starts_with("part-"));
        names.sort();
        names.iter().map(|n| std::fs::read_to_string(out.join(n)).unwrap()).collect()
    }
}

/// Parses `word count` lines into each word's counts in output order.
pub fn counts_by_key(output: &str) -> BTreeMap<String, Vec<u64>> {
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in output.lines() {
        let (k, n) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad output line {line:?}"));
        m.entry(k.to_string()).or_default().push(n.parse().unwrap());
    }
    m
}

/// Checks that every key's updates are exactly 1, 2, ..., n (no update lost
/// or duplicated), and returns the final count per key.
pub fn final_counts(output: &str) -> BTreeMap<String, u64> {
    counts_by_key(output)
        .into_iter()
        .map(|(k, seen)| {
            let expected: Vec<u64> = (1..=seen.len() as u64).collect();
            assert_eq!(seen, expected, "updates of key {k:?} are not 1..=n");
            (k, *seen.last().unwrap())
        })
        .collect()
}
