//! `--log-format json`: every line the host writes to stderr is one JSON
//! object, the summary included, so a log collector needs no text parsing.

use crate::support::JobDir;
use weir_tests::host_command;

#[test]
fn json_logs_are_one_object_per_line_and_the_summary_counts_every_record() {
    let dir = JobDir::new();
    let records = 12_345;
    dir.write("job.toml", weir_tests::counter_job("logs", records, 100, 5, ""));
    let out = host_command(dir.path(), &["--log-format", "json", "run", "job.toml"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON object ({e}): {l}")))
        .collect();
    assert!(lines.iter().any(|l| l["fields"]["message"] == "job started"), "{err}");
    let summary = lines.iter().find(|l| l["fields"]["message"] == "job summary").expect("a summary line");
    let nodes = summary["fields"]["nodes"].as_array().unwrap();
    let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["gen", "counter", "out"]);
    for n in nodes {
        assert_eq!(n["records_in"].as_u64(), Some(records), "{n}");
    }
    assert_eq!(summary["fields"]["job"], "logs");

    // The text format stays the default.
    let out = host_command(dir.path(), &["run", "job.toml"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("job 'logs' finished in"), "{err}");
    assert!(!err.lines().any(|l| l.starts_with('{')), "{err}");
}

/// QuickJS has no console; the JavaScript SDK's writes to WASI stdout and
/// stderr, which reach the host's log as any guest's do: stdout at INFO
/// and stderr at WARN, a line per line, tagged with the operator, with an
/// error's stack naming the operator's own file and line, and a line
/// longer than one WASI write (4096 bytes) whole.
#[test]
fn a_javascript_operators_console_output_reaches_the_log_tagged_with_the_operator() {
    let dir = JobDir::new();
    let records: Vec<String> = (0..5).map(|i| format!("line-{i}")).collect();
    dir.write("in.txt", records.join("\n") + "\n");
    dir.write(
        "job.toml",
        format!(
            r#"name = "console"

[[sources]]
id = "in"
kind = "file"
path = "in.txt"

[[operators]]
uid = "talker"
module = "{module}"
input = "in"

[[sinks]]
id = "out"
kind = "file"
input = "talker"
path = "out.txt"
"#,
            module = weir_tests::script_guest("test_operators_js_console")
        ),
    );
    let out = host_command(dir.path(), &["--log-format", "json", "run", "job.toml"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(dir.read("out.txt"), records.join("\n") + "\n", "records pass through");
    let guest = |stream: &str, level: &str| -> Vec<String> {
        err.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .filter(|l| l["fields"]["stream"] == stream)
            .map(|l| {
                assert_eq!(l["level"], level, "{l}");
                assert_eq!(l["fields"]["operator"], "talker", "{l}");
                l["fields"]["message"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let stdout = guest("stdout", "INFO");
    let mut want = vec![r#"opened 1 {"a":[1,2]} 5n null undefined"#.to_string(), format!("{}ü", "long ".repeat(1000))];
    want.extend(records.iter().map(|r| format!("record {r}")));
    assert_eq!(stdout, want, "{err}");
    let stderr = guest("stderr", "WARN");
    assert_eq!(stderr.first().map(String::as_str), Some("RangeError: a warning from open"), "{err}");
    // The stack's first frame is `open`, at the line of the operator's
    // own file where the error was made.
    assert!(
        stderr.get(1).is_some_and(|l| l.trim_start().starts_with("at open (") && l.contains("console/app.js:11:")),
        "{stderr:?}"
    );
    let warned: Vec<&String> = stderr.iter().filter(|l| l.starts_with("warned ")).collect();
    assert_eq!(warned, records.iter().map(|r| format!("warned {r}")).collect::<Vec<_>>().iter().collect::<Vec<_>>());
}
