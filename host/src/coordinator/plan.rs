//! The wiring plan: a job graph turned into tasks and the channels between
//! them, as data. A pure function of the job ([`plan`]) that unit tests,
//! `host status`, and the code that spawns the tasks all read.
//!
//! Every edge of the graph becomes one bounded channel per pair of
//! (upstream subtask, downstream subtask) it connects: a forward edge pairs
//! subtask *i* with subtask *i*; every other partitioning connects each
//! upstream subtask to every downstream one. Sinks read with forward from a
//! single-subtask input, else with rebalance.

use crate::config::{JobSpec, Partition};
use crate::runtime::TaskId;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads input into the job.
    Source,
    /// Runs a module.
    Operator,
    /// Writes output.
    Sink,
}

impl Role {
    /// "source", "operator" or "sink".
    pub fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Operator => "operator",
            Role::Sink => "sink",
        }
    }
}

/// A node of the job graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Source id, operator uid or sink id.
    pub id: Arc<str>,
    /// What it is.
    pub role: Role,
    /// Its subtasks.
    pub parallelism: u32,
}

/// An edge of the job graph, as the job file draws it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The upstream node.
    pub from: Arc<str>,
    /// The downstream node.
    pub to: Arc<str>,
    /// How records are spread over the downstream subtasks.
    pub partition: Partition,
}

/// Index of a channel in [`Plan::channels`].
pub type ChannelId = usize;

/// One channel: from one upstream subtask to one downstream subtask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The sending subtask.
    pub from: TaskId,
    /// The receiving subtask.
    pub to: TaskId,
    /// Whether the edge is `partition = "broadcast"` (its input is read
    /// first and goes to `process-broadcast`).
    pub broadcast: bool,
}

/// One downstream node as one upstream subtask sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The downstream node.
    pub to: Arc<str>,
    /// How records are spread over its subtasks.
    pub partition: Partition,
    /// The channels, in downstream subtask order (one for forward).
    pub channels: Vec<ChannelId>,
}

/// One task's place in the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPlan {
    /// The task.
    pub id: TaskId,
    /// What its node is.
    pub role: Role,
    /// The channels it reads.
    pub inputs: Vec<ChannelId>,
    /// Its downstream nodes, in the job file's order.
    pub outputs: Vec<Output>,
}

/// The whole wiring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Nodes in graph order: sources, operators (each after its inputs),
    /// sinks.
    pub nodes: Vec<Node>,
    /// The edges between nodes.
    pub edges: Vec<Edge>,
    /// Every channel.
    pub channels: Vec<Channel>,
    /// Every task, in the order they are started: sinks and operators
    /// first (downstream before upstream), so no sender waits on a reader
    /// that does not exist yet; sources last.
    pub tasks: Vec<TaskPlan>,
}

impl Plan {
    /// The node called `id`.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| &*n.id == id)
    }
}

/// Plans the wiring of `spec`.
pub fn plan(spec: &JobSpec) -> Plan {
    plan_rescaled(spec, &BTreeMap::new())
}

/// Plans the wiring of `spec` with the operators in `rescaled` (uid to
/// parallelism) at the parallelism a live rescale gave them.
pub fn plan_rescaled(spec: &JobSpec, rescaled: &BTreeMap<String, u32>) -> Plan {
    let mut nodes = Vec::new();
    for s in &spec.sources {
        nodes.push(Node { id: s.id.as_str().into(), role: Role::Source, parallelism: s.parallelism });
    }
    for o in &spec.operators {
        let parallelism = rescaled.get(&o.uid).copied().unwrap_or(o.parallelism);
        nodes.push(Node { id: o.uid.as_str().into(), role: Role::Operator, parallelism });
    }
    for s in &spec.sinks {
        nodes.push(Node { id: s.connector.id.as_str().into(), role: Role::Sink, parallelism: 1 });
    }
    let node = |id: &str| nodes.iter().find(|n| &*n.id == id).expect("validated: every input names a node").clone();

    // (node, subtask) -> its inputs and outputs, filled edge by edge.
    let mut inputs: BTreeMap<(Arc<str>, u32), Vec<ChannelId>> = BTreeMap::new();
    let mut outputs: BTreeMap<(Arc<str>, u32), Vec<Output>> = BTreeMap::new();
    let mut channels = Vec::new();
    let mut edges = Vec::new();
    let mut connect = |from: &Node, to: &Node, partition: Partition| {
        edges.push(Edge { from: from.id.clone(), to: to.id.clone(), partition });
        for u in 0..from.parallelism {
            let targets: Vec<u32> =
                if partition == Partition::Forward { vec![u] } else { (0..to.parallelism).collect() };
            let mut ids = Vec::with_capacity(targets.len());
            for d in targets {
                ids.push(channels.len());
                inputs.entry((to.id.clone(), d)).or_default().push(channels.len());
                channels.push(Channel {
                    from: TaskId { node: from.id.clone(), subtask: u },
                    to: TaskId { node: to.id.clone(), subtask: d },
                    broadcast: partition == Partition::Broadcast,
                });
            }
            outputs.entry((from.id.clone(), u)).or_default().push(Output {
                to: to.id.clone(),
                partition,
                channels: ids,
            });
        }
    };
    for o in &spec.operators {
        for i in &o.inputs {
            connect(&node(&i.from), &node(&o.uid), i.partition);
        }
    }
    for s in &spec.sinks {
        let from = node(&s.input);
        let partition = if from.parallelism == 1 { Partition::Forward } else { Partition::Rebalance };
        connect(&from, &node(&s.connector.id), partition);
    }

    let order = [Role::Sink, Role::Operator, Role::Source];
    let mut tasks = Vec::new();
    for role in order {
        for n in nodes.iter().filter(|n| n.role == role) {
            for sub in 0..n.parallelism {
                let key = (n.id.clone(), sub);
                tasks.push(TaskPlan {
                    id: TaskId { node: n.id.clone(), subtask: sub },
                    role,
                    inputs: inputs.remove(&key).unwrap_or_default(),
                    outputs: outputs.remove(&key).unwrap_or_default(),
                });
            }
        }
    }
    Plan { nodes, edges, channels, tasks }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::{ConnectorSpec, InputSpec, OperatorSpec, SinkSpec};

    fn connector(id: &str) -> ConnectorSpec {
        ConnectorSpec { id: id.into(), kind: "test".into(), options: toml::Table::new(), parallelism: 1 }
    }

    fn operator(uid: &str, parallelism: u32, inputs: &[(&str, Partition)]) -> OperatorSpec {
        OperatorSpec {
            uid: uid.into(),
            module: "m.wasm".into(),
            inputs: inputs.iter().map(|(f, p)| InputSpec { from: f.to_string(), partition: *p }).collect(),
            parallelism,
            max_parallelism: 128,
            params: Vec::new(),
            record: None,
        }
    }

    /// Word count: lines -> tokenizer (p=2, rebalance) -> counter (p=3, key) -> out.
    pub(in crate::coordinator) fn word_count() -> JobSpec {
        JobSpec {
            name: "wc".into(),
            max_parallelism: 128,
            base: ".".into(),
            sources: vec![connector("lines")],
            operators: vec![
                operator("tokenizer", 2, &[("lines", Partition::Rebalance)]),
                operator("counter", 3, &[("tokenizer", Partition::Key)]),
            ],
            sinks: vec![SinkSpec { connector: connector("out"), input: "counter".into() }],
            cluster: None,
        }
    }

    fn task<'a>(p: &'a Plan, node: &str, subtask: u32) -> &'a TaskPlan {
        p.tasks.iter().find(|t| &*t.id.node == node && t.id.subtask == subtask).unwrap()
    }

    #[test]
    fn every_edge_connects_every_pair_of_subtasks_it_spans() {
        let p = plan(&word_count());
        // 1x2 + 2x3 + 3x1 (sink reads a parallel input with rebalance).
        assert_eq!(p.channels.len(), 2 + 6 + 3);
        for t in &p.tasks {
            for c in &t.inputs {
                assert_eq!(p.channels[*c].to, t.id, "an input channel ends at its task");
            }
            for o in &t.outputs {
                for c in &o.channels {
                    assert_eq!(p.channels[*c].from, t.id, "an output channel starts at its task");
                    assert_eq!(&*p.channels[*c].to.node, &*o.to);
                }
            }
        }
        let counter_out = &task(&p, "counter", 1).outputs[0];
        assert_eq!((counter_out.partition, counter_out.channels.len()), (Partition::Rebalance, 1));
        let tokenizer_out = &task(&p, "tokenizer", 0).outputs[0];
        assert_eq!(tokenizer_out.partition, Partition::Key);
        let targets: Vec<u32> = tokenizer_out.channels.iter().map(|c| p.channels[*c].to.subtask).collect();
        assert_eq!(targets, [0, 1, 2], "keyed channels in downstream subtask order");
        assert_eq!(task(&p, "counter", 2).inputs.len(), 2, "one channel from each tokenizer subtask");
        assert_eq!(task(&p, "out", 0).inputs.len(), 3);
    }

    #[test]
    fn forward_pairs_equal_subtasks_and_a_single_input_sink_reads_forward() {
        let mut spec = word_count();
        spec.operators[1] = operator("counter", 2, &[("tokenizer", Partition::Forward)]);
        spec.sinks[0].input = "lines".into();
        let p = plan(&spec);
        for sub in 0..2 {
            let out = &task(&p, "tokenizer", sub).outputs[0];
            assert_eq!(out.channels.len(), 1);
            assert_eq!(p.channels[out.channels[0]].to, TaskId { node: "counter".into(), subtask: sub });
        }
        let lines = task(&p, "lines", 0);
        assert_eq!(lines.outputs.len(), 2, "to the tokenizer and to the sink");
        assert_eq!(lines.outputs[1].partition, Partition::Forward);
    }

    #[test]
    fn broadcast_channels_are_marked_and_tasks_start_downstream_first() {
        let mut spec = word_count();
        spec.sources.push(connector("rules"));
        spec.operators[1] = operator("counter", 3, &[("tokenizer", Partition::Key), ("rules", Partition::Broadcast)]);
        let p = plan(&spec);
        let broadcast: Vec<&Channel> = p.channels.iter().filter(|c| c.broadcast).collect();
        assert_eq!(broadcast.len(), 3);
        assert!(broadcast.iter().all(|c| &*c.from.node == "rules"));
        let roles: Vec<Role> = p.tasks.iter().map(|t| t.role).collect();
        let first_source = roles.iter().position(|r| *r == Role::Source).unwrap();
        assert!(roles[..first_source].iter().all(|r| *r != Role::Source));
        assert!(roles[first_source..].iter().all(|r| *r == Role::Source), "sources start last");
        assert_eq!(p.nodes.iter().map(|n| n.parallelism).sum::<u32>() as usize, p.tasks.len());
    }
}
