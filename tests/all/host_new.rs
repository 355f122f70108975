//! `host new` as a user meets it: for each language, scaffold a project in
//! an empty directory, run the very commands it prints (build with the
//! language's toolchain, then `host run job.toml`), and check the counts it
//! wrote against the sample input it generated, counted here. The toolchains
//! are the ones `scripts/test` installs: cargo with wasm32-wasip2,
//! componentize-py (`WEIR_COMPONENTIZE_PY`), componentize-js
//! (`WEIR_COMPONENTIZE_JS`), clang with wasi-libc.

use super::support::{final_counts, text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use weir_tests::host_binary;

/// `host new <args>` in `dir`.
fn host_new(dir: &Path, args: &[&str]) -> Output {
    Command::new(host_binary()).arg("new").args(args).current_dir(dir).output().unwrap()
}

/// The tools a language's printed build command runs, put on PATH as a
/// user who installed them would have them.
fn tool_path(lang: &str) -> String {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
    let mut dirs: Vec<PathBuf> = Vec::new();
    if lang == "python" {
        let py = std::env::var_os("WEIR_COMPONENTIZE_PY")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache.join("weir/venv/bin/componentize-py"));
        dirs.push(py.parent().unwrap().to_path_buf());
    }
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).unwrap().to_string_lossy().into_owned()
}

/// Scaffolds `demo-op` in `lang`, runs the printed commands, and checks
/// `output/counts.txt`: one line per event, each user's counts 1..=n, n
/// the user's events in the generated `events.jsonl`.
fn scaffold_builds_and_runs(lang: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = host_new(dir.path(), &["demo-op", "--lang", lang]);
    let printed = text(&out.stdout);
    assert!(out.status.success(), "host new failed: {}{printed}", text(&out.stderr));
    let project = dir.path().join("demo-op");
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert_eq!(readme.lines().count(), 3, "a README of three lines: {readme}");

    // The indented lines after "Build and run it:", run as printed.
    let commands: Vec<&str> = printed
        .lines()
        .skip_while(|l| *l != "Build and run it:")
        .skip(1)
        .map(|l| l.strip_prefix("  ").unwrap_or_else(|| panic!("not a command line: {l:?}")))
        .collect();
    assert_eq!(commands.len(), 3, "cd, build, run: {printed}");
    assert_eq!(commands[0], "cd demo-op");
    assert!(commands[2].ends_with(" run job.toml"), "{printed}");
    if lang == "rust" {
        // A cache for the SDK's dependencies across runs (the project's
        // ./target is a link to it): the build command stays as printed.
        if let Some(shared) = std::env::var_os("CARGO_TARGET_DIR") {
            let cache = PathBuf::from(shared).join("host-new-rust");
            std::fs::create_dir_all(&cache).unwrap();
            std::os::unix::fs::symlink(&cache, project.join("target")).unwrap();
        }
    }
    let run = Command::new("sh")
        .arg("-c")
        .arg(commands.join(" && "))
        .current_dir(dir.path())
        .env("PATH", tool_path(lang))
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .env("WEIR_RUN_DIR", dir.path().join(".run"))
        .env_remove("WEIR_CONFIG")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}: {}{}", commands.join(" && "), text(&run.stdout), text(&run.stderr));

    // The expected counts, from the sample input itself.
    let events = std::fs::read_to_string(project.join("events.jsonl")).unwrap();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for line in events.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        *expected.entry(v["user"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert!(expected.len() > 3, "the sample has several users: {expected:?}");
    let counts = std::fs::read_to_string(project.join("output/counts.txt")).unwrap();
    assert_eq!(counts.lines().count() as u64, expected.values().sum::<u64>(), "one line per event:\n{counts}");
    assert_eq!(final_counts(&counts), expected);
}

#[test]
fn a_new_rust_project_builds_and_runs_with_the_printed_commands() {
    scaffold_builds_and_runs("rust");
}

#[test]
fn a_new_python_project_builds_and_runs_with_the_printed_commands() {
    scaffold_builds_and_runs("python");
}

#[test]
fn a_new_javascript_project_builds_and_runs_with_the_printed_commands() {
    scaffold_builds_and_runs("js");
}

#[test]
fn a_new_c_project_builds_and_runs_with_the_printed_commands() {
    scaffold_builds_and_runs("c");
}

#[test]
fn host_new_refuses_an_existing_directory_a_bad_name_and_a_missing_checkout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    std::fs::write(dir.path().join("taken/keep.txt"), "mine").unwrap();
    let out = host_new(dir.path(), &["taken", "--lang", "c"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("./taken already exists"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("taken/keep.txt")).unwrap(), "mine");

    let out = host_new(dir.path(), &["Bad/Name", "--lang", "rust"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("bad project name \"Bad/Name\""), "{}", text(&out.stderr));

    let out = host_new(dir.path(), &["fine", "--lang", "python", "--weir", "/nonexistent"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("/nonexistent is not a Weir checkout"), "{}", text(&out.stderr));

    // Nothing was written by the refusals: the directory holds only `taken`.
    let entries: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(entries, ["taken"]);
}
