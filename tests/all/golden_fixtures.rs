//! Golden fixtures: the checkpoints and savepoints that every released
//! `_metadata` format version wrote (`tests/fixtures/golden/v<N>/`, made
//! once by `scripts/golden`) restore with this version of Weir, or a
//! version it no longer reads is refused with a message saying why
//! (docs/checkpoint-format.md, "Compatibility"). Flink keeps its
//! `*MigrationTest` savepoints the same way.
//!
//! Each fixture is a checkpoint or a savepoint of the `every-state` test
//! operator (every kind of state and both kinds of timers) on the hashmap
//! or the RocksDB backend (checkpoints incremental), the input read before
//! its barrier, and `expected.json`, what the state holds, which the script
//! computed from that input with a reference model of the operator, not
//! with the host's code. For every fixture found (so a new version's set is
//! picked up without a change here), on a copy:
//! - `host inspect` shows the source positions, every state with its kind
//!   and number of keys, and every key's value, list, map, accumulators,
//!   pending timers and TTL expiry as `expected.json` says;
//! - `host run --from-checkpoint` / `--from-savepoint`, into each backend,
//!   with a record per key and two broadcast commands appended to the input:
//!   the operator's output (it prints its whole state per record, its
//!   operator lists and rules when it opens and ends, and a line per timer)
//!   is exactly what the restored state plus the new input give.
//!
//! The module is today's `every-state` operator: its state names and types
//! are part of the fixtures, so they stay as they are.

use crate::support::JobDir;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weir_host::checkpoint::metadata::METADATA_VERSION;
use weir_tests::{artifacts, repo_root, run_host, stderr};

/// Every fixture directory, `tests/fixtures/golden/v<N>/<name>/`, with its version.
fn fixtures() -> Vec<(u32, PathBuf)> {
    let root = repo_root().join("tests/fixtures/golden");
    let mut out = Vec::new();
    for set in std::fs::read_dir(&root).unwrap() {
        let set = set.unwrap().path();
        if !set.is_dir() {
            continue;
        }
        let name = set.file_name().unwrap().to_str().unwrap().to_string();
        let version: u32 = name
            .strip_prefix('v')
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{}: fixture sets are named v<format version>", set.display()));
        for fixture in std::fs::read_dir(&set).unwrap() {
            let fixture = fixture.unwrap().path();
            assert!(fixture.join("expected.json").is_file(), "{} has no expected.json", fixture.display());
            out.push((version, fixture));
        }
    }
    out.sort();
    out
}

/// Copies a fixture into `to`, with directories 0700 and files 0600. The
/// host refuses to open a checkpoint tree with a link, a FIFO, or a
/// directory others may write (docs/security.md, "Checkpoint directories
/// on disk"), and git keeps only 0644/0755 (0664/0775 under a umask of
/// 002, which the host would refuse): so the test restores a fresh copy
/// with the modes the host writes itself, never the committed files in
/// place, which a restore must not touch anyway.
fn copy_fixture(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let kind = e.file_type().unwrap();
        let target = to.join(e.file_name());
        if kind.is_dir() {
            copy_fixture(&e.path(), &target);
        } else {
            assert!(kind.is_file(), "{}: a fixture holds regular files and directories only", e.path().display());
            std::fs::copy(e.path(), &target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn num(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn nums(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(num).collect()
}

fn joined(items: &[i64]) -> String {
    items.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// The bytes of an inspect value, `0x<hex> (...)`.
fn hex_of(text: &str) -> Vec<u8> {
    let hex = text.trim().strip_prefix("0x").unwrap_or_else(|| panic!("not a value: {text:?}"));
    let hex = hex.split(' ').next().unwrap();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// Postcard's unsigned varints (LEB128), one after another.
fn varints(bytes: &[u8]) -> Vec<u64> {
    let (mut out, mut x, mut shift) = (Vec::new(), 0u64, 0);
    for &b in bytes {
        x |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            out.push(x);
            (x, shift) = (0, 0);
        }
    }
    assert_eq!(shift, 0, "a varint cut short in {bytes:x?}");
    out
}

/// Postcard's signed varint (zigzag).
fn zigzag(bytes: &[u8]) -> i64 {
    let [u] = varints(bytes)[..] else { panic!("not one varint: {bytes:x?}") };
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// One fixture, copied into a directory of its own.
struct Fixture {
    name: String,
    dir: JobDir,
    expected: Value,
}

impl Fixture {
    fn new(from: &Path) -> Fixture {
        let dir = JobDir::new();
        copy_fixture(from, &dir.path().join("fixture"));
        let text = std::fs::read_to_string(from.join("expected.json")).unwrap();
        let name = format!(
            "{}/{}",
            from.parent().unwrap().file_name().unwrap().to_str().unwrap(),
            from.file_name().unwrap().to_str().unwrap()
        );
        Fixture { name, dir, expected: serde_json::from_str(&text).unwrap() }
    }

    /// The checkpoint or savepoint in the copy.
    fn location(&self) -> PathBuf {
        self.dir.path().join("fixture").join(self.expected["location"].as_str().unwrap())
    }

    fn uid(&self) -> &str {
        self.expected["job"]["operator"].as_str().unwrap()
    }

    /// `host inspect` of the copy with `args`; its stdout if it succeeded.
    fn inspect(&self, args: &[&str]) -> Result<String, String> {
        let location = self.location();
        let mut all = vec!["inspect", location.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = run_host(self.dir.path(), &all);
        if out.status.success() { Ok(String::from_utf8(out.stdout).unwrap()) } else { Err(stderr(&out)) }
    }

    /// The lines of one key's value in `state` (empty if it has none).
    fn value_of(&self, state: &str, key: &str) -> Vec<String> {
        match self.inspect(&["--operator", self.uid(), "--state", state, "--key", key]) {
            Ok(text) => text.lines().map(str::to_string).collect(),
            Err(e) if e.contains("no value for key") => Vec::new(),
            Err(e) => panic!("{}: inspect of {state} of {key} failed:\n{e}", self.name),
        }
    }

    /// A map state's entries of one key, as (key bytes, value bytes).
    fn entries_of(&self, state: &str, key: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.value_of(state, key)
            .iter()
            .map(|l| {
                let (k, v) = l.split_once(" => ").unwrap_or_else(|| panic!("not a map entry: {l}"));
                (hex_of(k), hex_of(v))
            })
            .collect()
    }
}

/// `host inspect`: source positions, states and their kinds and sizes, and
/// every key's state, value by value, against `expected.json`.
fn inspected_state_is_the_expected_one(f: &Fixture) {
    let e = &f.expected;
    let what = &f.name;
    let summary = f.inspect(&[]).unwrap_or_else(|err| panic!("{what}: inspect failed:\n{err}"));
    for source in ["events", "rules"] {
        let line = format!("source '{source}': position {}", num(&e["sources"][source]));
        assert!(summary.contains(&line), "{what}: no `{line}` in:\n{summary}");
    }
    let keyed = e["keyed"].as_object().unwrap();
    let with = |field: &str| keyed.values().filter(|k| !k[field].is_null() && k[field] != Value::Array(vec![])).count();
    let lists = e["operator_lists"].as_array().unwrap();
    let elements = |list: &str| lists.iter().map(|l| l[list].as_array().unwrap().len()).sum::<usize>();
    let states = [
        ("prev", "value", format!("{} keys", keyed.len())),
        ("long", "value", format!("{} keys", keyed.len())),
        ("short", "value", format!("{} keys", with("short"))),
        ("vals", "list", format!("{} keys", keyed.len())),
        ("counts", "map", format!("{} keys", keyed.len())),
        ("sum", "reducing", format!("{} keys", keyed.len())),
        ("stats", "aggregating", format!("{} keys", keyed.len())),
        ("et-pending", "map", format!("{} keys", keyed.len())),
        ("pt-pending", "map", format!("{} keys", with("pt_pending"))),
        ("even", "operator-list", format!("{} elements", elements("even"))),
        ("union", "operator-list", format!("{} elements", elements("union"))),
        ("rules", "broadcast-map", format!("{} keys", e["rules"].as_object().unwrap().len())),
    ];
    for (state, kind, size) in states {
        let line = format!("  state '{state}': {kind} v1 (postcard), {size}, ");
        assert!(summary.contains(&line), "{what}: no `{line}` in:\n{summary}");
    }
    // One event-time timer per record (their times differ), and at most one
    // processing-time timer per registration (records of a batch share one).
    let timers: usize = summary
        .split(&format!("operator '{}' (parallelism {}), ", f.uid(), num(&e["job"]["parallelism"])))
        .nth(1)
        .and_then(|r| r.split(" timers").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: no timer count in:\n{summary}"));
    let records = num(&e["records"]) as usize;
    let pt: usize = keyed.values().map(|k| k["pt_pending"].as_array().unwrap().len()).sum();
    let least = records + usize::from(pt > 0);
    assert!((least..=records + pt).contains(&timers), "{what}: {timers} timers for {records} records, {pt} pt");

    let [from, to] = nums(&e["written_ms"])[..] else { panic!("{what}: written_ms") };
    let pt_delay = num(&e["job"]["params"]["pt_delay_ms"]);
    for (key, k) in keyed {
        let what = format!("{what}, key {key}");
        let one = |state: &str| -> Vec<u8> {
            let lines = f.value_of(state, key);
            assert_eq!(lines.len(), 1, "{what}: {state} is {lines:?}");
            hex_of(&lines[0])
        };
        // A value with a TTL starts with its expiry time (ms, 8 bytes LE).
        let with_ttl = |state: &str, ttl: i64| -> u64 {
            let bytes = one(state);
            let expiry = i64::from_le_bytes(bytes[..8].try_into().unwrap());
            assert!((from + ttl..=to + ttl).contains(&expiry), "{what}: {state} expires at {expiry}");
            varints(&bytes[8..])[0]
        };
        assert_eq!(varints(&one("prev")), [num(&k["prev"]) as u64], "{what}: prev");
        assert_eq!(with_ttl("long", num(&e["long_ttl_ms"])), num(&k["long"]) as u64, "{what}: long");
        if k["short"].is_null() {
            assert_eq!(f.value_of("short", key), Vec::<String>::new(), "{what}: short");
        } else {
            let short = with_ttl("short", num(&e["job"]["params"]["short_ttl_ms"]));
            assert_eq!(short, num(&k["short"]) as u64, "{what}: short");
        }
        let vals: Vec<i64> = f.value_of("vals", key).iter().map(|l| varints(&hex_of(l))[0] as i64).collect();
        assert_eq!(vals, nums(&k["vals"]), "{what}: vals");
        let counts: Vec<(String, u64)> =
            f.entries_of("counts", key).iter().map(|(b, n)| (varints(b)[0].to_string(), varints(n)[0])).collect();
        let want: Vec<(String, u64)> =
            k["counts"].as_object().unwrap().iter().map(|(b, n)| (b.clone(), num(n) as u64)).collect();
        assert_eq!(counts, want, "{what}: counts");
        assert_eq!(varints(&one("sum")), [num(&k["sum"]) as u64], "{what}: sum");
        let stats: Vec<i64> = varints(&one("stats")).iter().map(|&x| x as i64).collect();
        assert_eq!(stats, nums(&k["stats"]), "{what}: stats (count, min, max)");
        let mut et: Vec<(i64, u64)> =
            f.entries_of("et-pending", key).iter().map(|(t, s)| (zigzag(t), varints(s)[0])).collect();
        et.sort();
        let mut want: Vec<(i64, u64)> =
            k["et_pending"].as_object().unwrap().iter().map(|(t, s)| (t.parse().unwrap(), num(s) as u64)).collect();
        want.sort();
        assert_eq!(et, want, "{what}: et-pending (time -> seq)");
        let pt = f.entries_of("pt-pending", key);
        let seqs: Vec<i64> = pt.iter().map(|(s, _)| varints(s)[0] as i64).collect();
        assert_eq!(seqs, nums(&k["pt_pending"]), "{what}: pt-pending (seq -> time)");
        for (_, at) in &pt {
            let at = zigzag(at);
            assert!((from + pt_delay..=to + pt_delay).contains(&at), "{what}: a processing-time timer at {at}");
        }
    }
}

/// What the restored run reads after the fixture's input: one record per
/// key (flag `m`: into the operator lists) and two broadcast commands
/// (a new rule, one deleted).
struct More {
    /// (key, seq, value) of each record.
    records: Vec<(String, i64, i64)>,
    events: String,
    set: (String, String),
    delete: String,
    rules: String,
}

fn more_input(e: &Value) -> More {
    let first = num(&e["records"]);
    let records: Vec<(String, i64, i64)> = e["keyed"]
        .as_object()
        .unwrap()
        .keys()
        .enumerate()
        .map(|(i, key)| (key.clone(), first + i as i64, (137 + 211 * i as i64) % 1000))
        .collect();
    let events = records
        .iter()
        .map(|(k, seq, v)| {
            format!("{{\"k\": \"{k}\", \"t\": {}, \"seq\": {seq}, \"v\": {v}, \"f\": \"m\"}}\n", 1_000_000 + 10 * seq)
        })
        .collect();
    // Rule names of the fixture's length, so that they sort by name.
    let set = ("b00".to_string(), "new".to_string());
    let delete = e["rules"].as_object().unwrap().keys().next().expect("a rule to delete").clone();
    let commands = [format!("set {} {}", set.0, set.1), format!("del {delete}")];
    let first_rule = num(&e["commands"]);
    let rules = commands
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{{\"t\": {}, \"cmd\": \"{c}\"}}\n", 1_000_000_000_000 + first_rule + i as i64))
        .collect();
    More { records, events, set, delete, rules }
}

/// Every line the restored run must print: its operator lists and rules
/// when each subtask opens and ends, a line per new record with the key's
/// whole state, and a line per timer pending in the fixture or registered
/// since (every event-time timer fires at the end of input; processing-time
/// timers are overdue and fire at once).
fn expected_lines(e: &Value, more: &More, long_expired: bool) -> Vec<String> {
    let p = num(&e["job"]["parallelism"]) as usize;
    let et_delay = num(&e["job"]["params"]["et_delay"]);
    let rules_line = |rules: &BTreeMap<String, String>| -> String {
        rules.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    };
    let mut rules: BTreeMap<String, String> =
        e["rules"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
    let mut lists: Vec<(Vec<i64>, Vec<i64>)> =
        e["operator_lists"].as_array().unwrap().iter().map(|l| (nums(&l["even"]), nums(&l["union"]))).collect();
    let mut lines = Vec::new();
    for (s, (even, union)) in lists.iter().enumerate() {
        lines.push(format!(
            "open {s}/{p} even=[{}] union=[{}] rules=[{}]",
            joined(even),
            joined(union),
            rules_line(&rules)
        ));
    }
    for (key, k) in e["keyed"].as_object().unwrap() {
        for (t, seq) in k["et_pending"].as_object().unwrap() {
            lines.push(format!("et {key} t={t} seq={}", num(seq)));
        }
        for seq in nums(&k["pt_pending"]) {
            lines.push(format!("pt {key} seq={seq}"));
        }
    }
    for (key, seq, v) in &more.records {
        let k = &e["keyed"][key];
        let mut vals = nums(&k["vals"]);
        vals.push(*v);
        let mut counts: BTreeMap<i64, i64> =
            k["counts"].as_object().unwrap().iter().map(|(b, n)| (b.parse().unwrap(), num(n))).collect();
        *counts.entry(v % 5).or_default() += 1;
        let counts: Vec<String> = counts.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        let (min, max) = (vals.iter().min().unwrap(), vals.iter().max().unwrap());
        // `short` expired long ago (the test waits for it); `long` lives an hour.
        let long = if long_expired { "none".to_string() } else { num(&k["long"]).to_string() };
        lines.push(format!(
            "rec {key} seq={seq} prev={} list=[{}] counts=[{}] sum={} stats={}/{min}/{max} long={long} short=none",
            num(&k["prev"]),
            joined(&vals),
            counts.join(","),
            vals.iter().sum::<i64>(),
            vals.len(),
        ));
        lines.push(format!("et {key} t={} seq={seq}", 1_000_000 + 10 * seq + et_delay));
        let s = num(&k["subtask"]) as usize;
        lists[s].0.push(*seq);
        lists[s].1.push(*seq);
    }
    rules.insert(more.set.0.clone(), more.set.1.clone());
    rules.remove(&more.delete);
    for (s, (even, union)) in lists.iter().enumerate() {
        lines.push(format!(
            "end {s}/{p} even=[{}] union=[{}] rules=[{}]",
            joined(even),
            joined(union),
            rules_line(&rules)
        ));
    }
    lines.sort();
    lines
}

/// Restores the fixture into `backend` ("hashmap" or "rocksdb", with
/// incremental checkpoints) with more input after its own, and checks
/// every line the run prints.
fn restores_and_continues(f: &Fixture, backend: &str) {
    let e = &f.expected;
    let what = format!("{} restored into {backend}", f.name);
    let run = JobDir::new();
    let more = more_input(e);
    let fixture = f.dir.path().join("fixture");
    let mut events = std::fs::read_to_string(fixture.join("events.jsonl")).unwrap();
    events += &more.events;
    run.write("events.jsonl", events);
    let mut rules = std::fs::read_to_string(fixture.join("rules.jsonl")).unwrap();
    rules += &more.rules;
    run.write("rules.jsonl", rules);
    let backend_settings = match backend {
        "hashmap" => "state.backend = \"hashmap\"",
        _ => "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true",
    };
    let params: Vec<String> =
        e["job"]["params"].as_object().unwrap().iter().map(|(k, v)| format!("{k} = {v}")).collect();
    run.write(
        "job.toml",
        format!(
            r#"name = "{name}"
parallelism = {p}
max_parallelism = {maxp}
{backend_settings}

[checkpointing]
interval = "1s"

[state.checkpoints]
dir = "file://{root}/ck"

[pipeline]
batch_size = 8

[[sources]]
id = "events"
kind = "file"
path = "events.jsonl"
format = "jsonl"
key_field = "k"
timestamp_field = "t"

[[sources]]
id = "rules"
kind = "file"
path = "rules.jsonl"
format = "jsonl"
timestamp_field = "t"

[[operators]]
uid = "{uid}"
module = "{module}"
inputs = [{{ from = "events", partition = "key" }}, {{ from = "rules", partition = "broadcast" }}]
params = {{ {params} }}

[[sinks]]
id = "out"
kind = "stdout"
input = "{uid}"
"#,
            name = e["job"]["name"].as_str().unwrap(),
            p = num(&e["job"]["parallelism"]),
            maxp = num(&e["job"]["max_parallelism"]),
            root = run.path().display(),
            uid = f.uid(),
            module = artifacts::EVERY_STATE,
            params = params.join(", "),
        ),
    );

    // Timers pending in the fixture are due and its short-lived values
    // expired (only just after scripts/golden is there a wait).
    let [from, to] = nums(&e["written_ms"])[..] else { panic!("{what}: written_ms") };
    let params = &e["job"]["params"];
    let due = to + num(&params["pt_delay_ms"]).max(num(&params["short_ttl_ms"])) + 1000;
    if now_ms() < due {
        eprintln!("{what}: waiting {} ms for the fixture's timers to be due", due - now_ms());
        std::thread::sleep(Duration::from_millis((due - now_ms()).max(0) as u64));
    }
    let flag = if e["kind"] == "checkpoint" { "--from-checkpoint" } else { "--from-savepoint" };
    let location = f.location();
    let before = now_ms();
    let out = run_host(run.path(), &["run", "job.toml", flag, location.to_str().unwrap()]);
    let after = now_ms();
    let err = stderr(&out);
    assert!(out.status.success(), "{what}: the run failed:\n{err}");
    assert!(err.contains("restoring"), "{what}: no restore in:\n{err}");
    let mut got: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
    got.sort();

    // `long` (an hour's TTL) expired if the run started over an hour after
    // the last write; it had not if it ended within an hour of the first.
    let ttl = num(&e["long_ttl_ms"]);
    let expired = expected_lines(e, &more, true);
    let alive = expected_lines(e, &more, false);
    let fits = if before > to + ttl {
        got == expired
    } else if after < from + ttl {
        got == alive
    } else {
        got.iter().all(|l| expired.contains(l) || alive.contains(l)) && got.len() == alive.len()
    };
    if !fits {
        let want = if before > to + ttl { &expired } else { &alive };
        let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).take(20).collect();
        let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).take(20).collect();
        panic!("{what}: {} lines, {} expected\nmissing: {missing:#?}\nextra: {extra:#?}", got.len(), want.len());
    }
}

/// Asserts that the tree at `copy` holds the same files as `original`,
/// byte for byte.
fn assert_same_tree(original: &Path, copy: &Path, what: &str) {
    let mut names: Vec<_> = std::fs::read_dir(original).unwrap().map(|e| e.unwrap().file_name()).collect();
    let mut copied: Vec<_> = std::fs::read_dir(copy).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    copied.sort();
    assert_eq!(names, copied, "{what}: files in {}", copy.display());
    for name in names {
        let (a, b) = (original.join(&name), copy.join(&name));
        if a.is_dir() {
            assert_same_tree(&a, &b, what);
        } else {
            assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "{what}: {} changed", b.display());
        }
    }
}

#[test]
fn golden_fixtures_of_every_format_version_restore() {
    let all = fixtures();
    let current: Vec<&(u32, PathBuf)> = all.iter().filter(|(v, _)| *v == METADATA_VERSION).collect();
    assert!(
        current.len() >= 4,
        "tests/fixtures/golden/v{METADATA_VERSION}/ lacks fixtures of the current _metadata version: run scripts/golden"
    );
    for (version, path) in &all {
        let f = Fixture::new(path);
        assert_eq!(num(&f.expected["format_version"]), i64::from(*version), "{}: version", f.name);
        let header = std::fs::read_to_string(f.location().join("_metadata")).unwrap();
        assert!(header.starts_with(&format!("WEIRMETA {version} ")), "{}: a v{version} fixture", f.name);
        inspected_state_is_the_expected_one(&f);
        for backend in ["hashmap", "rocksdb"] {
            restores_and_continues(&f, backend);
        }
        // Inspecting and restoring read the copy and wrote nothing into it.
        assert_same_tree(path, &f.dir.path().join("fixture"), &f.name);
    }
    // Every kind and backend, at the current version.
    for kind in ["hashmap-checkpoint", "hashmap-savepoint", "rocksdb-checkpoint", "rocksdb-savepoint"] {
        assert!(current.iter().any(|(_, p)| p.ends_with(kind)), "no {kind} fixture of v{METADATA_VERSION}");
    }
}

#[test]
fn a_checkpoint_of_a_future_format_version_is_refused_with_the_reason() {
    // The newest fixture set with its `_metadata` claiming the next
    // version: the CRC covers only the JSON, so only the version differs.
    let all = fixtures();
    let next = all.iter().map(|(v, _)| v).max().unwrap() + 1;
    for (_, path) in all.iter().filter(|(v, _)| *v == next - 1) {
        let f = Fixture::new(path);
        let meta = f.location().join("_metadata");
        let text = std::fs::read_to_string(&meta).unwrap();
        let (header, body) = text.split_once('\n').unwrap();
        let crc = header.rsplit(' ').next().unwrap();
        std::fs::write(&meta, format!("WEIRMETA {next} {crc}\n{body}")).unwrap();
        let reason = format!("_metadata version {next} is not supported (this host reads version {METADATA_VERSION})");
        let err = f.inspect(&[]).expect_err("inspect of a future version");
        assert!(err.contains(&reason), "{}: inspect says why:\n{err}", f.name);

        let fixture = f.dir.path().join("fixture");
        std::fs::write(fixture.join("job.toml"), restore_job(&f)).unwrap();
        let flag = if f.expected["kind"] == "checkpoint" { "--from-checkpoint" } else { "--from-savepoint" };
        let out = run_host(&fixture, &["run", "job.toml", flag, f.location().to_str().unwrap()]);
        let err = stderr(&out);
        assert!(!out.status.success() && err.contains(&reason), "{}: the restore says why:\n{err}", f.name);
    }
}

/// A minimal job file for the fixture's operator (the refusal comes before
/// any of it runs).
fn restore_job(f: &Fixture) -> String {
    let e = &f.expected;
    format!(
        r#"name = "{}"
parallelism = {}
max_parallelism = {}

[checkpointing]
interval = "1s"

[state.checkpoints]
dir = "file://{}/ck"

[[sources]]
id = "events"
kind = "file"
path = "events.jsonl"
format = "jsonl"
key_field = "k"

[[sources]]
id = "rules"
kind = "file"
path = "rules.jsonl"
format = "jsonl"

[[operators]]
uid = "{uid}"
module = "{}"
inputs = [{{ from = "events", partition = "key" }}, {{ from = "rules", partition = "broadcast" }}]

[[sinks]]
id = "out"
kind = "transactional-file"
input = "{uid}"
dir = "out"
"#,
        e["job"]["name"].as_str().unwrap(),
        num(&e["job"]["parallelism"]),
        num(&e["job"]["max_parallelism"]),
        f.dir.path().join("fixture").display(),
        artifacts::EVERY_STATE,
        uid = f.uid(),
    )
}
