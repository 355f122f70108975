//! Cheap checks of the code base itself, for the architecture invariants
//! `docs/architecture.md` states: every Rust source file opens with a `//!`
//! header; the host's modules depend one way, in the documented order; no
//! lock is shared between the coordinator and the tasks; errors are typed;
//! no source file grows past 700 lines; `unsafe` appears only where listed.

use std::collections::{BTreeMap, BTreeSet};
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

/// The host library's files (not the binary's `main.rs` and `cli/`), with
/// their text, by path relative to `host/src`.
fn host_sources() -> BTreeMap<String, String> {
    let src = repo_root().join("host/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|f| (f.strip_prefix(&src).unwrap().display().to_string(), std::fs::read_to_string(&f).unwrap()))
        .filter(|(p, _)| p != "main.rs" && !p.starts_with("cli/"))
        .collect()
}

/// The text of a file without its `#[cfg(test)]` module (tests may reach
/// across layers) and without comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
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

/// The host's top-level modules, lowest first: each may use only the ones
/// before it (the order `host/src/lib.rs` and `docs/architecture.md` give).
const LAYERS: &[&str] = &[
    "fault",
    "paths",
    "durable",
    "clock",
    "record",
    "crash_point",
    "config",
    "api",
    "state",
    "wasm",
    "checkpoint",
    "runtime",
    "connectors",
    "control",
    "coordinator",
    "cluster",
    "fuzzing",
];

/// Every `crate::<module>` a file names.
fn crate_uses(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let code = code(text);
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

#[test]
fn host_modules_depend_one_way_in_the_documented_order() {
    let sources = host_sources();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &sources {
        let module = path.split(['/', '.']).next().unwrap().to_string();
        if module == "lib" {
            continue;
        }
        assert!(LAYERS.contains(&module.as_str()), "host/src/{path}: module `{module}` is missing from LAYERS");
        // Paths that climb two levels could leave the module unseen.
        assert!(
            !code(text).contains("super::super::"),
            "host/src/{path}: name other modules with crate::, not super::super::"
        );
        for used in crate_uses(text) {
            if used != module {
                edges.entry(module.clone()).or_default().insert(format!("{used} ({path})"));
            }
        }
    }
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut wrong = Vec::new();
    for (module, uses) in &edges {
        for used in uses {
            let name = used.split(' ').next().unwrap();
            match rank(name) {
                Some(r) if r < rank(module).unwrap() => {}
                _ => wrong.push(format!("{module} -> {used}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "uses against the module order (a cycle, or a layer used from below):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_coordinator_and_the_tasks_share_no_lock() {
    // Locks a subtask keeps to itself: its own upload threads, the threads
    // writing its RocksDB cache layers, and the guest's stdout and stderr
    // pipes.
    // A rescale's key-group hand-off is shared, read-only but for each new
    // subtask taking out the groups of its own range (hashmap) or, once, a
    // database given up whole (RocksDB), by the new subtasks of one
    // operator.
    const ALLOWED: &[&str] = &[
        "checkpoint/upload.rs",
        "state/rocksdb/layers.rs",
        "wasm/log_stream.rs",
        "state/hashmap/handoff.rs",
        "state/rocksdb/handoff.rs",
    ];
    let mut found = Vec::new();
    for (path, text) in host_sources() {
        let code = code(&text);
        if (code.contains("Mutex") || code.contains("RwLock")) && !ALLOWED.contains(&path.as_str()) {
            found.push(path);
        }
    }
    assert!(found.is_empty(), "locks outside {ALLOWED:?} (orders travel as messages): {found:?}");
}

#[test]
fn errors_are_typed() {
    let mut found = Vec::new();
    for (path, text) in host_sources() {
        for (n, line) in code(&text).lines().enumerate() {
            let compact: String = line.split_whitespace().collect();
            // The guest's own `result<_, string>` is the WIT contract's type.
            if compact.contains(",String>") && compact.contains("Result<") && !compact.contains("typeGuestResult<R>") {
                found.push(format!("host/src/{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "Result<_, String> in the library (use a typed error):\n{}", found.join("\n"));
}

#[test]
fn error_messages_say_their_cause_once() {
    // Messages carry their cause's text, so logs read whole; a cause that
    // is also the error's `source()` would print twice in a chain (`{:#}`).
    // Hence: no `#[source]`, no field named `source`, and `#[from]` only on
    // transparent variants.
    let mut found = Vec::new();
    for (path, text) in host_sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let before = lines[..n].iter().rev().find(|l| !l.trim().is_empty() && !l.trim_start().starts_with("///"));
            let transparent = before.is_some_and(|l| l.contains("#[error(transparent)]"));
            let comment = line.trim_start().starts_with("//");
            let field = line.trim_start().trim_start_matches("pub ");
            let source_field =
                field.starts_with("source: ") && field[8..].starts_with(|c: char| c.is_ascii_uppercase());
            if !comment && (line.contains("#[source]") || source_field || (line.contains("#[from]") && !transparent)) {
                found.push(format!("host/src/{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "causes that would print twice:\n{}", found.join("\n"));
}

#[test]
fn no_host_source_file_is_over_700_lines() {
    let src = repo_root().join("host/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 700)
        .map(|(f, n)| format!("{} ({n} lines)", f.strip_prefix(&src).unwrap().display()))
        .collect();
    assert!(long.is_empty(), "split these along their seams: {long:?}");
}

#[test]
fn unsafe_code_is_only_where_listed() {
    // Each with a SAFETY comment; docs/architecture.md says why it is sound.
    const LISTED: &[&str] = &["host/src/wasm/cache.rs", "host/src/connectors/kafka/mod.rs"];
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["host/src", "sdk/src", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let unlisted: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let code = code(&text);
            ["unsafe {", "unsafe fn", "unsafe impl", "unsafe trait", "unsafe extern"].iter().any(|k| code.contains(k))
        })
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        // This file names the keyword in its patterns.
        .filter(|f| !LISTED.contains(&f.as_str()) && f != "tests/all/tidy.rs")
        .collect();
    assert!(unlisted.is_empty(), "unsafe outside {LISTED:?}: {unlisted:?}");
    let architecture = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    for f in LISTED {
        assert!(architecture.contains(f), "docs/architecture.md does not list {f} among the unsafe code");
    }
}
