//! Who a task is ([`TaskId`]): a node of the job graph and a subtask index.
//! Every other file of the runtime may name it; it names none of them.

use std::fmt;
use std::sync::Arc;

/// Identifies one task: a node and a subtask index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    /// Source id, operator uid or sink id.
    pub node: Arc<str>,
    /// Subtask index.
    pub subtask: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.node, self.subtask)
    }
}
