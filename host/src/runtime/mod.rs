//! The task side of a job: what runs on the task threads. An operator
//! subtask ([`operator`]), a source ([`source`]) or a sink ([`sink`]) reads
//! its inputs ([`inputs`]: batches, watermarks, aligned barriers), does its
//! work, and sends on ([`router`]: partitioning, batching, back-pressure).
//! An operator may record its input for replay ([`recording`]), which
//! [`replay`] runs again offline.
//! Tasks hear the coordinator through [`message::Control`] and answer with
//! [`events::TaskEvent`]s; nothing else passes between them.
//!
//! Architecture invariant: the runtime never builds a job graph and never
//! decides anything about checkpoints; the coordinator does both, and the
//! tasks carry out what the messages and barriers they receive say.

pub mod error;
pub mod events;
pub mod inputs;
pub mod message;
pub mod operator;
pub mod recording;
pub mod replay;
pub mod rescale;
pub mod router;
pub mod shadow;
pub mod sink;
pub mod source;
pub mod swap;
pub mod taps;
pub mod task_id;

pub use error::{ConnectorError, SwapError, TaskError};
pub use events::{Counters, TaskEvent};
pub use task_id::TaskId;
