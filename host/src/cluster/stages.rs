//! How a cluster job splits at its repartition topics. A keyed operator
//! that reads another operator's output (not the Kafka source) would see
//! one key's records in several members; as Kafka Streams does, the job is
//! cut there: the upstream part writes that output to a topic Weir creates,
//! `<job>-<operator uid>-repartition`, keyed by the record key, and the
//! operator reads it as the Kafka source of a **stage** of its own. Each
//! stage is a job with one Kafka source, which its members share through a
//! consumer group of its own (`[cluster] group`, then `-<uid>` for the
//! stage that starts at operator `uid`); the rule of [`partitioned`](super::partitioned)
//! holds within each.
//!
//! A repartition topic is written by an exactly-once Kafka sink, like any
//! output (published once its checkpoint committed), so the stage that
//! reads it reads every record once.

use super::partitioned::{NotPartitionable, SharedInput};
use crate::config::{ConnectorSpec, InputSpec, LoadedJob, Partition, SinkSpec};
use std::collections::BTreeMap;

/// One stage: the job its members run a copy of per partition of `input`.
#[derive(Debug, Clone)]
pub struct Stage {
    /// The stage's job: `<job>` for the first, `<job>-<uid>` for the one
    /// that starts at keyed operator `uid`.
    pub job: LoadedJob,
    /// The topic whose partitions its members share.
    pub input: SharedInput,
    /// Its consumer group.
    pub group: String,
    /// For a stage that reads a repartition topic: that topic's partition
    /// count, which the members create it with.
    pub creates: Option<i32>,
}

/// The repartition topic in front of operator `uid` of job `job`.
pub fn repartition_topic(job: &str, uid: &str) -> String {
    format!("{job}-{uid}-repartition")
}

/// The node that writes and reads the repartition topic of operator `uid`:
/// a sink in the stage upstream, the source of `uid`'s stage.
fn repartition_node(uid: &str) -> String {
    format!("{uid}-repartition")
}

/// Splits `job` (already checked, reading `input`, whose topic has
/// `partitions` partitions) into its stages, the first first; `group` is
/// `[cluster] group`. Refuses a graph whose cut does not leave each node in
/// one stage, naming the node.
pub fn split(
    job: &LoadedJob,
    input: &SharedInput,
    group: &str,
    partitions: i32,
) -> Result<Vec<Stage>, NotPartitionable> {
    let refuse = |reason: String| NotPartitionable { job: job.path.display().to_string(), reason };
    let spec = &job.spec;
    // Which stage each node is in: the source's is "" (the first).
    let mut stage_of: BTreeMap<&str, &str> = BTreeMap::new();
    stage_of.insert(input.source_id.as_str(), "");
    let mut cuts: Vec<(&str, &str)> = Vec::new(); // (operator, the node it reads)
    for o in &spec.operators {
        let keyed_elsewhere = o.inputs.iter().find(|i| i.partition == Partition::Key && i.from != input.source_id);
        if let Some(i) = keyed_elsewhere {
            if o.inputs.len() != 1 {
                return Err(refuse(format!(
                    "operator '{}' is keyed on the output of '{}', whose keys are not the Kafka keys of topic '{}', \
                     and reads other inputs too: cluster mode cuts the job in front of such an operator with a \
                     repartition topic, which carries one input. Give '{}' that one input, or key it on source '{}' \
                     directly",
                    o.uid, i.from, input.topic, o.uid, input.source_id
                )));
            }
            stage_of.insert(o.uid.as_str(), o.uid.as_str());
            cuts.push((o.uid.as_str(), i.from.as_str()));
            continue;
        }
        let stages: std::collections::BTreeSet<&str> =
            o.inputs.iter().filter_map(|i| stage_of.get(i.from.as_str()).copied()).collect();
        let [stage] = stages.into_iter().collect::<Vec<_>>()[..] else {
            return Err(refuse(format!(
                "operator '{}' reads from both sides of a repartition topic (in front of a keyed operator that \
                 reads another operator's output): each part of a cluster job runs on its own, so an operator \
                 reads inputs of one part only",
                o.uid
            )));
        };
        stage_of.insert(o.uid.as_str(), stage);
    }
    let mut stages = Vec::new();
    let starts = std::iter::once("").chain(cuts.iter().map(|(uid, _)| *uid));
    for start in starts {
        let mut stage = job.clone();
        let in_stage = |node: &str| stage_of.get(node) == Some(&start);
        stage.spec.operators.retain(|o| in_stage(&o.uid));
        stage.spec.sinks.retain(|s| in_stage(&s.input));
        let stage_input = if start.is_empty() {
            stage.spec.sources.retain(|s| s.id == input.source_id);
            input.clone()
        } else {
            stage.spec.name = format!("{}-{start}", spec.name);
            let source = repartition_source(spec, input, start);
            for o in stage.spec.operators.iter_mut().filter(|o| o.uid == start) {
                o.inputs = vec![InputSpec { from: source.id.clone(), partition: Partition::Key }];
            }
            let shared = SharedInput {
                source_id: source.id.clone(),
                topic: repartition_topic(&spec.name, start),
                ..input.clone()
            };
            stage.spec.sources = vec![source];
            shared
        };
        // The topics this stage writes for the stages after it.
        for (uid, from) in cuts.iter().filter(|(_, from)| in_stage(from)) {
            let id = repartition_node(uid);
            if stage.spec.operators.iter().any(|o| o.uid == id) || stage.spec.sinks.iter().any(|s| s.connector.id == id)
            {
                return Err(refuse(format!(
                    "node id '{id}' is taken; cluster mode names the repartition topic's sink in front of '{uid}' so"
                )));
            }
            stage.spec.sinks.push(repartition_sink(spec, input, uid, from, partitions));
        }
        if stage.spec.name.len() > 116 {
            return Err(refuse(format!(
                "the part of the job from operator '{start}' on runs as {:?}, too long a name: each partition runs \
                 as <name>-p<partition>, at most 128 characters; shorten the job's name or the operator's uid",
                stage.spec.name
            )));
        }
        let group = if start.is_empty() { group.to_string() } else { format!("{group}-{start}") };
        let creates = (!start.is_empty()).then_some(partitions);
        stages.push(Stage { job: stage, input: stage_input, group, creates });
    }
    Ok(stages)
}

/// The Kafka options every repartition node shares with the job's source:
/// its brokers and client properties (security settings, say).
fn cluster_options(input: &SharedInput, topic: String) -> toml::Table {
    let mut options = toml::Table::new();
    options.insert("bootstrap_servers".into(), toml::Value::String(input.bootstrap_servers.clone()));
    options.insert("topic".into(), toml::Value::String(topic));
    if !input.properties.is_empty() {
        options.insert("properties".into(), toml::Value::Table(input.properties.clone()));
    }
    options
}

/// The source of the stage that starts at operator `uid`: its repartition
/// topic from the start, never ending (the stage upstream may write more at
/// any time); with event time as the job's source had it, carried in the
/// records' Kafka timestamps.
fn repartition_source(spec: &crate::config::JobSpec, input: &SharedInput, uid: &str) -> ConnectorSpec {
    let mut options = cluster_options(input, repartition_topic(&spec.name, uid));
    options.insert("start".into(), toml::Value::String("earliest".into()));
    let original = spec.sources.iter().find(|s| s.id == input.source_id).map(|s| &s.options);
    if original.is_some_and(|o| o.contains_key("timestamp") || o.contains_key("timestamp_field")) {
        options.insert("timestamp".into(), toml::Value::String("kafka".into()));
        if let Some(lag) = original.and_then(|o| o.get("max_out_of_orderness")) {
            options.insert("max_out_of_orderness".into(), lag.clone());
        }
    }
    ConnectorSpec { id: repartition_node(uid), kind: "kafka".into(), options, parallelism: 1 }
}

/// The sink that writes `from`'s output, keyed by the record key, to the
/// repartition topic in front of operator `uid`, creating it with
/// `partitions` partitions when no member did yet.
fn repartition_sink(
    spec: &crate::config::JobSpec,
    input: &SharedInput,
    uid: &str,
    from: &str,
    partitions: i32,
) -> SinkSpec {
    let mut options = cluster_options(input, repartition_topic(&spec.name, uid));
    options.insert("create_topic".into(), toml::Value::Boolean(true));
    options.insert("partitions".into(), toml::Value::Integer(partitions.into()));
    SinkSpec {
        connector: ConnectorSpec { id: repartition_node(uid), kind: "kafka".into(), options, parallelism: 1 },
        input: from.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{default_settings, parse_job};
    use std::path::Path;

    fn job(operators: &str) -> (LoadedJob, SharedInput) {
        let text = format!(
            r#"
name = "wc"

[[sources]]
id = "lines"
kind = "kafka"
bootstrap_servers = "b:9092"
topic = "lines"

{operators}

[[sinks]]
id = "out"
kind = "kafka"
input = "counter"
bootstrap_servers = "b:9092"
topic = "counts"
"#
        );
        // The modules must exist; what is in them does not matter here.
        let dir = tempfile::tempdir().unwrap();
        for m in ["t.wasm", "c.wasm", "k.wasm"] {
            std::fs::write(dir.path().join(m), b"").unwrap();
        }
        let spec = parse_job(Path::new("job.toml"), &text, dir.path(), None).unwrap();
        let input = SharedInput {
            source_id: "lines".into(),
            topic: "lines".into(),
            bootstrap_servers: "b:9092".into(),
            properties: toml::Table::new(),
        };
        (LoadedJob { path: "job.toml".into(), spec, settings: default_settings() }, input)
    }

    const TOKENIZER: &str = "[[operators]]\nuid = \"tokenizer\"\nmodule = \"t.wasm\"\ninput = \"lines\"\n";

    #[test]
    fn a_keyed_operator_on_another_operators_output_starts_a_stage_that_reads_a_repartition_topic() {
        let (job, input) = job(&format!(
            "{TOKENIZER}\n[[operators]]\nuid = \"counter\"\nmodule = \"c.wasm\"\ninput = \"tokenizer\"\npartition = \"key\"\n"
        ));
        let stages = split(&job, &input, "g", 4).unwrap();
        let [first, second] = &stages[..] else { panic!("two stages: {stages:#?}") };
        assert_eq!((first.job.spec.name.as_str(), first.group.as_str(), first.creates), ("wc", "g", None));
        assert_eq!(first.job.spec.sources.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["lines"]);
        assert_eq!(first.job.spec.operators.iter().map(|o| o.uid.as_str()).collect::<Vec<_>>(), ["tokenizer"]);
        let [to_counter] = &first.job.spec.sinks[..] else { panic!("one sink: {:#?}", first.job.spec.sinks) };
        assert_eq!((to_counter.connector.id.as_str(), to_counter.input.as_str()), ("counter-repartition", "tokenizer"));
        let o = &to_counter.connector.options;
        assert_eq!(o["topic"].as_str(), Some("wc-counter-repartition"));
        assert_eq!((o["create_topic"].as_bool(), o["partitions"].as_integer()), (Some(true), Some(4)));

        assert_eq!(
            (second.job.spec.name.as_str(), second.group.as_str(), second.creates),
            ("wc-counter", "g-counter", Some(4))
        );
        assert_eq!(
            (second.input.source_id.as_str(), second.input.topic.as_str()),
            ("counter-repartition", "wc-counter-repartition")
        );
        let [source] = &second.job.spec.sources[..] else { panic!("one source") };
        assert_eq!(source.options["start"].as_str(), Some("earliest"));
        assert!(!source.options.contains_key("end"), "a repartition topic never ends");
        let [counter] = &second.job.spec.operators[..] else { panic!("the counter alone") };
        assert_eq!(
            (counter.inputs[0].from.as_str(), counter.inputs[0].partition),
            ("counter-repartition", Partition::Key)
        );
        assert_eq!(second.job.spec.sinks.iter().map(|s| s.connector.id.as_str()).collect::<Vec<_>>(), ["out"]);
    }

    #[test]
    fn a_job_keyed_on_its_source_is_one_stage_and_an_operator_across_a_cut_is_refused() {
        let (one, input) =
            job("[[operators]]\nuid = \"counter\"\nmodule = \"c.wasm\"\ninput = \"lines\"\npartition = \"key\"\n");
        let stages = split(&one, &input, "g", 4).unwrap();
        assert_eq!(stages.len(), 1);
        assert_eq!(stages[0].job.spec.sinks.len(), 1);
        // `counter` joins the keyed stream with the source's: both sides.
        let (across, input) = job(&format!(
            "{TOKENIZER}\n[[operators]]\nuid = \"keyed\"\nmodule = \"k.wasm\"\ninput = \"tokenizer\"\npartition = \"key\"\n\n\
             [[operators]]\nuid = \"counter\"\nmodule = \"c.wasm\"\ninputs = [{{ from = \"keyed\", partition = \"rebalance\" }}, {{ from = \"lines\", partition = \"rebalance\" }}]\n"
        ));
        let e = split(&across, &input, "g", 4).unwrap_err().to_string();
        assert!(e.contains("operator 'counter' reads from both sides of a repartition topic"), "{e}");
    }
}
