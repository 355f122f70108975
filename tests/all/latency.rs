//! Latency end to end: the `latency` sink's percentiles against latencies
//! computed here from known timestamps; `pipeline.max_batch_delay` bounding
//! how long a slow source's records wait in a partly filled batch; and the
//! synchronous pause of RocksDB checkpoints staying short while every key
//! is rewritten between checkpoints.

use super::support::JobDir;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn report(dir: &JobDir) -> serde_json::Value {
    serde_json::from_str(&dir.read("latency.json")).unwrap()
}

fn us(report: &serde_json::Value, field: &str) -> i64 {
    report[field].as_i64().unwrap_or_else(|| panic!("{field} in {report}"))
}

#[test]
fn the_latency_sink_reports_percentiles_of_arrival_minus_timestamp() {
    let dir = JobDir::new();
    // 200 records stamped 1 to 200 seconds before the job starts (plus a
    // few milliseconds each, so they are not round).
    let start = now_ms();
    let ages_ms: Vec<i64> = (1..=200).map(|s| s * 1000 + s % 7).collect();
    let lines: String = ages_ms.iter().map(|age| format!("{{\"k\":\"a\",\"t\":{}}}\n", start - age)).collect();
    dir.write("in.jsonl", lines);
    dir.write(
        "job.toml",
        r#"name = "latency-sink"

[[sources]]
id = "in"
kind = "file"
path = "in.jsonl"
format = "jsonl"
key_field = "k"
timestamp_field = "t"

[[sinks]]
id = "out"
kind = "latency"
output = "latency.json"
input = "in"
"#,
    );
    dir.succeeds(&[]);
    // Every record arrived between `start` and now: its latency is its age
    // plus that delay, and the percentiles are those of the sorted ages.
    let delay_ms = now_ms() - start;
    let r = report(&dir);
    assert_eq!(r["count"], 200, "{r}");
    assert_eq!(r["untimed"], 0, "{r}");
    assert_eq!(r["unit"], "ms");
    let mut sorted = ages_ms.clone();
    sorted.sort();
    // hdrhistogram keeps three significant digits: 0.1% of the value.
    let check = |field: &str, age_ms: i64| {
        let got = us(&r, field);
        let low = age_ms * 1000;
        let high = (age_ms + delay_ms) * 1000 + age_ms; // + 0.1%
        assert!((low..=high).contains(&got), "{field} = {got} us, want {low}..={high} (age {age_ms} ms): {r}");
    };
    check("min_us", sorted[0]);
    check("p50_us", sorted[99]);
    check("p90_us", sorted[179]);
    check("p99_us", sorted[197]);
    check("max_us", sorted[199]);
}

/// A generator paced at 5 records per second stamps each record with the
/// time it was due; the counter passes the stamp on; the latency sink
/// measures when it arrived. Returns the max latency in milliseconds.
fn slow_source_max_latency_ms(max_batch_delay: &str) -> i64 {
    let dir = JobDir::new();
    let pipeline = format!("[pipeline]\nbatch_size = 1024\nmax_batch_delay = \"{max_batch_delay}\"\n");
    dir.write("job.toml", weir_tests::latency_job(1, 10, 3, Some(5), &pipeline));
    dir.succeeds(&[]);
    let r = report(&dir);
    assert_eq!(r["count"], 10, "{r}");
    us(&r, "max_us") / 1000
}

#[test]
fn a_slow_sources_records_wait_in_a_batch_no_longer_than_max_batch_delay() {
    // One record every 200 ms, batches of 1024: without the delay bound a
    // record would wait for the end of the stream (2 s).
    let bounded = slow_source_max_latency_ms("30ms");
    assert!(bounded < 30 + 250, "max latency {bounded} ms with max_batch_delay = 30ms");
    // The bound is what holds records back: with a longer one they wait
    // for it (the first waits the whole 700 ms).
    let long = slow_source_max_latency_ms("700ms");
    assert!(long >= 650, "max latency {long} ms with max_batch_delay = 700ms");
}

/// "median 1.527 ms, max 7.099 ms" after "sync pause" in a summary: the max
/// in milliseconds.
fn max_sync_pause_ms(summary: &str) -> f64 {
    let part = summary.split("sync pause ").nth(1).unwrap_or_else(|| panic!("no sync pause in:\n{summary}"));
    part.split("max ").nth(1).and_then(|m| m.split(" ms").next()).unwrap().parse().unwrap()
}

/// Timing-sensitive in the way the issue allows: the bound (200 ms) is
/// over 20 times what this takes on an idle 2-core machine (a few ms) and
/// under the pause a freeze that wrote the cache back before its RocksDB
/// checkpoint had at this size (400-600 ms); `cargo bench --bench latency`
/// measures it.
#[test]
fn rocksdb_checkpoints_pause_briefly_while_every_key_is_rewritten_between_them() {
    let dir = JobDir::new();
    dir.write(
        "job.toml",
        weir_tests::counter_job(
            "rocks-pause",
            3_000_000,
            1_000_000,
            1,
            &format!(
                "[checkpointing]\ninterval = \"500ms\"\n\n[state.backend]\ntype = \"rocksdb\"\nincremental = true\nrocksdb.localdir = \"{}\"\n\n[state.checkpoints]\ndir = \"file://{}\"\n",
                dir.path().join("rocksdb").display(),
                dir.path().join("ck").display()
            ),
        ),
    );
    let summary = dir.succeeds(&[]);
    assert!(summary.contains("counter                     1        3000000"), "{summary}");
    let completed: u32 = summary
        .split("\n  checkpoints: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(completed >= 2, "at least two checkpoints while keys were rewritten:\n{summary}");
    let max = max_sync_pause_ms(&summary);
    assert!(max < 200.0, "a RocksDB checkpoint paused records for {max} ms:\n{summary}");
}
