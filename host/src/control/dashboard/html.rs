//! The dashboard's HTML ([`page`]) as `maud` templates: the page's frame
//! (head, title bar, the sections `app.js` draws into, footer), filled
//! with the job's state as plain tables or, without the token, with the
//! form that asks for it. Each section's content lives in the module of
//! its concept. maud escapes every spliced string, so nothing from the job
//! (ids, paths, failure causes) becomes markup; these modules never wrap a
//! string in `PreEscaped`.

mod checkpoints;
#[cfg(test)]
mod fixture;
mod forms;
mod operators;
mod overview;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(super) use fixture::fixture;

use super::PageData;
use super::format::{fmt_count, fmt_duration_ms, fmt_time};
use crate::api::Status;
use maud::{DOCTYPE, Markup, html};

/// The HTML of `/`: the job's state with `data`, else the form asking for
/// the token (posted to `/`). Either way `app.js` takes over where scripts
/// run.
pub fn page(data: Option<&PageData>) -> String {
    let title = match data {
        Some(d) => format!("{} · Weir", d.status.job),
        None => "Weir".to_string(),
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(&title))
            body {
                (top(data.map(|d| &d.status)))
                @match data {
                    Some(d) => { main id="dashboard" { (sections(Some(d))) } },
                    None => {
                        (forms::token_form())
                        // The sections app.js fills once it has the token.
                        main id="dashboard" hidden { (sections(None)) }
                    }
                }
                footer { span id="updated" {} }
            }
        }
    }
    .into_string()
}

/// The page while the job does not answer.
pub(super) fn unavailable_page() -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Weir"))
            body {
                header class="top" { h1 { "Weir" } span id="job-state" class="state" { "not answering" } }
                main {
                    p class="notice" {
                        "The job is not answering (it is restarting or ending). Reload in a moment."
                    }
                }
            }
        }
    }
    .into_string()
}

/// The document's head: the page's own icon, style sheet and script, and
/// nothing from anywhere else.
fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="referrer" content="no-referrer";
            title { (title) }
            link rel="icon" href="/assets/icon.svg" type="image/svg+xml";
            link rel="stylesheet" href="/assets/style.css";
            script src="/assets/app.js" defer {}
        }
    }
}

/// The title bar: job name, state, and the run's summary.
fn top(status: Option<&Status>) -> Markup {
    let state = match status {
        Some(s) => format!("state state-{}", state_class(&s.state)),
        None => "state".to_string(),
    };
    html! {
        header class="top" {
            h1 {
                span class="brand" { "Weir" }
                " "
                span id="job-name" { @if let Some(s) = status { (s.job) } }
            }
            span id="job-state" class=(state) { @if let Some(s) = status { (s.state) } }
            dl id="summary" {
                @if let Some(s) = status {
                    @for (term, value) in summary(s) {
                        div { dt { (term) } dd { (value) } }
                    }
                }
            }
        }
    }
}

/// The run's summary in the title bar, term by term.
fn summary(s: &Status) -> [(&'static str, String); 6] {
    [
        ("Uptime", fmt_duration_ms(s.uptime_ms)),
        ("Started", fmt_time(s.start_time_ms)),
        ("Attempt", s.attempt.to_string()),
        ("Records read", fmt_count(s.records_read)),
        ("Records written", fmt_count(s.records_written)),
        ("Parallelism", format!("{} (max {})", s.parallelism, s.max_parallelism)),
    ]
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

/// The sections' frames (the ids `app.js` fills), with the job's state in
/// them when there is `data`.
fn sections(data: Option<&PageData>) -> Markup {
    html! {
        (forms::actions())
        (forms::shadow())
        section class="card" {
            h2 { "Job graph" }
            svg id="graph" class="graph" role="img" aria-label="job graph" {}
            div id="nodes" { @if let Some(d) = data { (overview::nodes(d)) } }
        }
        section class="card" {
            h2 { "Checkpoints" }
            div id="checkpoint-counts" { @if let Some(d) = data { (checkpoints::counts(&d.checkpoints)) } }
            svg id="checkpoint-chart" class="chart" role="img" aria-label="checkpoint history" {}
            div id="checkpoint-history" { @if let Some(d) = data { (checkpoints::history(&d.checkpoints.history)) } }
        }
        section class="card" {
            h2 { "Operators: state and guest memory" }
            div id="guests" { @if let Some(d) = data { (operators::guests(d)) } }
        }
        div class="row" {
            section class="card" {
                h2 { "Watermarks" }
                div id="watermarks" { @if let Some(d) = data { (overview::watermarks(&d.metrics)) } }
            }
            section class="card" {
                h2 { "Restarts" }
                div id="restarts" { @if let Some(d) = data { (overview::restarts(&d.status)) } }
            }
        }
    }
}
