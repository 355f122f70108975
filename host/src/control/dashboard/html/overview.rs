//! The job at a glance: its nodes with records, rates, back-pressure and
//! busy time (summed over subtasks), its edges, the watermarks per node,
//! and the restarts. Tables only; the graph itself is drawn by `app.js`.

use crate::api::{BackPressure, Metrics, NodeWatermarks, Status, Watermarks};
use crate::control::dashboard::PageData;
use crate::control::dashboard::format::{fmt_count, fmt_duration_ms, fmt_percent, fmt_rate, fmt_time, fmt_watermark};
use maud::{Markup, html};
use std::collections::BTreeMap;

/// Per node: records and rates summed over its subtasks.
#[derive(Default)]
struct NodeRates {
    records_in: u64,
    records_out: u64,
    in_per_second: f64,
    out_per_second: f64,
    busy: f64,
}

fn node_rates(metrics: &Metrics) -> BTreeMap<&str, NodeRates> {
    let mut by_node: BTreeMap<&str, NodeRates> = BTreeMap::new();
    for t in &metrics.tasks {
        let n = by_node.entry(&t.node).or_default();
        n.records_in += t.records_in;
        n.records_out += t.records_out;
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

/// The nodes table (one row per node of the graph) and the edges.
pub(super) fn nodes(d: &PageData) -> Markup {
    let rates = node_rates(&d.metrics);
    let back_pressure = BackPressure::of(&d.metrics);
    html! {
        table class="nodes" {
            thead {
                tr {
                    th { "Node" } th { "Role" } th { "Kind" } th.n { "Parallelism" }
                    th.n { "Records in" } th.n { "Records out" } th.n { "In/s" } th.n { "Out/s" }
                    th { "Back-pressure" } th.n { "Busy" }
                }
            }
            tbody {
                @for n in &d.graph.nodes {
                    // Empty before the node's subtasks report.
                    @let r = rates.get(n.id.as_str());
                    tr {
                        th scope="row" { (n.id) }
                        td { (n.role) }
                        td { (n.kind) }
                        td.n { (n.parallelism) }
                        td.n { @if let Some(r) = r { (fmt_count(r.records_in)) } }
                        td.n { @if let Some(r) = r { (fmt_count(r.records_out)) } }
                        td.n { @if let Some(r) = r { (fmt_rate(r.in_per_second)) } }
                        td.n { @if let Some(r) = r { (fmt_rate(r.out_per_second)) } }
                        td {
                            @if let Some(b) = back_pressure.nodes.iter().find(|b| b.id == n.id) {
                                span class=(level_class(&b.level)) { (b.level) }
                                " " (fmt_percent(b.ratio))
                            }
                        }
                        td.n { @if let Some(r) = r { (fmt_percent(r.busy)) } }
                    }
                }
            }
        }
        @if !d.graph.edges.is_empty() {
            p class="edges" {
                "Edges: "
                @for (i, e) in d.graph.edges.iter().enumerate() {
                    @if i > 0 { ", " }
                    (e.from) " → " (e.to) " (" (e.partitioning) ")"
                }
            }
        }
    }
}

/// Watermarks per node: the lowest input, its lag behind the clock, and
/// the subtasks' outputs.
pub(super) fn watermarks(metrics: &Metrics) -> Markup {
    let watermarks = Watermarks::of(metrics, crate::clock::now_ms());
    html! {
        table {
            thead { tr { th { "Node" } th { "Input watermark" } th.n { "Lag" } th { "Output watermarks" } } }
            tbody {
                @for n in &watermarks.nodes {
                    tr {
                        th scope="row" { (n.id) }
                        td { (or_dash(n.min_input)) }
                        td.n { (n.lag_ms.map(|l| fmt_duration_ms(l.max(0) as u64)).unwrap_or_else(|| "—".into())) }
                        td { (outputs(n)) }
                    }
                }
            }
        }
    }
}

/// A watermark, or a dash before there is one.
fn or_dash(w: Option<i64>) -> String {
    w.map(fmt_watermark).unwrap_or_else(|| "—".into())
}

/// The subtasks' output watermarks; subtasks that agree (the usual case)
/// read as one.
fn outputs(n: &NodeWatermarks) -> String {
    let mut outputs: Vec<String> = n.subtasks.iter().map(|s| or_dash(s.output)).collect();
    outputs.dedup();
    outputs.join(", ")
}

/// The restarts, oldest first, with their causes.
pub(super) fn restarts(s: &Status) -> Markup {
    html! {
        @if s.restarts.is_empty() {
            p class="muted" { "No restarts." }
        } @else {
            table {
                thead { tr { th.n { "Attempt" } th { "Time" } th { "Cause" } th { "Restored from" } } }
                tbody {
                    @for r in &s.restarts {
                        tr {
                            td.n { (r.attempt) }
                            td { (fmt_time(r.time_ms)) }
                            td class="cause" { (r.cause) }
                            td class="path" { (r.restored_from.as_deref().unwrap_or("—")) }
                        }
                    }
                }
            }
        }
    }
}
