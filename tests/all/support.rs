//! Fixtures: temporary job directories and output parsing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use weir_tests::{run_host, stderr};

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
