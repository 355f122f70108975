//! What the control endpoint allows one client, so that nobody can exhaust
//! the host through it: connections at once, time and bytes for a
//! request's head and body, and how long a request waits for the
//! coordinator.

use std::time::Duration;

/// Connections served at once; past it, the oldest that has not sent its
/// request yet is closed ([`super::connections`]).
pub const MAX_CONNECTIONS: usize = 256;
/// Time for a request's line and headers to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a request's line and headers.
pub const MAX_HEAD_BYTES: usize = 16 << 10;
/// Bytes of a request's body.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// Time for a request's body to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a savepoint, swap or rescale request may wait for its answer.
pub const LONG_WAIT: Duration = Duration::from_secs(3600);
/// How long a read or a cancel may wait for the coordinator.
pub const SHORT_WAIT: Duration = Duration::from_secs(10);
