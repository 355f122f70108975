//! Membership in a Kafka consumer group, for cluster mode: the group, not
//! Weir, decides which member owns which partition of a topic, notices a
//! member that went silent (`session.timeout.ms`) and moves its
//! partitions. The member's consumer reads no records (its partitions are
//! paused): it only holds the assignment. Assignment is cooperative
//! (`cooperative-sticky`): a rebalance revokes only the partitions that
//! change owner, and every other partition keeps running through it. Each
//! change comes out as a [`GroupEvent`], in the order the group made it; a
//! revocation waits until the receiver says the partitions are let go, so
//! that no partition is ever run by two members of one generation.

use super::{ClusterOptions, Logs, describe};
use crate::runtime::error::ConnectorError;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A change of what this member owns.
#[derive(Debug)]
pub enum GroupEvent {
    /// These partitions are now this member's.
    Assigned(Vec<i32>),
    /// These partitions go to others: the sender of `released` must be
    /// sent to (or dropped) once nothing runs them here any more.
    Revoked(Vec<i32>, Sender<()>),
    /// The group could not be reached for a while (the client goes on
    /// trying).
    Failed(String),
    /// The group refuses the member as configured (a session timeout the
    /// broker does not allow, a group it may not join): trying again
    /// cannot help.
    Refused(String),
}

/// This process's membership; leaving is dropping it.
pub struct GroupMember {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What the group asks of a member, as it happens.
struct Membership {
    topic: String,
    events: Sender<GroupEvent>,
}

impl ClientContext for Membership {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        Logs.log(level, facility, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        Logs.error(error, reason);
    }
}

impl Membership {
    fn partitions(&self, list: &TopicPartitionList) -> Vec<i32> {
        let mut ps: Vec<i32> =
            list.elements().iter().filter(|e| e.topic() == self.topic).map(|e| e.partition()).collect();
        ps.sort_unstable();
        ps
    }
}

impl ConsumerContext for Membership {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(list) => {
                // Cooperative: only the partitions that move are listed.
                let partitions = self.partitions(list);
                if partitions.is_empty() {
                    return;
                }
                let (released, wait) = bounded(1);
                // Until the supervisor let the partitions go, the group
                // must not hand them to another member: this callback
                // holds the rebalance. A supervisor that is gone has
                // nothing running.
                if self.events.send(GroupEvent::Revoked(partitions, released)).is_ok() {
                    let _ = wait.recv();
                }
            }
            Rebalance::Error(e) => {
                let _ = self.events.send(GroupEvent::Failed(format!("rebalance failed: {e}")));
            }
            Rebalance::Assign(_) => {}
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(list) = rebalance {
            // The member holds partitions, it does not read them: each
            // partition's task reads it with its own offsets.
            if let Err(e) = consumer.pause(list) {
                tracing::warn!(error = %e, "cannot pause the membership consumer's partitions");
            }
            // Cooperative: only the partitions added are listed.
            let partitions = self.partitions(list);
            if !partitions.is_empty() {
                let _ = self.events.send(GroupEvent::Assigned(partitions));
            }
        }
    }
}

/// How often a member tells the group it is alive: a tenth of a session,
/// at least 100 ms.
pub fn heartbeat_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 10).max(Duration::from_millis(100))
}

/// Joins `group` on `cluster` for `topic`; the events come out of the
/// receiver until the member is dropped.
pub fn join(
    cluster: &ClusterOptions,
    group: &str,
    topic: &str,
    session_timeout: Duration,
) -> Result<(GroupMember, Receiver<GroupEvent>), ConnectorError> {
    let (events, receiver) = unbounded();
    let context = Membership { topic: topic.to_string(), events: events.clone() };
    let session_ms = session_timeout.as_millis().to_string();
    // A member learns that a rebalance began at its next heartbeat, so the
    // interval adds to every failover; a tenth of a session keeps that
    // short at a load the coordinator does not notice.
    let heartbeat_ms = heartbeat_interval(session_timeout).as_millis().to_string();
    let consumer: BaseConsumer<Membership> = cluster
        .client_config(&[
            ("group.id", group.to_string()),
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
            ("partition.assignment.strategy", "cooperative-sticky".into()),
            ("session.timeout.ms", session_ms),
            ("heartbeat.interval.ms", heartbeat_ms),
            ("allow.auto.create.topics", "false".into()),
            // Partitions added to the topic are seen this soon, and the
            // group gives them out.
            ("topic.metadata.refresh.interval.ms", "5000".into()),
        ])?
        .create_with_context(context)
        .map_err(|e| ConnectorError::Refused(describe(&e)))?;
    consumer.subscribe(&[topic]).map_err(|e| ConnectorError::Refused(describe(&e)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let group = group.to_string();
    let thread = std::thread::Builder::new()
        .name("cluster-member".into())
        .spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                // The partitions are paused, so records never come; a poll
                // serves the group's callbacks.
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Err(e)) if refused(&e) => {
                        let why = match e.rdkafka_error_code() {
                            Some(RDKafkaErrorCode::InvalidSessionTimeout) => format!(
                                "session_timeout = {} is outside what the broker allows (its group.min.session.timeout.ms and group.max.session.timeout.ms; 6s to 30m by default)",
                                humantime::format_duration(session_timeout)
                            ),
                            _ => e.to_string(),
                        };
                        let _ = events.send(GroupEvent::Refused(format!("group '{group}': {why}")));
                        break;
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "consumer group"),
                    _ => {}
                }
            }
            // Leaving the group revokes what is left; the receiver may be
            // gone by now, which the callback allows for.
            consumer.unsubscribe();
        })
        .map_err(|e| ConnectorError::Refused(format!("cannot start the group member's thread: {e}")))?;
    Ok((GroupMember { stop, thread: Some(thread) }, receiver))
}

/// Whether a consumer error says the group refuses this member as it is
/// configured, so that trying again cannot help.
fn refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::InvalidSessionTimeout
                | RDKafkaErrorCode::GroupAuthorizationFailed
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::InvalidGroupId
                | RDKafkaErrorCode::GroupMaxSizeReached
                | RDKafkaErrorCode::InconsistentGroupProtocol
        )
    )
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
