//! `GET /v1/job/plan`: the job graph as the control API and the
//! dashboard draw it, with the WebAssembly component each operator runs.

use serde::{Deserialize, Serialize};

/// `GET /v1/job/plan`: the job graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobGraph {
    /// Job name.
    pub job: String,
    /// Key groups.
    pub max_parallelism: u32,
    /// Sources, operators and sinks, in topological order.
    pub nodes: Vec<GraphNode>,
    /// The edges between them.
    pub edges: Vec<GraphEdge>,
}

/// A node of the job graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphNode {
    /// Source id, operator uid or sink id.
    pub id: String,
    /// "source", "operator" or "sink".
    pub role: String,
    /// A connector's kind ("file", "generator", ...); "wasm" for operators.
    pub kind: String,
    /// Subtasks.
    pub parallelism: u32,
    /// An operator's most subtasks: its own `max_parallelism` in the job
    /// file, else the job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallelism: Option<u32>,
    /// An operator's module, as it runs now (after any swap).
    pub module: Option<ModuleInfo>,
    /// An operator's state backend.
    pub backend: Option<String>,
}

/// A WebAssembly component.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleInfo {
    /// Where it was loaded from.
    pub path: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
}

/// An edge of the job graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphEdge {
    /// The upstream node.
    pub from: String,
    /// The downstream node.
    pub to: String,
    /// How records are spread over the downstream subtasks, as the job
    /// file names it: "forward", "key", "rebalance" or "broadcast".
    pub partitioning: String,
}
