//! Cheap checks of the code base itself, for the architecture invariants
//! `docs/architecture.md` states: every Rust source file opens with a `//!`
//! header; the host's modules depend one way, in the documented order, and
//! the files inside each module depend one way too (no cycles); no lock is
//! shared between the coordinator and the tasks; errors are typed; no
//! source file grows past 700 lines; `unsafe` appears only where listed.
//!
//! `scripts/test` runs these first, right after rustfmt: they read the
//! sources, and build nothing of Weir's.

use std::collections::{BTreeMap, BTreeSet};
use weir_tidy::files::{code, host_sources, repo_root, rust_files};
use weir_tidy::graph::{Files, cycles};

#[test]
fn every_source_file_has_a_module_header() {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["host/src", "sdk/src", "tests", "guest-examples", "tidy"] {
        files.extend(rust_files(&root.join(dir)));
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

/// Files that still use each other in a cycle, as this check found them
/// when it came (issue 48), each group as the cycle's files. They are
/// being split: the coordinator's into drivers that own their state; most
/// others are a `mod.rs` and its files using each other's items (an error
/// type in `mod.rs` that the files return, their types in its code), which
/// an `error.rs` or a file per shared type undoes. Each group is a
/// ceiling: a cycle among other files, or one that takes in a file not
/// listed with it, fails; a group that is no longer a cycle must go.
const KNOWN_CYCLES: &[&[&str]] = &[
    &[
        "checkpoint/metadata.rs",
        "checkpoint/modules.rs",
        "checkpoint/storage/fence.rs",
        "checkpoint/storage/mod.rs",
        "checkpoint/storage/stores.rs",
    ],
    &["cluster/endpoint.rs", "cluster/mod.rs", "cluster/overview.rs"],
    &["config/job.rs", "config/limits.rs", "config/rest.rs", "config/settings.rs", "config/wasm.rs"],
    &[
        "connectors/file_sink.rs",
        "connectors/file_source.rs",
        "connectors/generator.rs",
        "connectors/kafka/sink.rs",
        "connectors/kafka/source.rs",
        "connectors/latency.rs",
        "connectors/mod.rs",
        "connectors/nexmark/mod.rs",
        "connectors/transactional_file.rs",
    ],
    &["control/dashboard.rs", "control/dashboard/html.rs"],
    &[
        "state/backend.rs",
        "state/handoff.rs",
        "state/hashmap/frozen.rs",
        "state/hashmap/handoff.rs",
        "state/hashmap/keyed.rs",
        "state/hashmap/mod.rs",
        "state/hashmap/size.rs",
        "state/pass_through.rs",
        "state/rocksdb/frozen.rs",
        "state/rocksdb/handoff.rs",
        "state/rocksdb/layers.rs",
        "state/rocksdb/mod.rs",
        "state/rocksdb/options.rs",
        "state/rocksdb/timers.rs",
        "state/rocksdb/values.rs",
        "state/snapshot/read.rs",
        "state/snapshot/write.rs",
        "state/ttl/mod.rs",
    ],
    &["wasm/host/clocks.rs", "wasm/host/mod.rs", "wasm/instance.rs", "wasm/mod.rs", "wasm/module.rs"],
];

fn host_files() -> Files {
    Files::parse(&host_sources()).unwrap_or_else(|e| panic!("cannot parse host/src/{e}"))
}

#[test]
fn host_modules_depend_one_way_in_the_documented_order() {
    let files = host_files();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut wrong = BTreeSet::new();
    for (module, (path, parsed)) in &files.files {
        let Some(top) = module.first() else { continue };
        assert!(rank(top).is_some(), "host/src/{path}: module `{top}` is missing from LAYERS");
        // Paths that climb two levels hide which module they reach.
        for climb in &parsed.climbs {
            wrong.insert(format!("host/src/{path}: name other modules with crate::, not {climb}"));
        }
        for named in &parsed.named {
            let Some(used) = named.path.first().filter(|u| *u != top) else { continue };
            match rank(used) {
                Some(r) if r < rank(top).unwrap() => {}
                _ => {
                    wrong.insert(format!("{top} -> {used} (host/src/{path}: {})", named.written));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "uses against the module order (a cycle, or a layer used from below):\n{}",
        wrong.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn files_inside_each_module_depend_one_way() {
    let edges = host_files().edges();
    let known: Vec<BTreeSet<&str>> = KNOWN_CYCLES.iter().map(|c| c.iter().copied().collect()).collect();
    let mut report = Vec::new();
    let mut seen_known = BTreeSet::new();
    for cycle in cycles(&edges) {
        let files: BTreeSet<&str> = cycle.iter().map(String::as_str).collect();
        if let Some(i) = known.iter().position(|k| files.is_subset(k)) {
            seen_known.insert(i);
            continue;
        }
        // The uses that close the cycle, so the report says what to move.
        let inside: Vec<String> = edges
            .iter()
            .filter(|e| files.contains(e.from.as_str()) && files.contains(e.to.as_str()))
            .map(|e| format!("    {} -> {} ({})", e.from, e.to, e.written))
            .collect();
        report.push(format!("{}:\n{}", cycle.join(", "), inside.join("\n")));
    }
    assert!(
        report.is_empty(),
        "files that use each other in a cycle (move the shared type to the lowest file that owns its concept):\n{}",
        report.join("\n")
    );
    let stale: Vec<String> =
        (0..known.len()).filter(|i| !seen_known.contains(i)).map(|i| KNOWN_CYCLES[i].join(", ")).collect();
    assert!(stale.is_empty(), "these files no longer form a cycle; take them out of KNOWN_CYCLES: {stale:?}");
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
    let long: Vec<String> = host_sources_with_binary()
        .into_iter()
        .map(|(f, text)| (f, text.lines().count()))
        .filter(|(_, n)| *n > 700)
        .map(|(f, n)| format!("{f} ({n} lines)"))
        .collect();
    assert!(long.is_empty(), "split these along their seams: {long:?}");
}

/// Every file in `host/src`, the binary's too, by path below it.
fn host_sources_with_binary() -> BTreeMap<String, String> {
    let src = repo_root().join("host/src");
    rust_files(&src)
        .into_iter()
        .map(|f| (f.strip_prefix(&src).unwrap().display().to_string(), std::fs::read_to_string(&f).unwrap()))
        .collect()
}

#[test]
fn unsafe_code_is_only_where_listed() {
    // Each with a SAFETY comment; docs/architecture.md says why it is sound.
    const LISTED: &[&str] = &["host/src/wasm/cache.rs", "host/src/connectors/kafka/mod.rs"];
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["host/src", "sdk/src", "tests", "tidy"] {
        files.extend(rust_files(&root.join(dir)));
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
        .filter(|f| !LISTED.contains(&f.as_str()) && f != "tidy/tests/tidy.rs")
        .collect();
    assert!(unlisted.is_empty(), "unsafe outside {LISTED:?}: {unlisted:?}");
    let architecture = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    for f in LISTED {
        assert!(architecture.contains(f), "docs/architecture.md does not list {f} among the unsafe code");
    }
}
