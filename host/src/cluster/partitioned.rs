//! What cluster mode can run, and how: the rule a job graph must follow so
//! that an input partition is a unit of ownership, and the copy of the job
//! a member runs for each partition it owns (`<job>-p<n>`: the job read
//! from that partition alone, at parallelism 1, with its own checkpoints).
//!
//! The rule: one Kafka source reading one topic; keyed operators read that
//! source directly, so they key by the Kafka key and every record of a key
//! is in one partition (the producer's partitioner put it there), or read
//! a repartition topic in front of them ([`stages`](super::stages)); sinks
//! are Kafka sinks, whose exactly-once output is per copy; checkpoints go
//! to a durable directory every member reaches.
//!
//! A copy's sinks give up on a record they could not deliver within half a
//! session (`flush_timeout`): a member paused past its session finds, when
//! it wakes, that the output it still held expired instead of being sent
//! after the partition's new owner published it.

use crate::config::units::HumanDuration;
use crate::config::{ClusterSpec, LoadedJob};
use std::time::Duration;
use thiserror::Error;

/// The longest a copy's sink may take to deliver a record: under the time
/// a silent member's partitions take to move, which is at least nine
/// tenths of a session after its last record was handed to the producer
/// (its last heartbeat may be a heartbeat interval, a tenth of a session,
/// older than that).
pub fn flush_timeout(cluster: &ClusterSpec) -> Duration {
    cluster.session_timeout / 2
}

/// A job cluster mode cannot run; says why and what to change.
#[derive(Debug, Error)]
#[error("{job}: cluster mode cannot run this job: {reason}")]
pub struct NotPartitionable {
    /// The job file.
    pub job: String,
    /// Why, and what to change.
    pub reason: String,
}

/// The input a cluster's members share.
#[derive(Debug, Clone)]
pub struct SharedInput {
    /// The Kafka source's id.
    pub source_id: String,
    /// Its topic.
    pub topic: String,
    /// Its brokers.
    pub bootstrap_servers: String,
    /// Its librdkafka properties (security settings apply to the group too).
    pub properties: toml::Table,
}

/// Checks `job` against the rule; the input the members share.
pub fn check(job: &LoadedJob, cluster: &ClusterSpec) -> Result<SharedInput, NotPartitionable> {
    let refuse = |reason: String| NotPartitionable { job: job.path.display().to_string(), reason };
    let spec = &job.spec;
    if spec.name.len() > 116 {
        return Err(refuse(format!(
            "name {:?} is too long: each partition runs as <name>-p<partition>, at most 128 characters",
            spec.name
        )));
    }
    let [source] = spec.sources.as_slice() else {
        return Err(refuse(format!(
            "it has {} sources; cluster mode runs a job with one Kafka source, whose partitions the members share",
            spec.sources.len()
        )));
    };
    if source.kind != "kafka" {
        return Err(refuse(format!(
            "source '{}' is a {} source; the members share the partitions of a Kafka source's topic",
            source.id, source.kind
        )));
    }
    let topic = match source.options.get("topic") {
        Some(toml::Value::String(t)) => t.clone(),
        _ => {
            return Err(refuse(format!(
                "source '{}' must name one topic (topic = \"...\"): the members share its partitions",
                source.id
            )));
        }
    };
    if source.options.contains_key("only_partitions") {
        return Err(refuse(format!(
            "source '{}' sets only_partitions; in cluster mode the group decides which member reads which partition",
            source.id
        )));
    }
    let Some(toml::Value::String(servers)) = source.options.get("bootstrap_servers") else {
        return Err(refuse(format!("source '{}' has no bootstrap_servers", source.id)));
    };
    let source_group = match source.options.get("group") {
        Some(toml::Value::String(g)) => g.clone(),
        _ => format!("weir-{}", source.id),
    };
    if source_group == cluster.group {
        return Err(refuse(format!(
            "[cluster] group {:?} is source '{}''s group too (where it commits offsets for monitoring); give them different names",
            cluster.group, source.id
        )));
    }
    if let Some(sink) = spec.sinks.iter().find(|s| s.connector.kind != "kafka") {
        return Err(refuse(format!(
            "sink '{}' is a {} sink; in cluster mode each member writes the output of its partitions, which only a Kafka sink \
             keeps exactly-once across members",
            sink.connector.id, sink.connector.kind
        )));
    }
    let most = flush_timeout(cluster);
    for sink in &spec.sinks {
        let Some(value) = sink.connector.options.get("flush_timeout") else { continue };
        let given = value.as_str().and_then(|t| HumanDuration::parse(t).ok());
        if given.is_none_or(|d| d.0 > most) {
            return Err(refuse(format!(
                "sink '{}' sets flush_timeout = {value}; in cluster mode it must be at most half of [cluster] \
                 session_timeout ({}), so that a member paused past its session never sends output after the \
                 partition's new owner published it: leave it out, or lower it",
                sink.connector.id,
                humantime::format_duration(most)
            )));
        }
    }
    for sink in &spec.sinks {
        let Some(toml::Value::Table(properties)) = sink.connector.options.get("properties") else { continue };
        if let Some(key) = properties.keys().find(|k| FENCED_PRODUCER.contains(&k.as_str())) {
            return Err(refuse(format!(
                "sink '{}' sets properties.{key}; in cluster mode Weir sets it, so that a member paused past its \
                 session cannot have its Kafka client send output again after waking (no retries, no idempotent \
                 resends, records expire after flush_timeout): leave it out",
                sink.connector.id
            )));
        }
    }
    if job.settings.checkpointing.is_none() {
        return Err(refuse(
            "it takes no checkpoints; a partition moves to another member through its checkpoints: set [checkpointing] interval"
                .into(),
        ));
    }
    if job.settings.storage.dir.as_deref().is_none_or(str::is_empty) {
        return Err(refuse(
            "state.checkpoints.dir is not set; every member must reach the checkpoints (S3, or a shared file system)"
                .into(),
        ));
    }
    let properties = match source.options.get("properties") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => toml::Table::new(),
    };
    Ok(SharedInput { source_id: source.id.clone(), topic, bootstrap_servers: servers.clone(), properties })
}

/// Producer properties a cluster-mode Kafka sink sets itself (see
/// `connectors::kafka::sink`); a job may not set them.
const FENCED_PRODUCER: &[&str] =
    &["enable.idempotence", "retries", "message.send.max.retries", "message.timeout.ms", "delivery.timeout.ms"];

/// The name of the copy of job `job` for partition `partition`.
pub fn copy_name(job: &str, partition: i32) -> String {
    format!("{job}-p{partition}")
}

/// The copy of `job` that runs partition `partition` of `input`: its own
/// name (so its own checkpoints and control endpoint), everything at
/// parallelism 1, the source reading that partition only, its commits
/// fenced as `owner`'s.
pub fn copy_for(job: &LoadedJob, input: &SharedInput, partition: i32, owner: String) -> LoadedJob {
    let mut copy = job.clone();
    copy.spec.name = copy_name(&job.spec.name, partition);
    if let Some(cluster) = copy.spec.cluster.take() {
        let most = format!("{}ms", flush_timeout(&cluster).as_millis());
        for s in &mut copy.spec.sinks {
            s.connector.options.entry("flush_timeout").or_insert_with(|| toml::Value::String(most.clone()));
        }
    }
    // Each copy has transactional ids of its own: copies sharing them
    // would fence each other. (The default prefix has the copy's name.)
    for s in &mut copy.spec.sinks {
        if let Some(toml::Value::String(prefix)) = s.connector.options.get_mut("transactional_id_prefix") {
            prefix.push_str(&format!("-p{partition}"));
        }
    }
    for s in &mut copy.spec.sources {
        s.parallelism = 1;
        if s.id == input.source_id {
            s.options
                .insert("only_partitions".into(), toml::Value::Array(vec![toml::Value::Integer(partition.into())]));
        }
    }
    for o in &mut copy.spec.operators {
        o.parallelism = 1;
    }
    // Several copies run in one process: each listens on a port of its own.
    copy.settings.rest.bind.set_port(0);
    // The partition may come from a member that is paused, not dead: the
    // commit log, not the run file, decides who may commit.
    copy.settings.rest.take_over = true;
    copy.settings.storage.fenced_by = Some(owner);
    copy
}

/// Who this process is, in the commit log: the host and the process id.
pub fn member_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    format!("member {} on {}", std::process::id(), if host.is_empty() { "?" } else { host })
}
