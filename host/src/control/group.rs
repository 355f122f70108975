//! What the control API says about a cluster job's consumer group: every
//! input partition with the member that last wrote its commit log, its
//! latest committed checkpoint, the input offset that checkpoint resumes
//! at and the lag behind the broker, and the members with the partitions
//! each holds. `host status <job file> --json` prints it; a member's own
//! endpoint answers it as `cluster` in `GET /v1/job`.

use super::Status;
use serde::{Deserialize, Serialize};

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
