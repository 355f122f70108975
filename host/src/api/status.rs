//! A running job's state as `GET /v1/job` and `host status` show it: its
//! nodes, its restarts, and on a cluster member the whole consumer group
//! (every input partition with its owner, latest committed checkpoint,
//! offset and lag). `host status <job file> --json` prints the group.
//!
//! Times are milliseconds: `*_time_ms` since the Unix epoch, `*_ms`
//! durations.

use serde::{Deserialize, Serialize};

/// A running job's state, as `host status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// Job name.
    pub job: String,
    /// Host process id.
    pub pid: u32,
    /// Restarts so far (0 on the first attempt).
    pub attempt: u32,
    /// Where the job is in its life: running, savepointing, stopping, ...
    #[serde(default)]
    pub state: String,
    /// Time since the run started, in milliseconds.
    pub uptime_ms: u64,
    /// Records read by the sources.
    pub records_read: u64,
    /// Records written by the sinks.
    pub records_written: u64,
    /// The checkpoint line of the progress display (none without
    /// checkpointing).
    pub checkpoints: Option<String>,
    /// The id of the latest checkpoint this run completed.
    #[serde(default)]
    pub latest_checkpoint: Option<u64>,
    /// Per node: role, id, parallelism, records in and out.
    pub nodes: Vec<NodeStatus>,
    /// When the run started.
    #[serde(default)]
    pub start_time_ms: u64,
    /// The largest parallelism of any node.
    #[serde(default)]
    pub parallelism: u32,
    /// Key groups: the most subtasks a keyed operator can be rescaled to.
    #[serde(default)]
    pub max_parallelism: u32,
    /// The run's restarts so far, oldest first, with their causes.
    #[serde(default)]
    pub restarts: Vec<Restart>,
    /// On a cluster member's own endpoint: the whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<GroupView>,
}

/// One restart of the job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restart {
    /// The attempt it started (1 for the first restart).
    pub attempt: u32,
    /// When the failure that caused it happened.
    pub time_ms: u64,
    /// The failure.
    pub cause: String,
    /// The checkpoint it restored, if any.
    pub restored_from: Option<String>,
}

/// One node of a running job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    /// "source", "operator" or "sink".
    pub role: String,
    /// Source id, operator uid or sink id.
    pub id: String,
    /// Subtasks.
    pub parallelism: u32,
    /// Records in, summed over subtasks.
    pub records_in: u64,
    /// Records out, summed over subtasks.
    pub records_out: u64,
}

/// The group of a cluster job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupView {
    /// The job's name (its copies are `<job>-p<partition>`).
    pub job: String,
    /// The consumer group.
    pub group: String,
    /// The input topic the members share.
    pub topic: String,
    /// Every partition of the topic, in order.
    pub partitions: Vec<PartitionStatus>,
    /// The members that wrote the last entry of some partition's commit
    /// log, with those partitions: the member that runs a partition, or the
    /// one that ran it last while it moves.
    pub members: Vec<MemberStatus>,
}

/// One input partition of a cluster job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// Its topic: the job's input, or the repartition topic a later stage
    /// of the job reads.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its copy's job name.
    pub job: String,
    /// Who wrote the last entry of its commit log.
    pub owner: Option<String>,
    /// Whether that entry is a claim (its run started, nothing committed since).
    pub claimed: bool,
    /// The latest committed checkpoint.
    pub checkpoint: Option<u64>,
    /// The input offset that checkpoint resumes at.
    pub offset: Option<i64>,
    /// The partition's end offset at the broker.
    pub end: i64,
    /// Records past the committed offset.
    pub lag: Option<i64>,
    /// The input ended before the latest committed checkpoint.
    pub input_ended: bool,
    /// The copy's status, when it runs where the view was taken.
    pub here: Option<Box<Status>>,
}

/// A member and the partitions whose commit logs it wrote last.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberStatus {
    /// As the commit log names it: `member <pid> on <host>`.
    pub member: String,
    /// Its partitions, in order.
    pub partitions: Vec<i32>,
}

impl GroupView {
    /// The members of `partitions`, from their owners.
    pub fn members_of(partitions: &[PartitionStatus]) -> Vec<MemberStatus> {
        let mut members: std::collections::BTreeMap<&str, Vec<i32>> = std::collections::BTreeMap::new();
        for p in partitions {
            if let Some(owner) = &p.owner {
                members.entry(owner).or_default().push(p.partition);
            }
        }
        members.into_iter().map(|(m, partitions)| MemberStatus { member: m.to_string(), partitions }).collect()
    }

    /// The view as `host status` prints it: a line for the group, one for
    /// each partition.
    pub fn table(&self) -> String {
        let first = self.partitions.iter().filter(|p| p.topic == self.topic).count();
        let repartitioned = match self.partitions.len() - first {
            0 => String::new(),
            n => format!(" and {n} of its repartition topics"),
        };
        let mut out = format!(
            "cluster job '{}' (group '{}'): {first} partitions of topic '{}'{repartitioned}\n",
            self.job, self.group, self.topic
        );
        out += &format!(
            "  {:>9}  {:<16} {:<28} {:>14} {:>10} {:>8}  on this machine\n",
            "partition", "job", "last written by", "checkpoint", "offset", "lag"
        );
        for p in &self.partitions {
            let checkpoint = match (p.checkpoint, p.claimed) {
                (Some(c), false) => c.to_string(),
                (Some(c), true) => format!("{c} (claimed)"),
                (None, _) => "-".into(),
            };
            let here = p.here.as_ref().map_or("-".to_string(), |s| {
                format!("{}: {} records read, {} written", s.state, s.records_read, s.records_written)
            });
            let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
            let (offset, lag) =
                if p.input_ended { ("ended".to_string(), "-".to_string()) } else { (dash(p.offset), dash(p.lag)) };
            out += &format!(
                "  {:>9}  {:<16} {:<28} {:>14} {:>10} {:>8}  {here}\n",
                p.partition,
                p.job,
                p.owner.as_deref().unwrap_or("nobody yet"),
                checkpoint,
                offset,
                lag
            );
        }
        out
    }
}
