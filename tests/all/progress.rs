//! Progress: a redrawn line on a terminal with log lines printed whole
//! above it, nothing on a pipe.

use super::support::JobDir;
use std::path::Path;
use std::process::{Command, Output};
use weir_tests::artifacts::WORD_COUNT_COUNTER;
use weir_tests::host_command;

/// A job of `count` records at 20 a second (so it runs long enough to be
/// drawn a few times), progress every 200 ms; `settings` (TOML tables) go
/// before the graph.
fn paced_job(dir: &JobDir, count: u64, settings: &str) {
    dir.write(
        "job.toml",
        format!(
            r#"name = "paced"
[pipeline]
progress_interval = "200ms"

{settings}

[[sources]]
id = "gen"
kind = "generator"
count = {count}
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

/// Runs `host <args>` in `dir` as [`host_command`] sets it up, but with a
/// pseudo-terminal for stdin, stdout and stderr (`script`, from
/// util-linux); returns what the terminal received, in `stdout`.
fn in_terminal(dir: &Path, args: &[&str]) -> Output {
    // Without `script` these tests could prove nothing, so they fail rather
    // than pass unseen.
    assert!(
        Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success()),
        "the `script` command (util-linux's bsdutils) is missing: scripts/test installs it (ensure_script in scripts/common.sh)"
    );
    let host = host_command(dir, args);
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', r"'\''"));
    let cmd: Vec<String> = std::iter::once(host.get_program()).chain(host.get_args()).map(quote).collect();
    let mut script = Command::new("script");
    // -e: the host's exit status; -f: flush as it comes (the order of
    // writes is what these tests look at).
    script.args(["-qefc", &cmd.join(" "), "/dev/null"]).current_dir(dir);
    for (key, value) in host.get_envs() {
        match value {
            Some(v) => script.env(key, v),
            None => script.env_remove(key),
        };
    }
    script.output().expect("run script")
}

/// The terminal's output cut where a line starts over, at `\n` and at `\r`
/// (every redraw of a line begins with one), without ANSI escape sequences
/// (colours, clearing, cursor moves): what was written on each line, in
/// order. Text drawn over another line's text without a `\r` between shows
/// up as one piece, so a torn line can't pass for a whole one.
fn written_lines(output: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(output);
    let mut lines = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\n' => lines.push(String::new()),
            // A CSI sequence: parameters, then one final byte in @..~.
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            c => lines.last_mut().unwrap().push(c),
        }
    }
    lines.retain(|l| !l.trim().is_empty());
    lines
}

/// `2026-01-31T12:00:00` at the start: the text log format's timestamp.
fn starts_with_timestamp(line: &str) -> bool {
    let pattern = "dddd-dd-ddTdd:dd:dd";
    line.len() >= pattern.len()
        && line.bytes().zip(pattern.bytes()).all(|(c, p)| if p == b'd' { c.is_ascii_digit() } else { c == p })
}

/// A progress line: `[   1.2s] in 24 (20/s)  out 24 (20/s) ...`.
fn is_progress(line: &str) -> bool {
    line.contains("] in ") && line.contains("/s)  out ")
}

#[test]
fn a_terminal_shows_records_in_and_out_while_the_job_runs() {
    let dir = JobDir::new();
    paced_job(&dir, 30, "");
    let out = in_terminal(dir.path(), &["run", "job.toml"]);
    let lines = written_lines(&out.stdout);
    assert!(out.status.success(), "{lines:#?}");
    assert!(lines.iter().any(|l| is_progress(l)), "no progress line on a terminal:\n{lines:#?}");
}

#[test]
fn log_lines_print_whole_above_the_progress_line_and_the_summary_after_it() {
    let dir = JobDir::new();
    // A checkpoint every 200 ms logs `checkpoint complete` at info level
    // about as often as the progress line is redrawn: with the line left at
    // the cursor between redraws, a log line would be written onto it.
    let ck = format!("file://{}/ck", dir.path().display());
    paced_job(&dir, 60, &format!("[checkpointing]\ninterval = \"200ms\"\n\n[state.checkpoints]\ndir = \"{ck}\"\n"));
    let out = in_terminal(dir.path(), &["run", "job.toml"]);
    let lines = written_lines(&out.stdout);
    assert!(out.status.success(), "{lines:#?}");

    let logged: Vec<&String> = lines.iter().filter(|l| l.contains(" INFO ")).collect();
    let complete: Vec<&&String> =
        logged.iter().filter(|l| l.contains("checkpoint complete") && !l.contains("final checkpoint")).collect();
    assert!(complete.len() >= 3, "too few checkpoints logged to tell:\n{lines:#?}");
    for line in &logged {
        assert!(starts_with_timestamp(line), "a log line not at the start of its line: {line:?}\n{lines:#?}");
    }
    for line in &complete {
        // The message and every field, nothing after the last one.
        let whole = line.contains(" INFO checkpoint complete checkpoint=")
            && line.contains(" size=")
            && line.trim_end().rsplit_once(" duration_ms=").is_some_and(|(_, ms)| ms.parse::<u64>().is_ok());
        assert!(whole, "a torn log line: {line:?}\n{lines:#?}");
    }

    // Progress was drawn, the checkpoint status with it, between the logs.
    let first_log = lines.iter().position(|l| l.contains("checkpoint complete")).unwrap();
    let last_log = lines.iter().rposition(|l| l.contains("checkpoint complete")).unwrap();
    let drawn = lines.iter().enumerate().filter(|(i, l)| is_progress(l) && (first_log..last_log).contains(i));
    assert!(
        drawn.clone().any(|(_, l)| l.contains("checkpoint chk-")),
        "no progress between the log lines:\n{lines:#?}"
    );

    // The line is cleared before the summary: the summary starts its line
    // and no progress is drawn after it.
    let summary = lines.iter().position(|l| l.contains("finished in")).expect("a summary");
    assert!(lines[summary].starts_with("job 'paced' finished in"), "{lines:#?}");
    assert!(!lines[summary..].iter().any(|l| is_progress(l)), "{lines:#?}");
}

#[test]
fn a_pipe_gets_no_progress_line() {
    let dir = JobDir::new();
    paced_job(&dir, 30, "");
    let err = dir.succeeds(&[]);
    assert!(!err.contains("\x1b[2K") && !err.contains("] in "), "{err}");
    assert!(err.contains("job 'paced' finished"), "{err}");
}

#[test]
fn json_logs_on_a_terminal_get_no_progress_line() {
    let dir = JobDir::new();
    paced_job(&dir, 30, "");
    let out = in_terminal(dir.path(), &["--log-format", "json", "run", "job.toml"]);
    let lines = written_lines(&out.stdout);
    assert!(out.status.success(), "{lines:#?}");
    for line in &lines {
        assert!(line.starts_with('{') && line.ends_with('}'), "not a JSON log line: {line:?}\n{lines:#?}");
    }
    assert!(lines.iter().any(|l| l.contains("job summary")), "{lines:#?}");
}
