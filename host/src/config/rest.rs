//! `rest.*`: where the control API's HTTP server listens and who may read
//! it without the token; from a job file, only loopback and the token.

use super::settings::SettingsError;
use serde::Deserialize;

/// `rest.*`: the control API's HTTP server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestSection {
    /// `address:port` to listen on; port 0 takes any free port.
    pub bind: Option<String>,
    /// `"token"` (every request needs the run file's bearer token) or
    /// `"none"` (reads are open; actions still need the token).
    pub auth: Option<String>,
}

/// Who may read the control API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestAuth {
    /// Every request carries the bearer token.
    Token,
    /// Reads are open to anyone who can reach the address; actions
    /// (savepoint, stop, swap, cancel) still need the token.
    ReadOpen,
}

/// `rest.*`, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestSettings {
    /// Where the server listens.
    pub bind: std::net::SocketAddr,
    /// Who may read.
    pub auth: RestAuth,
    /// Replace the run file of a live process running a job of this name
    /// (never from a file: cluster mode's copies, which the commit log
    /// fences, take a partition over from a member that may be paused).
    pub take_over: bool,
}

impl RestSection {
    /// Why a job file may not set this section as written, if it may not:
    /// a job file may move the server only to another loopback address,
    /// and may not open its reads. Reaching beyond the machine, or without
    /// the token, is the host's choice (`rest.*` in the host file).
    pub(super) fn job_problem(&self) -> Option<String> {
        if let Some(auth) = self.auth.as_deref().filter(|a| *a != "token") {
            return Some(format!(
                "rest.auth = \"{auth}\": only the host settings file may open the control API without the token (rest.auth there); a job file may set only \"token\""
            ));
        }
        let bind = self.bind.as_deref()?;
        let ip = bind.parse::<std::net::SocketAddr>().ok()?.ip();
        (!ip.is_loopback()).then(|| {
            format!(
                "rest.bind = \"{bind}\": a job file may bind the control API only to a loopback address (127.0.0.1 or [::1], any port); {ip} is the host settings file's choice (rest.bind there)"
            )
        })
    }

    /// The settings, or an error naming the field; `origin` names the file.
    pub(super) fn resolve(&self, origin: &str) -> Result<RestSettings, SettingsError> {
        let bind = self.bind.as_deref().unwrap_or("127.0.0.1:0");
        let bind: std::net::SocketAddr = bind.parse().map_err(|_| {
            SettingsError(format!(
                "{origin}: rest.bind = \"{bind}\" is not an address and port (e.g. \"127.0.0.1:8081\", or port 0 for any free one)"
            ))
        })?;
        let auth = match self.auth.as_deref().unwrap_or("token") {
            "token" => RestAuth::Token,
            "none" => RestAuth::ReadOpen,
            other => {
                return Err(SettingsError(format!(
                    "{origin}: rest.auth = \"{other}\" is not a mode (use \"token\", or \"none\" to open reads; actions always need the token)"
                )));
            }
        };
        Ok(RestSettings { bind, auth, take_over: false })
    }
}
