//! What every handler of the control endpoint shares: where its requests
//! go (the coordinator), the run's bearer token, and which reads need it.

use crate::api::Request;
use crate::config::RestAuth;
use crossbeam_channel::Sender;

/// What every handler shares.
pub(super) struct Shared {
    pub(super) requests: Sender<Request>,
    pub(super) token: String,
    pub(super) auth: RestAuth,
}
