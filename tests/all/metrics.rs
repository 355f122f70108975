//! `GET /metrics` on a running job: the Prometheus text a scraper reads,
//! parsed by a Prometheus parser, with Flink's names, one series per
//! subtask, counts consistent with `host status` taken around it and with
//! the checkpoint directory, and the bearer token required.

use super::control_auth::request;

use super::support::JobDir;
use std::time::{Duration, Instant};
use weir_tests::artifacts;

const RECORDS: u64 = 12_000;

fn write_job(dir: &JobDir) {
    dir.write(
        "job.toml",
        format!(
            r#"name = "scraped"

[checkpointing]
interval = "300ms"
# Every checkpoint stays, so the one a scrape names is still on disk when
# the test looks: with one kept, the next (300 ms later) had replaced it
# on a loaded machine.
retained = 1000

[state.checkpoints]
dir = "file://{ck}"

[[sources]]
id = "gen"
kind = "generator"
count = {RECORDS}
keys = 20
records_per_second = 3000

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"
parallelism = 2

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#,
            ck = dir.path().join("ck").display(),
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
}

/// The samples of one scrape: (metric name, labels, value).
pub fn scrape(port: u16, token: &str) -> Vec<(String, std::collections::HashMap<String, String>, f64)> {
    let (code, body) = request(port, "GET", "/metrics", Some(token));
    assert_eq!(code, 200, "{body}");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap_or_else(|e| panic!("{e}: not Prometheus text:\n{body}"));
    scrape
        .samples
        .into_iter()
        .map(|s| {
            let value = match s.value {
                prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Counter(v) => v,
                prometheus_parse::Value::Untyped(v) => v,
                other => panic!("{} is {other:?}", s.metric),
            };
            (s.metric, s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), value)
        })
        .collect()
}

fn job_value(samples: &[(String, std::collections::HashMap<String, String>, f64)], name: &str) -> f64 {
    let found: Vec<f64> = samples.iter().filter(|s| s.0 == name).map(|s| s.2).collect();
    assert_eq!(found.len(), 1, "{name}: one series, found {found:?}");
    found[0]
}

#[test]
fn metrics_have_flinks_names_one_series_per_subtask_and_agree_with_status_and_checkpoints() {
    let dir = JobDir::new();
    write_job(&dir);
    let child = dir.start(&[]);
    let before = dir.wait_for_status("scraped", "records read", |s| {
        s["state"] == "running" && s["records_read"].as_u64() > Some(0)
    });
    let run: serde_json::Value = serde_json::from_str(&dir.read(".run/scraped.json")).unwrap();
    let (port, token) = (run["port"].as_u64().unwrap() as u16, run["token"].as_str().unwrap().to_string());

    // The token is required, as for the rest of the API.
    assert_eq!(request(port, "GET", "/metrics", None).0, 401);
    assert_eq!(request(port, "GET", "/metrics", Some("wrong")).0, 401);

    // Wait for two completed checkpoints, scraping as a Prometheus server would.
    let samples = dir.wait_until("a second checkpoint in the metrics", || {
        Some(scrape(port, &token)).filter(|s| job_value(s, "weir_job_numberOfCompletedCheckpoints") >= 2.0)
    });
    let after = dir.status("scraped").expect("still running");

    // One series per subtask, labelled as Flink labels them.
    let records_in: Vec<_> = samples.iter().filter(|s| s.0 == "weir_task_numRecordsIn").collect();
    let mut tasks: Vec<(String, String)> =
        records_in.iter().map(|s| (s.1["task_name"].clone(), s.1["subtask_index"].clone())).collect();
    tasks.sort();
    let want: Vec<(String, String)> =
        [("counter", "0"), ("counter", "1"), ("gen", "0"), ("out", "0")].map(|(t, i)| (t.into(), i.into())).into();
    assert_eq!(tasks, want);
    assert!(records_in.iter().all(|s| s.1["job_name"] == "scraped"));
    let value = |name: &str, task: &str| -> f64 {
        samples.iter().filter(|s| s.0 == name && s.1["task_name"] == task).map(|s| s.2).sum()
    };
    // Between the two status calls, and conserved along the pipeline (up
    // to what is in flight).
    let read = value("weir_task_numRecordsIn", "gen");
    assert!(read >= before["records_read"].as_f64().unwrap() && read <= after["records_read"].as_f64().unwrap());
    assert!(read > 0.0 && read < RECORDS as f64, "the job is mid-stream: {read}");
    assert!(value("weir_task_numRecordsOut", "gen") <= read);
    assert!(value("weir_task_numRecordsIn", "counter") <= value("weir_task_numRecordsOut", "gen"));
    assert!(value("weir_task_numRecordsIn", "out") <= value("weir_task_numRecordsOut", "counter"));

    // The latest completed checkpoint is in the checkpoint directory, with
    // a size and a duration.
    let id = job_value(&samples, "weir_job_lastCompletedCheckpointId") as u64;
    assert!(dir.path().join(format!("ck/scraped/chk-{id}/_metadata")).is_file(), "chk-{id} is not on disk");
    assert!(job_value(&samples, "weir_job_lastCheckpointSize") > 0.0);
    assert!(job_value(&samples, "weir_job_lastCheckpointDuration") >= 0.0);
    assert_eq!(job_value(&samples, "weir_job_numberOfFailedCheckpoints"), 0.0);
    assert_eq!(job_value(&samples, "weir_job_numRestarts"), 0.0);
    assert!(job_value(&samples, "weir_job_uptime") > 0.0);

    let (ok, log) = dir.finish(child);
    assert!(ok, "{log}");
}

/// Runs a generator into `operator` (a module and its params) into a
/// discard sink, waits until the source's back-pressure meter has been
/// reported twice, and returns the last scrape; then cancels the job.
fn meters_of(operator: &str, source: &str) -> Vec<(String, std::collections::HashMap<String, String>, f64)> {
    let dir = JobDir::new();
    dir.write(
        "job.toml",
        format!(
            r#"name = "scraped"

[pipeline]
batch_size = 64
progress_interval = "200ms"

[[sources]]
id = "gen"
kind = "generator"
count = 100000000
keys = 10
{source}

[[operators]]
uid = "op"
{operator}
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "op"
"#
        ),
    );
    let child = dir.start(&[]);
    let until = Instant::now() + Duration::from_secs(60);
    while dir.status("scraped").is_none_or(|s| s["state"] != "running") {
        assert!(Instant::now() < until, "the job never ran; log:\n{}", dir.read("run.log"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let run: serde_json::Value = serde_json::from_str(&dir.read(".run/scraped.json")).unwrap();
    let (port, token) = (run["port"].as_u64().unwrap() as u16, run["token"].as_str().unwrap().to_string());
    // Two seconds of meters: a few reporting intervals.
    std::thread::sleep(Duration::from_secs(2));
    let samples = loop {
        let samples = scrape(port, &token);
        if samples.iter().any(|s| s.0 == "weir_task_backPressuredTimeMsPerSecond" && s.1["task_name"] == "gen") {
            break samples;
        }
        assert!(Instant::now() < until, "no meters; log:\n{}", dir.read("run.log"));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(request(port, "POST", "/v1/cancel", Some(&token)).0, 200);
    let _ = dir.finish(child);
    samples
}

fn meter(samples: &[(String, std::collections::HashMap<String, String>, f64)], name: &str, task: &str) -> f64 {
    samples.iter().find(|s| s.0 == name && s.1["task_name"] == task).unwrap_or_else(|| panic!("{name} of {task}")).2
}

#[test]
fn back_pressure_shows_upstream_of_a_slow_operator_and_not_in_a_pipeline_that_keeps_up() {
    // The operator sleeps 2 ms per record: the unpaced source spends its
    // time blocked on the full channel to it, and the operator is busy.
    let slow = meters_of(
        &format!("module = \"{}\"\nparams = {{ mode = \"slow\", sleep_ms = \"2\" }}", artifacts::MISBEHAVE),
        "",
    );
    let blocked = meter(&slow, "weir_task_backPressuredTimeMsPerSecond", "gen");
    assert!(blocked > 700.0, "the source upstream of a slow operator is blocked {blocked} ms/s");
    let busy = meter(&slow, "weir_task_busyTimeMsPerSecond", "op");
    assert!(busy > 700.0, "the slow operator is busy {busy} ms/s");
    let rate = meter(&slow, "weir_task_numRecordsInPerSecond", "op");
    assert!(rate > 100.0 && rate < 600.0, "2 ms per record is at most 500 records/s, got {rate}");

    // A counter keeps up with 2000 records/s: nothing is blocked, and the
    // operator is mostly idle.
    let light = meters_of(&format!("module = \"{}\"", artifacts::WORD_COUNT_COUNTER), "records_per_second = 2000");
    let blocked = meter(&light, "weir_task_backPressuredTimeMsPerSecond", "gen");
    assert!(blocked < 50.0, "a source whose operator keeps up is blocked {blocked} ms/s");
    let idle = meter(&light, "weir_task_idleTimeMsPerSecond", "op");
    assert!(idle > 500.0, "an operator with little to do is idle {idle} ms/s");
}
