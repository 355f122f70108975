//! The `stdout` sink: each record's payload and a newline on standard
//! output, and nothing else there; the host's own logs and summary go to
//! standard error. After a restore, the lines since the checkpoint come
//! again (at-least-once), and none is missing.

use super::support::JobDir;
use weir_host::connectors::generator::key_of;
use weir_tests::{artifacts, run_host, stderr};

const LINES: usize = 8000;
const POISON_AT: usize = 5000;

#[test]
fn the_stdout_sink_prints_exactly_the_records_and_logs_go_to_stderr() {
    let (count, keys, seed) = (3000u64, 37u64, 11u64);
    let dir = JobDir::new();
    dir.write(
        "job.toml",
        format!(
            r#"name = "to-stdout"

[[sources]]
id = "gen"
kind = "generator"
count = {count}
keys = {keys}
seed = {seed}

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"

[[sinks]]
id = "screen"
kind = "stdout"
input = "counter"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
    let out = run_host(dir.path(), &["run", "job.toml"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");

    // One subtask from end to end, so the counter's `<key> <n>` updates
    // arrive in stream order.
    let mut seen = std::collections::HashMap::new();
    let expected: String = (0..count)
        .map(|i| {
            let k = key_of(seed, i, keys);
            let n = seen.entry(k).or_insert(0u64);
            *n += 1;
            format!("{k} {n}\n")
        })
        .collect();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected, "stdout holds the records, exactly");

    // The logs and the summary are on stderr.
    assert!(err.contains("INFO") && err.contains("job started"), "logs on stderr:\n{err}");
    assert!(err.contains("to-stdout"), "the summary on stderr:\n{err}");
}

#[test]
fn after_a_restart_the_stdout_sink_writes_the_lines_since_the_checkpoint_again() {
    // `line-<i>`, and `poison` in place of line POISON_AT, on which the
    // `flaky` operator traps in the job's first attempt only.
    let expected: Vec<String> =
        (0..LINES).map(|i| if i == POISON_AT { "poison".to_string() } else { format!("line-{i}") }).collect();
    let dir = JobDir::new();
    dir.write("input.txt", expected.join("\n") + "\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "replayed"

[checkpointing]
interval = "100ms"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"
records_per_second = 4000

[[operators]]
uid = "flaky"
module = "{misbehave}"
input = "lines"
params = {{ mode = "trap-once", on = "poison" }}

[[sinks]]
id = "screen"
kind = "stdout"
input = "flaky"
"#,
            misbehave = artifacts::MISBEHAVE
        ),
    );
    let out = run_host(dir.path(), &["run", "job.toml"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("restart 1 of 3") && err.contains("from memory:/replayed/chk-"), "{err}");
    let printed = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = printed.lines().collect();

    // stdout is the first attempt's lines, up to some line `upto` before
    // the poison, then the second attempt's from the checkpoint's position
    // `from` to the end: `from <= upto`, so nothing is missing, and what
    // lay between them is written twice.
    let upto = printed.iter().zip(&expected).take_while(|(p, e)| *p == e).count();
    let again = &printed[upto..];
    let from = LINES.checked_sub(again.len()).expect("more lines than the input and one replay");
    assert_eq!(again, &expected[from..], "the second attempt went on from a checkpoint to the end");
    assert!(from <= upto, "lines {upto}..{from} were never written");
    assert!(from > 0, "the restart restored a checkpoint, not the beginning");
}
