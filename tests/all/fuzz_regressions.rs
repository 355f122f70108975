//! Every input the fuzzers ever crashed on (`fuzz/regressions/<target>/`),
//! and their seeds, replayed through the same entry points
//! (`weir_host::fuzzing`): each must be answered without a panic.

use std::path::Path;
use weir_tests::repo_root;

fn replay(target: &str, run: fn(&[u8])) {
    let mut replayed = 0;
    for dir in ["regressions", "seeds"] {
        let Ok(entries) = std::fs::read_dir(repo_root().join("fuzz").join(dir).join(target)) else { continue };
        for e in entries {
            let path = e.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{} panicked", path.strip_prefix(repo_root()).unwrap_or(Path::new("?")).display());
            replayed += 1;
        }
    }
    assert!(replayed > 0, "no inputs for {target}");
}

#[test]
fn metadata_inputs() {
    replay("metadata", weir_host::fuzzing::metadata);
}

#[test]
fn snapshot_inputs() {
    replay("snapshot", weir_host::fuzzing::snapshot);
}

#[test]
fn control_request_inputs() {
    replay("control_request", weir_host::fuzzing::control_request);
}

#[test]
fn job_file_inputs() {
    replay("job_file", weir_host::fuzzing::job_file);
}

#[test]
fn unit_inputs() {
    replay("units", weir_host::fuzzing::units);
}

#[test]
fn recording_inputs() {
    replay("recording", weir_host::fuzzing::recording);
}

#[test]
fn checkpoint_tree_inputs() {
    replay("checkpoint_tree", weir_host::fuzzing::checkpoint_tree);
}
