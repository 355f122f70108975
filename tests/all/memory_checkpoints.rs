//! Checkpoints kept in host memory (no `state.checkpoints.dir`): the job
//! completes checkpoints without writing any to disk, and a task failure
//! restarts the job inside the same `host run` from the latest of them,
//! with exactly-once output in the plain file sink.

use super::support::{JobDir, final_counts};
use std::collections::BTreeMap;
use weir_tests::artifacts;

const LINES: usize = 3000;
const POISON_AT: usize = 2000;

/// `LINES` lines of three words from a vocabulary of 30, with `poison`
/// added to line `POISON_AT`; and each word's count.
fn input() -> (String, BTreeMap<String, u64>) {
    let (mut text, mut counts) = (String::new(), BTreeMap::new());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..LINES {
        let mut words: Vec<String> = (0..3)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("w{}", x % 30)
            })
            .collect();
        if i == POISON_AT {
            words.push("poison".into());
        }
        for w in &words {
            *counts.entry(w.clone()).or_insert(0) += 1;
        }
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    (text, counts)
}

#[test]
fn a_job_with_checkpoints_in_memory_restarts_from_the_latest_with_exact_output() {
    let dir = JobDir::new();
    let (text, expected) = input();
    dir.write("input.txt", text);
    dir.write(
        "job.toml",
        format!(
            r#"name = "in-memory"

[checkpointing]
interval = "100ms"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"
records_per_second = 1000

[[operators]]
uid = "tokenizer"
module = "{tokenizer}"
input = "lines"

# Traps on "poison" in the first attempt only.
[[operators]]
uid = "flaky"
module = "{misbehave}"
input = "tokenizer"
params = {{ mode = "trap-once", on = "poison" }}

[[operators]]
uid = "counter"
module = "{counter}"
input = "flaky"
partition = "key"

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "out.txt"
"#,
            tokenizer = artifacts::WORD_COUNT_TOKENIZER,
            misbehave = artifacts::MISBEHAVE,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
    let err = dir.succeeds(&[]);
    assert!(err.contains("misbehave: trap on \"poison\""), "the failure is reported:\n{err}");
    // The restart restores a checkpoint held in memory, not the beginning.
    assert!(err.contains("restart 1 of 3 in 1000 ms, from memory:/in-memory/chk-"), "{err}");
    assert!(err.contains("restarted 1 time(s)"), "{err}");
    let completed: u64 = err
        .split("\n  checkpoints: ")
        .nth(1)
        .and_then(|s| s.split(" completed").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no checkpoint summary:\n{err}"));
    assert!(completed >= 2, "checkpoints completed before and after the restart: {completed}\n{err}");

    // The sink's file was cut back to the restored checkpoint: every
    // word's updates are 1, 2, ..., its count, once each.
    let out = dir.read("out.txt");
    assert_eq!(out.lines().count() as u64, expected.values().sum::<u64>(), "one line per word");
    assert_eq!(final_counts(&out), expected);

    // Nothing of the checkpoints reached the disk.
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, [".run", "input.txt", "job.toml", "out.txt"], "files in the job directory");
}
