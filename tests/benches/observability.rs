//! What watching a job costs: the keyed-count job (the generator into the
//! word-count counter on the hashmap backend, parallelism 1, checkpoints
//! every second) run by the real `host` binary, unwatched and while a
//! client polls `/metrics`, `/v1/job`, `/v1/job/metrics` and
//! `/v1/checkpoints` every 100 ms (ten times what the dashboard asks), in
//! the same run, interleaved. With `WEIR_BENCH_BASELINE=<path of another
//! host binary>` (a build from before the metrics), that binary runs the
//! same job too: the cost of the counters, watermarks and guest call
//! timing themselves.
//!
//! Run: `cargo bench -p weir-tests --bench observability`
//! Sizes: `WEIR_BENCH_RECORDS` (default 20 M), `WEIR_BENCH_KEYS` (default
//! 1 M), `WEIR_BENCH_REPEATS` (default 3). The markdown table goes to
//! stdout, and to `WEIR_BENCH_OUT` if set.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use weir_tests::bench::{env_u64, median};

const JOB: &str = "keyed-count";

/// One GET with the token; true if it answered 200.
fn get(port: u16, token: &str, path: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    let mut answer = Vec::new();
    s.write_all(request.as_bytes()).is_ok() && s.read_to_end(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 200")
}

/// Polls the job in `dir` until `stop`; counts the answered requests.
fn scrape(dir: PathBuf, stop: Arc<AtomicBool>, answered: Arc<AtomicU64>) {
    let file = dir.join(".run").join(format!("{JOB}.json"));
    let mut endpoint = None;
    while !stop.load(Ordering::Relaxed) {
        if endpoint.is_none()
            && let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(run) = serde_json::from_str::<serde_json::Value>(&text)
        {
            endpoint = Some((run["port"].as_u64().unwrap() as u16, run["token"].as_str().unwrap().to_string()));
        }
        if let Some((port, token)) = &endpoint {
            for path in ["/metrics", "/v1/job", "/v1/job/metrics", "/v1/checkpoints"] {
                if get(*port, token, path) {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Records per second of one run of `bin`, watched or not; and the
/// requests answered while it ran.
fn run(bin: &Path, count: u64, keys: u64, watched: bool) -> (f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let settings = format!(
        "[checkpointing]\ninterval = \"1s\"\n\n[state.checkpoints]\ndir = \"file://{}/ck\"\n",
        dir.path().display()
    );
    std::fs::write(dir.path().join("job.toml"), weir_tests::counter_job(JOB, count, keys, 1, &settings)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let scraper = watched.then(|| {
        let (d, s, a) = (dir.path().to_path_buf(), stop.clone(), answered.clone());
        std::thread::spawn(move || scrape(d, s, a))
    });
    let out = Command::new(bin)
        .args(["run", "job.toml"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .env("RUST_LOG", "error")
        .env("WEIR_RUN_DIR", dir.path().join(".run"))
        .env_remove("WEIR_CONFIG")
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    if let Some(s) = scraper {
        s.join().unwrap();
    }
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let counted = format!("counter                     1 {count:>14}");
    assert!(err.contains(&counted), "every record reached the counter:\n{err}");
    (count as f64 / weir_tests::elapsed_secs(&err), answered.load(Ordering::Relaxed))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("observability: bench");
        return;
    }
    let count = env_u64("WEIR_BENCH_RECORDS", 20_000_000);
    let keys = env_u64("WEIR_BENCH_KEYS", 1_000_000);
    let repeats = env_u64("WEIR_BENCH_REPEATS", 3).max(1);
    let baseline = std::env::var("WEIR_BENCH_BASELINE").ok().map(PathBuf::from);
    let this = weir_tests::host_binary();
    let (mut quiet, mut watched, mut before) = (Vec::new(), Vec::new(), Vec::new());
    let mut requests = 0;
    for i in 0..repeats {
        eprintln!("round {} of {repeats}: {count} records over {keys} keys", i + 1);
        let (rate, _) = run(&this, count, keys, false);
        eprintln!("  unwatched: {:.3} M/s", rate / 1e6);
        quiet.push(rate);
        let (rate, answered) = run(&this, count, keys, true);
        assert!(answered > 0, "the client got answers while the job ran");
        eprintln!("  watched: {:.3} M/s ({answered} requests answered)", rate / 1e6);
        watched.push(rate);
        requests += answered;
        if let Some(b) = &baseline {
            let (rate, _) = run(b, count, keys, false);
            eprintln!("  baseline: {:.3} M/s", rate / 1e6);
            before.push(rate);
        }
    }
    let (q, w) = (median(quiet), median(watched));
    let mut table = format!(
        "| run (median of {repeats}) | records/s | ratio |\n|---|---|---|\n\
         | unwatched | {:.3} M | 1 |\n\
         | polled every 100 ms: `/metrics`, `/v1/job`, `/v1/job/metrics`, `/v1/checkpoints` ({} requests answered in all) | {:.3} M | **{:.3}** |\n",
        q / 1e6,
        requests,
        w / 1e6,
        w / q,
    );
    if !before.is_empty() {
        let b = median(before);
        table.push_str(&format!(
            "| baseline build, unwatched | {:.3} M | {:.3} (this build / baseline: {:.3}) |\n",
            b / 1e6,
            b / q,
            q / b
        ));
    }
    println!("{table}");
    if let Ok(out) = std::env::var("WEIR_BENCH_OUT") {
        std::fs::write(out, &table).unwrap();
    }
}
