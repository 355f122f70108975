//! Progress: a redrawn line on a terminal, nothing on a pipe.

use super::support::JobDir;
use weir_tests::artifacts::WORD_COUNT_COUNTER;

fn paced_job(dir: &JobDir) {
    dir.write(
        "job.toml",
        format!(
            r#"name = "paced"
[pipeline]
progress_interval = "200ms"

[[sources]]
id = "gen"
kind = "generator"
count = 30
keys = 5
records_per_second = 20

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "discard"
input = "counter"
"#
        ),
    );
}

#[test]
fn a_terminal_shows_records_in_and_out_while_the_job_runs() {
    // `script` (util-linux) gives the host a terminal; without it this
    // test could prove nothing, so it fails rather than pass unseen.
    assert!(
        std::process::Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success()),
        "the `script` command (util-linux's bsdutils) is missing: scripts/test installs it (ensure_script in scripts/common.sh)"
    );
    let dir = JobDir::new();
    paced_job(&dir);
    let host = weir_tests::host_binary();
    let cmd = format!("{} run job.toml", host.display());
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join(".cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let text = String::from_utf8_lossy(&out.stdout);
    let progress: Vec<&str> = text.split(['\r', '\n']).filter(|l| l.contains("] in ") && l.contains("/s)")).collect();
    assert!(!progress.is_empty(), "no progress line on a terminal:\n{text}");
}

#[test]
fn a_pipe_gets_no_progress_line() {
    let dir = JobDir::new();
    paced_job(&dir);
    let err = dir.succeeds(&[]);
    assert!(!err.contains("\x1b[2K") && !err.contains("] in "), "{err}");
    assert!(err.contains("job 'paced' finished"), "{err}");
}
