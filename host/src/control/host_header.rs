//! Which `Host` a request to the control API may name: the defence against
//! DNS rebinding. A web page the user opens can make the browser resolve
//! its own name to 127.0.0.1 and then read the job's API as same-origin
//! (with `rest.auth = "none"`, everything a read shows). The browser still
//! sends the page's name in `Host`, so the server answers only requests
//! that name the machine: an IP address (reaching the port by address is
//! not rebinding), `localhost` or a name under it, or this machine's host
//! name. A request without `Host` (HTTP/1.0, the fuzzers) is no browser's.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::OnceLock;

/// Refuses, with 421, a request whose `Host` names anything else.
pub async fn check(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    match request.headers().get(header::HOST).map(|h| h.to_str()) {
        None => next.run(request).await,
        Some(Ok(host)) if allowed(host) => next.run(request).await,
        Some(_) => {
            let message = "the Host header names neither an IP address nor this machine: the control API \
                           answers only requests for this machine (a web page's name resolved to it is DNS rebinding)";
            (StatusCode::MISDIRECTED_REQUEST, axum::Json(serde_json::json!({ "error": message }))).into_response()
        }
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
