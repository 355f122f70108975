//! The job file (`job.toml`): its schema, and the checks that turn it into a
//! [`JobSpec`] the runtime can trust (every input names something, no cycles,
//! modules exist). Documented for users in `docs/job-file.md`.

use super::settings::{
    CheckpointingSection, ExecutionSection, PipelineSection, RestartSection, SettingsFile, StateSection, WasmSection,
};
use super::units::HumanDuration;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

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
    /// `[[sources]]`.
    #[serde(default)]
    pub sources: Vec<SourceFile>,
    /// `[[operators]]`.
    #[serde(default)]
    pub operators: Vec<OperatorFile>,
    /// `[[sinks]]`.
    #[serde(default)]
    pub sinks: Vec<SinkFile>,
}

impl JobFile {
    /// The job's overrides in the shape of the host file.
    pub fn settings_overrides(&self) -> SettingsFile {
        SettingsFile {
            state: self.state.clone().unwrap_or_default(),
            execution: ExecutionSection { checkpointing: self.checkpointing.clone().unwrap_or_default() },
            wasm: self.wasm.clone().unwrap_or_default(),
            pipeline: self.pipeline.clone().unwrap_or_default(),
            restart: self.restart.clone().unwrap_or_default(),
        }
    }
}

/// `[[sources]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceFile {
    /// Reads a file.
    File {
        /// Node id.
        id: String,
        /// The file, relative to the job file.
        path: PathBuf,
        /// `"lines"` or `"jsonl"`.
        #[serde(default)]
        format: Format,
        /// jsonl: the field whose value becomes the record key.
        key_field: Option<String>,
        /// jsonl: the integer field (milliseconds since the epoch) that
        /// becomes the record's event time; the source then emits watermarks.
        timestamp_field: Option<String>,
        /// How far event time may go backwards; watermarks trail the largest
        /// timestamp seen by this much.
        max_out_of_orderness: Option<HumanDuration>,
        /// At most this many records per second (unset: as fast as possible).
        records_per_second: Option<f64>,
    },
    /// A deterministic synthetic stream.
    Generator {
        /// Node id.
        id: String,
        /// Records to produce.
        count: u64,
        /// Distinct keys.
        keys: u64,
        /// Seed of the key sequence.
        #[serde(default)]
        seed: u64,
        /// Event time of record `i` is `i * event_time_step` (milliseconds);
        /// unset, records carry no timestamp.
        event_time_step: Option<HumanDuration>,
        /// At most this many records per second (unset: as fast as possible).
        records_per_second: Option<f64>,
    },
}

/// File source formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One record per line; the payload is the line without its newline.
    #[default]
    Lines,
    /// One JSON object per line; the payload is the line.
    Jsonl,
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
    /// Free-form params handed to the guest's `open`.
    #[serde(default)]
    pub params: toml::Table,
}

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

/// `[[sinks]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SinkFile {
    /// Writes payloads as lines to a file.
    File {
        /// Node id.
        id: String,
        /// Upstream node id.
        input: String,
        /// Output file, relative to the job file.
        path: PathBuf,
    },
    /// Writes payloads as lines to part files in a directory, published
    /// only when the checkpoint that covers them completes (exactly-once).
    #[serde(rename = "transactional-file")]
    TransactionalFile {
        /// Node id.
        id: String,
        /// Upstream node id.
        input: String,
        /// Output directory, relative to the job file.
        dir: PathBuf,
    },
    /// Writes payloads as lines to standard output.
    Stdout {
        /// Node id.
        id: String,
        /// Upstream node id.
        input: String,
    },
    /// Drops everything (for benchmarks).
    Discard {
        /// Node id.
        id: String,
        /// Upstream node id.
        input: String,
    },
}

impl SinkFile {
    fn id(&self) -> &str {
        match self {
            SinkFile::File { id, .. }
            | SinkFile::TransactionalFile { id, .. }
            | SinkFile::Stdout { id, .. }
            | SinkFile::Discard { id, .. } => id,
        }
    }
    fn input(&self) -> &str {
        match self {
            SinkFile::File { input, .. }
            | SinkFile::TransactionalFile { input, .. }
            | SinkFile::Stdout { input, .. }
            | SinkFile::Discard { input, .. } => input,
        }
    }
}

impl SourceFile {
    fn id(&self) -> &str {
        match self {
            SourceFile::File { id, .. } | SourceFile::Generator { id, .. } => id,
        }
    }
}

/// A validated job: what the runtime builds its graph from.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The job's name.
    pub name: String,
    /// Number of key groups.
    pub max_parallelism: u32,
    /// Sources, in file order.
    pub sources: Vec<SourceSpec>,
    /// Operators, in an order where every operator comes after its inputs.
    pub operators: Vec<OperatorSpec>,
    /// Sinks, in file order.
    pub sinks: Vec<SinkSpec>,
}

/// A validated source.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// Node id.
    pub id: String,
    /// What it reads.
    pub kind: SourceKind,
    /// When the source assigns event time: how far (ms) its watermarks trail
    /// the largest timestamp seen.
    pub watermark_lag_ms: Option<i64>,
    /// Rate limit, records per second.
    pub records_per_second: Option<f64>,
}

/// What a source reads.
#[derive(Debug, Clone)]
pub enum SourceKind {
    /// A file, by absolute path.
    File {
        /// Absolute path.
        path: PathBuf,
        /// Line format.
        format: Format,
        /// jsonl key field.
        key_field: Option<String>,
        /// jsonl timestamp field.
        timestamp_field: Option<String>,
    },
    /// The generator.
    Generator {
        /// Records.
        count: u64,
        /// Distinct keys.
        keys: u64,
        /// Seed.
        seed: u64,
        /// Event-time step in ms, if the generator assigns timestamps.
        event_time_step_ms: Option<i64>,
    },
}

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
    /// Params as strings, sorted by name.
    pub params: Vec<(String, String)>,
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
    /// Node id.
    pub id: String,
    /// Upstream node id.
    pub input: String,
    /// Where output goes.
    pub kind: SinkKind,
}

/// Where a sink writes.
#[derive(Debug, Clone)]
pub enum SinkKind {
    /// A file, by absolute path.
    File(PathBuf),
    /// Part files in a directory, committed with checkpoints.
    TransactionalFile(PathBuf),
    /// Standard output.
    Stdout,
    /// Nowhere.
    Discard,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Checks a parsed job file and resolves paths against `base` (the job
/// file's directory). `parallelism_override` replaces the job's default
/// parallelism (the `--parallelism` flag). Every error names the node and
/// field at fault.
pub fn validate(file: &JobFile, base: &Path, parallelism_override: Option<u32>) -> Result<JobSpec, String> {
    if !valid_id(&file.name) {
        return Err(format!("name = {:?}: a job name is 1-128 letters, digits, '-', '_' or '.'", file.name));
    }
    let max_parallelism = file.max_parallelism.unwrap_or(DEFAULT_MAX_PARALLELISM);
    if !(1..=MAX_MAX_PARALLELISM).contains(&max_parallelism) {
        return Err(format!("max_parallelism = {max_parallelism}: must be between 1 and {MAX_MAX_PARALLELISM}"));
    }
    let default_parallelism = parallelism_override.or(file.parallelism).unwrap_or(1);
    let check_parallelism = |what: &str, p: u32| {
        if p == 0 || p > max_parallelism {
            Err(format!("{what}: parallelism {p} must be between 1 and max_parallelism ({max_parallelism})"))
        } else {
            Ok(p)
        }
    };
    check_parallelism("job", default_parallelism)?;
    if file.sources.is_empty() {
        return Err("the job has no [[sources]]".into());
    }

    // Every node id, with its kind and parallelism.
    #[derive(Clone, Copy, PartialEq)]
    enum NodeKind {
        Source,
        Operator,
        Sink,
    }
    let mut nodes: HashMap<String, (NodeKind, u32)> = HashMap::new();
    let mut add = |id: &str, kind: NodeKind, p: u32| -> Result<(), String> {
        if !valid_id(id) {
            return Err(format!("id {id:?}: ids are 1-128 letters, digits, '-', '_' or '.'"));
        }
        if nodes.insert(id.to_string(), (kind, p)).is_some() {
            return Err(format!("id {id:?} is used by more than one source, operator or sink"));
        }
        Ok(())
    };
    for s in &file.sources {
        add(s.id(), NodeKind::Source, 1)?;
    }
    for o in &file.operators {
        let p = check_parallelism(&format!("operator '{}'", o.uid), o.parallelism.unwrap_or(default_parallelism))?;
        add(&o.uid, NodeKind::Operator, p)?;
    }
    for s in &file.sinks {
        add(s.id(), NodeKind::Sink, 1)?;
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
        .map(|s| {
            Ok(match s {
                SourceFile::File {
                    id,
                    path,
                    format,
                    key_field,
                    timestamp_field,
                    max_out_of_orderness,
                    records_per_second,
                } => {
                    check_rate(id, *records_per_second)?;
                    let path = base.join(path);
                    if !path.is_file() {
                        return Err(format!("source '{id}': path {} does not exist or is not a file", path.display()));
                    }
                    if key_field.is_some() && *format != Format::Jsonl {
                        return Err(format!("source '{id}': key_field needs format = \"jsonl\""));
                    }
                    if timestamp_field.is_some() && *format != Format::Jsonl {
                        return Err(format!("source '{id}': timestamp_field needs format = \"jsonl\""));
                    }
                    if max_out_of_orderness.is_some() && timestamp_field.is_none() {
                        return Err(format!("source '{id}': max_out_of_orderness needs timestamp_field"));
                    }
                    SourceSpec {
                        id: id.clone(),
                        kind: SourceKind::File {
                            path,
                            format: *format,
                            key_field: key_field.clone(),
                            timestamp_field: timestamp_field.clone(),
                        },
                        watermark_lag_ms: timestamp_field
                            .as_ref()
                            .map(|_| max_out_of_orderness.map_or(0, |d| d.0.as_millis() as i64)),
                        records_per_second: *records_per_second,
                    }
                }
                SourceFile::Generator { id, count, keys, seed, event_time_step, records_per_second } => {
                    check_rate(id, *records_per_second)?;
                    if *keys == 0 {
                        return Err(format!("source '{id}': keys must be at least 1"));
                    }
                    let step = event_time_step.map(|d| d.0.as_millis() as i64);
                    SourceSpec {
                        id: id.clone(),
                        kind: SourceKind::Generator {
                            count: *count,
                            keys: *keys,
                            seed: *seed,
                            event_time_step_ms: step,
                        },
                        // Generated timestamps never go backwards.
                        watermark_lag_ms: step.map(|_| 0),
                        records_per_second: *records_per_second,
                    }
                }
            })
        })
        .collect::<Result<Vec<_>, String>>()?;

    let mut operators = Vec::new();
    for o in &file.operators {
        let what = format!("operator '{}'", o.uid);
        let inputs: Vec<InputFile> = match (&o.input, &o.inputs) {
            (Some(_), Some(_)) => return Err(format!("{what}: set either input or inputs, not both")),
            (None, None) => return Err(format!("{what}: missing field input (the node it reads from)")),
            (Some(from), None) => vec![InputFile { from: from.clone(), partition: o.partition }],
            (None, Some(list)) => {
                if o.partition.is_some() {
                    return Err(format!("{what}: partition goes inside each entry of inputs"));
                }
                if list.is_empty() {
                    return Err(format!("{what}: inputs is empty"));
                }
                list.clone()
            }
        };
        let (_, parallelism) = nodes[o.uid.as_str()];
        let mut resolved = Vec::new();
        for input in inputs {
            let Some(&(kind, up_parallelism)) = nodes.get(input.from.as_str()) else {
                return Err(format!(
                    "{what}: input '{}' names no source or operator (known: {})",
                    input.from,
                    known(true)
                ));
            };
            if kind == NodeKind::Sink {
                return Err(format!("{what}: input '{}' is a sink; sinks have no output", input.from));
            }
            if input.from == o.uid {
                return Err(format!("{what}: reads its own output (a cycle: {0} -> {0})", o.uid));
            }
            // Flink's default: forward where parallelism matches, else rebalance.
            let partition = input.partition.unwrap_or(if up_parallelism == parallelism {
                Partition::Forward
            } else {
                Partition::Rebalance
            });
            match partition {
                Partition::Forward if up_parallelism != parallelism => {
                    return Err(format!(
                        "{what}: partition = \"forward\" from '{}' needs equal parallelism ({} vs {}); use \"rebalance\" or \"key\"",
                        input.from, up_parallelism, parallelism
                    ));
                }
                _ => {}
            }
            resolved.push(InputSpec { from: input.from.clone(), partition });
        }
        if resolved.iter().all(|i| i.partition == Partition::Broadcast) {
            return Err(format!(
                "{what}: every input is partition = \"broadcast\"; an operator needs a main input besides its broadcast inputs"
            ));
        }
        let module = base.join(&o.module);
        if !module.is_file() {
            return Err(format!("{what}: module {} does not exist or is not a file", module.display()));
        }
        let params = o
            .params
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => v.to_string(),
                    other => {
                        return Err(format!(
                            "{what}: params.{k} is a {}; params are strings, numbers or booleans",
                            other.type_str()
                        ));
                    }
                };
                Ok((k.clone(), text))
            })
            .collect::<Result<BTreeMap<_, _>, String>>()?
            .into_iter()
            .collect();
        operators.push(OperatorSpec { uid: o.uid.clone(), module, inputs: resolved, parallelism, params });
    }
    let operators = topological(operators)?;

    let mut sinks = Vec::new();
    for s in &file.sinks {
        let what = format!("sink '{}'", s.id());
        match nodes.get(s.input()) {
            None => {
                return Err(format!(
                    "{what}: input '{}' names no source or operator (known: {})",
                    s.input(),
                    known(true)
                ));
            }
            Some((NodeKind::Sink, _)) => {
                return Err(format!("{what}: input '{}' is a sink; sinks have no output", s.input()));
            }
            Some(_) => {}
        }
        let kind = match s {
            SinkFile::File { path, .. } => SinkKind::File(base.join(path)),
            SinkFile::TransactionalFile { dir, .. } => SinkKind::TransactionalFile(base.join(dir)),
            SinkFile::Stdout { .. } => SinkKind::Stdout,
            SinkFile::Discard { .. } => SinkKind::Discard,
        };
        sinks.push(SinkSpec { id: s.id().to_string(), input: s.input().to_string(), kind });
    }
    Ok(JobSpec { name: file.name.clone(), max_parallelism, sources, operators, sinks })
}

fn check_rate(id: &str, rate: Option<f64>) -> Result<(), String> {
    match rate {
        Some(r) if !(r.is_finite() && r > 0.0) => {
            Err(format!("source '{id}': records_per_second = {r} must be a positive number"))
        }
        _ => Ok(()),
    }
}

/// Orders operators so each follows its inputs; a cycle is an error that
/// names its members in order.
fn topological(operators: Vec<OperatorSpec>) -> Result<Vec<OperatorSpec>, String> {
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
    ) -> Result<(), String> {
        match marks[i] {
            Mark::Done => return Ok(()),
            Mark::Active => {
                let start = path.iter().position(|&p| p == i).unwrap_or(0);
                let mut names: Vec<&str> = path[start..].iter().map(|&p| ops[p].uid.as_str()).collect();
                names.push(ops[i].uid.as_str());
                names.reverse();
                return Err(format!("the operators form a cycle: {}", names.join(" -> ")));
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
