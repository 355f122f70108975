//! The repository's Rust sources, found on disk and read as text; nothing
//! here parses Rust (that is [`crate::uses`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The repository's root (this crate is `<root>/tidy`).
pub fn repo_root() -> PathBuf {
    // Read when the test runs (cargo sets it then too): a binary built in
    // one checkout sharing the target directory may run in another.
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from);
    manifest.parent().expect("the crate is inside the repository").to_path_buf()
}

/// Every `.rs` file under `dir`, but for build output (`target`, `output`)
/// and hidden directories.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "output" {
                collect(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The host library's files (not the binary's `main.rs` and `cli/`), with
/// their text, by path relative to `host/src`.
pub fn host_sources() -> BTreeMap<String, String> {
    let src = repo_root().join("host/src");
    rust_files(&src)
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
            (f.strip_prefix(&src).expect("under host/src").display().to_string(), text)
        })
        .filter(|(p, _)| p != "main.rs" && !p.starts_with("cli/"))
        .collect()
}

/// The text of a file without its `#[cfg(test)]` module (tests may reach
/// across layers) and without comment lines, for the checks that look for
/// words rather than paths.
pub fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}
