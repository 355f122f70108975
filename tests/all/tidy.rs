//! Cheap checks of the code base itself: every Rust source file opens with a
//! `//!` header saying what it owns.

use std::path::{Path, PathBuf};
use weir_tests::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "output" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_source_file_has_a_module_header() {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["host/src", "sdk/src", "tests", "guest-examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 30, "found only {} files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().trim_start().starts_with("//!"))
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a `//!` header: {missing:?}");
}
