//! Where checkpoints and savepoints are: plain local paths, relative to
//! the command's directory, wherever a `file://` URI is taken (`host
//! savepoint --dir`, `host inspect`, `host checkpoints`, `--from-savepoint`
//! and `--from-checkpoint`), and the savepoint directory a job gets when it
//! names none; and a bare job, without checkpointing, that still takes
//! savepoints, swaps and stops.

use crate::savepoints::{RECORDS, expected, write_job};
use crate::support::{JobDir, final_counts, text};

#[test]
fn every_command_takes_a_local_path_where_it_takes_a_uri() {
    let dir = JobDir::new();
    write_job(&dir, 1, "hashmap", 8_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop", "--dir", "mine"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    // Written where the relative path points, and named as a URI.
    let saved: Vec<String> = std::fs::read_dir(dir.path().join("mine"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(location, format!("file://{}/mine/{}", dir.path().display(), saved[0]));
    let relative = format!("mine/{}", saved[0]);

    let out = dir.host(&["inspect", &relative]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("operator 'counter' (parallelism 1)"), "{}", text(&out.stdout));

    // The rest of the stream, from the savepoint named by its local path.
    let err = dir.succeeds(&["--from-savepoint", &relative]);
    assert!(err.contains("restoring"), "{err}");
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all), expected());

    // The job's checkpoint directory as a local path lists its final
    // checkpoint, which `--from-checkpoint` takes as a local path too.
    let out = dir.host(&["checkpoints", "ck/sp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    let id = listing
        .lines()
        .find(|l| l.contains("complete (job finished)"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no finished checkpoint listed:\n{listing}"));
    let checkpoint = format!("ck/sp/chk-{id}");
    let out = dir.host(&["inspect", &checkpoint]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("job finished"), "{}", text(&out.stdout));
    let err = dir.succeeds(&["--from-checkpoint", &checkpoint]);
    assert!(err.contains("already finished"), "{err}");
    assert_eq!(dir.published(), all, "nothing published twice");

    // A path that names nothing is an error naming it.
    let out = dir.host(&["inspect", "mine/nothing-here"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("nothing-here"), "{}", text(&out.stderr));
}

#[test]
fn a_job_that_names_no_savepoint_directory_saves_under_the_users_data_directory() {
    let dir = JobDir::new();
    write_job(&dir, 1, "hashmap", 8_000);
    let root = dir.path().display().to_string();
    let job = dir.read("job.toml").replace(&format!("[state.savepoints]\ndir = \"file://{root}/sp\"\n"), "");
    assert!(!job.contains("savepoints"), "{job}");
    dir.write("job.toml", job);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    // `host_command` points XDG_DATA_HOME at `.data` in the test's directory.
    let under = format!("file://{root}/.data/weir/savepoints/savepoint-sp-");
    assert!(location.starts_with(&under), "{location} is not under {under}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    dir.succeeds(&["--from-savepoint", &location]);
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all), expected());
}

#[test]
fn a_bare_job_without_checkpointing_takes_savepoints_swaps_and_stops_and_resumes_exactly() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 8_000);
    let root = dir.path().display().to_string();
    let job = dir
        .read("job.toml")
        .replace("[checkpointing]\ninterval = \"200ms\"\n", "")
        .replace(&format!("[state.checkpoints]\ndir = \"file://{root}/ck\"\n"), "")
        .replace(&format!("[state.savepoints]\ndir = \"file://{root}/sp\"\n"), "");
    assert!(!job.contains("checkpoint") && !job.contains("savepoints"), "{job}");
    dir.write("job.toml", job);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let status: serde_json::Value = serde_json::from_slice(&dir.host(&["status", "sp", "--json"]).stdout).unwrap();
    assert!(status["checkpoints"].is_null(), "no periodic checkpoints: {status}");

    // A savepoint, under the user's data directory.
    let out = dir.host(&["savepoint", "sp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first = text(&out.stdout).trim().to_string();
    assert!(first.starts_with(&format!("file://{root}/.data/weir/savepoints/savepoint-sp-")), "{first}");
    let out = dir.host(&["inspect", &first]);
    assert!(text(&out.stdout).contains("operator 'counter' (parallelism 2)"), "{}", text(&out.stdout));

    // A swap rides on a savepoint of its own.
    let module = std::path::absolute(weir_tests::artifacts::WORD_COUNT_COUNTER).unwrap();
    let out = dir.host(&["swap", "sp", "--operator", "counter", "--module", &module.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("now runs"), "{}", text(&out.stderr));

    // Stopped with a savepoint, then resumed from it: every record counted
    // once over the two runs.
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stop = text(&out.stdout).trim().to_string();
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert!(err.contains(&format!("stopped with savepoint {stop}")), "{err}");
    let err = dir.succeeds(&["--from-savepoint", &stop]);
    assert!(err.contains("restoring"), "{err}");
    let all = dir.published();
    assert_eq!(all.lines().count() as u64, RECORDS, "one output line per record");
    assert_eq!(final_counts(&all), expected());
}
