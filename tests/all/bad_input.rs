//! Bad input: each gets a message naming the file, field or operator, and a
//! non-zero exit.

use super::support::JobDir;
use weir_tests::artifacts::{INCOMPLETE, OUTDATED, WORD_COUNT_COUNTER, WORD_COUNT_TOKENIZER};

/// A valid two-operator job, as text to corrupt.
fn good_job() -> String {
    format!(
        r#"name = "wc"

[[sources]]
id = "lines"
kind = "file"
path = "input.txt"

[[operators]]
uid = "tokenizer"
module = "{WORD_COUNT_TOKENIZER}"
input = "lines"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "tokenizer"
partition = "key"

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "out.txt"
"#
    )
}

fn dir_with(job: &str) -> JobDir {
    let dir = JobDir::new();
    dir.write("input.txt", "one two two\n");
    dir.write("job.toml", job);
    dir
}

fn assert_mentions(err: &str, needles: &[&str]) {
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in the error:\n{err}");
    }
}

#[test]
fn the_good_job_runs() {
    let dir = dir_with(&good_job());
    dir.succeeds(&[]);
    assert_eq!(dir.read("out.txt").lines().count(), 3);
}

#[test]
fn malformed_toml_names_file_and_line() {
    let err = dir_with(&good_job().replace("name = \"wc\"", "name = \"wc")).fails();
    assert_mentions(&err, &["job.toml", "line 1"]);
}

#[test]
fn unknown_field_is_named() {
    let err = dir_with(&good_job().replace("name = \"wc\"", "name = \"wc\"\nparalelism = 2")).fails();
    assert_mentions(&err, &["job.toml", "unknown field `paralelism`"]);
}

#[test]
fn missing_field_is_named() {
    let job = good_job().replace(&format!("module = \"{WORD_COUNT_COUNTER}\"\n"), "");
    let err = dir_with(&job).fails();
    assert_mentions(&err, &["job.toml", "missing field `module`"]);
}

#[test]
fn an_input_that_names_nothing_is_named() {
    let err = dir_with(&good_job().replace("input = \"tokenizer\"", "input = \"tokeniser\"")).fails();
    assert_mentions(
        &err,
        &["operator 'counter'", "input 'tokeniser' names no source or operator", "known: counter, lines, tokenizer"],
    );
}

#[test]
fn a_cycle_is_named() {
    let job = good_job().replace("input = \"lines\"", "input = \"counter\"");
    let err = dir_with(&job).fails();
    assert_mentions(&err, &["job.toml", "the operators form a cycle: tokenizer -> counter -> tokenizer"]);
}

#[test]
fn a_missing_module_is_named() {
    let err = dir_with(&good_job().replace(WORD_COUNT_COUNTER, "/nonexistent/counter.wasm")).fails();
    assert_mentions(&err, &["operator 'counter'", "/nonexistent/counter.wasm", "does not exist"]);
}

#[test]
fn a_file_that_is_not_wasm_is_named() {
    let dir = dir_with(&good_job().replace(WORD_COUNT_COUNTER, "counter.wasm"));
    dir.write("counter.wasm", "this is not a component");
    let err = dir.fails();
    assert_mentions(&err, &["operator 'counter'", "counter.wasm", "not a WebAssembly file"]);
}

#[test]
fn a_core_module_is_not_a_component() {
    let dir = dir_with(&good_job().replace(WORD_COUNT_COUNTER, "core.wasm"));
    // The smallest valid core module: magic and version 1.
    dir.write("core.wasm", b"\0asm\x01\0\0\0");
    let err = dir.fails();
    assert_mentions(&err, &["operator 'counter'", "core WebAssembly module, not a component", "wasm32-wasip2"]);
}

#[test]
fn a_component_without_the_handler_is_named() {
    let dir = dir_with(&good_job().replace(WORD_COUNT_COUNTER, "empty.wasm"));
    // The smallest valid component: no imports, no exports.
    dir.write("empty.wasm", b"\0asm\x0d\0\x01\0");
    let err = dir.fails();
    assert_mentions(&err, &["operator 'counter'", "does not export weir:operator/handler@0.2.0"]);
}

#[test]
fn a_component_built_for_another_contract_version_says_which_and_what_to_do() {
    let err = dir_with(&good_job().replace(WORD_COUNT_COUNTER, OUTDATED)).fails();
    assert_mentions(
        &err,
        &[
            "operator 'counter'",
            "built against version 0.1.0",
            "this host runs 0.2.0",
            "rebuild it with this Weir's SDK",
        ],
    );
}

#[test]
fn missing_exports_are_named() {
    let err = dir_with(&good_job().replace(WORD_COUNT_COUNTER, INCOMPLETE)).fails();
    assert_mentions(&err, &["operator 'counter'", "lacks export(s) `on-timer`, `migrate-value`"]);
}

#[test]
fn forward_needs_equal_parallelism() {
    let job = good_job().replace("input = \"lines\"", "input = \"lines\"\nparallelism = 2\npartition = \"forward\"");
    let err = dir_with(&job).fails();
    assert_mentions(&err, &["operator 'tokenizer'", "forward", "equal parallelism"]);
}

#[test]
fn unavailable_choices_fail_clearly_instead_of_falling_back() {
    let rocks = good_job().replacen(
        "[[sources]]",
        "[state.backend]\ntype = \"rocksdb\"\nrocksdb.cache = \"1GiB\"\n\n[[sources]]",
        1,
    );
    assert_mentions(&dir_with(&rocks).fails(), &["job.toml", "[state.backend]"]);
    let bogus = good_job().replacen("[[sources]]", "[state]\nbackend = \"heap\"\n\n[[sources]]", 1);
    assert_mentions(&dir_with(&bogus).fails(), &["state.backend = \"heap\" is not a state backend"]);
    let dur = good_job().replacen("[[sources]]", "[wasm]\ncall_timeout = \"5 parsecs\"\n\n[[sources]]", 1);
    assert_mentions(&dir_with(&dur).fails(), &["job.toml", "invalid duration"]);
}

#[test]
fn a_bad_host_config_is_named() {
    let dir = dir_with(&good_job());
    dir.write("host.toml", "state.backend = \"hashmap\"\nstate.bogus = 1\n");
    let (ok, err) = dir.run(&["--config", "host.toml"]);
    assert!(!ok);
    assert_mentions(&err, &["host.toml", "unknown field `bogus`"]);
}

#[test]
fn a_missing_job_file_is_named() {
    let dir = JobDir::new();
    let (ok, err) = dir.run(&[]);
    assert!(!ok);
    assert_mentions(&err, &["cannot read job.toml: No such file or directory"]);
    assert_eq!(err.matches("No such file").count(), 1, "the cause is said once:\n{err}");
}

#[test]
fn unkeyed_records_on_a_keyed_edge_are_refused() {
    // Lines carry no key; the counter reads them with partition = "key".
    let job = good_job().replace("input = \"tokenizer\"", "input = \"lines\"");
    let err = dir_with(&job).fails();
    assert_mentions(&err, &["'lines' emitted a record without a key", "'counter' reads it with partition = \"key\""]);
}

#[test]
fn a_failure_a_restart_cannot_mend_stops_the_job_at_once() {
    // A line that is not JSON fails the same way after every restart: the
    // restart strategy (on by default with checkpointing) must not retry.
    let dir = JobDir::new();
    dir.write("input.jsonl", "{\"w\":\"a\"}\n{\"w\":\"b\"}\nnot json\n{\"w\":\"c\"}\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "bad-line"

[checkpointing]
interval = "50ms"

[state.checkpoints]
dir = "file://{}/ck"

[[sources]]
id = "words"
kind = "file"
path = "input.jsonl"
format = "jsonl"
key_field = "w"

[[operators]]
uid = "counter"
module = "{WORD_COUNT_COUNTER}"
input = "words"
partition = "key"

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "out.txt"
"#,
            dir.path().display()
        ),
    );
    let err = dir.fails();
    assert_mentions(
        &err,
        &["source 'words'", "input.jsonl:3", "invalid JSON", "not restarting: a restart cannot help"],
    );
    assert!(!err.contains("restart 1 of"), "the job was restarted:\n{err}");
}
