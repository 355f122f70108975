//! Shared helpers of Weir's end-to-end tests and benchmarks: paths of the
//! guest components this crate's build script compiled, the `host` binary,
//! and a way to run it as a user would.

#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Absolute paths of the compiled guest components.
pub mod artifacts {
    include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The `host` binary of the same build profile as the running test.
pub fn host_binary() -> PathBuf {
    // Tests run from <target>/<profile>/deps/; the binary is in <profile>/.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile_dir.join("host");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build --release -p weir-host`, which scripts/test does)",
        bin.display()
    );
    bin
}

/// Runs `host` with `args` in `dir`, with an isolated module cache and no
/// host settings file unless the args name one.
pub fn run_host(dir: &Path, args: &[&str]) -> Output {
    Command::new(host_binary())
        .args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .env_remove("WEIR_CONFIG")
        .env("RUST_LOG", "warn,weir_host=info")
        .output()
        .expect("run the host binary")
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `host run <job> <extra...>` from a scratch directory with its own
/// module cache: how the committed examples are run, from anywhere.
pub fn run_example(job: &Path, extra: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    let mut args = vec!["run", job.to_str().unwrap()];
    args.extend_from_slice(extra);
    Command::new(host_binary())
        .args(&args)
        .current_dir(scratch.path())
        .env("XDG_CACHE_HOME", scratch.path().join(".cache"))
        .env_remove("WEIR_CONFIG")
        .output()
        .expect("run the host binary")
}

/// The job time in seconds from a summary (`job '…' finished in 1.234s`).
pub fn elapsed_secs(stderr: &str) -> f64 {
    stderr
        .split("finished in ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no elapsed time in:\n{stderr}"))
}

/// Runs `host run job.toml` in `dir` with logs at error level, asserts
/// success, and returns stderr (the summary).
pub fn run_quiet(dir: &Path) -> String {
    let out = Command::new(host_binary())
        .args(["run", "job.toml"])
        .current_dir(dir)
        .env("RUST_LOG", "error")
        .env_remove("WEIR_CONFIG")
        .output()
        .expect("run the host binary");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}
