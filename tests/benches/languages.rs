//! The word-count counter per language: the generator into the counter at
//! parallelism 1, discard sink, run by the real `host` binary with the Rust,
//! Python, JavaScript and C components in the same run. Throughput is given as a ratio
//! of the Rust counter's; cold start is the first run's startup (compiling
//! the component, then instantiating), warm start a later run's (the
//! component from the module cache). Two more rows run the counter's logic
//! with no host calls in Python and JavaScript
//! (`guest-examples/bench-py/counter-bound`, `guest-examples/bench-js/counter-bound`):
//! each interpreter's bound on a counter.
//!
//! Run: `cargo bench -p weir-tests --bench languages` (after `scripts/test`
//! built the Python, JavaScript and C operators). `WEIR_BENCH_RECORDS` (default 1 M),
//! `WEIR_BENCH_KEYS` (default 100 k). `WEIR_BENCH_EXTRA` adds rows for more
//! components, as `label=path.wasm,label=path.wasm` (`scripts/profile-python`
//! and `scripts/profile-js` add the steps of the Python and JavaScript
//! counters' profiles this way). The markdown
//! table goes to stdout, and to `WEIR_BENCH_OUT` if set.

use weir_tests::{artifacts, counter_job, elapsed_secs, run_quiet, script_guest};

/// The startup the summary reports, in milliseconds.
fn startup_ms(summary: &str) -> f64 {
    let after = summary.split("(startup ").nth(1).expect("a startup figure");
    after.split(" ms").next().unwrap().trim().parse().unwrap()
}

/// (records per second, cold start ms, warm start ms) of `module`.
fn measure(module: &str, records: u64, keys: u64) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    // run_quiet gives the directory a module cache of its own.
    let job = |count: u64| counter_job("lang", count, keys, 1, "").replace(artifacts::WORD_COUNT_COUNTER, module);
    std::fs::write(dir.path().join("job.toml"), job(1)).unwrap();
    let cold = startup_ms(&run_quiet(dir.path()));
    let warm = startup_ms(&run_quiet(dir.path()));
    std::fs::write(dir.path().join("job.toml"), job(records)).unwrap();
    let summary = run_quiet(dir.path());
    (records as f64 / elapsed_secs(&summary), cold, warm)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("languages: bench");
        return;
    }
    let records: u64 = std::env::var("WEIR_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let keys: u64 = std::env::var("WEIR_BENCH_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let python = script_guest("word_count_py_counter");
    let javascript = script_guest("word_count_js_counter");
    let python_bound = script_guest("bench_py_counter_bound");
    let bound = script_guest("bench_js_counter_bound");
    let c = script_guest("word_count_c_counter");
    let extra: Vec<(String, String)> = std::env::var("WEIR_BENCH_EXTRA")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (label, path) = s.split_once('=').expect("WEIR_BENCH_EXTRA is label=path,label=path");
            (label.to_string(), path.to_string())
        })
        .collect();
    let mut table = String::from(
        "| language | component | throughput | µs per record | **ratio to Rust** | cold start (compile + instantiate) | warm start (cached) |\n|---|---|---|---|---|---|---|\n",
    );
    let rust = measure(artifacts::WORD_COUNT_COUNTER, records, keys);
    let mut rows = vec![
        ("Rust".to_string(), artifacts::WORD_COUNT_COUNTER.to_string()),
        ("Python".to_string(), python),
        ("JavaScript".to_string(), javascript),
        ("C".to_string(), c),
        ("Python logic, no host calls".to_string(), python_bound),
        ("JavaScript logic, no host calls".to_string(), bound),
    ];
    rows.extend(extra);
    for (name, module) in rows {
        let m = if name == "Rust" { rust } else { measure(&module, records, keys) };
        let size = std::fs::metadata(&module).unwrap().len() as f64 / (1 << 20) as f64;
        eprintln!("{name}: {:.3} M records/s, cold {:.0} ms, warm {:.0} ms", m.0 / 1e6, m.1, m.2);
        table.push_str(&format!(
            "| {name} | {size:.1} MiB | {:.3} M rec/s | {:.2} | **{:.3}** | {:.0} ms | {:.0} ms |\n",
            m.0 / 1e6,
            1e6 / m.0,
            m.0 / rust.0,
            m.1,
            m.2
        ));
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
