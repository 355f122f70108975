//! The dashboard's HTML ([`page`]): the job's state as plain tables, or
//! the form that asks for the token, around the frames `app.js` draws
//! into. Markup comes only from `&'static str` ([`Html::raw`]); every
//! string from the job goes through [`Html::text`], which escapes it.

use super::PageData;
use super::format::{fmt_bytes, fmt_count, fmt_duration_ms, fmt_percent, fmt_rate, fmt_time, fmt_watermark};
use crate::api::{BackPressure, CheckpointOverview, CheckpointSummary, Metrics, Status, Watermarks};
use std::collections::BTreeMap;

/// Rows of the checkpoint history table (the chart shows all the API
/// keeps).
const HISTORY_ROWS: usize = 20;

/// HTML being written: markup only from `&'static str` ([`Html::raw`]),
/// every other string escaped ([`Html::text`]).
#[derive(Default)]
struct Html(String);

impl Html {
    /// Markup of the page itself.
    fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.0.push_str(markup);
        self
    }

    /// Text, escaped for an element's content or a double-quoted attribute.
    fn text(&mut self, text: impl AsRef<str>) -> &mut Self {
        for c in text.as_ref().chars() {
            match c {
                '&' => self.0.push_str("&amp;"),
                '<' => self.0.push_str("&lt;"),
                '>' => self.0.push_str("&gt;"),
                '"' => self.0.push_str("&quot;"),
                '\'' => self.0.push_str("&#39;"),
                c => self.0.push(c),
            }
        }
        self
    }

    /// A table cell holding `text`.
    fn cell(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.raw("<td>").text(text).raw("</td>")
    }

    /// A right-aligned (numeric) table cell.
    fn num(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.raw("<td class=\"n\">").text(text).raw("</td>")
    }

    /// A table's head row: `columns`, numeric ones (`#` prefix) aligned right.
    fn head_row(&mut self, columns: &[&'static str]) -> &mut Self {
        self.raw("<thead><tr>");
        for c in columns {
            match c.strip_prefix('#') {
                Some(c) => self.raw("<th class=\"n\">").raw(c).raw("</th>"),
                None => self.raw("<th>").raw(c).raw("</th>"),
            };
        }
        self.raw("</tr></thead>")
    }
}

/// The HTML of `/`: the job's state with `data`, else the form asking for
/// the token (posted to `/`). Either way `app.js` takes over where scripts
/// run.
pub fn page(data: Option<&PageData>) -> String {
    let mut h = Html::default();
    match data {
        Some(d) => {
            head(&mut h, &format!("{} · Weir", d.status.job));
            h.raw("<body>");
            top(&mut h, Some(&d.status));
            h.raw("<main id=\"dashboard\">");
            body(&mut h, d);
        }
        None => {
            head(&mut h, "Weir");
            h.raw("<body>");
            top(&mut h, None);
            token_form(&mut h);
            // The sections app.js fills once it has the token.
            h.raw("<main id=\"dashboard\" hidden>");
            empty_body(&mut h);
        }
    }
    h.raw("</main><footer><span id=\"updated\"></span></footer></body></html>\n");
    h.0
}

fn head(h: &mut Html, title: &str) {
    h.raw("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    h.raw("<meta name=\"referrer\" content=\"no-referrer\">");
    h.raw("<title>").text(title).raw("</title>");
    h.raw("<link rel=\"icon\" href=\"/assets/icon.svg\" type=\"image/svg+xml\">");
    h.raw("<link rel=\"stylesheet\" href=\"/assets/style.css\">");
    h.raw("<script src=\"/assets/app.js\" defer></script></head>\n");
}

/// The title bar: job name, state, and the run's summary.
fn top(h: &mut Html, status: Option<&Status>) {
    h.raw("<header class=\"top\"><h1><span class=\"brand\">Weir</span> <span id=\"job-name\">");
    if let Some(s) = status {
        h.text(&s.job);
    }
    h.raw("</span></h1><span id=\"job-state\" class=\"state");
    if let Some(s) = status {
        h.raw(" state-").text(state_class(&s.state)).raw("\">").text(&s.state);
    } else {
        h.raw("\">");
    }
    h.raw("</span><dl id=\"summary\">");
    if let Some(s) = status {
        let parallelism = format!("{} (max {})", s.parallelism, s.max_parallelism);
        let items = [
            ("Uptime", fmt_duration_ms(s.uptime_ms)),
            ("Started", fmt_time(s.start_time_ms)),
            ("Attempt", s.attempt.to_string()),
            ("Records read", fmt_count(s.records_read)),
            ("Records written", fmt_count(s.records_written)),
            ("Parallelism", parallelism),
        ];
        for (k, v) in items {
            h.raw("<div><dt>").raw(k).raw("</dt><dd>").text(v).raw("</dd></div>");
        }
    }
    h.raw("</dl></header>\n");
}

/// A state as a class name: known states only (the rest look neutral).
fn state_class(state: &str) -> &'static str {
    match state {
        "running" => "running",
        "failing" | "failed" | "cancelled" | "cancelling" => "failing",
        "restarting" => "restarting",
        "" => "unknown",
        _ => "busy",
    }
}

fn token_form(h: &mut Html) {
    // Posted, so the token travels in the body, never in an address (which
    // history, bookmarks and logs keep); where scripts run, app.js keeps it
    // instead and sends nothing.
    h.raw("<form id=\"token-form\" class=\"card token\" method=\"post\" action=\"/\"><h2>Open the dashboard</h2>");
    h.raw(
        "<p>This job's control API needs its token. <code>host status &lt;job&gt;</code> prints the dashboard's \
           address with it (<code>#token=…</code>); it is also in the job's run file.</p>",
    );
    h.raw("<p id=\"token-error\" class=\"error\" hidden></p>");
    h.raw("<label for=\"token\">Token</label> <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required> ");
    h.raw("<button type=\"submit\">Open</button></form>\n");
}

/// The actions card, shown by app.js only: the actions need the bearer
/// token in a header, which a plain HTML form cannot send.
fn actions(h: &mut Html) {
    h.raw("<section id=\"actions\" class=\"card\" hidden><h2>Actions</h2><div class=\"actions\">");
    h.raw("<button id=\"savepoint-button\" type=\"button\">Savepoint</button>");
    h.raw("<button id=\"stop-button\" type=\"button\" class=\"danger\">Stop with savepoint</button>");
    h.raw("<span class=\"swap\"><label for=\"swap-operator\">Swap module of</label> <select id=\"swap-operator\"></select> ");
    h.raw("<input id=\"swap-module\" type=\"text\" placeholder=\"/absolute/path/to/operator.wasm\" spellcheck=\"false\"> ");
    h.raw("<button id=\"swap-button\" type=\"button\">Swap module</button></span></div>");
    h.raw("<p id=\"action-result\" class=\"result\"></p>");
    h.raw("<h3>Operations</h3><ul id=\"operations\" class=\"operations\"></ul></section>\n");
}

/// The shadow run card, shown and filled by app.js only (from
/// `GET /v1/shadow`): its report, the buttons that stop or promote it, and
/// the form that starts one.
fn shadow(h: &mut Html) {
    h.raw("<section id=\"shadow\" class=\"card\" hidden><h2>Shadow run</h2>");
    h.raw("<div id=\"shadow-report\"><p class=\"muted\">No shadow run.</p></div>");
    h.raw("<div class=\"actions\"><button id=\"shadow-stop-button\" type=\"button\" hidden>Stop</button>");
    h.raw("<button id=\"shadow-promote-button\" type=\"button\" class=\"danger\" hidden>Promote</button>");
    h.raw(
        "<span class=\"swap\"><label for=\"shadow-operator\">Shadow</label> <select id=\"shadow-operator\"></select> ",
    );
    h.raw("<label for=\"shadow-module\">with</label> ");
    h.raw("<input id=\"shadow-module\" type=\"text\" placeholder=\"/absolute/path/to/operator.wasm\" spellcheck=\"false\"> ");
    h.raw("<label for=\"shadow-duration\">for</label> ");
    h.raw("<input id=\"shadow-duration\" type=\"number\" min=\"1\" step=\"any\" placeholder=\"until stopped\"> s ");
    h.raw("<button id=\"shadow-button\" type=\"button\">Start shadow run</button></span></div>");
    h.raw("<p id=\"shadow-result\" class=\"result\"></p></section>\n");
}

/// The sections' frames; `fill` writes each one's content.
fn sections(h: &mut Html, mut fill: impl FnMut(&mut Html, &'static str)) {
    actions(h);
    shadow(h);
    h.raw("<section class=\"card\"><h2>Job graph</h2><svg id=\"graph\" class=\"graph\" role=\"img\" aria-label=\"job graph\"></svg>");
    h.raw("<div id=\"nodes\">");
    fill(h, "nodes");
    h.raw("</div></section>\n<section class=\"card\"><h2>Checkpoints</h2><div id=\"checkpoint-counts\">");
    fill(h, "checkpoint-counts");
    h.raw("</div><svg id=\"checkpoint-chart\" class=\"chart\" role=\"img\" aria-label=\"checkpoint history\"></svg>");
    h.raw("<div id=\"checkpoint-history\">");
    fill(h, "checkpoint-history");
    h.raw("</div></section>\n<section class=\"card\"><h2>Operators: state and guest memory</h2><div id=\"guests\">");
    fill(h, "guests");
    h.raw("</div></section>\n<div class=\"row\"><section class=\"card\"><h2>Watermarks</h2><div id=\"watermarks\">");
    fill(h, "watermarks");
    h.raw("</div></section>\n<section class=\"card\"><h2>Restarts</h2><div id=\"restarts\">");
    fill(h, "restarts");
    h.raw("</div></section></div>\n");
}

fn empty_body(h: &mut Html) {
    sections(h, |_, _| {});
}

fn body(h: &mut Html, d: &PageData) {
    let back_pressure = BackPressure::of(&d.metrics);
    let watermarks = Watermarks::of(&d.metrics, crate::clock::now_ms());
    sections(h, |h, section| match section {
        "nodes" => nodes(h, d, &back_pressure),
        "watermarks" => watermark_table(h, &watermarks),
        "guests" => guests(h, d),
        "checkpoint-counts" => checkpoint_counts(h, &d.checkpoints),
        "checkpoint-history" => checkpoint_history(h, &d.checkpoints.history),
        "restarts" => restarts(h, &d.status),
        _ => {}
    });
}

/// Per node: records and rates summed over its subtasks.
#[derive(Default)]
struct NodeRates {
    records_in: u64,
    records_out: u64,
    in_per_second: f64,
    out_per_second: f64,
    busy: f64,
    subtasks: u32,
}

fn node_rates(metrics: &Metrics) -> BTreeMap<&str, NodeRates> {
    let mut by_node: BTreeMap<&str, NodeRates> = BTreeMap::new();
    for t in &metrics.tasks {
        let n = by_node.entry(&t.node).or_default();
        n.records_in += t.records_in;
        n.records_out += t.records_out;
        n.subtasks += 1;
        if let Some(r) = t.rates {
            n.in_per_second += r.records_in_per_second;
            n.out_per_second += r.records_out_per_second;
            // Busy time: the node's busiest subtask, as back-pressure.
            n.busy = n.busy.max(r.busy_ms_per_second / 1000.0);
        }
    }
    by_node
}

fn level_class(level: &str) -> &'static str {
    match level {
        "ok" => "level level-ok",
        "low" => "level level-low",
        "high" => "level level-high",
        _ => "level",
    }
}

fn nodes(h: &mut Html, d: &PageData, back_pressure: &BackPressure) {
    let rates = node_rates(&d.metrics);
    h.raw("<table class=\"nodes\">");
    h.head_row(&[
        "Node",
        "Role",
        "Kind",
        "#Parallelism",
        "#Records in",
        "#Records out",
        "#In/s",
        "#Out/s",
        "Back-pressure",
        "#Busy",
    ]);
    h.raw("<tbody>");
    for n in &d.graph.nodes {
        let r = rates.get(n.id.as_str());
        h.raw("<tr><th scope=\"row\">").text(&n.id).raw("</th>");
        h.cell(&n.role).cell(&n.kind).num(n.parallelism.to_string());
        h.num(r.map(|r| fmt_count(r.records_in)).unwrap_or_default());
        h.num(r.map(|r| fmt_count(r.records_out)).unwrap_or_default());
        h.num(r.map(|r| fmt_rate(r.in_per_second)).unwrap_or_default());
        h.num(r.map(|r| fmt_rate(r.out_per_second)).unwrap_or_default());
        match back_pressure.nodes.iter().find(|b| b.id == n.id) {
            Some(b) => {
                h.raw("<td><span class=\"").raw(level_class(&b.level)).raw("\">").text(&b.level).raw("</span> ");
                h.text(fmt_percent(b.ratio)).raw("</td>");
            }
            None => {
                h.cell("");
            }
        }
        h.num(r.map(|r| fmt_percent(r.busy)).unwrap_or_default());
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
    if !d.graph.edges.is_empty() {
        h.raw("<p class=\"edges\">Edges: ");
        for (i, e) in d.graph.edges.iter().enumerate() {
            if i > 0 {
                h.raw(", ");
            }
            h.text(&e.from).raw(" → ").text(&e.to).raw(" (").text(&e.partitioning).raw(")");
        }
        h.raw("</p>");
    }
}

fn watermark_table(h: &mut Html, watermarks: &Watermarks) {
    h.raw("<table>");
    h.head_row(&["Node", "Input watermark", "#Lag", "Output watermarks"]);
    h.raw("<tbody>");
    for n in &watermarks.nodes {
        h.raw("<tr><th scope=\"row\">").text(&n.id).raw("</th>");
        h.cell(n.min_input.map(fmt_watermark).unwrap_or_else(|| "—".into()));
        h.num(n.lag_ms.map(|l| fmt_duration_ms(l.max(0) as u64)).unwrap_or_else(|| "—".into()));
        let mut outputs: Vec<String> =
            n.subtasks.iter().map(|s| s.output.map(fmt_watermark).unwrap_or("—".into())).collect();
        // Subtasks that agree (the usual case) read as one.
        outputs.dedup();
        h.cell(outputs.join(", "));
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
}

fn guests(h: &mut Html, d: &PageData) {
    // Per operator, summed over its subtasks.
    #[derive(Default)]
    struct Guest<'a> {
        state: Option<u64>,
        memory: u64,
        peak: u64,
        backend: &'a str,
        key_groups: u32,
        calls: u64,
        traps: u64,
        interruptions: u64,
    }
    let mut by_node: Vec<(&str, Guest)> = Vec::new();
    for t in &d.metrics.tasks {
        let Some(g) = &t.guest else { continue };
        if by_node.last().is_none_or(|(id, _)| *id != t.node) {
            by_node.push((&t.node, Guest::default()));
        }
        let Some((_, n)) = by_node.last_mut() else { continue };
        // Unknown before the subtask's first checkpoint.
        if let Some(s) = g.state_bytes {
            n.state = Some(n.state.unwrap_or(0) + s);
        }
        n.memory += g.memory_bytes;
        n.peak += g.memory_peak_bytes;
        n.backend = &g.backend;
        n.key_groups += g.key_groups;
        n.calls += g.calls.values().map(|c| c.count).sum::<u64>();
        n.traps += g.traps;
        n.interruptions += g.interruptions;
    }
    if by_node.is_empty() {
        h.raw("<p class=\"muted\">No operator has reported its guest yet.</p>");
        return;
    }
    h.raw("<table>");
    h.head_row(&[
        "Operator",
        "Backend",
        "#State",
        "#Memory",
        "#Peak memory",
        "#Key groups",
        "#Calls",
        "#Traps / interrupts",
    ]);
    h.raw("<tbody>");
    for (id, g) in &by_node {
        h.raw("<tr><th scope=\"row\">").text(id);
        if let Some(m) = d.graph.nodes.iter().find(|n| n.id == *id).and_then(|n| n.module.as_ref()) {
            h.raw("<div class=\"module\" title=\"").text(&m.sha256).raw("\">").text(&m.path).raw("</div>");
        }
        h.raw("</th>").cell(g.backend);
        h.num(g.state.map(fmt_bytes).unwrap_or_else(|| "—".into()));
        h.num(fmt_bytes(g.memory)).num(fmt_bytes(g.peak)).num(g.key_groups.to_string());
        h.num(fmt_count(g.calls)).num(format!("{} / {}", g.traps, g.interruptions));
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
}

fn checkpoint_counts(h: &mut Html, c: &CheckpointOverview) {
    h.raw("<dl class=\"counts\">");
    let counts = [
        ("Completed", c.counts.completed),
        ("Failed", c.counts.failed),
        ("In progress", c.counts.in_progress),
        ("Restored", c.counts.restored),
    ];
    for (k, v) in counts {
        h.raw("<div><dt>").raw(k).raw("</dt><dd>").text(fmt_count(v)).raw("</dd></div>");
    }
    let latest = [
        ("Latest checkpoint", &c.latest_completed),
        ("Latest savepoint", &c.latest_savepoint),
        ("Latest failure", &c.latest_failed),
    ];
    for (k, s) in latest {
        if let Some(s) = s {
            h.raw("<div><dt>").raw(k).raw("</dt><dd>#").text(s.id.to_string());
            if let Some(l) = s.location.as_deref().or(s.failure.as_deref()) {
                h.raw(" <span class=\"path\">").text(l).raw("</span>");
            }
            h.raw("</dd></div>");
        }
    }
    if let Some(r) = &c.latest_restored {
        h.raw("<div><dt>Restored from</dt><dd>#").text(r.id.to_string()).raw(" <span class=\"path\">");
        h.text(&r.location).raw("</span></dd></div>");
    }
    h.raw("</dl>");
}

fn checkpoint_history(h: &mut Html, history: &[CheckpointSummary]) {
    if history.is_empty() {
        h.raw("<p class=\"muted\">No checkpoint yet.</p>");
        return;
    }
    h.raw("<table class=\"history\">");
    h.head_row(&[
        "#ID",
        "Type",
        "Status",
        "Triggered",
        "#Duration",
        "#Size",
        "#Incremental",
        "#Acknowledged",
        "Location or failure",
    ]);
    h.raw("<tbody>");
    for s in history.iter().take(HISTORY_ROWS) {
        h.raw("<tr class=\"status-").raw(checkpoint_status_class(&s.status)).raw("\">");
        h.num(s.id.to_string()).cell(if s.savepoint { "savepoint" } else { "checkpoint" });
        h.cell(&s.status).cell(fmt_time(s.trigger_time_ms)).num(fmt_duration_ms(s.duration_ms));
        h.num(fmt_bytes(s.size)).num(fmt_bytes(s.incremental_size));
        h.num(format!("{}/{}", s.acknowledged, s.subtasks));
        h.raw("<td class=\"path\">").text(s.location.as_deref().or(s.failure.as_deref()).unwrap_or("")).raw("</td>");
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
    if history.len() > HISTORY_ROWS {
        h.raw("<p class=\"muted\">").text(format!("… and {} older ones.", history.len() - HISTORY_ROWS)).raw("</p>");
    }
}

fn checkpoint_status_class(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        "failed" => "failed",
        _ => "in-progress",
    }
}

fn restarts(h: &mut Html, s: &Status) {
    if s.restarts.is_empty() {
        h.raw("<p class=\"muted\">No restarts.</p>");
        return;
    }
    h.raw("<table>");
    h.head_row(&["#Attempt", "Time", "Cause", "Restored from"]);
    h.raw("<tbody>");
    for r in &s.restarts {
        h.raw("<tr>").num(r.attempt.to_string()).cell(fmt_time(r.time_ms));
        h.raw("<td class=\"cause\">").text(&r.cause).raw("</td>");
        h.raw("<td class=\"path\">").text(r.restored_from.as_deref().unwrap_or("—")).raw("</td></tr>");
    }
    h.raw("</tbody></table>");
}

/// The page while the job does not answer.
pub(super) fn unavailable_page() -> String {
    let mut h = Html::default();
    head(&mut h, "Weir");
    h.raw(
        "<body><header class=\"top\"><h1>Weir</h1><span id=\"job-state\" class=\"state\">not answering</span></header>",
    );
    h.raw("<main><p class=\"notice\">The job is not answering (it is restarting or ending). Reload in a moment.</p></main></body></html>");
    h.0
}

/// A running job of two operators, a savepoint, a failed checkpoint,
/// and one restart.
#[cfg(test)]
pub(super) fn fixture() -> PageData {
    use crate::api::*;
    let task = |node: &str, role: &str, subtask, guest: Option<GuestMetrics>| TaskMetrics {
        node: node.into(),
        role: role.into(),
        subtask,
        records_in: 1000,
        records_out: 900,
        rates: Some(TaskRates {
            records_in_per_second: 250.0,
            records_out_per_second: 240.0,
            busy_ms_per_second: 300.0,
            backpressured_ms_per_second: if node == "parse" { 600.0 } else { 0.0 },
            idle_ms_per_second: 100.0,
        }),
        input_watermark: Some(1_700_000_000_000),
        output_watermark: Some(1_700_000_000_500),
        guest,
    };
    let guest = GuestMetrics {
        memory_bytes: 2 << 20,
        memory_peak_bytes: 3 << 20,
        backend: "rocksdb".into(),
        key_groups: 64,
        state_bytes: Some(5 << 20),
        ..Default::default()
    };
    let summary = |id, status: &str, savepoint| CheckpointSummary {
        id,
        status: status.into(),
        savepoint,
        trigger_time_ms: 1_700_000_000_000 + id * 1000,
        duration_ms: 40 + id,
        size: 10_000 * id,
        incremental_size: 2_000,
        acknowledged: 4,
        subtasks: 4,
        location: (status == "completed").then(|| format!("file:///ck/chk-{id}")),
        failure: (status == "failed").then(|| "expired before completing".to_string()),
    };
    let node = |id: &str, role: &str, kind: &str| GraphNode {
        id: id.into(),
        role: role.into(),
        kind: kind.into(),
        parallelism: 2,
        max_parallelism: (role == "operator").then_some(128),
        module: (role == "operator").then(|| ModuleInfo { path: format!("/m/{id}.wasm"), sha256: "ab".repeat(32) }),
        backend: (role == "operator").then(|| "rocksdb".into()),
    };
    PageData {
        status: Status {
            job: "orders".into(),
            pid: 1,
            attempt: 1,
            state: "running".into(),
            uptime_ms: 3_723_000,
            records_read: 1_234_567,
            records_written: 7,
            checkpoints: None,
            latest_checkpoint: Some(3),
            nodes: vec![],
            start_time_ms: 1_700_000_000_000,
            parallelism: 2,
            max_parallelism: 128,
            restarts: vec![Restart {
                attempt: 1,
                time_ms: 1_700_000_001_000,
                cause: "operator 'parse' trapped: unreachable".into(),
                restored_from: Some("file:///ck/chk-2".into()),
            }],
            cluster: None,
        },
        graph: JobGraph {
            job: "orders".into(),
            max_parallelism: 128,
            nodes: vec![
                node("in", "source", "generator"),
                node("parse", "operator", "wasm"),
                node("total", "operator", "wasm"),
                node("sink", "sink", "file"),
            ],
            edges: vec![
                GraphEdge { from: "in".into(), to: "parse".into(), partitioning: "rebalance".into() },
                GraphEdge { from: "parse".into(), to: "total".into(), partitioning: "key".into() },
                GraphEdge { from: "total".into(), to: "sink".into(), partitioning: "forward".into() },
            ],
        },
        metrics: Metrics {
            job: "orders".into(),
            restarts: 1,
            uptime_ms: 3_723_000,
            tasks: vec![
                task("in", "source", 0, None),
                task("parse", "operator", 0, Some(guest.clone())),
                task("parse", "operator", 1, Some(guest.clone())),
                task("total", "operator", 0, Some(guest)),
                task("sink", "sink", 0, None),
            ],
            checkpoints: None,
        },
        checkpoints: CheckpointOverview {
            counts: CheckpointCounts { completed: 2, failed: 1, in_progress: 0, restored: 1 },
            latest_completed: Some(summary(3, "completed", false)),
            latest_savepoint: Some(summary(2, "completed", true)),
            latest_failed: Some(summary(4, "failed", false)),
            latest_restored: None,
            history: vec![summary(4, "failed", false), summary(3, "completed", false), summary(2, "completed", true)],
        },
    }
}

#[cfg(test)]
mod tests;
