//! Deterministic replay end to end: jobs with `replay = { record = true }`
//! run on the real binary, then `host replay` runs the operator again from
//! one of their checkpoints over what was recorded. The same module
//! reproduces the recorded output byte for byte (`--check`); a changed gap
//! reports the changed sessions; a guest reading the wall clock reads the
//! recorded time; the chain of recordings survives a SIGKILL and a resume.
//! How much input a replay covers is checked against the source's position
//! in the checkpoint (`host inspect`) and the input file, not against the
//! replay's own bookkeeping.

use super::checkpoints::spawn;
use super::rescales::rescaled_at;
use super::session_windows::{expected_sessions, generated_clicks};
use super::support::{JobDir, text};
use serde_json::Value;
use std::time::Duration;
use weir_tests::artifacts::{MISBEHAVE, SESSION_WINDOWS};

const CLICKS: usize = 3_000;

/// The sessionizer at parallelism 2 over [`CLICKS`] generated clicks, paced
/// at 1000 a second, checkpoints every 200 ms (all kept), recording on.
fn write_sessions_job(dir: &JobDir, extra: &str) -> Vec<(String, i64)> {
    let clicks = generated_clicks(CLICKS, 2_000);
    let input: String = clicks.iter().map(|(u, t)| format!("{{\"user\": \"{u}\", \"ts\": {t}}}\n")).collect();
    dir.write("clicks.jsonl", input);
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "rec"
parallelism = 2
{extra}

[checkpointing]
interval = "200ms"
retained = 1000

[state.checkpoints]
dir = "file://{root}/ck"

[pipeline]
batch_size = 64

[[sources]]
id = "clicks"
kind = "file"
path = "clicks.jsonl"
format = "jsonl"
key_field = "user"
timestamp_field = "ts"
max_out_of_orderness = "2s"
records_per_second = 1000

[[operators]]
uid = "sessions"
module = "{SESSION_WINDOWS}"
input = "clicks"
partition = "key"
params = {{ gap_ms = 10000 }}
replay = {{ record = true }}

[[sinks]]
id = "out"
kind = "file"
input = "sessions"
path = "sessions.txt"
"#
        ),
    );
    clicks
}

/// The job's completed checkpoints, in order.
fn checkpoints(dir: &JobDir, job: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(dir.path().join("ck").join(job))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .filter(|id| dir.path().join(format!("ck/{job}/chk-{id}/_metadata")).exists())
        .collect();
    ids.sort();
    ids
}

/// `host replay` of `operator` from checkpoint `id` with `args`: (success,
/// the JSON report if it printed one, stderr).
fn replay(dir: &JobDir, job: &str, id: u64, operator: &str, args: &[&str]) -> (bool, Option<Value>, String) {
    let chk = format!("ck/{job}/chk-{id}");
    let mut all = vec!["replay", chk.as_str(), "--operator", operator, "--json"];
    all.extend_from_slice(args);
    let out = dir.host(&all);
    (out.status.success(), serde_json::from_slice(&out.stdout).ok(), text(&out.stderr))
}

/// The file source's byte position in checkpoint `id`, as `host inspect`
/// shows it.
fn source_position(dir: &JobDir, job: &str, id: u64) -> u64 {
    let out = dir.host(&["inspect", &format!("ck/{job}/chk-{id}")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let line = shown.lines().find(|l| l.starts_with("source ")).unwrap_or_else(|| panic!("{shown}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Lines of `file` that start at or after byte `position`.
fn lines_from(dir: &JobDir, file: &str, position: u64) -> u64 {
    let bytes = std::fs::read(dir.path().join(file)).unwrap();
    let mut at = 0u64;
    let mut n = 0;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        if at >= position {
            n += 1;
        }
        at += line.len() as u64;
    }
    n
}

/// User `u`'s clicks with times in `[s, e]`.
fn clicks_within(clicks: &[(String, i64)], u: &str, s: i64, e: i64) -> u64 {
    clicks.iter().filter(|(user, t)| user == u && (s..=e).contains(t)).count() as u64
}

#[test]
fn a_recorded_session_run_replays_byte_for_byte_and_a_changed_gap_reports_the_changed_sessions() {
    let dir = JobDir::new();
    let clicks = write_sessions_job(&dir, "");
    dir.succeeds(&[]);
    let output = dir.read("sessions.txt");
    let mut sorted: Vec<&str> = output.lines().collect();
    sorted.sort();
    assert_eq!(sorted, expected_sessions(&clicks, 10_000), "the recorded run itself is exact");
    let ids = checkpoints(&dir, "rec");
    assert!(ids.len() >= 6, "checkpoints: {ids:?}");
    let middle = ids[ids.len() / 2];

    // The same module from a middle checkpoint: every step's output is the
    // recorded one, and every input record after the checkpoint was
    // replayed, once.
    let (ok, report, err) = replay(&dir, "rec", middle, "sessions", &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["identical"], true, "{r:#}");
    assert_eq!(r["differing_steps"], 0);
    assert_eq!(r["reached"], serde_json::json!([null, null]), "both subtasks to the end of input: {r:#}");
    let after = lines_from(&dir, "clicks.jsonl", source_position(&dir, "rec", middle));
    assert!(after > 0 && after < CLICKS as u64, "a middle checkpoint: {after} clicks after it");
    assert_eq!(r["records_in"], after, "{r:#}");
    let replayed_out = r["records_out"].as_u64().unwrap();
    assert!(replayed_out > 0 && replayed_out < output.lines().count() as u64, "{r:#}");
    assert_eq!(r["counts"]["equal"], replayed_out);

    // Up to a later checkpoint: both subtasks stop at its barrier.
    let until = ids[ids.len() / 2 + 2];
    let (ok, report, err) = replay(&dir, "rec", middle, "sessions", &["--until", &until.to_string()]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["reached"], serde_json::json!([until, until]), "{r:#}");
    let upto = after - lines_from(&dir, "clicks.jsonl", source_position(&dir, "rec", until));
    assert_eq!(r["records_in"], upto, "{r:#}");
    assert_eq!(r["identical"], true);

    // A shorter gap splits sessions: the output differs, there are more
    // sessions, and each session the report shows, recorded or replayed,
    // holds exactly the user's clicks in its span.
    let (ok, report, err) = replay(&dir, "rec", middle, "sessions", &["--param", "gap_ms=5000"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["identical"], false);
    assert!(r["differing_steps"].as_u64().unwrap() > 0);
    assert!(r["records_out"].as_u64().unwrap() > replayed_out, "more, shorter sessions: {r:#}");
    let samples = r["samples"].as_array().unwrap();
    assert!(!samples.is_empty(), "{r:#}");
    for sample in samples {
        for (side, text) in [("live", &sample["live"]), ("shadow", &sample["shadow"])] {
            let Some(session) = text.as_str() else { continue };
            let f: Vec<&str> = session.split(' ').collect();
            let (s, e, n): (i64, i64, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap());
            assert_eq!(clicks_within(&clicks, f[0], s, e), n, "{side} session {session}");
            if side == "live" {
                assert!(output.lines().any(|l| l == session), "recorded {session} is in the job's output");
            }
        }
    }
    // --check turns a difference into a failure that says how much.
    let (ok, _, err) = replay(&dir, "rec", middle, "sessions", &["--param", "gap_ms=5000", "--check"]);
    assert!(!ok && err.contains("differs from the recorded one"), "{err}");
}

#[test]
fn the_recording_chain_survives_a_kill_and_a_resume() {
    let dir = JobDir::new();
    let clicks = write_sessions_job(&dir, "");
    let mut child = dir.start(&[]);
    dir.wait_for_output("rec");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before_kill = checkpoints(&dir, "rec");
    assert!(!before_kill.is_empty());
    dir.succeeds(&["--resume"]);
    // Sessions are exactly once across the kill (a file sink may repeat
    // what followed the last checkpoint: count distinct lines).
    let output = dir.read("sessions.txt");
    let mut distinct: Vec<&str> = output.lines().collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct, expected_sessions(&clicks, 10_000));
    // From the first checkpoint, across the kill, to the end of input: the
    // recording of the resumed run follows the one of the killed run at the
    // checkpoint it resumed from, and every click after the first
    // checkpoint is replayed once.
    let first = before_kill[0];
    let (ok, report, err) = replay(&dir, "rec", first, "sessions", &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["reached"], serde_json::json!([null, null]), "{r:#}");
    let after = lines_from(&dir, "clicks.jsonl", source_position(&dir, "rec", first));
    assert_eq!(r["records_in"], after, "{r:#}");
}

#[test]
fn a_replay_stops_at_a_live_rescale_and_runs_on_from_the_checkpoints_after_it() {
    let dir = JobDir::new();
    write_sessions_job(&dir, "");
    let child = dir.start(&[]);
    dir.wait_for_output("rec");
    let out = dir.host(&["rescale", "rec", "--operator", "sessions", "-p", "3"]);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{said}");
    let at = rescaled_at(&said);
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let ids = checkpoints(&dir, "rec");
    let before = *ids.iter().find(|id| **id < at).expect("a checkpoint before the rescale");
    let after = *ids.iter().find(|id| **id > at).expect("a checkpoint after the rescale");
    // From before the rescale: both subtasks stop at its barrier, saying so.
    let (ok, report, err) = replay(&dir, "rec", before, "sessions", &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["reached"], serde_json::json!([at, at]), "{r:#}");
    assert!(r["stopped"].as_array().unwrap().iter().all(|s| s.as_str().unwrap().contains("rescaled")), "{r:#}");
    let upto = lines_from(&dir, "clicks.jsonl", source_position(&dir, "rec", before))
        - lines_from(&dir, "clicks.jsonl", source_position(&dir, "rec", at));
    assert_eq!(r["records_in"], upto, "{r:#}");
    // From after it, the three new subtasks run to the end of input.
    let (ok, report, err) = replay(&dir, "rec", after, "sessions", &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["subtasks"], 3);
    assert_eq!(r["reached"], serde_json::json!([null, null, null]), "{r:#}");
    assert_eq!(r["records_in"], lines_from(&dir, "clicks.jsonl", source_position(&dir, "rec", after)), "{r:#}");
}

/// The misbehave guest in clock mode (each record: WASI's wall clock and
/// the host's processing time), at parallelism 1 over 3000 lines paced at
/// 1500 a second, recording on; `replay_extra` goes into its replay table.
fn write_clock_job(dir: &JobDir, replay_extra: &str, retained: u32) {
    let lines: String = (0..3000).map(|i| format!("line-{i}\n")).collect();
    dir.write("lines.txt", lines);
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "clock"

[checkpointing]
interval = "200ms"
retained = {retained}

[state.checkpoints]
dir = "file://{root}/ck"

[[sources]]
id = "lines"
kind = "file"
path = "lines.txt"
records_per_second = 1500

[[operators]]
uid = "clock"
module = "{MISBEHAVE}"
input = "lines"
params = {{ mode = "clock" }}
replay = {{ record = true{replay_extra} }}

[[operators]]
uid = "plain"
module = "{MISBEHAVE}"
input = "lines"
params = {{ mode = "clock" }}

[[sinks]]
id = "out"
kind = "file"
input = "clock"
path = "out.txt"

[[sinks]]
id = "plain-out"
kind = "discard"
input = "plain"
"#
        ),
    );
}

#[test]
fn a_guest_reading_the_wall_clock_sees_the_recorded_time_in_replay() {
    let dir = JobDir::new();
    write_clock_job(&dir, "", 3);
    let started = weir_host::clock::now_ms();
    dir.succeeds(&[]);
    let ended = weir_host::clock::now_ms();
    // The guest read the time of the run, through WASI and the host alike.
    let out = dir.read("out.txt");
    assert_eq!(out.lines().count(), 3000);
    for line in out.lines() {
        let (wasi, host_time) = line.split_once(' ').unwrap();
        let (wasi, host_time): (i64, i64) = (wasi.parse().unwrap(), host_time.parse().unwrap());
        assert_eq!(wasi, host_time, "{line}");
        assert!((started..=ended).contains(&wasi), "{line} outside the run ({started}..{ended})");
    }
    // Retention keeps 3 checkpoints, and the recordings that start from
    // them and after; older recordings are deleted with their checkpoints.
    let ids = checkpoints(&dir, "clock");
    assert_eq!(ids.len(), 3, "{ids:?}");
    let mut starts: Vec<u64> = std::fs::read_dir(dir.path().join("ck/clock/recordings/clock/0"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .trim_start_matches("from-")
                .trim_end_matches(".rec")
                .parse()
                .unwrap()
        })
        .collect();
    starts.sort();
    assert!(starts.iter().all(|s| *s >= ids[0]), "recordings {starts:?}, checkpoints {ids:?}");
    assert!(starts.contains(&ids[0]), "recordings {starts:?}, checkpoints {ids:?}");
    // Later, the replay reads the recorded times: byte for byte the output.
    std::thread::sleep(Duration::from_millis(1100));
    let (ok, report, err) = replay(&dir, "clock", ids[0], "clock", &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    let after = lines_from(&dir, "lines.txt", source_position(&dir, "clock", ids[0]));
    assert_eq!(r["records_in"], after, "{r:#}");
    assert_eq!(r["records_out"], after, "{r:#}");
    assert_eq!(r["identical"], true, "{r:#}");
}

#[test]
fn a_resumed_run_keeps_the_recorded_input_of_the_checkpoint_it_restored_from() {
    let dir = JobDir::new();
    write_clock_job(&dir, "", 1);
    // The first run dies just after its third checkpoint's `_metadata` is
    // written; the run resumed from that checkpoint keeps it (no-claim)
    // while retention (1) deletes every checkpoint it completes but the
    // last, and with them the recordings no kept checkpoint starts.
    let crash = [("WEIR_CRASH_AT", "checkpoint.metadata-written:3".to_string())];
    let out = spawn(&dir, &[], &crash).wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("crashing at checkpoint.metadata-written"), "{err}");
    let restored = *checkpoints(&dir, "clock").last().unwrap();
    dir.succeeds(&["--resume"]);
    let ids = checkpoints(&dir, "clock");
    assert_eq!((ids.len(), ids[0]), (2, restored), "kept: the restored checkpoint and the last one, {ids:?}");
    // Replay from the restored checkpoint runs over every line after it,
    // through the segments of the resumed run, byte for byte.
    let (ok, report, err) = replay(&dir, "clock", restored, "clock", &["--check"]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    let after = lines_from(&dir, "lines.txt", source_position(&dir, "clock", restored));
    assert!(after > 0 && after < 3000, "{after}");
    assert_eq!((r["records_in"].as_u64(), r["records_out"].as_u64()), (Some(after), Some(after)), "{r:#}");
    assert_eq!(r["reached"], serde_json::json!([null]), "{r:#}");
}

#[test]
fn replays_that_cannot_run_say_why() {
    let dir = JobDir::new();
    write_clock_job(&dir, ", max_segment = \"2KiB\"", 100);
    dir.succeeds(&[]);
    let ids = checkpoints(&dir, "clock");
    let first = ids[0];
    // An operator without recording.
    let (ok, _, err) = replay(&dir, "clock", first, "plain", &[]);
    assert!(!ok && err.contains("recorded no input") && err.contains("replay = { record = true }"), "{err}");
    // An operator the checkpoint does not have.
    let (ok, _, err) = replay(&dir, "clock", first, "nope", &[]);
    assert!(!ok && err.contains("no operator 'nope'") && err.contains("clock"), "{err}");
    // --until before the start.
    let (ok, _, err) = replay(&dir, "clock", first, "clock", &["--until", &first.to_string()]);
    assert!(!ok && err.contains("is not after checkpoint"), "{err}");
    // 2 KiB between checkpoints is less than 300 records: each stretch is
    // marked cut short, and the replay stops at the first.
    let (ok, report, err) = replay(&dir, "clock", first, "clock", &[]);
    assert!(ok, "{err}");
    let r = report.unwrap();
    assert_eq!(r["steps"], 0, "{r:#}");
    assert!(r["stopped"][0].as_str().unwrap().contains("outgrew replay.max_segment"), "{r:#}");
    // A damaged recording is refused, naming the file.
    let seg = dir.path().join(format!("ck/clock/recordings/clock/0/from-{first}.rec"));
    let mut bytes = std::fs::read(&seg).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&seg, bytes).unwrap();
    let (ok, _, err) = replay(&dir, "clock", first, "clock", &[]);
    assert!(!ok && err.contains(&format!("from-{first}.rec")) && err.contains("checksum"), "{err}");
    // A bad max_segment is refused when the job starts, naming the field.
    write_clock_job(&dir, ", max_segment = \"0\"", 100);
    let err = dir.fails();
    assert!(err.contains("operator 'clock'") && err.contains("replay.max_segment"), "{err}");
}
