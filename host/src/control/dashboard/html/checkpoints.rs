//! The checkpoints card's tables: the counts with the latest checkpoint,
//! savepoint, failure and restore, and the recent history (the chart of
//! all of it is drawn by `app.js`).

use crate::api::{CheckpointOverview, CheckpointSummary};
use crate::control::dashboard::format::{fmt_count, fmt_duration_ms, fmt_time};
use bytesize::ByteSize;
use maud::{Markup, html};

/// Rows of the checkpoint history table (the chart shows all the API
/// keeps).
const HISTORY_ROWS: usize = 20;

/// The counts by outcome, then the latest of each kind with its location
/// (or failure).
pub(super) fn counts(c: &CheckpointOverview) -> Markup {
    let counts = [
        ("Completed", c.counts.completed),
        ("Failed", c.counts.failed),
        ("In progress", c.counts.in_progress),
        ("Restored", c.counts.restored),
    ];
    let latest = [
        ("Latest checkpoint", &c.latest_completed),
        ("Latest savepoint", &c.latest_savepoint),
        ("Latest failure", &c.latest_failed),
    ];
    html! {
        dl class="counts" {
            @for (term, n) in counts {
                div { dt { (term) } dd { (fmt_count(n)) } }
            }
            @for (term, s) in latest {
                @if let Some(s) = s {
                    div {
                        dt { (term) }
                        dd {
                            "#" (s.id)
                            @if let Some(l) = s.location.as_deref().or(s.failure.as_deref()) {
                                " " span class="path" { (l) }
                            }
                        }
                    }
                }
            }
            @if let Some(r) = &c.latest_restored {
                div { dt { "Restored from" } dd { "#" (r.id) " " span class="path" { (r.location) } } }
            }
        }
    }
}

/// The newest [`HISTORY_ROWS`] checkpoints and savepoints, newest first.
pub(super) fn history(history: &[CheckpointSummary]) -> Markup {
    html! {
        @if history.is_empty() {
            p class="muted" { "No checkpoint yet." }
        } @else {
            table class="history" {
                thead {
                    tr {
                        th.n { "ID" } th { "Type" } th { "Status" } th { "Triggered" } th.n { "Duration" }
                        th.n { "Size" } th.n { "Incremental" } th.n { "Acknowledged" } th { "Location or failure" }
                    }
                }
                tbody {
                    @for s in history.iter().take(HISTORY_ROWS) {
                        tr class={ "status-" (status_class(&s.status)) } {
                            td.n { (s.id) }
                            td { @if s.savepoint { "savepoint" } @else { "checkpoint" } }
                            td { (s.status) }
                            td { (fmt_time(s.trigger_time_ms)) }
                            td.n { (fmt_duration_ms(s.duration_ms)) }
                            td.n { (ByteSize(s.size)) }
                            td.n { (ByteSize(s.incremental_size)) }
                            td.n { (s.acknowledged) "/" (s.subtasks) }
                            td class="path" { (s.location.as_deref().or(s.failure.as_deref()).unwrap_or("")) }
                        }
                    }
                }
            }
            @if history.len() > HISTORY_ROWS {
                p class="muted" { "… and " (history.len() - HISTORY_ROWS) " older ones." }
            }
        }
    }
}

fn status_class(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        "failed" => "failed",
        _ => "in-progress",
    }
}
