//! The REST API against a running job, checked for content: the overview
//! and the job graph as the job file and the module's bytes say, counts
//! that agree with the run's summary, watermarks that advance with the
//! wall clock, a checkpoint history whose ids and sizes match the
//! checkpoint directory, per-subtask checkpoint details, the checkpoint
//! configuration, and actions (savepoint, swap) as operations to poll.
//! Then `[rest]`: a fixed port, reads opened with `auth = "none"` while
//! actions still need the token, and bad settings refused by name.

use super::control_auth::{endpoint, request_with, wait_for};
use super::support::{JobDir, text};
use sha2::Digest;
use std::time::{Duration, Instant};
use weir_tests::artifacts;

const RECORDS: u64 = 30_000;
const RATE: u64 = 3_000;

fn write_job(dir: &JobDir, rest: &str) {
    dir.write(
        "job.toml",
        format!(
            r#"name = "watched"

[checkpointing]
interval = "300ms"

[state.checkpoints]
dir = "file://{ck}"
inline_threshold = "0"

[pipeline]
batch_size = 64
progress_interval = "100ms"

{rest}

[[sources]]
id = "gen"
kind = "generator"
count = {RECORDS}
keys = 40
records_per_second = {RATE}
timestamps = "wall-clock"

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"
parallelism = 2

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "out.txt"
"#,
            ck = dir.path().join("ck").display(),
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
}

/// One HTTP request: (status code, JSON body).
fn call(port: u16, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, serde_json::Value) {
    let (code, answer) = request_with(port, method, path, token, body);
    (code, serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{method} {path}: {e}: {answer:?}")))
}

/// Follows an accepted action to its end.
fn follow(port: u16, token: &str, accepted: &serde_json::Value) -> serde_json::Value {
    let location = accepted["location"].as_str().unwrap();
    wait_for(port, token, location, |o| o["status"] != "in-progress")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Bytes of the files of checkpoint directory `chk`, `_metadata` aside.
fn state_bytes(chk: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![chk.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(e.path());
            } else if e.file_name() != "_metadata" {
                total += meta.len();
            }
        }
    }
    total
}

#[test]
fn every_endpoint_answers_what_the_running_job_is_doing() {
    let dir = JobDir::new();
    write_job(&dir, "");
    let child = dir.start(&[]);
    let (port, token) = endpoint(&dir, "watched");
    let t = Some(token.as_str());

    // The overview.
    let job = wait_for(port, &token, "/v1/job", |j| j["state"] == "running" && j["records_read"].as_u64() > Some(0));
    assert_eq!(job["job"], "watched");
    assert_eq!((job["attempt"].as_u64(), job["parallelism"].as_u64()), (Some(0), Some(2)));
    assert_eq!(job["max_parallelism"], 128);
    let started = job["start_time_ms"].as_i64().unwrap();
    let expected_start = now_ms() - job["uptime_ms"].as_i64().unwrap();
    assert!((started - expected_start).abs() < 2_000, "start {started} vs now - uptime {expected_start}");
    assert_eq!(job["restarts"].as_array().unwrap().len(), 0);

    // The graph: the job file's nodes and edges, the module's own SHA-256.
    let (code, graph) = call(port, "GET", "/v1/job/plan", t, "");
    assert_eq!(code, 200, "{graph}");
    let ids: Vec<&str> = graph["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["gen", "counter", "out"]);
    let counter = &graph["nodes"][1];
    assert_eq!((counter["role"].as_str(), counter["parallelism"].as_u64()), (Some("operator"), Some(2)));
    assert_eq!(
        (graph["nodes"][0]["kind"].as_str(), graph["nodes"][2]["kind"].as_str()),
        (Some("generator"), Some("file"))
    );
    let bytes = std::fs::read(artifacts::WORD_COUNT_COUNTER).unwrap();
    let sha = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(counter["module"]["sha256"], sha);
    assert_eq!(counter["backend"], "hashmap");
    let edges: Vec<(String, String, String)> = graph["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from"].to_string(), e["to"].to_string(), e["partitioning"].to_string()))
        .collect();
    let edge = |a: &str, b: &str, p: &str| (format!("{a:?}"), format!("{b:?}"), format!("{p:?}"));
    assert_eq!(edges, [edge("gen", "counter", "key"), edge("counter", "out", "rebalance")]);

    // Watermarks advance, and trail the wall clock (the generator stamps
    // records with it) by little.
    let first = wait_for(port, &token, "/v1/job/watermarks", |w| w["nodes"][1]["min_input"].is_i64());
    let w1 = first["nodes"][1]["min_input"].as_i64().unwrap();
    assert_eq!(first["nodes"][1]["subtasks"].as_array().unwrap().len(), 2);
    assert!(first["nodes"][0]["subtasks"][0]["output"].is_i64(), "the source's output watermark: {first}");
    let later = wait_for(port, &token, "/v1/job/watermarks", |w| w["nodes"][1]["min_input"].as_i64() > Some(w1 + 200));
    let lag = later["nodes"][1]["lag_ms"].as_i64().unwrap();
    assert!((0..5_000).contains(&lag), "watermark lag {lag} ms: {later}");

    // Metrics as JSON: every subtask, rates once reported twice.
    let metrics = wait_for(port, &token, "/v1/job/metrics", |m| {
        m["tasks"].as_array().unwrap().iter().all(|t| t["rates"].is_object())
    });
    assert_eq!(metrics["tasks"].as_array().unwrap().len(), 4);
    // The guest's side: memory within the limit, calls of the batch
    // export, the key groups split between the two subtasks.
    let counters: Vec<&serde_json::Value> =
        metrics["tasks"].as_array().unwrap().iter().filter(|t| t["role"] == "operator").collect();
    let key_groups: u64 = counters.iter().map(|t| t["guest"]["key_groups"].as_u64().unwrap()).sum();
    assert_eq!(key_groups, 128, "{metrics}");
    for t in &counters {
        let g = &t["guest"];
        let memory = g["memory_bytes"].as_u64().unwrap();
        assert!((64 << 10..=256 << 20).contains(&memory), "a page at least, the limit at most: {g}");
        assert!(g["memory_peak_bytes"].as_u64() >= Some(memory), "{g}");
        let batch = &g["calls"]["process-batch"];
        assert!(batch["count"].as_u64() > Some(0) && batch["time_ns"].as_u64() > Some(0), "{g}");
        assert_eq!(g["calls"]["open"]["count"], 1, "{g}");
        assert_eq!((g["backend"].as_str(), g["traps"].as_u64()), (Some("hashmap"), Some(0)), "{g}");
    }
    // A pipeline that keeps up with its source: no back-pressure anywhere.
    let (_, bp) = call(port, "GET", "/v1/job/backpressure", t, "");
    for n in bp["nodes"].as_array().unwrap() {
        assert_eq!(n["level"], "ok", "{bp}");
        assert!(n["ratio"].as_f64().unwrap() <= 0.1, "{bp}");
    }

    // The configuration.
    let (_, config) = call(port, "GET", "/v1/checkpoints/config", t, "");
    assert_eq!((config["enabled"].as_bool(), config["interval_ms"].as_u64()), (Some(true), Some(300)));
    assert_eq!((config["mode"].as_str(), config["backend"].as_str()), (Some("exactly-once"), Some("hashmap")));
    assert_eq!(config["checkpoints_dir"], format!("file://{}", dir.path().join("ck").display()));

    // A savepoint, as an operation to follow.
    let sp_dir = dir.path().join("sp");
    let body = format!(r#"{{"dir": "file://{}"}}"#, sp_dir.display());
    let (code, accepted) = call(port, "POST", "/v1/savepoints", t, &body);
    assert_eq!(code, 202, "{accepted}");
    let op = follow(port, &token, &accepted);
    assert_eq!((op["status"].as_str(), op["kind"].as_str()), (Some("completed"), Some("savepoint")), "{op}");
    let location = op["savepoint"]["location"].as_str().unwrap().to_string();
    let sp_path = std::path::PathBuf::from(location.strip_prefix("file://").unwrap());
    assert!(sp_path.join("_metadata").is_file(), "{location}");
    let sp_id = op["savepoint"]["id"].as_u64().unwrap();

    // A swap of an operator the job lacks: accepted, then failed, named.
    let module = std::path::absolute(artifacts::WORD_COUNT_COUNTER).unwrap();
    let body = format!(r#"{{"operator": "nope", "module": "{}"}}"#, module.display());
    let (code, accepted) = call(port, "POST", "/v1/swaps", t, &body);
    assert_eq!(code, 202, "{accepted}");
    let op = follow(port, &token, &accepted);
    assert_eq!(op["status"], "failed");
    assert!(op["error"].as_str().unwrap().contains("no operator 'nope'"), "{op}");
    let (_, ops) = call(port, "GET", "/v1/operations", t, "");
    let kinds: Vec<&str> = ops.as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["swap", "savepoint"], "newest first");
    assert_eq!(call(port, "GET", "/v1/swaps/swap-999", t, "").0, 404);

    // The checkpoint history against the checkpoint directory.
    let overview = wait_for(port, &token, "/v1/checkpoints", |c| c["counts"]["completed"].as_u64() >= Some(4));
    assert_eq!(overview["latest_savepoint"]["id"].as_u64(), Some(sp_id), "{overview}");
    assert_eq!(overview["latest_savepoint"]["location"], location.as_str());
    let latest = &overview["latest_completed"];
    let id = latest["id"].as_u64().unwrap();
    let chk = dir.path().join("ck").join("watched").join(format!("chk-{id}"));
    assert!(chk.join("_metadata").is_file(), "{} (retained) is on disk", chk.display());
    assert_eq!(latest["size"].as_u64(), Some(state_bytes(&chk)), "the state files' bytes");
    assert_eq!(latest["incremental_size"], latest["size"], "a full checkpoint stores everything anew");
    assert_eq!((latest["acknowledged"].as_u64(), latest["subtasks"].as_u64()), (Some(4), Some(4)));
    let history = overview["history"].as_array().unwrap();
    let ids: Vec<u64> = history.iter().map(|s| s["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    for s in history.iter().filter(|s| s["status"] == "completed" && s["savepoint"] == false) {
        assert!(s["duration_ms"].as_u64().unwrap() < 30_000);
        assert!(s["trigger_time_ms"].as_i64().unwrap() >= started);
    }
    // Every checkpoint directory this run left is in the history.
    for e in std::fs::read_dir(dir.path().join("ck").join("watched")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(n) = name.strip_prefix("chk-").and_then(|n| n.parse::<u64>().ok()) {
            assert!(ids.contains(&n), "{name} on disk is not in the history {ids:?}");
        }
    }

    // One checkpoint's parts, per subtask.
    let (code, details) = call(port, "GET", &format!("/v1/checkpoints/{id}"), t, "");
    assert_eq!(code, 200, "{details}");
    let tasks = details["tasks"].as_array().unwrap();
    let names: Vec<String> =
        tasks.iter().map(|t| format!("{}#{}", t["node"].as_str().unwrap(), t["subtask"])).collect();
    assert_eq!(names, ["counter#0", "counter#1", "gen#0", "out#0"]);
    let counter_bytes: u64 = tasks[..2].iter().map(|t| t["size"].as_u64().unwrap()).sum();
    assert_eq!(counter_bytes, latest["size"].as_u64().unwrap());
    for t in tasks {
        assert!(t["ack_ms"].as_u64() >= t["start_delay_ms"].as_u64(), "{t}");
        assert!(t["sync_ms"].as_f64().unwrap() >= 0.0 && t["async_ms"].as_f64().unwrap() >= 0.0, "{t}");
    }
    // Each counter subtask's state size is its part of a checkpoint.
    let metrics = wait_for(port, &token, "/v1/job/metrics", |m| m["tasks"][1]["guest"]["state_bytes"].is_u64());
    let (_, overview) = call(port, "GET", "/v1/checkpoints", t, "");
    let latest = overview["latest_completed"]["id"].as_u64().unwrap();
    let (_, parts) = call(port, "GET", &format!("/v1/checkpoints/{latest}"), t, "");
    let sizes: Vec<u64> = parts["tasks"].as_array().unwrap()[..2].iter().map(|t| t["size"].as_u64().unwrap()).collect();
    let state: Vec<u64> = metrics["tasks"].as_array().unwrap()[1..3]
        .iter()
        .map(|t| t["guest"]["state_bytes"].as_u64().unwrap())
        .collect();
    // A checkpoint may complete between the two reads: then the sizes are
    // the next one's, which a paced job changes little.
    let close = |a: u64, b: u64| a.abs_diff(b) * 10 <= a.max(b);
    assert!(sizes.iter().zip(&state).all(|(a, b)| close(*a, *b)), "checkpoint {sizes:?} vs metrics {state:?}");
    assert_eq!(call(port, "GET", "/v1/checkpoints/999999", t, "").0, 404);
    assert_eq!(call(port, "GET", "/v1/checkpoints/x", t, "").0, 400);

    // Counts the API reported agree with each other and, at the end, with
    // the run's own summary.
    let last = wait_for(port, &token, "/v1/job", |_| true);
    let read = last["records_read"].as_u64().unwrap();
    let node = |id: &str| last["nodes"].as_array().unwrap().iter().find(|n| n["id"] == id).unwrap().clone();
    assert_eq!(node("gen")["records_in"].as_u64(), Some(read), "{last}");
    assert!(read <= RECORDS, "{last}");
    let (ok, log) = dir.finish(child);
    assert!(ok, "{log}");
    let summary = |role: &str, id: &str| -> Vec<String> {
        let line = log.lines().find(|l| l.split_whitespace().take(2).eq([role, id])).unwrap_or_else(|| panic!("{log}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(summary("source", "gen")[3], RECORDS.to_string(), "{log}");
    assert_eq!(summary("operator", "counter")[3], RECORDS.to_string(), "{log}");
}

#[test]
fn rest_settings_bind_a_port_open_reads_and_keep_actions_behind_the_token() {
    // A free port, released for the host to take.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = JobDir::new();
    // Opening reads is the host file's choice (a job file may not).
    dir.write("host.toml", "rest.auth = \"none\"\n");
    write_job(&dir, &format!("[rest]\nbind = \"127.0.0.1:{port}\""));
    let child = dir.start(&["--config", "host.toml"]);
    let (run_port, token) = endpoint(&dir, "watched");
    assert_eq!(run_port, port, "the run file names the bound port");
    wait_for(port, &token, "/v1/job", |j| j["state"] == "running");

    // Reads without a token.
    let (code, job) = call(port, "GET", "/v1/job", None, "");
    assert_eq!((code, job["job"].as_str()), (200, Some("watched")));
    assert_eq!(call(port, "GET", "/v1/checkpoints", None, "").0, 200);
    // Actions without it, or with a wrong one: refused, and nothing ran.
    for given in [None, Some("wrong")] {
        for (path, body) in [("/v1/savepoints", "{}"), ("/v1/swaps", "{}"), ("/v1/cancel", "")] {
            let (code, answer) = call(port, "POST", path, given, body);
            assert_eq!(code, 401, "POST {path} with {given:?}: {answer}");
            assert!(answer["error"].as_str().unwrap().contains("bearer token"), "{answer}");
        }
    }
    let (_, ops) = call(port, "GET", "/v1/operations", None, "");
    assert_eq!(ops, serde_json::json!([]));
    // The token still steers it: cancel ends the run, non-zero.
    let out = dir.host(&["cancel", "watched"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, log) = dir.finish(child);
    assert!(!ok, "a cancelled run exits non-zero: {log}");

    // Bad settings: named, non-zero, before anything runs.
    for (rest, named) in [
        ("[rest]\nbind = \"localhost\"", "rest.bind = \"localhost\""),
        ("[rest]\nauth = \"open\"", "rest.auth = \"open\""),
        ("[rest]\nport = 1", "port"),
    ] {
        write_job(&dir, rest);
        let out = dir.host(&["run", "job.toml"]);
        assert!(!out.status.success(), "{rest}");
        let err = text(&out.stderr);
        assert!(err.contains(named) && err.contains("job.toml"), "{rest}: {err}");
    }
    // A port another process holds: refused, naming the setting.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    write_job(&dir, &format!("[rest]\nbind = \"127.0.0.1:{taken_port}\""));
    let out = dir.host(&["run", "job.toml"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("cannot listen on rest.bind = 127.0.0.1:{taken_port}")), "{err}");
}

#[test]
fn a_slow_source_reports_progress_and_watermarks_while_it_runs() {
    // 40 records a second: a batch of 1024 would take 25 s to fill. One
    // key: one of the two counter subtasks gets no record at all.
    let dir = JobDir::new();
    write_job(&dir, "");
    let job = dir.read("job.toml").replace(&format!("records_per_second = {RATE}"), "records_per_second = 40");
    let job = job.replace("keys = 40", "keys = 1");
    let job = job.replace("batch_size = 64", "batch_size = 1024").replace(&format!("count = {RECORDS}"), "count = 400");
    dir.write("job.toml", job);
    let child = dir.start(&[]);
    let (port, token) = endpoint(&dir, "watched");
    let started = Instant::now();
    let first = wait_for(port, &token, "/v1/job/watermarks", |w| w["nodes"][1]["min_input"].is_i64());
    let job = wait_for(port, &token, "/v1/job", |j| j["records_read"].as_u64() > Some(0));
    assert!(started.elapsed() < Duration::from_secs(5), "progress came after {:?}: {job}", started.elapsed());
    let w1 = first["nodes"][1]["min_input"].as_i64().unwrap();
    std::thread::sleep(Duration::from_millis(1_000));
    let (_, later) = call(port, "GET", "/v1/job/watermarks", Some(&token), "");
    let w2 = later["nodes"][1]["min_input"].as_i64().unwrap();
    assert!(w2 >= w1 + 500, "the watermark follows the records' time: {w1} then {w2}");
    let (_, job) = call(port, "GET", "/v1/job", Some(&token), "");
    let read = job["records_read"].as_u64().unwrap();
    assert!((20..400).contains(&read), "{job}");
    // Every subtask, the one without input too, reports that it is idle.
    wait_for(port, &token, "/v1/job/backpressure", |b| {
        b["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| n["subtasks"].as_array().unwrap())
            .all(|s| s["idle_ratio"].as_f64().unwrap() > 0.5)
    });
    assert_eq!(call(port, "POST", "/v1/cancel", Some(&token), "").0, 200);
    let (ok, _) = dir.finish(child);
    assert!(!ok, "cancelled");
}

#[test]
fn a_restart_shows_its_cause_and_the_guest_trap_that_caused_it() {
    let dir = JobDir::new();
    dir.write(
        "job.toml",
        format!(
            r#"name = "watched"

[checkpointing]
interval = "300ms"

[restart-strategy]
delay = "200ms"

[[sources]]
id = "gen"
kind = "generator"
count = 20000
keys = 10
records_per_second = 2000

[[operators]]
uid = "flaky"
module = "{misbehave}"
input = "gen"
partition = "forward"
params = {{ mode = "trap-once" }}

[[operators]]
uid = "counter"
module = "{counter}"
input = "flaky"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#,
            misbehave = artifacts::MISBEHAVE,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
    let child = dir.start(&[]);
    let (port, token) = endpoint(&dir, "watched");
    let job = wait_for(port, &token, "/v1/job", |j| j["attempt"] == 1 && j["state"] == "running");
    let restarts = job["restarts"].as_array().unwrap();
    assert_eq!(restarts.len(), 1, "{job}");
    assert_eq!(restarts[0]["attempt"], 1);
    let cause = restarts[0]["cause"].as_str().unwrap();
    assert!(cause.contains("flaky") && cause.contains("misbehave: trap"), "{cause}");
    assert!(restarts[0]["time_ms"].as_i64().unwrap() >= job["start_time_ms"].as_i64().unwrap(), "{job}");
    let metrics = wait_for(port, &token, "/v1/job/metrics", |m| {
        m["tasks"].as_array().unwrap().iter().any(|t| t["node"] == "flaky" && t["guest"]["calls"].is_object())
    });
    let flaky = metrics["tasks"].as_array().unwrap().iter().find(|t| t["node"] == "flaky").unwrap();
    assert_eq!((flaky["guest"]["traps"].as_u64(), flaky["guest"]["interruptions"].as_u64()), (Some(1), Some(0)));
    let counter = metrics["tasks"].as_array().unwrap().iter().find(|t| t["node"] == "counter").unwrap();
    assert_eq!(counter["guest"]["traps"], 0, "{counter}");
    assert_eq!(metrics["restarts"], 1);
    assert_eq!(call(port, "POST", "/v1/cancel", Some(&token), "").0, 200);
    let (ok, _) = dir.finish(child);
    assert!(!ok, "cancelled");
}
