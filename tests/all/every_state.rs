//! Restore of every kind of state, end to end, element by element.
//!
//! The `every-state` operator writes, per record, the whole content of its
//! keyed states (value, list in order, map entries, reducing and aggregating
//! accumulators, a value with a long TTL, a value with a short TTL), emits a
//! line per event-time and processing-time timer naming what registered it,
//! and in `open` and at end of input each subtask's operator lists
//! (even-split and union) and broadcast rules. Each test stops a paced run
//! part-way (SIGKILL after a checkpoint, or a stop savepoint), waits until
//! the pending processing-time timers are overdue and the short TTL has run
//! out, restores (`--resume`; `--from-checkpoint` and `--from-savepoint` at
//! another parallelism, backend, max parallelism; incremental RocksDB
//! files taken over or converted), and compares the published output with
//! a model of the operator computed here: the keyed lines and timer lines
//! of an uninterrupted run, plus the operator lists and rules every subtask
//! must hold, derived from the source positions the checkpoint or
//! savepoint recorded and the documented redistribution rules.
//!
//! The operator's Python, JavaScript and C twins (`every-state-py`,
//! `test-operators-js/every-state`, `test-operators-c/every-state`) are
//! held to the same model, and a checkpoint or savepoint of a twin
//! restores into another: each SDK's whole state model, end to end.

use crate::support::{JobDir, text};
use std::collections::{BTreeMap, HashMap};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use weir_tests::{artifacts, host_command};

/// Main records, keys, and their pace in the first run (records/s).
const RECORDS: u64 = 800;
const KEYS: u64 = 8;
const RATE: u32 = 100;
/// The broadcast commands' pace in the first run: they straddle the cut,
/// and their source outlasts it (once any source has ended, the host takes
/// no more checkpoints or savepoints).
const RULES_RATE: u32 = 5;
/// Event time of record `seq` is `T0 + 10 * seq`; its timer fires `ET_DELAY` later.
const T0: i64 = 1_000_000;
const ET_DELAY: i64 = 200;
/// Records before this `seq` with flag `p` register a processing-time
/// timer `PT_DELAY_MS` ahead; records before `SHORT_BEFORE` write the
/// short-TTL value, records from `READ_FROM` on read it.
const PT_BEFORE: u64 = 150;
const PT_DELAY_MS: u64 = 4000;
const SHORT_BEFORE: u64 = 40;
const SHORT_TTL_MS: u64 = 1000;
const READ_FROM: u64 = 400;
/// The first run is stopped once the operator processed this many main
/// records: after every processing-time timer was registered (some still
/// pending) and, unless the machine is very slow, before the first
/// short-TTL read, so the restored run reads the short-TTL values right
/// after the restore (a restore that renewed their time to live shows).
const CUT_AFTER: u64 = 250;

/// One main record.
struct Rec {
    seq: u64,
    key: String,
    v: u64,
    flags: String,
    line: String,
}

impl Rec {
    fn t(&self) -> i64 {
        T0 + 10 * self.seq as i64
    }
}

fn records() -> Vec<Rec> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..RECORDS)
        .map(|seq| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = format!("k{}", x % KEYS);
            let v = (x >> 20) % 1000;
            let mut flags = String::new();
            if seq < SHORT_BEFORE {
                flags.push('s');
            }
            if seq < PT_BEFORE && seq % 3 == 0 {
                flags.push('p');
            }
            if seq % 9 == 4 {
                flags.push('m');
            }
            let line =
                format!(r#"{{"k": "{key}", "t": {}, "seq": {seq}, "v": {v}, "f": "{flags}"}}"#, T0 + 10 * seq as i64);
            Rec { seq, key, v, flags, line }
        })
        .collect()
}

/// Broadcast commands: names set once each (so a replica that lost the
/// commands before the cut ends different), some deleted later.
fn rules() -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..40 {
        out.push(format!("set a{i:02} v{}", i * 7));
        if i % 4 == 3 {
            out.push(format!("del a{:02}", i - 2));
        }
    }
    out
}

/// The broadcast input: one command a line, with an event time far ahead
/// of the main input's, so that its watermarks never hold event time back
/// once it sent one.
fn rules_file() -> String {
    rules()
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{{\"t\": {}, \"cmd\": \"{c}\"}}\n", 1_000_000_000_000u64 + i as u64))
        .collect()
}

/// The operator's shape in one run.
#[derive(Clone, Copy, Debug)]
struct Shape {
    parallelism: u32,
    max_parallelism: u32,
    /// "hashmap", "rocksdb" or "rocksdb-incremental".
    backend: &'static str,
    lang: Lang,
}

/// Which twin of the operator runs: the states are encoded alike, so a
/// checkpoint or savepoint of one restores into the other.
#[derive(Clone, Copy, Debug)]
enum Lang {
    Rust,
    /// guest-examples/every-state-py.
    Python,
    /// guest-examples/test-operators-js/every-state.
    JavaScript,
    /// guest-examples/test-operators-c/every-state.
    C,
}

impl Shape {
    const fn js(self) -> Shape {
        Shape { lang: Lang::JavaScript, ..self }
    }

    const fn in_python(self) -> Shape {
        Shape { lang: Lang::Python, ..self }
    }

    const fn in_c(self) -> Shape {
        Shape { lang: Lang::C, ..self }
    }

    fn module(self) -> String {
        match self.lang {
            Lang::Rust => artifacts::EVERY_STATE.to_string(),
            Lang::Python => weir_tests::script_guest("every_state_py_every"),
            Lang::JavaScript => weir_tests::script_guest("test_operators_js_every_state"),
            Lang::C => weir_tests::script_guest("test_operators_c_every_state"),
        }
    }
}

const P2_HASHMAP: Shape = Shape { parallelism: 2, max_parallelism: 128, backend: "hashmap", lang: Lang::Rust };

/// Where a run was cut: main records and broadcast commands before the
/// barrier, from the source positions in `_metadata`.
#[derive(Clone, Copy, Debug)]
struct Cut {
    events: usize,
    rules: usize,
}

fn write_job(dir: &JobDir, shape: Shape, paced: bool) {
    let root = dir.path().display();
    let events: String = records().iter().map(|r| format!("{}\n", r.line)).collect();
    dir.write("events.jsonl", events);
    dir.write("rules.jsonl", rules_file());
    let backend = match shape.backend {
        "rocksdb-incremental" => "state.backend.type = \"rocksdb\"\nstate.backend.incremental = true".to_string(),
        b => format!("state.backend = \"{b}\""),
    };
    // The restored runs read at full speed: nothing in them depends on time.
    let (rate, rules_rate) = if paced { (RATE, RULES_RATE) } else { (1_000_000, 1_000_000) };
    dir.write(
        "job.toml",
        format!(
            r#"name = "every"
parallelism = {p}
max_parallelism = {maxp}
{backend}

[checkpointing]
interval = "100ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[pipeline]
batch_size = 8
progress_interval = "100ms"

[[sources]]
id = "events"
kind = "file"
path = "events.jsonl"
format = "jsonl"
key_field = "k"
timestamp_field = "t"
records_per_second = {rate}

[[sources]]
id = "rules"
kind = "file"
path = "rules.jsonl"
format = "jsonl"
timestamp_field = "t"
records_per_second = {rules_rate}

[[operators]]
uid = "every"
module = "{module}"
inputs = [{{ from = "events", partition = "key" }}, {{ from = "rules", partition = "broadcast" }}]
params = {{ short_ttl_ms = {SHORT_TTL_MS}, read_from = {READ_FROM}, et_delay = {ET_DELAY}, pt_delay_ms = {PT_DELAY_MS} }}

[[sinks]]
id = "out"
kind = "transactional-file"
input = "every"
dir = "out"
"#,
            p = shape.parallelism,
            maxp = shape.max_parallelism,
            module = shape.module(),
        ),
    );
}

/// The subtask that owns `key` (docs/job-file.md, "Key groups"): the hash
/// is the host's, the key-group arithmetic is written out here.
fn owner(key: &str, shape: Shape) -> usize {
    let hash = weir_host::state::key_group::key_hash(key.as_bytes());
    let key_group = hash % u64::from(shape.max_parallelism);
    (key_group * u64::from(shape.parallelism) / u64::from(shape.max_parallelism)) as usize
}

fn joined(items: &[u64]) -> String {
    items.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// The rules after the first `n` commands, as the operator prints them
/// (every name has the same length, so byte order is name order).
fn rules_after(n: usize) -> String {
    let mut m: BTreeMap<String, String> = BTreeMap::new();
    for c in &rules()[..n] {
        let w: Vec<&str> = c.split(' ').collect();
        match w[..] {
            ["set", name, value] => {
                m.insert(name.into(), value.into());
            }
            ["del", name] => {
                m.remove(name);
            }
            _ => unreachable!("{c}"),
        }
    }
    m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// What an uninterrupted run emits per record and per timer: the same
/// whatever the restores in between.
fn keyed_lines() -> Vec<String> {
    #[derive(Default)]
    struct Key {
        prev: Option<u64>,
        vals: Vec<u64>,
        counts: BTreeMap<u64, u64>,
        sum: u64,
    }
    let show = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
    let mut keys: HashMap<String, Key> = HashMap::new();
    let mut out = Vec::new();
    for r in records() {
        let k = keys.entry(r.key.clone()).or_default();
        let prev = k.prev.replace(r.seq);
        k.vals.push(r.v);
        *k.counts.entry(r.v % 5).or_default() += 1;
        k.sum += r.v;
        let (min, max) = (k.vals.iter().min().unwrap(), k.vals.iter().max().unwrap());
        let counts: Vec<String> = k.counts.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        // The short-TTL value is read at least 3 s after it was written
        // (pacing in the first run, the wait before a restore): gone.
        let short = if r.seq >= READ_FROM { "none" } else { "-" };
        out.push(format!(
            "rec {} seq={} prev={} list=[{}] counts=[{}] sum={} stats={}/{min}/{max} long={} short={short}",
            r.key,
            r.seq,
            show(prev),
            joined(&k.vals),
            counts.join(","),
            k.sum,
            k.vals.len(),
            show(prev),
        ));
        out.push(format!("et {} t={} seq={}", r.key, r.t() + ET_DELAY, r.seq));
        if r.flags.contains('p') {
            out.push(format!("pt {} seq={}", r.key, r.seq));
        }
    }
    out
}

/// Every line the runs `shapes` publish together, run `i + 1` restored
/// from the cut `cuts[i]` of run `i`: the keyed and timer lines of an
/// uninterrupted run, and each run's `open` lines and the last run's `end`
/// lines with the operator lists and rules each subtask holds. On a change
/// of parallelism even-split element `j` of old subtask `i` goes to new
/// subtask `(i + j) % p` and union lists go whole to everyone, old subtasks
/// in order (docs/savepoint-format.md, "Restoring"); otherwise each subtask
/// keeps its own lists.
fn expected(shapes: &[Shape], cuts: &[Cut]) -> Vec<String> {
    assert_eq!(cuts.len() + 1, shapes.len());
    let recs = records();
    let mut lines = keyed_lines();
    let mut even: Vec<Vec<u64>> = vec![Vec::new(); shapes[0].parallelism as usize];
    let mut union = even.clone();
    let mut from = 0;
    for (i, &shape) in shapes.iter().enumerate() {
        let p = shape.parallelism as usize;
        if i > 0 && shapes[i - 1].parallelism != shape.parallelism {
            let mut dealt = vec![Vec::new(); p];
            for (old, items) in even.iter().enumerate() {
                for (j, &item) in items.iter().enumerate() {
                    dealt[(old + j) % p].push(item);
                }
            }
            even = dealt;
            union = vec![union.concat(); p];
        }
        let rules_now = if i == 0 { String::new() } else { rules_after(cuts[i - 1].rules) };
        for s in 0..p {
            lines.push(format!(
                "open {s}/{p} even=[{}] union=[{}] rules=[{rules_now}]",
                joined(&even[s]),
                joined(&union[s])
            ));
        }
        let to = cuts.get(i).map_or(recs.len(), |c| c.events);
        for r in recs[from..to].iter().filter(|r| r.flags.contains('m')) {
            let s = owner(&r.key, shape);
            even[s].push(r.seq);
            union[s].push(r.seq);
        }
        from = to;
    }
    let p = shapes.last().unwrap().parallelism as usize;
    let all_rules = rules_after(rules().len());
    for s in 0..p {
        lines.push(format!(
            "end {s}/{p} even=[{}] union=[{}] rules=[{all_rules}]",
            joined(&even[s]),
            joined(&union[s])
        ));
    }
    lines
}

/// Asserts that `published` holds exactly the `expected` lines (as a
/// multiset, listing what is missing and what is extra), that each key's
/// records come in order, and that no event-time timer fired before a
/// record of its key at or below its time (the watermark had not passed).
fn assert_matches(published: &str, expected: Vec<String>, what: &str) {
    let mut want: BTreeMap<&str, i64> = BTreeMap::new();
    for l in &expected {
        *want.entry(l.as_str()).or_default() += 1;
    }
    let mut got = want.clone();
    for v in got.values_mut() {
        *v = 0;
    }
    for l in published.lines() {
        *got.entry(l).or_default() += 1;
    }
    let diff: Vec<String> = got
        .iter()
        .filter(|(l, n)| want.get(*l).copied().unwrap_or(0) != **n)
        .map(|(l, n)| format!("  expected {} got {n}: {l}", want.get(l).copied().unwrap_or(0)))
        .collect();
    assert!(
        diff.is_empty(),
        "{what}: {} of {} expected lines differ:\n{}",
        diff.len(),
        expected.len(),
        diff.iter().take(25).cloned().collect::<Vec<_>>().join("\n")
    );

    // Order per key: records by seq; each event-time timer after every
    // record of its key with an event time up to the timer's.
    let mut times: HashMap<String, Vec<i64>> = HashMap::new();
    for r in records() {
        times.entry(r.key.clone()).or_default().push(r.t());
    }
    let mut last_seq: HashMap<&str, u64> = HashMap::new();
    let mut latest_t: HashMap<&str, i64> = HashMap::new();
    for l in published.lines() {
        let w: Vec<&str> = l.split(' ').collect();
        let num = |i: usize, prefix: &str| -> i64 { w[i].strip_prefix(prefix).unwrap().parse().unwrap() };
        match w[0] {
            "rec" => {
                let seq = num(2, "seq=") as u64;
                if let Some(before) = last_seq.insert(w[1], seq) {
                    assert!(before < seq, "{what}: key {} record {seq} published after record {before}", w[1]);
                }
                latest_t.insert(w[1], T0 + 10 * seq as i64);
            }
            "et" => {
                let t = num(2, "t=");
                let seen = latest_t.get(w[1]).copied().unwrap_or(i64::MIN);
                let next = times[w[1]].iter().copied().find(|&r| r > seen);
                assert!(
                    next.is_none_or(|next| next > t),
                    "{what}: timer {l} fired before the record of {} at {next:?} (watermark not past it)",
                    w[1]
                );
            }
            _ => {}
        }
    }
}

/// The published lines, part files in name order (checkpoint ids are
/// zero-padded, `part-end` last), whatever is left unpublished.
fn published_so_far(dir: &JobDir) -> String {
    let out = dir.path().join("out");
    let Ok(entries) = std::fs::read_dir(&out) else { return String::new() };
    let mut names: Vec<String> = entries.map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.retain(|n| n.starts_with("part-"));
    names.sort();
    names.iter().map(|n| std::fs::read_to_string(out.join(n)).unwrap()).collect()
}

/// The published lines of a run that ended; asserts nothing is left
/// unpublished.
fn committed(dir: &JobDir) -> String {
    let stray: Vec<_> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with("part-"))
        .collect();
    assert!(stray.is_empty(), "unpublished files left after the job finished: {stray:?}");
    published_so_far(dir)
}

/// `host run job.toml <args>` in the background; its log goes to `run.log` (a pipe
/// nobody reads could fill up and stall the host).
fn spawn(dir: &JobDir, args: &[&str]) -> Child {
    let log = std::fs::File::create(dir.path().join("run.log")).unwrap();
    let mut all = vec!["run", "job.toml"];
    all.extend_from_slice(args);
    host_command(dir.path(), &all).stdout(Stdio::null()).stderr(log).spawn().unwrap()
}

/// Waits (up to 60 s) until the operator processed `records` main records
/// in this run; returns when it saw that and the latest completed
/// checkpoint.
fn wait_for_cut(dir: &JobDir, child: &mut Child, parallelism: u32, records: u64) -> (Instant, u64) {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        assert!(child.try_wait().unwrap().is_none(), "the first run ended early:\n{}", dir.read("run.log"));
        if let Some(s) = dir.status("every") {
            let node = |id: &str, field: &str| -> u64 {
                let nodes = s["nodes"].as_array().unwrap();
                nodes.iter().find(|n| n["id"] == id).and_then(|n| n[field].as_u64()).unwrap_or(0)
            };
            // The operator counts each broadcast record once per subtask,
            // and cannot have had more than the rules source sent.
            let main =
                node("every", "records_in").saturating_sub(node("rules", "records_out") * u64::from(parallelism));
            if main >= records {
                return (Instant::now(), s["latest_checkpoint"].as_u64().unwrap_or(0));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the operator never processed {records} records:\n{}", dir.read("run.log"));
}

/// Before restoring: every processing-time timer registered before the cut
/// is due, and every short-TTL value written before it has expired.
fn wait_until_due(cut_seen: Instant) {
    let due = cut_seen + Duration::from_millis(PT_DELAY_MS.max(SHORT_TTL_MS) + 1000);
    std::thread::sleep(due.saturating_duration_since(Instant::now()));
}

/// The source positions in a checkpoint's or savepoint's `_metadata`, as
/// records before the barrier.
fn cut_of(location: &std::path::Path) -> Cut {
    let meta = std::fs::read_to_string(location.join("_metadata")).unwrap();
    let json: serde_json::Value = serde_json::from_str(meta.split_once('\n').unwrap().1).unwrap();
    let lines_before = |source: &str, text: String| -> usize {
        let at = json["sources"][source].as_u64().unwrap_or_else(|| panic!("no position of {source}: {meta}"));
        let before = &text.as_bytes()[..at as usize];
        assert!(before.is_empty() || before.ends_with(b"\n"), "position {at} of {source} is not at a line start");
        before.iter().filter(|&&b| b == b'\n').count()
    };
    let events: String = records().iter().map(|r| format!("{}\n", r.line)).collect();
    Cut { events: lines_before("events", events), rules: lines_before("rules", rules_file()) }
}

fn finish(dir: &JobDir, mut child: Child) {
    let status = child.wait().unwrap();
    assert!(status.success(), "the run failed:\n{}", dir.read("run.log"));
}

/// Asserts the cut fell where the test needs it: after every
/// processing-time timer was registered (the restored runs read at full
/// speed and end before a timer registered in them could fire), with
/// broadcast commands before it.
fn assert_mid_stream(cut: Cut) {
    assert!(cut.events as u64 >= PT_BEFORE, "cut at {cut:?}: before the last processing-time timer was registered");
    assert!(cut.rules > 0, "cut at {cut:?}: no broadcast command before it");
}

/// Runs `shape` paced, SIGKILLs it once a checkpoint taken after the cut
/// completed, resumes with `--resume` at full speed, and checks the output;
/// then restores the same checkpoint (`--from-checkpoint`) into a fresh
/// directory at each of `targets`.
fn killed_and_resumed(shape: Shape, targets: &[Shape]) {
    let dir = JobDir::new();
    write_job(&dir, shape, true);
    let mut child = spawn(&dir, &[]);
    let (seen, latest) = wait_for_cut(&dir, &mut child, shape.parallelism, CUT_AFTER);
    // A checkpoint triggered after the cut was seen: its position is past it.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let done = dir.status("every").and_then(|s| s["latest_checkpoint"].as_u64()).unwrap_or(0);
        if done >= latest + 2 {
            break;
        }
        assert!(Instant::now() < until, "no checkpoint completed after the cut");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let ck = dir.path().join("ck/every");
    let mut done: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&ck)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("_metadata").is_file())
        .map(|p| (p.file_name().unwrap().to_str().unwrap().trim_start_matches("chk-").parse().unwrap(), p))
        .collect();
    done.sort();
    let (id, checkpoint) = done.pop().expect("a completed checkpoint");
    let cut = cut_of(&checkpoint);
    assert_mid_stream(cut);
    let before = published_so_far(&dir);
    assert!(before.lines().any(|l| l.starts_with("et ")), "event-time timers fired before the cut:\n{before}");
    copy_dir(&dir.path().join("out"), &dir.path().join("out-at-kill"));

    wait_until_due(seen);
    write_job(&dir, shape, false);
    let err = dir.succeeds(&["--resume"]);
    assert!(err.contains(&format!("chk-{id}")), "resumed from the latest checkpoint, chk-{id}:\n{err}");
    let all = committed(&dir);
    assert!(all.starts_with(&before), "what was published before the kill stays first");
    let after = &all[before.len()..];
    assert_fired_after_restore(after);
    assert_matches(&all, expected(&[shape, shape], &[cut]), &format!("{shape:?} killed at {cut:?}, resumed"));

    let uri = format!("file://{}", checkpoint.display());
    for &target in targets {
        // The sink's directory as the kill left it: a checkpoint restore
        // publishes the checkpoint's pending files from there (a checkpoint
        // whose pending output is missing is refused as damaged).
        let fresh = JobDir::new();
        copy_dir(&dir.path().join("out-at-kill"), &fresh.path().join("out"));
        write_job(&fresh, target, false);
        let err = fresh.succeeds(&["--from-checkpoint", &uri]);
        assert!(err.contains("restoring"), "{err}");
        let all = committed(&fresh);
        assert!(all.starts_with(&before), "what was published before the kill stays first");
        assert_fired_after_restore(&all[before.len()..]);
        let what = format!("checkpoint of {shape:?} at {cut:?} restored into {target:?}");
        assert_matches(&all, expected(&[shape, target], &[cut]), &what);
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Timers pending at the cut fired in the restored run.
fn assert_fired_after_restore(after: &str) {
    assert!(after.lines().any(|l| l.starts_with("pt ")), "processing-time timers fired after the restore:\n{after}");
    assert!(after.lines().any(|l| l.starts_with("et ")), "event-time timers fired after the restore:\n{after}");
}

/// Starts `dir`'s job paced (with `args`), waits until it processed
/// `records` main records, stops it with a savepoint and returns the
/// savepoint, its cut, when the wait ended, and what the run published.
fn stop_with_savepoint(dir: &JobDir, shape: Shape, args: &[&str], records: u64) -> (String, Cut, Instant, String) {
    write_job(dir, shape, true);
    let mut child = spawn(dir, args);
    let (seen, _) = wait_for_cut(dir, &mut child, shape.parallelism, records);
    let out = dir.host(&["savepoint", "every", "--stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let location = text(&out.stdout).trim().to_string();
    finish(dir, child);
    let cut = cut_of(std::path::Path::new(location.trim_start_matches("file://")));
    assert_mid_stream(cut);
    let published = committed(dir);
    assert!(!published.lines().any(|l| l.starts_with("end ")), "the stopped run published nothing after the savepoint");
    (location, cut, seen, published)
}

/// Runs `shape` paced, stops it with a savepoint at the cut, and restores
/// the savepoint into a fresh directory at each of `targets`, checking each
/// restored run's output together with the first run's.
fn savepoint_restored_into(shape: Shape, targets: &[Shape]) {
    let dir = JobDir::new();
    let (location, cut, seen, before) = stop_with_savepoint(&dir, shape, &[], CUT_AFTER);
    assert!(before.lines().any(|l| l.starts_with("et ")), "event-time timers fired before the cut:\n{before}");
    wait_until_due(seen);
    for &target in targets {
        let fresh = JobDir::new();
        write_job(&fresh, target, false);
        let err = fresh.succeeds(&["--from-savepoint", &location]);
        assert!(err.contains("restoring"), "{err}");
        let after = committed(&fresh);
        assert_fired_after_restore(&after);
        let what = format!("savepoint of {shape:?} at {cut:?} restored into {target:?}");
        assert_matches(&(before.clone() + &after), expected(&[shape, target], &[cut]), &what);
    }
}

#[test]
fn an_uninterrupted_run_matches_the_model() {
    // The baseline the restore tests compare against: without any restore
    // the operator's output is exactly the model's.
    let dir = JobDir::new();
    write_job(&dir, P2_HASHMAP, true);
    dir.succeeds(&[]);
    assert_matches(&committed(&dir), expected(&[P2_HASHMAP], &[]), "uninterrupted");
}

#[test]
fn every_state_kind_survives_a_kill_and_resume() {
    killed_and_resumed(P2_HASHMAP, &[]);
}

#[test]
fn every_state_kind_survives_a_savepoint_into_another_parallelism_backend_and_max_parallelism() {
    savepoint_restored_into(
        P2_HASHMAP,
        &[
            // Scale out onto RocksDB: lists dealt out, union lists to all,
            // broadcast state copied to the new subtask.
            Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", lang: Lang::Rust },
            // Fewer key groups at the same parallelism: keys re-hashed,
            // operator lists kept per subtask.
            Shape { parallelism: 2, max_parallelism: 64, backend: "hashmap", lang: Lang::Rust },
            // More key groups and scaled in.
            Shape { parallelism: 1, max_parallelism: 256, backend: "rocksdb", lang: Lang::Rust },
        ],
    );
}

#[test]
fn every_state_kind_survives_incremental_rocksdb_checkpoints_and_savepoints() {
    let incremental = Shape { parallelism: 2, max_parallelism: 128, backend: "rocksdb-incremental", lang: Lang::Rust };
    // Resumed in place (the RocksDB files taken over as they are), and
    // converted from RocksDB files into another parallelism and backend.
    killed_and_resumed(
        incremental,
        &[
            Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", lang: Lang::Rust },
            Shape { parallelism: 2, max_parallelism: 64, backend: "hashmap", lang: Lang::Rust },
        ],
    );
    savepoint_restored_into(
        incremental,
        &[Shape { parallelism: 3, max_parallelism: 128, backend: "hashmap", lang: Lang::Rust }],
    );
}

#[test]
fn every_state_kind_survives_two_rescales_in_a_row() {
    // Lists dealt out and union lists merged twice, broadcast state copied
    // twice, keys re-hashed on the way: 2 -> 3 -> 1 subtasks.
    let shapes = [
        P2_HASHMAP,
        Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", lang: Lang::Rust },
        Shape { parallelism: 1, max_parallelism: 64, backend: "hashmap", lang: Lang::Rust },
    ];
    let first = JobDir::new();
    let (location, cut1, seen, mut all) = stop_with_savepoint(&first, shapes[0], &[], CUT_AFTER);
    wait_until_due(seen);
    // The second run, paced too, goes on from the first savepoint and is
    // stopped by another one a hundred records later.
    let second = JobDir::new();
    let (location, cut2, _, published) = stop_with_savepoint(&second, shapes[1], &["--from-savepoint", &location], 100);
    assert!(cut2.events > cut1.events, "the second run read records: {cut1:?} then {cut2:?}");
    // Its event time waits for the broadcast input's first watermark (after
    // `batch_size` paced commands), which may come after the cut.
    assert!(published.lines().any(|l| l.starts_with("pt ")), "processing-time timers fired after the restore");
    all += &published;
    let third = JobDir::new();
    write_job(&third, shapes[2], false);
    third.succeeds(&["--from-savepoint", &location]);
    let published = committed(&third);
    assert!(published.lines().any(|l| l.starts_with("et ")), "event-time timers fired after the restore:\n{published}");
    all += &published;
    assert_matches(&all, expected(&shapes, &[cut1, cut2]), &format!("{shapes:?} cut at {cut1:?} and {cut2:?}"));
}

#[test]
fn every_state_kind_in_python_matches_the_model_across_a_kill_and_resume() {
    // The Python SDK's state handles, batch path, timers, TTL, operator
    // and broadcast state: the same lines as the Rust operator's model.
    killed_and_resumed(P2_HASHMAP.in_python(), &[]);
}

#[test]
fn every_state_kind_restores_from_rust_into_python_and_back() {
    // A savepoint of the Rust operator read by the Python one at another
    // parallelism and backend, and the reverse: the same state layout.
    let p3_rocksdb = Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", ..P2_HASHMAP };
    savepoint_restored_into(P2_HASHMAP, &[p3_rocksdb.in_python()]);
    savepoint_restored_into(P2_HASHMAP.in_python(), &[p3_rocksdb]);
}

#[test]
fn an_uninterrupted_javascript_run_matches_the_model() {
    let dir = JobDir::new();
    write_job(&dir, P2_HASHMAP.js(), true);
    dir.succeeds(&[]);
    assert_matches(&committed(&dir), expected(&[P2_HASHMAP.js()], &[]), "uninterrupted, JavaScript");
}

#[test]
fn every_state_kind_in_javascript_survives_a_kill_and_resume_and_its_checkpoint_restores_into_rust() {
    killed_and_resumed(
        P2_HASHMAP.js(),
        &[Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", lang: Lang::Rust }],
    );
}

#[test]
fn every_state_kind_restores_from_a_javascript_savepoint_into_rust_and_from_a_rust_one_into_javascript() {
    savepoint_restored_into(
        P2_HASHMAP.js(),
        &[
            Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", lang: Lang::Rust },
            Shape { parallelism: 1, max_parallelism: 256, backend: "rocksdb", lang: Lang::JavaScript },
        ],
    );
    savepoint_restored_into(
        P2_HASHMAP,
        &[Shape { parallelism: 3, max_parallelism: 64, backend: "hashmap", lang: Lang::JavaScript }],
    );
}

#[test]
fn an_uninterrupted_c_run_matches_the_model() {
    let dir = JobDir::new();
    write_job(&dir, P2_HASHMAP.in_c(), true);
    dir.succeeds(&[]);
    assert_matches(&committed(&dir), expected(&[P2_HASHMAP.in_c()], &[]), "uninterrupted, C");
}

#[test]
fn every_state_kind_in_c_survives_a_kill_and_resume_and_its_checkpoint_restores_into_rust() {
    // The C SDK's batch path for value and accumulator state, its keyed
    // list and map calls, timers, TTL, operator and broadcast state.
    killed_and_resumed(
        P2_HASHMAP.in_c(),
        &[Shape { parallelism: 3, max_parallelism: 128, backend: "rocksdb", lang: Lang::Rust }],
    );
}

#[test]
fn every_state_kind_restores_from_a_c_savepoint_into_rust_and_from_a_rust_one_into_c() {
    let incremental = Shape { parallelism: 2, max_parallelism: 128, backend: "rocksdb-incremental", lang: Lang::C };
    savepoint_restored_into(
        incremental,
        &[
            Shape { parallelism: 3, max_parallelism: 128, backend: "hashmap", lang: Lang::Rust },
            Shape { parallelism: 1, max_parallelism: 256, backend: "rocksdb", lang: Lang::C },
        ],
    );
    savepoint_restored_into(
        P2_HASHMAP,
        &[Shape { parallelism: 3, max_parallelism: 64, backend: "rocksdb", lang: Lang::C }],
    );
}
