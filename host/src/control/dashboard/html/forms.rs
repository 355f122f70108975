//! The dashboard's forms: the one that asks for the token where scripts
//! do not run, and the cards `app.js` shows and drives (actions, shadow
//! runs). Only the token form is ever submitted by the browser; it posts,
//! so the token never goes into an address.

use maud::{Markup, html};

/// The form asking for the token. Posted, so the token travels in the
/// body, never in an address (which history, bookmarks and logs keep);
/// where scripts run, app.js keeps it instead and sends nothing.
pub(super) fn token_form() -> Markup {
    html! {
        form id="token-form" class="card token" method="post" action="/" {
            h2 { "Open the dashboard" }
            p {
                "This job's control API needs its token. " code { "host status <job>" }
                " prints the dashboard's address with it (" code { "#token=…" } "); it is also in the job's run file."
            }
            p id="token-error" class="error" hidden {}
            label for="token" { "Token" }
            " "
            input id="token" name="token" type="password" autocomplete="off" required;
            " "
            button type="submit" { "Open" }
        }
    }
}

/// The actions card, shown by app.js only: the actions need the bearer
/// token in a header, which a plain HTML form cannot send.
pub(super) fn actions() -> Markup {
    html! {
        section id="actions" class="card" hidden {
            h2 { "Actions" }
            div class="actions" {
                button id="savepoint-button" type="button" { "Savepoint" }
                button id="stop-button" type="button" class="danger" { "Stop with savepoint" }
                span class="swap" {
                    label for="swap-operator" { "Swap module of" }
                    " "
                    select id="swap-operator" {}
                    " "
                    input id="swap-module" type="text" placeholder="/absolute/path/to/operator.wasm" spellcheck="false";
                    " "
                    button id="swap-button" type="button" { "Swap module" }
                }
            }
            p id="action-result" class="result" {}
            h3 { "Operations" }
            ul id="operations" class="operations" {}
        }
    }
}

/// The shadow run card, shown and filled by app.js only (from
/// `GET /v1/shadow`): its report, the buttons that stop or promote it, and
/// the form that starts one.
pub(super) fn shadow() -> Markup {
    html! {
        section id="shadow" class="card" hidden {
            h2 { "Shadow run" }
            div id="shadow-report" { p class="muted" { "No shadow run." } }
            div class="actions" {
                button id="shadow-stop-button" type="button" hidden { "Stop" }
                button id="shadow-promote-button" type="button" class="danger" hidden { "Promote" }
                span class="swap" {
                    label for="shadow-operator" { "Shadow" }
                    " "
                    select id="shadow-operator" {}
                    " "
                    label for="shadow-module" { "with" }
                    " "
                    input id="shadow-module" type="text" placeholder="/absolute/path/to/operator.wasm" spellcheck="false";
                    " "
                    label for="shadow-duration" { "for" }
                    " "
                    input id="shadow-duration" type="number" min="1" step="any" placeholder="until stopped";
                    " s "
                    button id="shadow-button" type="button" { "Start shadow run" }
                }
            }
            p id="shadow-result" class="result" {}
        }
    }
}
