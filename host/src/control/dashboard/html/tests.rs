//! Unit tests of the server-rendered page: what it shows and that the
//! job's strings reach it escaped.

use super::*;
use crate::api::*;

#[test]
fn the_page_shows_the_job_as_tables() {
    let html = page(Some(&fixture()));
    assert!(html.starts_with("<!DOCTYPE html>"));
    for shown in [
        "<span id=\"job-name\">orders</span>",
        "state-running\">running</span>",
        "1h 02m 03s",
        "1,234,567",
        // Nodes, with rates and back-pressure (parse blocked 60 %).
        "<th scope=\"row\">parse</th>",
        "<span class=\"level level-high\">high</span> 60 %",
        "<span class=\"level level-ok\">ok</span> 0 %",
        "in → parse (rebalance)",
        // Watermarks: 2023-11-14 22:13:20 UTC.
        "2023-11-14 22:13:20.000 UTC",
        // Guests: parse has two subtasks of 2 MiB memory, 5 MiB state.
        "4.0 MiB",
        "10.0 MiB",
        "/m/parse.wasm",
        // The checkpoint history, newest first.
        "<td class=\"n\">4</td><td>checkpoint</td><td>failed</td>",
        "<td class=\"n\">2</td><td>savepoint</td><td>completed</td>",
        "expired before completing",
        "file:///ck/chk-3",
        // The restart and its cause.
        "<td class=\"cause\">operator 'parse' trapped: unreachable</td>",
    ] {
        assert!(html.contains(shown), "{shown:?} is not in the page:\n{html}");
    }
    assert!(!html.contains("id=\"token-form\""), "no token form with data");
    assert!(html.contains("id=\"graph\"") && html.contains("id=\"checkpoint-chart\""));
    for id in [
        "savepoint-button",
        "stop-button",
        "swap-button",
        "operations",
        "job-state",
        "shadow",
        "shadow-report",
        "shadow-button",
        "shadow-stop-button",
        "shadow-promote-button",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
}

#[test]
fn without_data_the_page_asks_for_the_token_and_shows_nothing_of_the_job() {
    let html = page(None);
    assert!(html.contains("<form id=\"token-form\""));
    assert!(html.contains("method=\"post\" action=\"/\""), "the token is posted, never put in an address");
    assert!(html.contains("name=\"token\""));
    assert!(html.contains("<main id=\"dashboard\" hidden>"));
    assert!(!html.contains("<table"), "no data, so no table");
}

#[test]
fn strings_from_the_job_cannot_inject_markup() {
    let evil = r#"x"><script>alert(1)</script><img src=x onerror=alert(2)>'&"#;
    let mut d = fixture();
    d.status.job = evil.into();
    d.status.state = evil.into();
    d.status.restarts[0].cause = evil.into();
    d.status.restarts[0].restored_from = Some(evil.into());
    for n in &mut d.graph.nodes {
        n.id = format!("{}{evil}", n.id);
        n.kind = evil.into();
        if let Some(m) = &mut n.module {
            m.path = evil.into();
            m.sha256 = evil.into();
        }
    }
    for e in &mut d.graph.edges {
        e.partitioning = evil.into();
        e.from = format!("{}{evil}", e.from);
    }
    for t in &mut d.metrics.tasks {
        t.node = format!("{}{evil}", t.node);
        if let Some(g) = &mut t.guest {
            g.backend = evil.into();
        }
    }
    for s in &mut d.checkpoints.history {
        s.status = evil.into();
        s.location = Some(evil.into());
        s.failure = Some(evil.into());
    }
    d.checkpoints.latest_failed.as_mut().unwrap().failure = Some(evil.into());
    d.checkpoints.latest_restored =
        Some(RestoredCheckpoint { id: 1, location: evil.into(), restore_time_ms: 0, savepoint: false });
    let html = page(Some(&d));
    // The page's own script tag is the only one, and no element came in.
    assert_eq!(html.matches("<script").count(), 1, "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("x\">"), "a quote broke out of an attribute:\n{html}");
    // maud escapes `&`, `<`, `>` and `"`; a `'` stays, harmless in text and
    // in the double-quoted attributes maud always writes.
    assert!(html.contains("x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;'&amp;"));
}

#[test]
fn stored_text_with_script_quotes_and_ampersands_is_escaped_where_it_lands() {
    let stored = r#"<script>alert("x")</script> & 'y'"#;
    let escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; 'y'";
    let mut d = fixture();
    d.status.job = stored.into();
    d.status.restarts[0].cause = stored.into();
    d.graph.nodes[1].module.as_mut().unwrap().sha256 = stored.into();
    d.checkpoints.history[0].failure = Some(stored.into());
    let html = page(Some(&d));
    for landed in [
        // In the title, the heading, a table cell and an attribute.
        format!("<title>{escaped} · Weir</title>"),
        format!("<span id=\"job-name\">{escaped}</span>"),
        format!("<td class=\"cause\">{escaped}</td>"),
        format!("<td class=\"path\">{escaped}</td>"),
        format!("<div class=\"module\" title=\"{escaped}\">/m/parse.wasm</div>"),
    ] {
        assert!(html.contains(&landed), "{landed:?} is not in the page:\n{html}");
    }
    assert_eq!(html.matches("<script").count(), 1, "only the page's own script:\n{html}");
    // Control characters pass as they are (a browser shows no markup in
    // them; the host escapes them only for terminals and logs).
    d.status.job = "a\u{1b}[31mb".into();
    assert!(page(Some(&d)).contains("<span id=\"job-name\">a\u{1b}[31mb</span>"));
}
