//! The operators card: per operator (its subtasks summed), the state
//! backend, state size, guest memory and its peak, key groups, guest
//! calls, traps and interruptions, with the module it runs.

use crate::control::dashboard::PageData;
use crate::control::dashboard::format::fmt_count;
use bytesize::ByteSize;
use maud::{Markup, html};

/// An operator's guests, summed over its subtasks.
#[derive(Default)]
struct Guest<'a> {
    /// Unknown before the operator's first checkpoint.
    state: Option<u64>,
    memory: u64,
    peak: u64,
    backend: &'a str,
    key_groups: u32,
    calls: u64,
    traps: u64,
    interruptions: u64,
}

/// The operators that have reported their guests, in the order of the
/// metrics' tasks.
fn by_operator(d: &PageData) -> Vec<(&str, Guest<'_>)> {
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
    by_node
}

/// The operators table, or a note while no guest has reported.
pub(super) fn guests(d: &PageData) -> Markup {
    let by_node = by_operator(d);
    let module = |id: &str| d.graph.nodes.iter().find(|n| n.id == id).and_then(|n| n.module.as_ref());
    html! {
        @if by_node.is_empty() {
            p class="muted" { "No operator has reported its guest yet." }
        } @else {
            table {
                thead {
                    tr {
                        th { "Operator" } th { "Backend" } th.n { "State" } th.n { "Memory" } th.n { "Peak memory" }
                        th.n { "Key groups" } th.n { "Calls" } th.n { "Traps / interrupts" }
                    }
                }
                tbody {
                    @for (id, g) in &by_node {
                        tr {
                            th scope="row" {
                                (id)
                                @if let Some(m) = module(id) { div class="module" title=(m.sha256) { (m.path) } }
                            }
                            td { (g.backend) }
                            td.n { @match g.state { Some(s) => (ByteSize(s)), None => "—" } }
                            td.n { (ByteSize(g.memory)) }
                            td.n { (ByteSize(g.peak)) }
                            td.n { (g.key_groups) }
                            td.n { (fmt_count(g.calls)) }
                            td.n { (g.traps) " / " (g.interruptions) }
                        }
                    }
                }
            }
        }
    }
}
