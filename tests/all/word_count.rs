//! Word count and the generator, end to end, at parallelism 1 and 3.

use super::example_copy::ExampleCopy;
use super::support::{JobDir, final_counts};
use std::collections::BTreeMap;
use weir_tests::artifacts::{WORD_COUNT_COUNTER, WORD_COUNT_TOKENIZER};

/// The tokenizer's rule, written independently: runs of alphanumerics and
/// apostrophes, apostrophes trimmed, lowercased.
fn expected_word_counts(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for w in text.split(|c: char| !(c.is_alphanumeric() || c == '\'')) {
        let w = w.trim_matches('\'');
        if !w.is_empty() {
            *m.entry(w.to_lowercase()).or_insert(0) += 1;
        }
    }
    m
}

/// A deterministic text of `lines` lines over a 500-word vocabulary with a
/// skewed distribution, so some words are hot and some rare.
fn corpus(lines: usize) -> String {
    let mut s = String::new();
    let mut x: u64 = 42;
    for _ in 0..lines {
        for j in 0..12 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = (x % 500) * (x % 7 + 1) / 7;
            if j > 0 {
                s.push_str(if j % 5 == 0 { ", " } else { " " });
            }
            s.push_str(&format!("Word{w}"));
        }
        s.push_str(".\n");
    }
    s
}

fn word_count_job(dir: &JobDir, input: &str, parallelism: u32) {
    dir.write("input.txt", input);
    dir.write(
        "job.toml",
        format!(
            r#"
name = "word-count"
parallelism = {parallelism}

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"

[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"
partition = "rebalance"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "counts"
kind = "file"
input = "counter"
path = "out/counts.txt"
"#
        ),
    );
}

#[test]
fn word_count_is_exact_at_parallelism_1_and_3() {
    let text = corpus(20_000);
    let expected = expected_word_counts(&text);
    let total: u64 = expected.values().sum();
    let mut results = Vec::new();
    for p in [1, 3] {
        let dir = JobDir::new();
        word_count_job(&dir, &text, p);
        let err = dir.succeeds(&[]);
        let out = dir.read("out/counts.txt");
        assert_eq!(out.lines().count() as u64, total, "one output line per word occurrence at p={p}");
        let counts = final_counts(&out);
        assert_eq!(counts, expected, "final counts at parallelism {p}");
        assert!(err.contains("job 'word-count' finished"), "summary missing:\n{err}");
        assert!(err.contains(&format!("counter                     {p}")), "summary shows parallelism {p}:\n{err}");
        results.push(counts);
    }
    assert_eq!(results[0], results[1]);
}

#[test]
fn the_example_job_runs_from_its_own_directory() {
    // The README's demo: the committed job file, its input, its paths, run
    // from a fresh copy of its directory so only this run's output is read.
    let example = ExampleCopy::new("word-count");
    example.run("job.toml", &[]);
    let text = example.read("input.txt");
    let out = example.take_output("counts.txt");
    let expected = expected_word_counts(&text);
    let occurrences: u64 = expected.values().sum();
    assert_eq!(out.lines().count() as u64, occurrences, "one line per word occurrence:\n{out}");
    // Each word's lines are 1, 2, ..., its count in the input.
    assert_eq!(final_counts(&out), expected);
    assert!(expected.len() > 10 && expected["weir"] > 1, "the example has repeated words: {expected:?}");
}

#[test]
fn generator_counts_match_its_key_sequence() {
    let (count, keys, seed) = (200_000u64, 5_000u64, 7u64);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..count {
        *expected.entry(weir_host::connectors::generator::key_of(seed, i, keys).to_string()).or_insert(0) += 1;
    }
    let mut results = Vec::new();
    for p in [1, 3] {
        let dir = JobDir::new();
        dir.write(
            "job.toml",
            format!(
                r#"
name = "generated"
parallelism = {p}
max_parallelism = 64

[[sources]]
id = "gen"
kind = "generator"
count = {count}
keys = {keys}
seed = {seed}

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "counts.txt"
"#
            ),
        );
        dir.succeeds(&[]);
        let counts = final_counts(&dir.read("counts.txt"));
        assert_eq!(counts, expected, "parallelism {p}");
        results.push(counts);
    }
    assert_eq!(results[0], results[1]);
}

#[test]
fn every_batch_size_gives_the_same_counts() {
    // Batches of 1 go through `process` and per-element state calls; larger
    // ones through `process-batch` and the batch fast path, where one batch
    // holds the same word many times.
    let text = corpus(2_000);
    let expected = expected_word_counts(&text);
    for batch_size in [1, 7, 1024] {
        let dir = JobDir::new();
        word_count_job(&dir, &text, 2);
        let job = dir.read("job.toml").replacen(
            "[[sources]]",
            &format!("[pipeline]\nbatch_size = {batch_size}\n\n[[sources]]"),
            1,
        );
        dir.write("job.toml", job);
        dir.succeeds(&[]);
        assert_eq!(final_counts(&dir.read("out/counts.txt")), expected, "batch_size {batch_size}");
    }
}

#[test]
fn the_parallelism_flag_overrides_the_job() {
    let dir = JobDir::new();
    word_count_job(&dir, "a b a\nc a b\n", 1);
    let err = dir.succeeds(&["--parallelism", "4"]);
    assert!(err.contains("counter                     4"), "{err}");
    let counts = final_counts(&dir.read("out/counts.txt"));
    assert_eq!(counts, BTreeMap::from([("a".into(), 3), ("b".into(), 2), ("c".into(), 1)]));
}

#[test]
fn legacy_backend_names_run_with_a_deprecation_warning() {
    let dir = JobDir::new();
    word_count_job(&dir, "x y x\n", 1);
    let job = dir.read("job.toml").replace("parallelism = 1", "parallelism = 1\n\n[state]\nbackend = \"jobmanager\"");
    dir.write("job.toml", job);
    let err = dir.succeeds(&[]);
    assert!(err.contains("state.backend = \"jobmanager\" is deprecated"), "{err}");
    assert_eq!(final_counts(&dir.read("out/counts.txt"))["x"], 2);
}

#[test]
fn the_compiled_module_cache_is_filled_then_used() {
    let dir = JobDir::new();
    word_count_job(&dir, "cache me\n", 1);
    // A cache of this test's own, not the one the tests share.
    let run = || {
        let mut c = weir_tests::host_command(dir.path(), &["run", "job.toml"]);
        c.env("XDG_CACHE_HOME", dir.path().join(".cache")).output().unwrap()
    };
    let first = run();
    assert!(first.status.success());
    let cache = dir.path().join(".cache/weir/components");
    let artifacts = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "cwasm"))
        .count();
    assert_eq!(artifacts, 2, "one artifact per distinct module");
    assert!(weir_tests::stderr(&first).contains("cache=Miss"));
    let second = run();
    assert!(second.status.success());
    let err = weir_tests::stderr(&second);
    assert!(err.contains("cache=Hit") && !err.contains("cache=Miss"), "{err}");
}
