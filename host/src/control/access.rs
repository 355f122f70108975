//! Which requests the control API lets in: those naming this machine in
//! `Host`, then those carrying the run file's bearer token (or, with
//! `rest.auth = "none"`, reads without it).
//!
//! The `Host` check is the defence against DNS rebinding. A web page the
//! user opens can make the browser resolve its own name to 127.0.0.1 and
//! then read the job's API as same-origin (with `rest.auth = "none"`,
//! everything a read shows). The browser still sends the page's name in
//! `Host`, so the server answers only requests that name the machine: an
//! IP address (reaching the port by address is not rebinding), `localhost`
//! or a name under it, or this machine's host name. A request without
//! `Host` (HTTP/1.0, the fuzzers) is no browser's.

use super::shared::Shared;
use crate::config::RestAuth;
use axum::extract::State;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use subtle::ConstantTimeEq;

/// Whether `given` is the run file's `token`, compared in constant time.
pub fn token_matches(given: &[u8], token: &str) -> bool {
    bool::from(given.ct_eq(token.as_bytes()))
}

/// Lets a request on with the run file's bearer token; a read also
/// without one when `rest.auth = "none"`.
pub async fn authorize(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    if read && shared.auth == RestAuth::ReadOpen {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    if token_matches(given, &shared.token) {
        next.run(request).await
    } else if read {
        refuse(StatusCode::UNAUTHORIZED, "missing or wrong bearer token (see the job's run file)")
    } else {
        refuse(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token: actions need the run file's token, whatever rest.auth says",
        )
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// Refuses, with 421, a request whose `Host` names anything else.
pub async fn check_host(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    match request.headers().get(header::HOST).map(|h| h.to_str()) {
        None => next.run(request).await,
        Some(Ok(host)) if allowed(host) => next.run(request).await,
        Some(_) => refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "the Host header names neither an IP address nor this machine: the control API \
             answers only requests for this machine (a web page's name resolved to it is DNS rebinding)",
        ),
    }
}

/// Whether `host` (`name[:port]`, `[v6]:port`) names this machine.
fn allowed(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, _)) => return addr.parse::<std::net::Ipv6Addr>().is_ok(),
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name.parse::<IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || machine_names().contains(&name)
}

/// This machine's host name, short and as the kernel has it.
fn machine_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let Ok(full) = std::fs::read_to_string("/proc/sys/kernel/hostname") else { return Vec::new() };
        let full = full.trim().to_ascii_lowercase();
        let short = full.split('.').next().unwrap_or_default().to_string();
        [full, short].into_iter().filter(|n| !n.is_empty()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::allowed;

    #[test]
    fn addresses_and_this_machine_pass_other_names_do_not() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8081",
            "10.1.2.3:80",
            "[::1]:8081",
            "[::1]",
            "localhost:9",
            "LOCALHOST",
            "a.localhost:1",
        ] {
            assert!(allowed(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8081",
            "localhost.evil.example:1",
            "127.0.0.1.nip.io:80",
            "[evil]:80",
            "",
            ":80",
        ] {
            assert!(!allowed(refused), "{refused}");
        }
    }
}
