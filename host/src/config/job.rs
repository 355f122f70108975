//! The job file (`job.toml`): its schema, and the checks that turn it into a
//! [`JobSpec`] the runtime can trust (every input names something, no cycles,
//! modules exist). Documented for users in `docs/job-file.md`.

use super::rest::RestSection;
use super::settings::{CheckpointingSection, PipelineSection, RestartSection, StateSection, WasmSection};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A job file whose values do not make a runnable job; the message names
/// the node and field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidJob(pub String);

/// An [`InvalidJob`] with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => { InvalidJob(format!($($arg)*)) };
}

/// Default number of key groups.
pub const DEFAULT_MAX_PARALLELISM: u32 = 128;
/// Most key groups a job may have (key groups are stored as `u16`).
pub const MAX_MAX_PARALLELISM: u32 = 32768;

/// `job.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    /// The job's name.
    pub name: String,
    /// Default parallelism of operators.
    pub parallelism: Option<u32>,
    /// Number of key groups.
    pub max_parallelism: Option<u32>,
    /// Overrides of `state.*`.
    pub state: Option<StateSection>,
    /// Overrides of `execution.checkpointing.*`.
    pub checkpointing: Option<CheckpointingSection>,
    /// Overrides of `wasm.*`.
    pub wasm: Option<WasmSection>,
    /// Overrides of `pipeline.*`.
    pub pipeline: Option<PipelineSection>,
    /// Overrides of `restart-strategy.*`.
    #[serde(rename = "restart-strategy")]
    pub restart: Option<RestartSection>,
    /// Overrides of `rest.*`.
    pub rest: Option<RestSection>,
    /// `[[sources]]`.
    #[serde(default)]
    pub sources: Vec<SourceFile>,
    /// `[[operators]]`.
    #[serde(default)]
    pub operators: Vec<OperatorFile>,
    /// `[[sinks]]`.
    #[serde(default)]
    pub sinks: Vec<SinkFile>,
    /// `[cluster]`: run as one member of many (see `docs/cluster.md`).
    pub cluster: Option<ClusterFile>,
}

/// `[cluster]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// How members share the job: only `"kafka-group"`.
    pub kind: String,
    /// The consumer group the members join (default `weir-cluster-<job>`).
    pub group: Option<String>,
    /// The group's brokers (default: the Kafka source's).
    pub bootstrap_servers: Option<String>,
    /// How long a member may be silent before the group gives its
    /// partitions to others (default 10 s).
    pub session_timeout: Option<super::units::HumanDuration>,
}

/// Default of `cluster.session_timeout`.
pub const DEFAULT_SESSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A checked `[cluster]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// The consumer group.
    pub group: String,
    /// Its brokers, when not the source's.
    pub bootstrap_servers: Option<String>,
    /// Kafka's `session.timeout.ms`.
    pub session_timeout: std::time::Duration,
}

/// A `[[sources]]` entry: its id and kind; every other field is the
/// connector's own, checked by the connector (see `connectors`).
#[derive(Debug, Clone, Deserialize)]
pub struct SourceFile {
    /// Node id.
    pub id: String,
    /// Which connector: `file`, `generator`, ...
    pub kind: String,
    /// Parallel subtasks, for a source that splits its input (Kafka's
    /// partitions); defaults to the job's parallelism for those, 1 for
    /// the rest.
    pub parallelism: Option<u32>,
    /// The connector's options.
    #[serde(flatten)]
    pub options: toml::Table,
}

/// `[[operators]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorFile {
    /// Stable id; state is matched by it.
    pub uid: String,
    /// The component, relative to the job file.
    pub module: PathBuf,
    /// The single input's node id (shorthand for `inputs`).
    pub input: Option<String>,
    /// How the single input is partitioned.
    pub partition: Option<Partition>,
    /// Several inputs, each with its partitioning.
    pub inputs: Option<Vec<InputFile>>,
    /// Parallel subtasks; defaults to the job's parallelism.
    pub parallelism: Option<u32>,
    /// The most subtasks it may run on (at most the job's
    /// `max_parallelism`, whose key groups stay the job's): a cap for live
    /// rescales, `--parallelism` and restores, e.g. 1 for an operator that
    /// must see every record in one subtask.
    pub max_parallelism: Option<u32>,
    /// Free-form params handed to the guest's `open`.
    #[serde(default)]
    pub params: toml::Table,
    /// Recording of its input for `host replay`.
    pub replay: Option<ReplayFile>,
}

/// An operator's `replay` table: `replay = { record = true }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFile {
    /// Record each subtask's input between checkpoints beside them.
    #[serde(default)]
    pub record: bool,
    /// The most one subtask records between two checkpoints (default
    /// 256 MiB); past it that stretch is marked cut short and a replay
    /// stops at it.
    pub max_segment: Option<super::units::ByteSize>,
}

/// Default of `replay.max_segment`.
pub const DEFAULT_MAX_SEGMENT: u64 = 256 << 20;
/// The largest `replay.max_segment` (a replay reads a segment whole).
pub const MAX_MAX_SEGMENT: u64 = 1 << 30;

/// One entry of `inputs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    /// The upstream node id.
    pub from: String,
    /// How records are spread over this operator's subtasks.
    pub partition: Option<Partition>,
}

/// How records from an upstream node are spread over an operator's subtasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    /// Subtask i feeds subtask i; parallelism must match.
    Forward,
    /// By key group of the record key.
    Key,
    /// Round-robin.
    Rebalance,
    /// Every subtask gets every record.
    Broadcast,
}

impl Partition {
    /// The name used in `job.toml`.
    pub fn name(self) -> &'static str {
        match self {
            Partition::Forward => "forward",
            Partition::Key => "key",
            Partition::Rebalance => "rebalance",
            Partition::Broadcast => "broadcast",
        }
    }
}

/// A `[[sinks]]` entry: its id, kind and input; every other field is the
/// connector's own.
#[derive(Debug, Clone, Deserialize)]
pub struct SinkFile {
    /// Node id.
    pub id: String,
    /// Which connector: `file`, `transactional-file`, `stdout`, `discard`.
    pub kind: String,
    /// Upstream node id.
    pub input: String,
    /// The connector's options.
    #[serde(flatten)]
    pub options: toml::Table,
}

/// A validated job: what the runtime builds its graph from.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The job's name.
    pub name: String,
    /// Number of key groups.
    pub max_parallelism: u32,
    /// The job file's directory: connectors resolve relative paths
    /// against it.
    pub base: PathBuf,
    /// Sources, in file order.
    pub sources: Vec<ConnectorSpec>,
    /// Operators, in an order where every operator comes after its inputs.
    pub operators: Vec<OperatorSpec>,
    /// Sinks, in file order.
    pub sinks: Vec<SinkSpec>,
    /// With `[cluster]`: the group this process runs the job in.
    pub cluster: Option<ClusterSpec>,
}

/// A source or sink as configured: which connector, with what options
/// (checked by the connector when the job starts).
#[derive(Debug, Clone)]
pub struct ConnectorSpec {
    /// Node id.
    pub id: String,
    /// The connector's kind.
    pub kind: String,
    /// Its options: every field of the entry but `id`, `kind`, `input`
    /// and `parallelism`.
    pub options: toml::Table,
    /// Parallel subtasks (1 for sinks and for sources that read one
    /// input in order).
    pub parallelism: u32,
}

/// Source kinds whose input is split over subtasks (by partition or split), so
/// they take a `parallelism`; every other source reads its input in order
/// in one subtask.
pub const PARTITIONED_SOURCES: &[&str] = &["kafka", "nexmark"];

/// A validated operator.
#[derive(Debug, Clone)]
pub struct OperatorSpec {
    /// Stable id.
    pub uid: String,
    /// Absolute path of the component.
    pub module: PathBuf,
    /// Inputs with their resolved partitioning.
    pub inputs: Vec<InputSpec>,
    /// Parallel subtasks.
    pub parallelism: u32,
    /// The most subtasks it may run on: its own `max_parallelism`, else
    /// the job's.
    pub max_parallelism: u32,
    /// Params as strings, sorted by name.
    pub params: Vec<(String, String)>,
    /// With `replay.record`: the most a subtask records between two
    /// checkpoints, in bytes.
    pub record: Option<u64>,
}

/// One resolved input edge.
#[derive(Debug, Clone)]
pub struct InputSpec {
    /// Upstream node id.
    pub from: String,
    /// Partitioning.
    pub partition: Partition,
}

/// A validated sink.
#[derive(Debug, Clone)]
pub struct SinkSpec {
    /// The connector.
    pub connector: ConnectorSpec,
    /// Upstream node id.
    pub input: String,
}

use crate::paths::is_id as valid_id;

/// Checks `[cluster]` of job `job`.
fn cluster(c: &ClusterFile, job: &str) -> Result<ClusterSpec, InvalidJob> {
    if c.kind != "kafka-group" {
        return Err(invalid!("[cluster] kind = {:?}: the one kind is \"kafka-group\"", c.kind));
    }
    let group = c.group.clone().unwrap_or_else(|| format!("weir-cluster-{job}"));
    if group.is_empty() || group.len() > 249 {
        return Err(invalid!("[cluster] group = {group:?}: 1 to 249 characters"));
    }
    let session_timeout = c.session_timeout.map_or(DEFAULT_SESSION_TIMEOUT, |d| d.0);
    // Kafka brokers accept 6 s to 30 min unless configured otherwise
    // (group.min/max.session.timeout.ms); the broker has the last word.
    if !(std::time::Duration::from_secs(1)..=std::time::Duration::from_secs(3600)).contains(&session_timeout) {
        return Err(invalid!("[cluster] session_timeout = {session_timeout:?}: between 1s and 1h"));
    }
    Ok(ClusterSpec { group, bootstrap_servers: c.bootstrap_servers.clone(), session_timeout })
}

/// Checks a parsed job file and resolves paths against `base` (the job
/// file's directory). `parallelism_override` replaces the job's default
/// parallelism (the `--parallelism` flag). Every error names the node and
/// field at fault.
pub fn validate(file: &JobFile, base: &Path, parallelism_override: Option<u32>) -> Result<JobSpec, InvalidJob> {
    if !valid_id(&file.name) {
        return Err(invalid!("name = {:?}: a job name is 1-128 letters, digits, '-', '_' or '.'", file.name));
    }
    let max_parallelism = file.max_parallelism.unwrap_or(DEFAULT_MAX_PARALLELISM);
    if !(1..=MAX_MAX_PARALLELISM).contains(&max_parallelism) {
        return Err(invalid!("max_parallelism = {max_parallelism}: must be between 1 and {MAX_MAX_PARALLELISM}"));
    }
    let default_parallelism = parallelism_override.or(file.parallelism).unwrap_or(1);
    let check_parallelism = |what: &str, p: u32| {
        if p == 0 || p > max_parallelism {
            Err(invalid!("{what}: parallelism {p} must be between 1 and max_parallelism ({max_parallelism})"))
        } else {
            Ok(p)
        }
    };
    check_parallelism("job", default_parallelism)?;
    if file.sources.is_empty() {
        return Err(invalid!("the job has no [[sources]]"));
    }

    // Every node id, with its kind and parallelism.
    #[derive(Clone, Copy, PartialEq)]
    enum NodeKind {
        Source,
        Operator,
        Sink,
    }
    let mut nodes: HashMap<String, (NodeKind, u32)> = HashMap::new();
    let mut add = |id: &str, kind: NodeKind, p: u32| -> Result<(), InvalidJob> {
        if !valid_id(id) {
            return Err(invalid!("id {id:?}: ids are 1-128 letters, digits, '-', '_' or '.'"));
        }
        if nodes.insert(id.to_string(), (kind, p)).is_some() {
            return Err(invalid!("id {id:?} is used by more than one source, operator or sink"));
        }
        Ok(())
    };
    let mut source_parallelism = Vec::new();
    for s in &file.sources {
        let what = format!("source '{}'", s.id);
        let p = match s.parallelism {
            Some(p) if !PARTITIONED_SOURCES.contains(&s.kind.as_str()) && p != 1 => {
                return Err(invalid!(
                    "{what}: parallelism = {p}, but a {} source reads its input in order in one subtask (sources that split their input: {})",
                    s.kind,
                    PARTITIONED_SOURCES.join(", ")
                ));
            }
            Some(p) => check_parallelism(&what, p)?,
            None if PARTITIONED_SOURCES.contains(&s.kind.as_str()) => default_parallelism,
            None => 1,
        };
        source_parallelism.push(p);
        add(&s.id, NodeKind::Source, p)?;
    }
    let mut operator_caps = Vec::new();
    for o in &file.operators {
        let what = format!("operator '{}'", o.uid);
        let cap = match o.max_parallelism {
            Some(cap) if cap == 0 || cap > max_parallelism => {
                return Err(invalid!(
                    "{what}: max_parallelism = {cap} must be between 1 and the job's max_parallelism ({max_parallelism})"
                ));
            }
            Some(cap) => cap,
            None => max_parallelism,
        };
        // The job's default (or --parallelism) gives way to the operator's
        // cap; a parallelism the operator sets itself must respect it.
        let p = match o.parallelism {
            Some(p) if p > cap && cap < max_parallelism => {
                return Err(invalid!("{what}: parallelism {p} is above its max_parallelism ({cap})"));
            }
            Some(p) => check_parallelism(&what, p)?,
            None => default_parallelism.min(cap),
        };
        operator_caps.push(cap);
        add(&o.uid, NodeKind::Operator, p)?;
    }
    for s in &file.sinks {
        add(&s.id, NodeKind::Sink, 1)?;
    }
    // librdkafka properties that load code or run commands, refused
    // whatever the entry's kind and whether this build has Kafka.
    let sources_and_sinks = file.sources.iter().map(|s| ("source", &s.id, &s.options));
    for (role, id, options) in sources_and_sinks.chain(file.sinks.iter().map(|s| ("sink", &s.id, &s.options))) {
        if let Some(toml::Value::Table(properties)) = options.get("properties") {
            super::kafka_properties::check_all(properties).map_err(|e| invalid!("{role} '{id}': {e}"))?;
        }
    }
    let known = |exclude_sinks: bool| {
        let mut ids: Vec<&str> = nodes
            .iter()
            .filter(|(_, (k, _))| !(exclude_sinks && *k == NodeKind::Sink))
            .map(|(id, _)| id.as_str())
            .collect();
        ids.sort_unstable();
        ids.join(", ")
    };

    let sources = file
        .sources
        .iter()
        .zip(&source_parallelism)
        .map(|(s, &parallelism)| ConnectorSpec {
            id: s.id.clone(),
            kind: s.kind.clone(),
            options: s.options.clone(),
            parallelism,
        })
        .collect();

    let mut operators = Vec::new();
    for (o, &cap) in file.operators.iter().zip(&operator_caps) {
        let what = format!("operator '{}'", o.uid);
        let inputs: Vec<InputFile> = match (&o.input, &o.inputs) {
            (Some(_), Some(_)) => return Err(invalid!("{what}: set either input or inputs, not both")),
            (None, None) => return Err(invalid!("{what}: missing field input (the node it reads from)")),
            (Some(from), None) => vec![InputFile { from: from.clone(), partition: o.partition }],
            (None, Some(list)) => {
                if o.partition.is_some() {
                    return Err(invalid!("{what}: partition goes inside each entry of inputs"));
                }
                if list.is_empty() {
                    return Err(invalid!("{what}: inputs is empty"));
                }
                list.clone()
            }
        };
        let (_, parallelism) = nodes[o.uid.as_str()];
        let mut resolved = Vec::new();
        for input in inputs {
            let Some(&(kind, up_parallelism)) = nodes.get(input.from.as_str()) else {
                return Err(invalid!(
                    "{what}: input '{}' names no source or operator (known: {})",
                    input.from,
                    known(true)
                ));
            };
            if kind == NodeKind::Sink {
                return Err(invalid!("{what}: input '{}' is a sink; sinks have no output", input.from));
            }
            if input.from == o.uid {
                return Err(invalid!("{what}: reads its own output (a cycle: {0} -> {0})", o.uid));
            }
            // Flink's default: forward where parallelism matches, else rebalance.
            let partition = input.partition.unwrap_or(if up_parallelism == parallelism {
                Partition::Forward
            } else {
                Partition::Rebalance
            });
            match partition {
                Partition::Forward if up_parallelism != parallelism => {
                    return Err(invalid!(
                        "{what}: partition = \"forward\" from '{}' needs equal parallelism ({} vs {}); use \"rebalance\" or \"key\"",
                        input.from,
                        up_parallelism,
                        parallelism
                    ));
                }
                _ => {}
            }
            resolved.push(InputSpec { from: input.from.clone(), partition });
        }
        if resolved.iter().all(|i| i.partition == Partition::Broadcast) {
            return Err(invalid!(
                "{what}: every input is partition = \"broadcast\"; an operator needs a main input besides its broadcast inputs"
            ));
        }
        let module = base.join(&o.module);
        if !module.is_file() {
            return Err(invalid!("{what}: module {} does not exist or is not a file", module.display()));
        }
        let params = o
            .params
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => v.to_string(),
                    other => {
                        return Err(invalid!(
                            "{what}: params.{k} is a {}; params are strings, numbers or booleans",
                            other.type_str()
                        ));
                    }
                };
                Ok((k.clone(), text))
            })
            .collect::<Result<BTreeMap<_, _>, InvalidJob>>()?
            .into_iter()
            .collect();
        let record = match &o.replay {
            Some(r) if r.record => {
                let max = r.max_segment.map_or(DEFAULT_MAX_SEGMENT, |b| b.0);
                if max == 0 || max > MAX_MAX_SEGMENT {
                    return Err(invalid!(
                        "{what}: replay.max_segment is {max} bytes; it takes 1 byte to 1GiB (default 256MiB)"
                    ));
                }
                Some(max)
            }
            _ => None,
        };
        operators.push(OperatorSpec {
            uid: o.uid.clone(),
            module,
            inputs: resolved,
            parallelism,
            max_parallelism: cap,
            params,
            record,
        });
    }
    let operators = topological(operators)?;

    let mut sinks = Vec::new();
    for s in &file.sinks {
        let what = format!("sink '{}'", s.id);
        match nodes.get(s.input.as_str()) {
            None => {
                return Err(invalid!(
                    "{what}: input '{}' names no source or operator (known: {})",
                    s.input,
                    known(true)
                ));
            }
            Some((NodeKind::Sink, _)) => {
                return Err(invalid!("{what}: input '{}' is a sink; sinks have no output", s.input));
            }
            Some(_) => {}
        }
        let connector =
            ConnectorSpec { id: s.id.clone(), kind: s.kind.clone(), options: s.options.clone(), parallelism: 1 };
        sinks.push(SinkSpec { connector, input: s.input.clone() });
    }
    let cluster = file.cluster.as_ref().map(|c| cluster(c, &file.name)).transpose()?;
    Ok(JobSpec {
        name: file.name.clone(),
        max_parallelism,
        base: base.to_path_buf(),
        sources,
        operators,
        sinks,
        cluster,
    })
}

/// Orders operators so each follows its inputs; a cycle is an error that
/// names its members in order.
fn topological(operators: Vec<OperatorSpec>) -> Result<Vec<OperatorSpec>, InvalidJob> {
    let index: HashMap<&str, usize> = operators.iter().enumerate().map(|(i, o)| (o.uid.as_str(), i)).collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut marks = vec![Mark::New; operators.len()];
    let mut order = Vec::with_capacity(operators.len());
    fn visit(
        i: usize,
        ops: &[OperatorSpec],
        index: &HashMap<&str, usize>,
        marks: &mut [Mark],
        order: &mut Vec<usize>,
        path: &mut Vec<usize>,
    ) -> Result<(), InvalidJob> {
        match marks[i] {
            Mark::Done => return Ok(()),
            Mark::Active => {
                let start = path.iter().position(|&p| p == i).unwrap_or(0);
                let mut names: Vec<&str> = path[start..].iter().map(|&p| ops[p].uid.as_str()).collect();
                names.push(ops[i].uid.as_str());
                names.reverse();
                return Err(invalid!("the operators form a cycle: {}", names.join(" -> ")));
            }
            Mark::New => {}
        }
        marks[i] = Mark::Active;
        path.push(i);
        for input in &ops[i].inputs {
            if let Some(&j) = index.get(input.from.as_str()) {
                visit(j, ops, index, marks, order, path)?;
            }
        }
        path.pop();
        marks[i] = Mark::Done;
        order.push(i);
        Ok(())
    }
    for i in 0..operators.len() {
        visit(i, &operators, &index, &mut marks, &mut order, &mut Vec::new())?;
    }
    let mut slots: Vec<Option<OperatorSpec>> = operators.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// Unused-output notes: sources or operators nobody reads.
pub fn unconsumed(spec: &JobSpec) -> Vec<String> {
    let mut read: HashSet<&str> = HashSet::new();
    for o in &spec.operators {
        for i in &o.inputs {
            read.insert(&i.from);
        }
    }
    for s in &spec.sinks {
        read.insert(&s.input);
    }
    spec.sources
        .iter()
        .map(|s| s.id.as_str())
        .chain(spec.operators.iter().map(|o| o.uid.as_str()))
        .filter(|id| !read.contains(id))
        .map(|id| format!("the output of '{id}' is read by no operator or sink and is dropped"))
        .collect()
}
