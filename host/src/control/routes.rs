//! The control API's routes: each endpoint of `docs/rest-api.md` as a
//! handler that hands the coordinator a [`Request`] and writes its answer
//! back as JSON (an action as an operation the client polls, in
//! [`super::operations`]), behind the token check of [`super::access`];
//! the dashboard's page beside them.

use super::limits::{BODY_TIMEOUT, LONG_WAIT, MAX_BODY_BYTES, SHORT_WAIT};
use super::operations::{Operations, Outcome};
use super::shared::Shared;
use crate::api::{
    Accepted, BackPressure, Request, RequestError, RescaleRequest, SavepointRequest, ShadowRequest, SwapRequest,
    Watermarks,
};
use crate::clock::now_ms;
use crate::config::RestAuth;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::sync::Arc;
use std::time::Duration;

/// What a handler gets: the shared settings and the operations table.
#[derive(Clone)]
struct App {
    shared: Arc<Shared>,
    operations: Operations,
}

pub(super) fn router(shared: Arc<Shared>, table: Operations) -> Router {
    Router::new()
        .route("/v1/job", get(job))
        .route("/v1/job/plan", get(plan))
        .route("/v1/job/metrics", get(job_metrics))
        .route("/v1/job/backpressure", get(back_pressure))
        .route("/v1/job/watermarks", get(watermarks))
        .route("/v1/checkpoints", get(checkpoints))
        .route("/v1/checkpoints/config", get(checkpoint_config))
        .route("/v1/checkpoints/{id}", get(checkpoint_details))
        .route("/v1/savepoints", post(trigger_savepoint))
        .route("/v1/savepoints/{request_id}", get(operation))
        .route("/v1/swaps", post(trigger_swap))
        .route("/v1/swaps/{request_id}", get(operation))
        .route("/v1/rescales", post(trigger_rescale))
        .route("/v1/rescales/{request_id}", get(operation))
        .route("/v1/shadows", post(trigger_shadow))
        .route("/v1/shadows/{request_id}", get(operation))
        .route("/v1/shadow", get(shadow_report))
        .route("/v1/shadow/stop", post(stop_shadow))
        .route("/v1/shadow/promote", post(promote_shadow))
        .route("/v1/operations", get(list_operations))
        .route("/v1/cancel", post(cancel))
        .route("/metrics", get(metrics))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint (see docs/rest-api.md; try GET /v1/job)") })
        .layer(axum::middleware::from_fn_with_state(shared.clone(), super::access::authorize))
        // The dashboard, outside the token check: its page asks for the
        // token itself, and its assets hold nothing of the job.
        .route("/", get(dashboard_page).post(dashboard_form))
        .merge(super::dashboard::router())
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(BODY_TIMEOUT))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(super::access::check_host))
        .with_state(App { shared, operations: table })
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

fn gone() -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, "the job is not taking requests (it is ending or restarting)")
}

/// Sends a request to the coordinator and waits, off the async threads,
/// for its answer.
async fn ask<T: Send + 'static>(
    shared: &Shared,
    make: impl FnOnce(crossbeam_channel::Sender<T>) -> Request,
    wait: Duration,
) -> Option<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    shared.requests.send(make(tx)).ok()?;
    tokio::task::spawn_blocking(move || rx.recv_timeout(wait).ok()).await.ok().flatten()
}

/// A read: the coordinator's answer as JSON.
async fn read<T: serde::Serialize + Send + 'static>(
    app: &App,
    make: impl FnOnce(crossbeam_channel::Sender<T>) -> Request,
) -> Response {
    match ask(&app.shared, make, SHORT_WAIT).await {
        Some(answer) => axum::Json(answer).into_response(),
        None => gone(),
    }
}

/// `GET /`: the dashboard with the job's state when the request may read
/// it (`rest.auth = "none"`, or the bearer token), else the form that asks
/// for the token.
async fn dashboard_page(State(app): State<App>, headers: axum::http::HeaderMap) -> Response {
    dashboard_answer(app, super::dashboard::bearer_token(&headers)).await
}

/// `POST /`: the page's form where scripts do not run, the token in the
/// body.
async fn dashboard_form(State(app): State<App>, body: Bytes) -> Response {
    dashboard_answer(app, super::dashboard::form_token(&body)).await
}

async fn dashboard_answer(app: App, given: Option<String>) -> Response {
    use super::dashboard::{PageData, respond, unavailable};
    let valid = given.as_ref().is_some_and(|t| super::access::token_matches(t.as_bytes(), &app.shared.token));
    if !valid && app.shared.auth != RestAuth::ReadOpen {
        return respond(None, given.is_some());
    }
    let shared = &app.shared;
    let answers = tokio::join!(
        ask(shared, Request::Status, SHORT_WAIT),
        ask(shared, Request::Plan, SHORT_WAIT),
        ask(shared, Request::Metrics, SHORT_WAIT),
        ask(shared, Request::Checkpoints, SHORT_WAIT),
    );
    match answers {
        (Some(status), Some(graph), Some(metrics), Some(checkpoints)) => {
            respond(Some(&PageData { status, graph, metrics, checkpoints }), false)
        }
        _ => unavailable(),
    }
}

async fn job(State(app): State<App>) -> Response {
    read(&app, Request::Status).await
}

async fn plan(State(app): State<App>) -> Response {
    read(&app, Request::Plan).await
}

async fn job_metrics(State(app): State<App>) -> Response {
    read(&app, Request::Metrics).await
}

async fn back_pressure(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Metrics, SHORT_WAIT).await {
        Some(m) => axum::Json(BackPressure::of(&m)).into_response(),
        None => gone(),
    }
}

async fn watermarks(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Metrics, SHORT_WAIT).await {
        Some(m) => axum::Json(Watermarks::of(&m, now_ms())).into_response(),
        None => gone(),
    }
}

async fn checkpoints(State(app): State<App>) -> Response {
    read(&app, Request::Checkpoints).await
}

async fn checkpoint_config(State(app): State<App>) -> Response {
    read(&app, Request::CheckpointConfig).await
}

async fn checkpoint_details(State(app): State<App>, UrlPath(id): UrlPath<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return error(StatusCode::BAD_REQUEST, &format!("'{id}' is not a checkpoint id"));
    };
    match ask(&app.shared, |tx| Request::CheckpointDetails(id, tx), SHORT_WAIT).await {
        Some(Some(details)) => axum::Json(details).into_response(),
        Some(None) => error(StatusCode::NOT_FOUND, &format!("checkpoint {id} is not in the run's history")),
        None => gone(),
    }
}

async fn metrics(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Metrics, SHORT_WAIT).await {
        Some(m) => {
            let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
            ([(header::CONTENT_TYPE, kind)], super::metrics::encode(&m)).into_response()
        }
        None => gone(),
    }
}

async fn cancel(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::Cancel, SHORT_WAIT).await {
        Some(()) => axum::Json(serde_json::json!({ "cancelled": true })).into_response(),
        None => gone(),
    }
}

async fn trigger_savepoint(State(app): State<App>, body: Bytes) -> Response {
    let request = match serde_json::from_slice::<SavepointRequest>(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("bad savepoint request: {e}")),
    };
    let kind = if request.stop { "stop" } else { "savepoint" };
    start(app, kind, "savepoints", |tx| Request::Savepoint(request, tx), Outcome::Savepoint).await
}

async fn trigger_swap(State(app): State<App>, body: Bytes) -> Response {
    match serde_json::from_slice::<SwapRequest>(&body) {
        Ok(request) => start(app, "swap", "swaps", |tx| Request::Swap(request, tx), Outcome::Swap).await,
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("bad swap request: {e}")),
    }
}

async fn trigger_rescale(State(app): State<App>, body: Bytes) -> Response {
    match serde_json::from_slice::<RescaleRequest>(&body) {
        Ok(request) => start(app, "rescale", "rescales", |tx| Request::Rescale(request, tx), Outcome::Rescale).await,
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("bad rescale request: {e}")),
    }
}

async fn trigger_shadow(State(app): State<App>, body: Bytes) -> Response {
    match serde_json::from_slice::<ShadowRequest>(&body) {
        Ok(request) => start(app, "shadow", "shadows", |tx| Request::Shadow(request, tx), Outcome::Shadow).await,
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("bad shadow request: {e}")),
    }
}

async fn shadow_report(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::ShadowReport, SHORT_WAIT).await {
        Some(Some(report)) => axum::Json(report).into_response(),
        Some(None) => error(StatusCode::NOT_FOUND, "no shadow run in this job yet (start one with POST /v1/shadows)"),
        None => gone(),
    }
}

/// Ends the shadow run; answers its final report once every subtask of it
/// ended.
async fn stop_shadow(State(app): State<App>) -> Response {
    match ask(&app.shared, Request::StopShadow, SHORT_WAIT + SHORT_WAIT).await {
        Some(Ok(report)) => axum::Json(report).into_response(),
        Some(Err(e)) => error(StatusCode::CONFLICT, &e.to_string()),
        None => gone(),
    }
}

async fn promote_shadow(State(app): State<App>) -> Response {
    start(app, "swap", "swaps", Request::PromoteShadow, Outcome::Swap).await
}

/// Starts an action that takes a checkpoint's time (a savepoint, a swap, a
/// rescale): answers `202 Accepted` with where to follow it, and records
/// its outcome there when the coordinator answers.
async fn start<T: Send + 'static>(
    app: App,
    kind: &'static str,
    collection: &str,
    make: impl FnOnce(crossbeam_channel::Sender<Result<T, RequestError>>) -> Request,
    done: fn(T) -> Outcome,
) -> Response {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let Some(request_id) = app.operations.start(kind).await else { return gone() };
    if app.shared.requests.send(make(tx)).is_err() {
        app.operations.finish(request_id, Outcome::Lost);
        return gone();
    }
    let operations = app.operations.clone();
    let id = request_id.clone();
    tokio::spawn(async move {
        let answer = tokio::task::spawn_blocking(move || rx.recv_timeout(LONG_WAIT).ok()).await.ok().flatten();
        let outcome = match answer {
            Some(Ok(t)) => done(t),
            Some(Err(e)) => Outcome::Failed(e),
            None => Outcome::Lost,
        };
        operations.finish(id, outcome);
    });
    let location = format!("/v1/{collection}/{request_id}");
    (StatusCode::ACCEPTED, [(header::LOCATION, location.clone())], axum::Json(Accepted { request_id, location }))
        .into_response()
}

async fn operation(State(app): State<App>, UrlPath(request_id): UrlPath<String>) -> Response {
    match app.operations.get(request_id.clone()).await {
        Some(o) => axum::Json(o).into_response(),
        None => error(StatusCode::NOT_FOUND, &format!("no operation '{request_id}' (the last 100 are kept)")),
    }
}

async fn list_operations(State(app): State<App>) -> Response {
    axum::Json(app.operations.list().await).into_response()
}
