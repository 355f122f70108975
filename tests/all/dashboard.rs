//! The web dashboard, in a real browser: headless Chromium (Debian's
//! `chromium`, driven over the DevTools protocol by `headless_chrome`)
//! opens a running job's dashboard at the address `host status` prints,
//! the token in its fragment. The page must draw the job graph with every node
//! and the checkpoint history, take the token out of the address bar, and
//! its Savepoint button must take a savepoint that the API then lists and
//! that is on disk. Without JavaScript, the page's form posts the token
//! (never in an address) and gets the job as HTML tables; `/` without the
//! token, or with it in the address, shows nothing of the job. Its shadow
//! run form starts a shadow whose report the page shows as the API does,
//! its Stop button ends it, and the operations list describes the shadow
//! and a rescale.

use super::control_auth::{endpoint, request, request_with, wait_for};
use super::support::{JobDir, text};
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use weir_tests::artifacts;

const JOB: &str = "dashboarded";
/// Node ids no page text contains by chance, so finding them in a page
/// means the page shows the job.
const NODES: [&str; 3] = ["pulse", "tally", "ledger"];

/// The job: a generator of `keys` keys into the word-count counter `tally`
/// (parallelism 2) into a file sink.
fn write_job(dir: &JobDir, keys: u64) {
    let root = dir.path().display();
    dir.write(
        "job.toml",
        format!(
            r#"name = "{JOB}"

[checkpointing]
interval = "300ms"

[state.checkpoints]
dir = "file://{root}/ck"

[state.savepoints]
dir = "file://{root}/sp"

[pipeline]
progress_interval = "200ms"

[[sources]]
id = "pulse"
kind = "generator"
count = 10000000
keys = {keys}
records_per_second = 2000
timestamps = "wall-clock"

[[operators]]
uid = "tally"
module = "{counter}"
input = "pulse"
partition = "key"
parallelism = 2

[[sinks]]
id = "ledger"
kind = "file"
input = "tally"
path = "out.txt"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
}

/// Chromium: `$WEIR_CHROMIUM`, else Debian's binary, else `chromium` on
/// the path.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let candidates = std::env::var_os("WEIR_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        // The binary itself rather than Debian's wrapper script, which
        // only adds settings for a desktop session.
        .chain([PathBuf::from("/usr/lib/chromium/chromium")])
        .chain(std::env::split_paths(&path).map(|d| d.join("chromium")));
    for c in candidates {
        if c.is_file() {
            return c;
        }
    }
    panic!(
        "Chromium is missing: the dashboard test drives it (apt-get install chromium; scripts/test installs it, or: source scripts/common.sh; ensure_chromium), or set WEIR_CHROMIUM"
    );
}

fn browser() -> Browser {
    let options = LaunchOptions::default_builder()
        .path(Some(chromium()))
        // Chromium's sandbox needs user namespaces or a setuid helper,
        // which a root user in a container (as CI runs here) does not
        // have: it refuses to start as root with it. The page it loads is
        // the test's own, from loopback.
        .sandbox(false)
        .headless(true)
        .window_size(Some((1440, 2600)))
        // The test waits on the job between browser calls.
        .idle_browser_timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    Browser::new(options).unwrap_or_else(|e| panic!("cannot start {}: {e:#}", chromium().display()))
}

/// `expression` (JavaScript returning JSON-able data) in the page, as JSON.
fn eval(tab: &Tab, expression: &str) -> serde_json::Value {
    let wrapped = format!("JSON.stringify((() => {{ {expression} }})())");
    let value = tab.evaluate(&wrapped, false).unwrap().value.unwrap_or_else(|| panic!("{expression}: no value"));
    serde_json::from_str(value.as_str().unwrap()).unwrap()
}

/// Evaluates `expression` in the page until `ok` holds for its value.
fn eval_until(tab: &Tab, what: &str, expression: &str, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let v = eval(tab, expression);
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < until, "the page never showed {what}: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the dashboard shows, read from its DOM.
const VIEW: &str = r#"
    const texts = (s) => [...document.querySelectorAll(s)].map((e) => e.textContent);
    return {
        nodes: [...document.querySelectorAll('#graph g.node')].map((g) => g.dataset.id),
        node_text: texts('#graph g.node'),
        edge_labels: texts('#graph .edge-label'),
        bars: document.querySelectorAll('#checkpoint-chart .bar').length,
        savepoint_bars: document.querySelectorAll('#checkpoint-chart .bar.savepoint').length,
        history_rows: document.querySelectorAll('#checkpoint-history tbody tr').length,
        node_stroke: (() => {
            const r = document.querySelector('#graph g.node rect');
            return r ? getComputedStyle(r).stroke : null;
        })(),
        state: document.querySelector('#job-state').textContent,
        form_hidden: document.querySelector('#token-form').hidden,
        dashboard_hidden: document.querySelector('#dashboard').hidden,
        operations: [...document.querySelectorAll('#operations li.op')].map((li) =>
            li.querySelector('.op-kind').textContent + ' ' + li.querySelector('.op-status').textContent),
        result: document.querySelector('#action-result').textContent,
        tables: document.querySelector('#dashboard').innerText,
        guests: document.querySelector('#guests').innerText,
        url: location.href,
    };
"#;

#[test]
fn the_dashboard_shows_the_running_job_and_takes_a_savepoint() {
    let dir = JobDir::new();
    write_job(&dir, 40);
    let child = dir.start(&[]);
    let (port, token) = endpoint(&dir, JOB);
    // Running, with checkpoints for the chart.
    wait_for(port, &token, "/v1/checkpoints", |c| c["counts"]["completed"].as_u64() >= Some(2));
    // The log names the dashboard's address, without the token;
    // `host status` prints it with the token, for the browser.
    let log = dir.read("run.log");
    assert!(log.contains(&format!("dashboard: http://127.0.0.1:{port}/ ")), "{log}");
    assert!(!log.contains(&token), "the token is in the log:\n{log}");
    let out = dir.host(&["status", JOB]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status = text(&out.stdout);
    let url = status
        .lines()
        .find_map(|l| l.trim().strip_prefix("dashboard: "))
        .unwrap_or_else(|| panic!("host status names no dashboard:\n{status}"))
        .to_string();
    assert_eq!(url, format!("http://127.0.0.1:{port}/#token={token}"));

    // Without JavaScript: the page's form posts the token (never puts it in
    // an address, which history and logs keep)...
    let (_, form) = request(port, "GET", "/", None);
    let form = &form[form.find("<form id=\"token-form\"").expect("a token form")..];
    let form = &form[..form.find("</form>").unwrap()];
    assert!(form.contains("method=\"post\" action=\"/\"") && form.contains("name=\"token\""), "{form}");
    // ...and its answer is the job as tables...
    let (code, html) = request_with(port, "POST", "/", None, &format!("token={token}"));
    assert_eq!(code, 200, "{html}");
    for shown in [JOB, "<table class=\"nodes\">", "<table class=\"history\">", "checkpoint</td><td>completed"] {
        assert!(html.contains(shown), "{shown:?} is not in the page:\n{html}");
    }
    for node in NODES {
        assert!(html.contains(&format!("<th scope=\"row\">{node}</th>")), "{node} is not in the page:\n{html}");
    }
    // ...and nothing of it without the token (or with a wrong one, or the
    // right one in the address), only the form that asks for it.
    let in_address = format!("/?token={token}");
    for (method, query, body, expected) in
        [("GET", "/", "", 200), ("POST", "/", "token=wrong", 401), ("GET", in_address.as_str(), "", 200)]
    {
        let (code, html) = request_with(port, method, query, None, body);
        assert_eq!(code, expected, "{method} {query}: {html}");
        assert!(html.contains("<form id=\"token-form\""), "{method} {query}: {html}");
        for secret in NODES.iter().chain([&JOB, &token.as_str(), &"<table"]) {
            assert!(!html.contains(secret), "{method} {query} shows {secret:?}:\n{html}");
        }
    }

    let browser = browser();
    // In the browser, the token typed into the form: the script keeps it
    // for the tab and sends it only as a header; the form is not sent, the
    // page stays where it is (no navigation, no token in any address).
    let typed = browser.new_tab().unwrap();
    typed.navigate_to(&format!("http://127.0.0.1:{port}/")).unwrap().wait_until_navigated().unwrap();
    eval_until(&typed, "the token form", "return !document.querySelector('#token-form').hidden", |v| v == true);
    eval(
        &typed,
        &format!(
            "window.stayed = true; document.querySelector('#token').value = '{token}'; \
             document.querySelector('#token-form').requestSubmit(); return true"
        ),
    );
    let view =
        eval_until(&typed, "the job after the form", VIEW, |v| v["nodes"].as_array().is_some_and(|n| n.len() == 3));
    assert_eq!(view["url"], format!("http://127.0.0.1:{port}/"), "{view}");
    assert_eq!((view["form_hidden"].as_bool(), view["dashboard_hidden"].as_bool()), (Some(true), Some(false)));
    assert_eq!(eval(&typed, "return window.stayed === true"), true, "the form navigated away");
    typed.close(true).unwrap();

    // In the browser, at the address `host status` printed.
    let tab = browser.new_tab().unwrap();
    tab.navigate_to(&url).unwrap().wait_until_navigated().unwrap();
    let view = eval_until(&tab, "the graph and the checkpoint chart", VIEW, |v| {
        v["nodes"].as_array().is_some_and(|n| n.len() == 3) && v["bars"].as_u64() > Some(0)
    });
    assert_eq!(view["nodes"], serde_json::json!(NODES), "one node per graph node, in order: {view}");
    assert_eq!(view["edge_labels"], serde_json::json!(["key", "rebalance"]), "{view}");
    assert_eq!(view["state"], "running", "{view}");
    assert_eq!((view["form_hidden"].as_bool(), view["dashboard_hidden"].as_bool()), (Some(true), Some(false)));
    assert_eq!(view["url"], format!("http://127.0.0.1:{port}/"), "the token is taken out of the address bar");
    assert!(view["history_rows"].as_u64() >= Some(2), "{view}");
    // The style sheet applies (the policy lets it): boxes are coloured by
    // back-pressure level, green, orange or red.
    let stroke = view["node_stroke"].as_str().unwrap_or_default();
    assert!(["rgb(47, 158, 68)", "rgb(232, 137, 12)", "rgb(224, 49, 49)"].contains(&stroke), "{view}");
    // Every node's rates, and every node in the tables.
    let tables = view["tables"].as_str().unwrap();
    for node in NODES {
        assert!(tables.contains(node), "{node} is not in the tables: {tables}");
    }
    // The operator's guest: its state backend and memory.
    eval_until(&tab, "the operator's guest", VIEW, |v| {
        let guests = v["guests"].as_str().unwrap();
        guests.contains("tally") && guests.contains("hashmap") && guests.contains("MiB")
    });
    eval_until(&tab, "rates on every node", VIEW, |v| {
        v["node_text"].as_array().unwrap().iter().all(|t| t.as_str().unwrap().contains("/s"))
    });

    // The Savepoint button: a savepoint, followed to its end on the page...
    tab.find_element("#savepoint-button").unwrap().click().unwrap();
    let view =
        eval_until(&tab, "the savepoint's outcome", VIEW, |v| v["result"].as_str().unwrap().contains("completed"));
    let shown = view["result"].as_str().unwrap().to_string();
    eval_until(&tab, "the savepoint among the operations", VIEW, |v| {
        v["operations"].as_array().unwrap().iter().any(|o| o == "savepoint completed")
    });
    // ...that the API lists, and that is on disk.
    let ops = wait_for(port, &token, "/v1/operations", |o| o.as_array().is_some_and(|a| !a.is_empty()));
    let op = &ops[0];
    assert_eq!((op["kind"].as_str(), op["status"].as_str()), (Some("savepoint"), Some("completed")), "{ops}");
    let location = op["savepoint"]["location"].as_str().unwrap();
    assert!(shown.contains(location), "the page shows where the savepoint is: {shown}");
    let sp = PathBuf::from(location.strip_prefix("file://").unwrap());
    assert!(sp.starts_with(dir.path().join("sp")), "{location}");
    assert!(sp.join("_metadata").is_file(), "{location} is on disk");
    let overview = wait_for(port, &token, "/v1/checkpoints", |c| c["latest_savepoint"].is_object());
    assert_eq!(overview["latest_savepoint"]["id"], op["savepoint"]["id"], "{overview}");
    // The chart marks it.
    eval_until(&tab, "the savepoint in the chart", VIEW, |v| v["savepoint_bars"].as_u64() > Some(0));

    // A screenshot, for people to look at.
    std::thread::sleep(Duration::from_millis(1200));
    let png = tab.capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
    let shot = dir.path().join("dashboard.png");
    std::fs::write(&shot, &png).unwrap();
    assert!(std::fs::metadata(&shot).unwrap().len() > 0);
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    if let Some(keep) = std::env::var_os("WEIR_SCREENSHOT_DIR") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&shot, PathBuf::from(keep).join("dashboard.png")).unwrap();
    }
    drop(tab);
    drop(browser);

    let out = dir.host(&["cancel", JOB]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, log) = dir.finish(child);
    assert!(!ok, "a cancelled run exits non-zero: {log}");
}

/// What the dashboard's shadow run card and operations list show.
const SHADOW_VIEW: &str = r#"
    const rows = (s) => [...document.querySelectorAll(s)].map((tr) => [...tr.children].map((c) => c.textContent));
    const text = (s) => { const e = document.querySelector(s); return e ? e.textContent : null; };
    const fields = {};
    document.querySelectorAll('#shadow-report [data-field]').forEach((d) => {
        fields[d.dataset.field] = d.querySelector('dd').textContent;
    });
    return {
        report: text('#shadow-report'),
        fields,
        reason: text('#shadow-reason'),
        keys: rows('#shadow-report table.shadow-keys tbody tr'),
        key_note: text('#shadow-report table.shadow-keys + p'),
        samples: rows('#shadow-report table.shadow-samples tbody tr'),
        buttons_hidden: ['#shadow-stop-button', '#shadow-promote-button'].map((b) => document.querySelector(b).hidden),
        operators: [...document.querySelectorAll('#shadow-operator option')].map((o) => o.value),
        result: text('#shadow-result'),
        operations: [...document.querySelectorAll('#operations li.op')].map((li) => ({
            kind: li.querySelector('.op-kind').textContent,
            status: li.querySelector('.op-status').textContent,
            outcome: li.querySelector('.op-outcome').textContent,
        })),
        tally: text('#graph g.node[data-id="tally"]'),
    };
"#;

/// A count as the page writes it (`1,234`).
fn count(v: &serde_json::Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a shown count: {v}"));
    s.replace(',', "").parse().unwrap_or_else(|_| panic!("not a shown count: {s:?}"))
}

/// The page's text for a key or payload of a shadow report (`none` for
/// none).
fn shown(v: &serde_json::Value, none: &str) -> String {
    v.as_str().unwrap_or(none).to_string()
}

/// Asserts that the shadow card shows `report` (`GET /v1/shadow`) as it is.
fn assert_shows_report(view: &serde_json::Value, report: &serde_json::Value) {
    let f = &view["fields"];
    assert_eq!(f["status"], report["status"], "{view}\n{report}");
    assert_eq!(f["operator"], report["operator"], "{view}");
    assert_eq!(f["module"], report["module"], "{view}");
    assert_eq!(f["checkpoint"], format!("#{}", report["checkpoint"]), "{view}");
    assert_eq!(count(&f["records_in"]), report["records_in"].as_u64().unwrap(), "{view}\n{report}");
    assert_eq!(count(&f["lag"]), report["lag"].as_u64().unwrap(), "{view}\n{report}");
    for c in ["equal", "different", "only_live", "only_shadow"] {
        assert_eq!(count(&f[c]), report["counts"][c].as_u64().unwrap(), "{c}: {view}\n{report}");
    }
    assert_eq!(view["reason"], report["reason"], "{view}\n{report}");
    // The first 50 keys with a difference, a note for the rest.
    let keys = report["keys"].as_array().unwrap();
    let rows = view["keys"].as_array().unwrap();
    assert_eq!(rows.len(), keys.len().min(50), "{view}\n{report}");
    for (row, k) in rows.iter().zip(keys) {
        assert_eq!(row[0], shown(&k["key"], "(no key)"), "{row} {k}");
        for (i, c) in ["different", "only_live", "only_shadow"].into_iter().enumerate() {
            assert_eq!(count(&row[i + 1]), k[c].as_u64().unwrap(), "{c}: {row} {k}");
        }
    }
    if keys.len() > 50 {
        let note = view["key_note"].as_str().unwrap_or_else(|| panic!("no note of more keys: {view}"));
        assert!(note.contains(&format!("… and {} more keys", keys.len() - 50)), "{note}");
    }
    let samples = report["samples"].as_array().unwrap();
    let rows = view["samples"].as_array().unwrap();
    assert_eq!(rows.len(), samples.len(), "{view}\n{report}");
    for (row, s) in rows.iter().zip(samples) {
        let expected = [shown(&s["key"], "(no key)"), shown(&s["live"], "—"), shown(&s["shadow"], "—")];
        assert_eq!(row, &serde_json::json!(expected), "{row} {s}");
    }
}

#[test]
fn the_dashboard_runs_a_shadow_and_describes_it_and_a_rescale() {
    let dir = JobDir::new();
    // More keys than the page lists (50).
    write_job(&dir, 60);
    let child = dir.start(&[]);
    let (port, token) = endpoint(&dir, JOB);
    wait_for(port, &token, "/v1/checkpoints", |c| c["counts"]["completed"].as_u64() >= Some(1));
    let (code, body) = request(port, "GET", "/v1/shadow", Some(&token));
    assert_eq!(code, 404, "no shadow run yet: {body}");

    let browser = browser();
    let tab = browser.new_tab().unwrap();
    tab.navigate_to(&format!("http://127.0.0.1:{port}/#token={token}")).unwrap().wait_until_navigated().unwrap();
    eval_until(&tab, "no shadow run, and the operator to shadow", SHADOW_VIEW, |v| {
        v["report"] == "No shadow run."
            && v["operators"] == serde_json::json!(["tally"])
            && v["buttons_hidden"] == serde_json::json!([true, true])
    });

    // The form: the operator (the only one), counter v2 (which writes
    // `word=n` where the counter writes `word n`, both keyed by the word:
    // every record differs), no duration.
    let module = artifacts::WORD_COUNT_COUNTER_V2;
    eval(
        &tab,
        &format!("document.querySelector('#shadow-module').value = {}; return true;", serde_json::json!(module)),
    );
    tab.find_element("#shadow-button").unwrap().click().unwrap();
    let view = eval_until(&tab, "the shadow running with records compared", SHADOW_VIEW, |v| {
        let f = &v["fields"];
        f["status"] == "running"
            && f["records_in"].is_string()
            && count(&f["records_in"]) >= 1000
            && count(&f["different"]) > 0
    });
    assert!(view["result"].as_str().unwrap().contains("completed"), "{view}");
    assert_eq!(view["buttons_hidden"], serde_json::json!([false, false]), "Stop and Promote while it runs: {view}");
    let report = wait_for(port, &token, "/v1/shadow", |r| r["status"] == "running");
    assert_eq!((report["operator"].as_str(), report["module"].as_str()), (Some("tally"), Some(module)), "{report}");
    assert_eq!(view["fields"]["module"], module, "{view}");
    assert_eq!(view["fields"]["operator"], "tally", "{view}");
    // The operations list describes the shadow as the API has it.
    let ops = wait_for(port, &token, "/v1/operations", |o| o.as_array().is_some_and(|a| !a.is_empty()));
    let op = &ops[0];
    assert_eq!((op["kind"].as_str(), op["status"].as_str()), (Some("shadow"), Some("completed")), "{ops}");
    let forked = &op["shadow"];
    assert_eq!(forked["checkpoint"], report["checkpoint"], "{ops}\n{report}");
    let described =
        format!("shadow {} of tally forked at checkpoint {}, running {module}", forked["id"], forked["checkpoint"]);
    eval_until(&tab, "the shadow among the operations", SHADOW_VIEW, |v| {
        v["operations"][0] == serde_json::json!({"kind": "shadow", "status": "completed", "outcome": described})
    });

    // Stop: the page shows the final report, as the API has it.
    tab.find_element("#shadow-stop-button").unwrap().click().unwrap();
    let view = eval_until(&tab, "the shadow ended", SHADOW_VIEW, |v| v["fields"]["status"] == "ended");
    let report = wait_for(port, &token, "/v1/shadow", |r| r["status"] == "ended");
    assert_eq!(report["reason"], "stopped on request", "{report}");
    // Every key has a difference (`word n` against `word=n`), more keys
    // than the page lists.
    let keys = report["keys"].as_array().unwrap();
    assert!(keys.len() > 50, "{report}");
    assert!(keys.iter().all(|k| k["different"].as_u64() > Some(0) && k["only_shadow"] == 0), "{report}");
    assert!(!report["samples"].as_array().unwrap().is_empty(), "{report}");
    assert_shows_report(&view, &report);
    assert_eq!(view["buttons_hidden"], serde_json::json!([true, true]), "no Stop or Promote once ended: {view}");
    assert!(view["result"].as_str().unwrap().contains("ended (stopped on request)"), "{view}");
    // A poll later, still the same.
    std::thread::sleep(Duration::from_millis(1500));
    assert_shows_report(&eval(&tab, SHADOW_VIEW), &report);
    // A screenshot of the operations and the shadow card, for people.
    eval(&tab, "window.scrollTo(0, 0); return true;");
    let png = tab.capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
    if let Some(keep) = std::env::var_os("WEIR_SCREENSHOT_DIR") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::write(PathBuf::from(keep).join("dashboard-shadow.png"), &png).unwrap();
    }

    // A rescale, asked for elsewhere: the list describes it, and the graph
    // shows the new parallelism.
    let out = dir.host(&["rescale", JOB, "--operator", "tally", "-p", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ops = wait_for(port, &token, "/v1/operations", |o| o[0]["kind"] == "rescale");
    let r = &ops[0]["rescale"];
    assert_eq!(
        (r["operator"].as_str(), r["from"].as_u64(), r["to"].as_u64()),
        (Some("tally"), Some(2), Some(3)),
        "{ops}"
    );
    let prefix = format!("tally 2 → 3 subtasks at checkpoint {} (paused ", r["checkpoint"]);
    let view = eval_until(&tab, "the rescale among the operations", SHADOW_VIEW, |v| {
        v["operations"][0]["kind"] == "rescale" && v["operations"][0]["status"] == "completed"
    });
    let outcome = view["operations"][0]["outcome"].as_str().unwrap();
    let pause = outcome
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(" ms)"))
        .and_then(|ms| ms.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{outcome:?} is not {prefix:?}<ms> ms)"));
    assert!((pause - r["pause_ms"].as_f64().unwrap()).abs() <= 0.051, "{outcome} {ops}");
    eval_until(&tab, "the rescaled operator in the graph", SHADOW_VIEW, |v| {
        v["tally"].as_str().is_some_and(|t| t.contains("×3"))
    });
    drop(tab);
    drop(browser);

    let out = dir.host(&["cancel", JOB]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, log) = dir.finish(child);
    assert!(!ok, "a cancelled run exits non-zero: {log}");
}
