//! The web dashboard at `/`: one page that shows what a running job is
//! doing (its graph, rates, back-pressure, watermarks, guests, checkpoints
//! and restarts) and steers it (savepoint, stop with savepoint, module
//! swap).
//!
//! The page works without JavaScript: [`page`] renders the job's state as
//! plain HTML tables, or a form asking for the token, which it posts (the
//! token never goes into an address). Where scripts run,
//! `app.js` takes over: it polls the control API every second, draws the
//! job graph and the checkpoint history as SVG, and sends the actions with
//! the bearer token. The page, its script and its style sheet are built
//! into the binary and load nothing from anywhere else; the
//! Content-Security-Policy ([`CSP`]) allows nothing else either, inline
//! script and style included.
//!
//! Every string taken from the job (ids, paths, failure causes) reaches the
//! HTML escaped: [`page`] is written as `maud` templates, which escape
//! every spliced value, so a crafted operator uid or failure message
//! cannot inject markup.

mod format;
mod html;

pub use html::page;

use crate::api::{CheckpointOverview, JobGraph, Metrics, Status};
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const APP_JS: &str = include_str!("dashboard/app.js");
const STYLE_CSS: &str = include_str!("dashboard/style.css");
const ICON_SVG: &str = include_str!("dashboard/icon.svg");

/// The page's Content-Security-Policy: its own origin's script, style,
/// images and API, nothing inline, no frames, forms back to itself only.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What the page shows of a job: the four resources it reads.
#[derive(Debug, Clone)]
pub struct PageData {
    /// `GET /v1/job`.
    pub status: Status,
    /// `GET /v1/job/plan`.
    pub graph: JobGraph,
    /// `GET /v1/job/metrics`.
    pub metrics: Metrics,
    /// `GET /v1/checkpoints`.
    pub checkpoints: CheckpointOverview,
}

/// The dashboard's static files: `GET /assets/app.js`, `/assets/style.css`
/// and `/assets/icon.svg`. They hold nothing of the job, so they need no
/// token (a browser fetches them without one).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/assets/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/assets/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }))
        .route("/assets/icon.svg", get(|| async { asset("image/svg+xml", ICON_SVG) }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // A host of another version serves other files at the same paths.
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (headers, body).into_response()
}

/// The token a `GET /` carries: an `Authorization: Bearer` header. Never
/// one in the address: addresses are kept in history and bookmarks and
/// logged by proxies.
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::to_string)
}

/// The token the page's form posts to `/` where scripts do not run:
/// `token=` in an `application/x-www-form-urlencoded` body.
pub fn form_token(body: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(body).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned())
}

/// The answer to `GET /` or the form's `POST /`: [`page`] with its security
/// headers; `401` when a token was given and is wrong (the page then asks
/// for it again).
pub fn respond(data: Option<&PageData>, wrong_token: bool) -> Response {
    let status = if wrong_token { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
    html_response(status, page(data))
}

/// The answer to `GET /` while the job does not answer (restarting or
/// ending): `503` with a page that says so; `app.js` goes on polling.
pub fn unavailable() -> Response {
    html_response(StatusCode::SERVICE_UNAVAILABLE, html::unavailable_page())
}

fn html_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_TYPE, "text/html; charset=utf-8");
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // An address of the page's (`#token=`) is never sent on.
    set(headers, header::REFERRER_POLICY, "no-referrer");
    // The job's data, and maybe the token, stay out of caches.
    set(headers, header::CACHE_CONTROL, "no-store");
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET path` on the dashboard's router: (status, headers, body).
    fn get(path: &str) -> (StatusCode, HeaderMap, String) {
        use tower::ServiceExt;
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let request = axum::http::Request::get(path).body(axum::body::Body::empty()).unwrap();
            let response = router::<()>().oneshot(request).await.unwrap();
            let (parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            (parts.status, parts.headers, String::from_utf8(bytes.to_vec()).unwrap())
        })
    }

    #[test]
    fn assets_are_served_with_their_types() {
        let (status, headers, body) = get("/assets/app.js");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(body, APP_JS);
        let (_, headers, body) = get("/assets/style.css");
        assert_eq!(headers[header::CONTENT_TYPE], "text/css; charset=utf-8");
        assert_eq!(body, STYLE_CSS);
        let (_, headers, _) = get("/assets/icon.svg");
        assert_eq!(headers[header::CONTENT_TYPE], "image/svg+xml");
        assert_eq!(get("/assets/other.js").0, StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_page_is_served_under_a_strict_policy() {
        let response = respond(None, false);
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self';"), "{csp}");
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert_eq!(respond(None, true).status(), StatusCode::UNAUTHORIZED);
        assert_eq!(unavailable().status(), StatusCode::SERVICE_UNAVAILABLE);
        // Nothing inline for the policy to block: no script or style in the
        // page, no event handler attributes.
        let html = page(Some(&html::fixture()));
        for inline in ["<style", " style=", " onclick=", " onload=", "javascript:"] {
            assert!(!html.contains(inline), "{inline}");
        }
        assert!(html.contains("<script src=\"/assets/app.js\" defer></script>"));
    }

    #[test]
    fn the_token_comes_from_the_header_or_the_posted_form_never_the_address() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(bearer_token(&headers).as_deref(), Some("abc"));
        assert_eq!(form_token(b"token=a%2Bb+c&x=1").as_deref(), Some("a+b c"));
        assert_eq!(form_token(b"x=1"), None);
        // The form posts the token; it has no field that a GET would put
        // in the address.
        let html = page(None);
        let form = &html[html.find("<form id=\"token-form\"").unwrap()..];
        let form = &form[..form.find("</form>").unwrap()];
        assert!(form.contains("method=\"post\" action=\"/\""), "{form}");
        assert!(!form.contains("method=\"get\""), "{form}");
    }

    #[test]
    fn the_script_uses_the_ids_the_page_has() {
        // Every `$('#id')` of app.js is an element of the page (or one it
        // makes itself), so a renamed id cannot break the page silently.
        let html = page(None);
        for id in APP_JS.split("$('#").skip(1).filter_map(|s| s.split('\'').next()) {
            assert!(html.contains(&format!("id=\"{id}\"")), "app.js looks for #{id}, which the page lacks");
        }
    }
}
