//! The types the control API, the `host` commands and the engine share:
//! the JSON resources the endpoints take and answer (shaped after Flink's
//! REST API where Flink has an equivalent; `docs/rest-api.md` shows one
//! of each), and the [`Request`]s the coordinator answers. The engine
//! fills them in (an operator subtask its [`GuestMetrics`], a shadow its
//! [`ShadowReport`]); `control` serves them, the `host` commands and the
//! dashboard read them.
//!
//! Architecture invariant: a leaf. `api` uses nothing of the crate, and
//! knows nothing of HTTP: the server, the client and the dashboard are
//! `control`'s.

mod actions;
mod checkpoints;
mod graph;
mod metrics;
mod request;
mod shadow;
mod status;

pub use actions::*;
pub use checkpoints::*;
pub use graph::*;
pub use metrics::*;
pub use request::*;
pub use shadow::*;
pub use status::*;
