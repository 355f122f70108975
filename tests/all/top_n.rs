//! The top-n example, in Rust and in JavaScript (`top-n-js`): a sliding
//! window kept by state TTL, in processing time. The source is paced to one
//! view every 500 ms; each output line is checked against the views read
//! before it: exactly where every view of the category is at most 1 s or at
//! least 3.5 s old (clearly in or out of the 2 s window on a busy machine
//! too), within bounds where one is near the window's edge. With a window
//! longer than the run, the output is exact: both languages give the same
//! lines across a kill and resume, and a savepoint of one restores into the
//! other.

use super::example_copy::ExampleCopy;

use super::support::JobDir;
use std::collections::BTreeMap;
use std::time::Duration;
use weir_tests::{artifacts, repo_root, script_guest};

/// The string value of `"name": "..."` in a flat JSON line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(&format!("\"{name}\": \"")).nth(1).unwrap().split('"').next().unwrap()
}

/// `page:count` of the `n` largest counts, ties by page name.
fn top(counts: &BTreeMap<&str, u64>, n: usize) -> String {
    let mut v: Vec<(&str, u64)> = counts.iter().map(|(p, c)| (*p, *c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter().take(n).map(|(p, c)| format!("{p}:{c}")).collect::<Vec<_>>().join(",")
}

/// What one output line may be: its category, the all-time top `n`, and the
/// per-page bounds of the window's counts.
#[derive(Debug)]
struct Expected {
    category: String,
    all: String,
    /// Views certainly in the window (read at most `window_ms / 2` before).
    certain: BTreeMap<String, u64>,
    /// Those plus the views too close to the window's edge to judge on a
    /// loaded machine (read less than `window_ms * 7 / 4` before).
    possible: BTreeMap<String, u64>,
}

/// Each output line, computed directly from the views in input order: view
/// `i` is read at `i * gap_ms`; the window of a view holds the earlier
/// views of its category read less than `window_ms` before it.
fn expected(views: &str, gap_ms: u64, window_ms: u64, n: usize) -> Vec<Expected> {
    let views: Vec<(&str, &str)> = views.lines().map(|l| (field(l, "category"), field(l, "page"))).collect();
    let mut out = Vec::new();
    for (i, (category, _)) in views.iter().enumerate() {
        let mut all: BTreeMap<&str, u64> = BTreeMap::new();
        let (mut certain, mut possible) = (BTreeMap::new(), BTreeMap::new());
        for (j, (c, page)) in views[..=i].iter().enumerate() {
            if c != category {
                continue;
            }
            *all.entry(page).or_default() += 1;
            let age = (i - j) as u64 * gap_ms;
            if age <= window_ms / 2 {
                *certain.entry(page.to_string()).or_default() += 1;
            }
            if age < window_ms * 7 / 4 {
                *possible.entry(page.to_string()).or_default() += 1;
            }
        }
        out.push(Expected { category: category.to_string(), all: top(&all, n), certain, possible });
    }
    out
}

/// Checks `line` against `e`: the all-time part exactly; the window's
/// counts within bounds (exact where no view is near the edge), listed as
/// the top `n` of those counts.
fn check(line: &str, e: &Expected, n: usize) {
    let (head, all) = line.split_once(" all=").unwrap_or_else(|| panic!("bad line {line:?}"));
    let (category, recent) = head.split_once(" recent=").unwrap_or_else(|| panic!("bad line {line:?}"));
    assert_eq!((category, all), (e.category.as_str(), e.all.as_str()), "{line}");
    let counts: BTreeMap<&str, u64> = recent
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (page, c) = p.split_once(':').unwrap();
            (page, c.parse().unwrap())
        })
        .collect();
    assert_eq!(top(&counts, n), recent, "{line}: the window's top {n}, largest first");
    for (page, max) in &e.possible {
        let min = e.certain.get(page).copied().unwrap_or(0);
        let got = counts.get(page.as_str()).copied().unwrap_or(0);
        // A page may be left out of the top n only for n larger ones.
        let shown = counts.len() < n || counts.contains_key(page.as_str());
        assert!(!shown || (min..=*max).contains(&got), "{line}: {page} counted {got}, not {min}..={max} ({e:?})");
    }
    for page in counts.keys() {
        assert!(e.possible.contains_key(*page), "{line}: {page} is not in the window ({e:?})");
    }
}

#[test]
fn old_views_leave_the_window_and_stay_in_the_all_time_counts() {
    views_leave_the_window("top-n");
}

#[test]
fn old_views_leave_the_window_of_the_javascript_twin_too() {
    views_leave_the_window("top-n-js");
}

/// The example `example` (its job reads `top-n`'s views) against the views'
/// expected window, at parallelism 1 and 3.
fn views_leave_the_window(example: &str) {
    let example = ExampleCopy::with_siblings(example, &["top-n"]);
    let job = example.read("job.toml");
    // The settings the expectation is computed from.
    assert!(job.contains("records_per_second = 2") && job.contains("params = { window_ms = 2000, n = 3 }"), "{job}");
    let views = std::fs::read_to_string(repo_root().join("guest-examples/top-n/views.jsonl")).unwrap();
    let expected = expected(&views, 500, 2000, 3);
    // The example shows views leaving the window: for some view, even the
    // largest window misses views the all-time counts have.
    assert!(
        expected.iter().any(|e| e.possible.values().sum::<u64>()
            < e.all.split(',').map(|p| p.split_once(':').unwrap().1.parse::<u64>().unwrap()).sum::<u64>()),
        "{expected:?}"
    );
    for p in ["1", "3"] {
        example.run("job.toml", &["--parallelism", p]);
        let out = example.take_output("trending.txt");
        // One category is one key: its lines keep their input order at any
        // parallelism; categories interleave freely.
        let mut lines: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for line in out.lines() {
            lines.entry(line.split(' ').next().unwrap()).or_default().push(line);
        }
        let mut want: BTreeMap<&str, Vec<&Expected>> = BTreeMap::new();
        for e in &expected {
            want.entry(e.category.as_str()).or_default().push(e);
        }
        assert_eq!(
            lines.iter().map(|(c, l)| (*c, l.len())).collect::<Vec<_>>(),
            want.iter().map(|(c, e)| (*c, e.len())).collect::<Vec<_>>(),
            "one line per view at parallelism {p}:\n{out}"
        );
        for (category, es) in &want {
            for (line, e) in lines[category].iter().zip(es) {
                check(line, e, 3);
            }
        }
    }
}

/// Views enough for a run of a few seconds: 4 categories, 9 pages with
/// uneven popularity, as the example's `views.jsonl` writes them.
fn many_views(n: usize) -> String {
    let categories = ["news", "sport", "tech", "arts"];
    (0..n)
        .map(|i| {
            let page = (i * 7 + i / 5 + (i * i) % 11) % 9;
            format!("{{\"category\": \"{}\", \"page\": \"p{page}\"}}\n", categories[i % 4])
        })
        .collect()
}

/// Each category's output lines, in order, for a window longer than the
/// run: every view counts in both parts.
fn exact_lines(views: &str, n: usize) -> BTreeMap<String, Vec<String>> {
    let mut by_category: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in expected(views, 0, 3_600_000, n) {
        by_category
            .entry(e.category.clone())
            .or_default()
            .push(format!("{} recent={} all={}", e.category, e.all, e.all));
    }
    by_category
}

fn lines_by_category(out: &str) -> BTreeMap<String, Vec<String>> {
    let mut by_category: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        by_category.entry(line.split(' ').next().unwrap().to_string()).or_default().push(line.to_string());
    }
    by_category
}

const VIEWS: usize = 800;

/// The trending operator `module` over [`many_views`] at parallelism `p`,
/// paced to run a few seconds, a one-hour window, checkpoints every 200 ms,
/// into a transactional file sink (`out/`); savepoints under `sp/`.
fn write_trending_job(dir: &JobDir, module: &str, p: u32) {
    let root = dir.path().display();
    dir.write("views.jsonl", many_views(VIEWS));
    dir.write(
        "job.toml",
        format!(
            r#"name = "sp"
parallelism = {p}

[checkpointing]
interval = "200ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[[sources]]
id = "views"
kind = "file"
path = "views.jsonl"
format = "jsonl"
key_field = "category"
records_per_second = 250

[[operators]]
uid = "trending"
module = "{module}"
input = "views"
partition = "key"
params = {{ window_ms = 3600000, n = 3 }}

[[sinks]]
id = "out"
kind = "transactional-file"
input = "trending"
dir = "out"
"#
        ),
    );
}

/// `module` killed with SIGKILL mid-run and resumed from its latest
/// checkpoint: every category's lines exactly once, in order, as computed
/// from the views.
fn killed_trending_resumes_exactly(module: &str) {
    let dir = JobDir::new();
    write_trending_job(&dir, module, 2);
    let mut child = dir.start(&[]);
    dir.wait_for_output("sp");
    std::thread::sleep(Duration::from_millis(1200));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = dir.published().lines().count();
    assert!(before < VIEWS, "killed mid-run: {before} lines published");
    dir.succeeds(&["--resume"]);
    assert_eq!(lines_by_category(&dir.published()), exact_lines(&many_views(VIEWS), 3));
}

#[test]
fn a_killed_rust_top_n_resumes_exactly() {
    killed_trending_resumes_exactly(artifacts::TOP_N);
}

#[test]
fn a_killed_javascript_top_n_resumes_exactly_with_the_same_output() {
    killed_trending_resumes_exactly(&script_guest("top_n_js_trending"));
}

/// A stop savepoint of `from` at parallelism 2, restored into `into` at 3:
/// the lists (with their TTL) and maps written by one language are read by
/// the other, and the output goes on exactly.
fn savepoint_restores_across(from: &str, into: &str) {
    let dir = JobDir::new();
    write_trending_job(&dir, from, 2);
    let child = dir.start(&[]);
    dir.wait_for_output("sp");
    let out = dir.host(&["savepoint", "sp", "--stop"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let location = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(dir.finish(child).0);
    let before = dir.published().lines().count();
    assert!(before > 0 && before < VIEWS, "stopped mid-run: {before} lines published");
    write_trending_job(&dir, into, 3);
    dir.succeeds(&["--from-savepoint", &location]);
    assert_eq!(lines_by_category(&dir.published()), exact_lines(&many_views(VIEWS), 3));
}

#[test]
fn a_savepoint_of_the_rust_top_n_restores_into_the_javascript_one() {
    savepoint_restores_across(artifacts::TOP_N, &script_guest("top_n_js_trending"));
}

#[test]
fn a_savepoint_of_the_javascript_top_n_restores_into_the_rust_one() {
    savepoint_restores_across(&script_guest("top_n_js_trending"), artifacts::TOP_N);
}
