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
