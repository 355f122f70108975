//! The committed examples, run from a temporary copy of their directory, so
//! a test reads back only what this run wrote: `output/` beside a job file
//! in the repository survives between runs (and other tests run the same
//! examples at the same time), so reading it would pass on a host that exits
//! 0 but writes elsewhere.

use std::path::PathBuf;
use std::process::Output;
use weir_tests::repo_root;

/// A copy of `guest-examples/<name>/`'s own files (the job files and their
/// inputs, not the operator sources or `output/`) at
/// `<tmp>/guest-examples/<name>/`, with `<tmp>/target/wasm` linked to the
/// repository's built components, so the committed job files run unchanged
/// (their modules are `../../target/wasm/...`).
pub struct ExampleCopy {
    _root: tempfile::TempDir,
    dir: PathBuf,
}

impl ExampleCopy {
    pub fn new(name: &str) -> Self {
        Self::with_siblings(name, &[])
    }

    /// As [`ExampleCopy::new`], with the examples `siblings` copied beside
    /// it, for job files that read their inputs (`../word-count/input.txt`).
    pub fn with_siblings(name: &str, siblings: &[&str]) -> Self {
        let root = tempfile::tempdir().unwrap();
        for example in std::iter::once(&name).chain(siblings) {
            let from = repo_root().join("guest-examples").join(example);
            let to = root.path().join("guest-examples").join(example);
            std::fs::create_dir_all(&to).unwrap();
            for e in std::fs::read_dir(&from).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_file() {
                    std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
                }
            }
        }
        std::fs::create_dir_all(root.path().join("target")).unwrap();
        std::os::unix::fs::symlink(repo_root().join("target/wasm"), root.path().join("target/wasm")).unwrap();
        let dir = root.path().join("guest-examples").join(name);
        ExampleCopy { _root: root, dir }
    }

    /// `host run <copy>/<job> <extra...>` from an unrelated directory, as
    /// [`weir_tests::run_example`] runs it; asserts success.
    pub fn run(&self, job: &str, extra: &[&str]) -> Output {
        assert!(!self.dir.join("output").exists(), "the copy starts without output");
        let out = weir_tests::run_example(&self.dir.join(job), extra);
        assert!(out.status.success(), "{job}: {}", weir_tests::stderr(&out));
        out
    }

    /// A file the run wrote into the copy's `output/`; removes it, so the
    /// next run starts without it.
    pub fn take_output(&self, name: &str) -> String {
        let path = self.dir.join("output").join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the job wrote no {} (beside its job file): {e}", path.display()));
        std::fs::remove_dir_all(self.dir.join("output")).unwrap();
        text
    }

    /// Replaces `from` (which must occur) by `to` in the copy's file `name`.
    pub fn edit(&self, name: &str, from: &str, to: &str) {
        let path = self.dir.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{name} has no {from:?}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    }

    /// Writes `text` as the copy's file `name` (a job file or an input).
    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join(name), text).unwrap();
    }

    /// An input file of the copy.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap()
    }
}
