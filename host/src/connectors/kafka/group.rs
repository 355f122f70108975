//! Membership in a Kafka consumer group, for cluster mode: the group, not
//! Weir, decides which member owns which partition of a topic, notices a
//! member that went silent (`session.timeout.ms`) and moves its
//! partitions. The member's consumer reads no records (its partitions are
//! paused): it only holds the assignment. Each change comes out as a
//! [`GroupEvent`]; a revocation waits until the receiver says the
//! partitions are let go, so that no partition is ever run by two members
//! of one generation.

use super::{ClusterOptions, Logs, describe};
use crate::runtime::error::ConnectorError;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
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
    /// The group could not be reached or refused the member.
    Failed(String),
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
            // copy of the job reads its own partition with its own offsets.
            if let Err(e) = consumer.pause(list) {
                tracing::warn!(error = %e, "cannot pause the membership consumer's partitions");
            }
            let partitions = self.partitions(list);
            if !partitions.is_empty() {
                let _ = self.events.send(GroupEvent::Assigned(partitions));
            }
        }
    }
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
    let heartbeat_ms = (session_timeout.as_millis() / 3).max(100).to_string();
    let consumer: BaseConsumer<Membership> = cluster
        .client_config(&[
            ("group.id", group.to_string()),
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
            ("partition.assignment.strategy", "roundrobin".into()),
            ("session.timeout.ms", session_ms),
            ("heartbeat.interval.ms", heartbeat_ms),
            ("allow.auto.create.topics", "false".into()),
        ])?
        .create_with_context(context)
        .map_err(|e| ConnectorError::Refused(describe(&e)))?;
    consumer.subscribe(&[topic]).map_err(|e| ConnectorError::Refused(describe(&e)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("cluster-member".into())
        .spawn(move || {
            // Polling serves the group's callbacks; the partitions are
            // paused, so records never come.
            while !stopping.load(Ordering::Relaxed) {
                if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                    tracing::warn!(error = %e, "consumer group");
                }
            }
            // Leaving the group revokes what is left; the receiver may be
            // gone by now, which the callback allows for.
            consumer.unsubscribe();
            drop(consumer);
            drop(events);
        })
        .map_err(|e| ConnectorError::Refused(format!("cannot start the group member's thread: {e}")))?;
    Ok((GroupMember { stop, thread: Some(thread) }, receiver))
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
