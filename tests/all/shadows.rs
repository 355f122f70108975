//! Shadow runs (`host shadow`) end to end: a shadow of the word-count
//! counter running a module that counts words starting with "q" twice,
//! forked from the live state while a paced job runs, on each backend. Its
//! report must name exactly the q words and count every other record
//! equal, and the live output must be exactly what the input says. A
//! shadow that traps is dropped and the job goes on; `--promote` swaps the
//! shadow's module in over the live state with exact output; a shadow
//! refuses what would change the operator under it.

use super::savepoints::{expected, write_job};
use super::support::{JobDir, PATIENCE, final_counts, text, wait_until};
use super::swaps::assert_swapped_once;
use std::collections::{BTreeMap, BTreeSet};
use weir_host::api::ShadowReport;
use weir_tests::artifacts;

/// Lines of input; each holds the four q words and four others.
const LINES: usize = 4000;
const Q_WORDS: [&str; 4] = ["quark", "queen", "quiet", "quote"];

fn line(i: usize) -> String {
    let other = |j: usize| format!("w{}", (i * 7 + j * 13) % 50);
    format!(
        "{} {} {} {} {} {} {} {}",
        Q_WORDS[0],
        other(0),
        Q_WORDS[1],
        other(1),
        Q_WORDS[2],
        other(2),
        Q_WORDS[3],
        other(3)
    )
}

/// Each word's count over the whole input, computed directly.
fn expected_words() -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for i in 0..LINES {
        for w in line(i).split(' ') {
            *m.entry(w.to_string()).or_default() += 1;
        }
    }
    m
}

/// The word-count job `sh` over the input at `rate` lines a second: the
/// tokenizer, the counter at parallelism 2 on `backend`, a transactional
/// file sink; checkpoints every 200 ms.
fn write_words_job(dir: &JobDir, backend: &str, rate: u32) {
    let input: String = (0..LINES).map(|i| line(i) + "\n").collect();
    dir.write("input.txt", input);
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "sh"
parallelism = 2
state.backend = "{backend}"

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"
format = "lines"
records_per_second = {rate}

[[operators]]
uid = "tokenizer"
module = "{tokenizer}"
input = "lines"
partition = "rebalance"

[[operators]]
uid = "counter"
module = "{counter}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "out"
kind = "transactional-file"
input = "counter"
dir = "out"
"#,
            tokenizer = artifacts::WORD_COUNT_TOKENIZER,
            counter = artifacts::WORD_COUNT_COUNTER,
        ),
    );
}

/// `host shadow <job> --report --json`.
fn report(dir: &JobDir, job: &str) -> ShadowReport {
    let out = dir.host(&["shadow", job, "--report", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits until the shadow of `job` processed `records` input records.
fn wait_shadowed(dir: &JobDir, job: &str, records: u64) {
    wait_until(&format!("the shadow to process {records} records"), PATIENCE, || {
        let r = report(dir, job);
        assert!(!r.is_over(), "the shadow ended early: {r:?}");
        r.records_in >= records
    });
}

fn start_shadow(dir: &JobDir, job: &str, module: &str) {
    let out = dir.host(&["shadow", job, "--operator", "counter", "--module", module]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("forked at checkpoint"), "{}", text(&out.stderr));
}

/// Asserts what a shadow of the counter running counter-q found: exactly
/// the q words differ, only as "different", every other record is equal.
fn assert_only_q_words_differ(r: &ShadowReport) {
    let keys: BTreeSet<&str> = r.keys.iter().map(|k| k.key.as_deref().unwrap()).collect();
    assert_eq!(keys, Q_WORDS.into_iter().collect(), "{r:?}");
    for k in &r.keys {
        assert!(k.different > 0 && k.only_live == 0 && k.only_shadow == 0, "{k:?}");
    }
    let c = r.counts;
    assert_eq!((c.only_live, c.only_shadow, r.unlisted), (0, 0, 0), "{r:?}");
    assert!(c.equal > 0 && c.different > 0, "{r:?}");
    // One output record per input record, each compared once.
    assert_eq!(c.equal + c.different, r.records_in, "{r:?}");
    assert_eq!(r.keys.iter().map(|k| k.different).sum::<u64>(), c.different);
    // A sample shows the live count and the shadow's higher one.
    let s = r.samples.first().expect("samples of the differences");
    let n = |v: &Option<String>| v.as_deref().unwrap().rsplit_once(' ').unwrap().1.parse::<u64>().unwrap();
    assert!(n(&s.shadow) > n(&s.live), "{s:?}");
}

#[test]
fn a_shadow_stopped_mid_run_names_exactly_the_changed_keys_and_the_live_output_is_exact() {
    let dir = JobDir::new();
    write_words_job(&dir, "hashmap", 400);
    let child = dir.start(&[]);
    dir.wait_for_output("sh");
    start_shadow(&dir, "sh", artifacts::WORD_COUNT_COUNTER_Q);
    wait_shadowed(&dir, "sh", 4000);
    let out = dir.host(&["shadow", "sh", "--stop", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: ShadowReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r.status.as_str(), r.reason.as_deref()), ("ended", Some("stopped on request")), "{r:?}");
    assert!(r.module.ends_with("word_count_counter_q.wasm") && r.operator == "counter", "{r:?}");
    assert_only_q_words_differ(&r);
    // The report stays readable after the stop, and a second stop has
    // nothing to stop.
    assert_eq!(report(&dir, "sh").counts, r.counts);
    let again = dir.host(&["shadow", "sh", "--stop"]);
    assert!(!again.status.success() && text(&again.stderr).contains("no shadow run is in progress"));
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert_eq!(final_counts(&dir.published()), expected_words());
}

#[test]
fn a_shadow_on_rocksdb_runs_to_the_end_of_input_and_compares_every_record() {
    let dir = JobDir::new();
    write_words_job(&dir, "rocksdb", 400);
    let child = dir.start(&[]);
    dir.wait_for_output("sh");
    start_shadow(&dir, "sh", artifacts::WORD_COUNT_COUNTER_Q);
    wait_shadowed(&dir, "sh", 800);
    // While it runs, a subtask's part of the report may lag the other's:
    // what is there names q words only.
    let r = report(&dir, "sh");
    assert_eq!(r.status, "running");
    assert!(!r.keys.is_empty(), "{r:?}");
    assert!(r.keys.iter().all(|k| Q_WORDS.contains(&k.key.as_deref().unwrap())), "{r:?}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert_eq!(final_counts(&dir.published()), expected_words());
    // The job logs the final report: every line after the fork compared,
    // four q words and four others each.
    let last = err.lines().find(|l| l.contains("shadow run over")).unwrap_or_else(|| panic!("{err}"));
    let field = |name: &str| -> u64 {
        let at = last.find(&format!("{name}=")).unwrap_or_else(|| panic!("{last}")) + name.len() + 1;
        last[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    assert!(last.contains("the input ended"), "{last}");
    assert_eq!(field("different"), field("equal"), "{last}");
    assert!(field("equal") >= 800 / 2 && field("equal") % 4 == 0, "{last}");
    assert_eq!((field("only_live"), field("only_shadow")), (0, 0), "{last}");
    assert_eq!(field("keys_with_differences"), Q_WORDS.len() as u64, "{last}");
}

#[test]
fn a_shadow_that_traps_is_dropped_with_its_reason_and_the_live_job_goes_on() {
    let dir = JobDir::new();
    write_words_job(&dir, "hashmap", 400);
    let child = dir.start(&[]);
    dir.wait_for_output("sh");
    // The counter's params say nothing: misbehave traps on every record.
    let out =
        dir.host(&["shadow", "sh", "--operator", "counter", "--module", artifacts::MISBEHAVE, "--duration", "60s"]);
    let said = text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("the shadow run was dropped") && said.contains("misbehave: trap"), "{said}");
    let r = report(&dir, "sh");
    assert_eq!(r.status, "dropped");
    // The operator is free again: a new shadow can start.
    start_shadow(&dir, "sh", artifacts::WORD_COUNT_COUNTER);
    wait_shadowed(&dir, "sh", 100);
    let r = report(&dir, "sh");
    assert_eq!((r.counts.different, r.counts.only_live, r.counts.only_shadow), (0, 0, 0), "{r:?}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    assert_eq!(final_counts(&dir.published()), expected_words());
}

#[test]
fn promote_swaps_the_shadow_module_in_over_the_live_state_and_a_shadow_refuses_changes_under_it() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let none = dir.host(&["shadow", "sp", "--promote"]);
    assert!(!none.status.success() && text(&none.stderr).contains("no shadow run is in progress"));
    let unknown = dir.host(&["shadow", "sp", "--operator", "nope", "--module", artifacts::WORD_COUNT_COUNTER_V2]);
    assert!(!unknown.status.success() && text(&unknown.stderr).contains("no operator 'nope'"));
    start_shadow(&dir, "sp", artifacts::WORD_COUNT_COUNTER_V2);
    wait_shadowed(&dir, "sp", 100);
    // Both versions key their output by the word; version 2 writes `word=n`
    // where version 1 writes `word n`: every record differs, none is missing.
    let r = report(&dir, "sp");
    let c = r.counts;
    assert!(c.equal == 0 && c.different > 0 && c.only_live == 0 && c.only_shadow == 0, "{c:?}");
    let shadow: Vec<&str> = r.samples.iter().filter_map(|s| s.shadow.as_deref()).collect();
    let live: Vec<String> = r.samples.iter().filter_map(|s| s.live.as_ref().map(|l| l.replace(' ', "="))).collect();
    assert!(live.iter().any(|l| shadow.contains(&l.as_str())), "the shadow migrated the forked counts: {r:?}");
    for refused in [
        vec!["shadow", "sp", "--operator", "counter", "--module", artifacts::WORD_COUNT_COUNTER_Q],
        vec!["swap", "sp", "--operator", "counter", "--module", artifacts::WORD_COUNT_COUNTER_Q],
        vec!["rescale", "sp", "--operator", "counter", "-p", "3"],
    ] {
        let out = dir.host(&refused);
        assert!(!out.status.success(), "{refused:?}");
        assert!(text(&out.stderr).contains("a shadow run is already in progress"), "{}", text(&out.stderr));
    }
    let out = dir.host(&["shadow", "sp", "--promote"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("now runs live"), "{}", text(&out.stderr));
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let all = dir.published();
    let (v1, v2) = assert_swapped_once(&all);
    assert!(v1 > 0 && v2 > 0, "{v1} v1 lines, {v2} v2 lines");
    assert_eq!(final_counts(&all.replace('=', " ")), expected());
}

#[test]
fn a_shadow_that_falls_behind_is_dropped_and_the_live_job_is_not_held_back() {
    let dir = JobDir::new();
    write_job(&dir, 2, "hashmap", 15_000);
    // The counter ignores params; the shadow's module (misbehave) reads
    // them and sleeps 5 ms a record: far slower than the live input.
    let job = dir
        .read("job.toml")
        .replace("partition = \"key\"\n", "partition = \"key\"\nparams = { mode = \"slow\", sleep_ms = \"5\" }\n");
    dir.write("job.toml", job);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&[
        "shadow",
        "sp",
        "--operator",
        "counter",
        "--module",
        artifacts::MISBEHAVE,
        "--max-lag",
        "4",
        "--duration",
        "60s",
    ]);
    let said = text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("fell 4 input batches behind the live operator"), "{said}");
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    // The live job ran on at its pace, to an exact end.
    assert_eq!(final_counts(&dir.published()), expected());
}
