//! What a shadow run costs the live job: the word-count counter's
//! throughput with and without a shadow of the same module, in one run of
//! the real `host` binary. The generator (unpaced) feeds the counter at
//! parallelism `WEIR_BENCH_P` (default 1) on the hashmap backend into a
//! discarding sink; records read per second are sampled from `host status`
//! over three windows of `WEIR_BENCH_SECS` seconds (default 8): before the
//! shadow, while it runs, and after `host shadow --stop`. The shadow's own
//! rate and its report (a shadow of the same module must find every record
//! equal) are printed beside them.
//!
//! Run: `cargo bench -p weir-tests --bench shadow`. The markdown table goes
//! to stdout, and to `WEIR_BENCH_OUT` if set.

use std::path::Path;
use std::time::{Duration, Instant};
use weir_host::api::ShadowReport;
use weir_tests::bench::env_u64;
use weir_tests::{artifacts, host_command};

fn job(dir: &Path, p: u64) -> String {
    format!(
        r#"name = "shadowbench"
parallelism = {p}
state.backend = "hashmap"

[state.checkpoints]
dir = "file://{root}/ck"

[checkpointing]
interval = "10s"

[[sources]]
id = "gen"
kind = "generator"
count = 2000000000
keys = 100000
seed = 3

[[operators]]
uid = "counter"
module = "{module}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#,
        root = dir.display(),
        module = artifacts::WORD_COUNT_COUNTER,
    )
}

fn records_read(dir: &Path) -> u64 {
    let out = host_command(dir, &["status", "shadowbench", "--json"]).output().unwrap();
    if !out.status.success() {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records_read"].as_u64().unwrap_or(0)
}

fn shadow(dir: &Path, args: &[&str]) -> ShadowReport {
    let mut all = vec!["shadow", "shadowbench"];
    all.extend_from_slice(args);
    let out = host_command(dir, &all).output().unwrap();
    assert!(out.status.success(), "host {all:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Records read per second over `secs` seconds.
fn rate(dir: &Path, secs: u64) -> f64 {
    let (r0, t0) = (records_read(dir), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    (records_read(dir) - r0) as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let (p, secs) = (env_u64("WEIR_BENCH_P", 1), env_u64("WEIR_BENCH_SECS", 8));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("job.toml"), job(d, p)).unwrap();
    let mut child = host_command(d, &["run", "job.toml"]).env("RUST_LOG", "error").spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    while records_read(d) < 1_000_000 {
        assert!(Instant::now() < until, "the job never got going");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Past start-up: every key seen, the tables at their size.
    std::thread::sleep(Duration::from_secs(3));
    let before = rate(d, secs);
    let out =
        host_command(d, &["shadow", "shadowbench", "--operator", "counter", "--module", artifacts::WORD_COUNT_COUNTER])
            .output()
            .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = shadow(d, &["--report", "--json"]);
    let with = rate(d, secs);
    let during = shadow(d, &["--report", "--json"]);
    let last = if during.is_over() { during.clone() } else { shadow(d, &["--stop", "--json"]) };
    let after = rate(d, secs);
    let _ = host_command(d, &["cancel", "shadowbench"]).output();
    let _ = child.wait();

    let shadow_rate =
        (during.records_in - first.records_in) as f64 / ((during.elapsed_ms - first.elapsed_ms) as f64 / 1e3);
    // Against the mean of the windows before and after: the machine's
    // drift over the run counts against neither.
    let without = (before + after) / 2.0;
    let c = last.counts;
    let mut table = String::new();
    table.push_str(&format!(
        "Counter at parallelism {p}, hashmap, 100 000 keys, unpaced generator, {secs} s windows.\n\n"
    ));
    table.push_str("| | records/s | ratio to no shadow (mean of before and after) |\n|---|---|---|\n");
    table.push_str(&format!("| live job, before the shadow | {before:.0} | {:.2} |\n", before / without));
    table.push_str(&format!("| live job, shadow of the same module running | {with:.0} | {:.2} |\n", with / without));
    table.push_str(&format!("| live job, after `--stop` | {after:.0} | {:.2} |\n", after / without));
    table.push_str(&format!("| the shadow itself | {shadow_rate:.0} | {:.2} |\n", shadow_rate / without));
    table.push_str(&format!(
        "\nShadow report: {} ({}), {} records compared: {} equal, {} different, {} only live, {} only shadow; lag at the end {} batches.\n",
        last.status,
        last.reason.as_deref().unwrap_or(""),
        c.equal + c.different + c.only_live + c.only_shadow,
        c.equal,
        c.different,
        c.only_live,
        c.only_shadow,
        last.lag
    ));
    print!("{table}");
    if let Ok(path) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(path, &table).unwrap();
    }
}
