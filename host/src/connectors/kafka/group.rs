//! Membership in a Kafka consumer group, for cluster mode: the group, not
//! Weir, decides which member owns which partition of a topic, notices a
//! member that went silent (`session.timeout.ms`) and moves its
//! partitions. The member's consumer reads no records (its partitions are
//! paused): it only holds the assignment. Each change comes out as a
//! [`GroupEvent`]; a revocation waits until the receiver says the
//! partitions are let go, so that no partition is ever run by two members
//! of one generation. A member handed back exactly what was just revoked
//! from it leaves and joins again as a new member ([`stale`](super::stale)).

use super::stale::StaleWatch;
use super::{ClusterOptions, Logs, describe};
use crate::runtime::error::ConnectorError;
use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// Each revocation and assignment, for the member's own thread to
    /// watch for a rebalance that moved nothing; it passes assignments on.
    rebalances: Sender<Rebalanced>,
    /// Revocations so far: an assignment a later revocation took back
    /// before the member's thread saw it is not passed on.
    revocations: AtomicU64,
}

/// One side of a rebalance, as the member's thread hears of it.
enum Rebalanced {
    Revoked(Vec<i32>),
    /// The partitions, and the revocations before them.
    Assigned(Vec<i32>, u64),
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
                self.revocations.fetch_add(1, Ordering::SeqCst);
                let _ = self.rebalances.send(Rebalanced::Revoked(partitions.clone()));
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
            // The member's thread passes the assignment on, unless it is
            // one that moved nothing and the member joins again instead:
            // starting the partitions' copies only to stop them at once
            // would hold up the rebalance that follows.
            let revocations = self.revocations.load(Ordering::SeqCst);
            let _ = self.rebalances.send(Rebalanced::Assigned(self.partitions(list), revocations));
        }
    }
}

/// How often a member tells the group it is alive: a tenth of a session,
/// at least 100 ms.
pub fn heartbeat_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 10).max(Duration::from_millis(100))
}

/// What a member needs to join (and join again).
struct Joining {
    cluster: ClusterOptions,
    group: String,
    topic: String,
    session_timeout: Duration,
    events: Sender<GroupEvent>,
}

/// A member consumer and what its callbacks tell the member's thread.
struct Joined {
    consumer: BaseConsumer<Membership>,
    rebalances: Receiver<Rebalanced>,
}

impl Joining {
    /// A new member consumer, subscribed.
    fn subscribe(&self) -> Result<Joined, ConnectorError> {
        let (rebalances, heard) = unbounded();
        let context = Membership {
            topic: self.topic.clone(),
            events: self.events.clone(),
            rebalances,
            revocations: AtomicU64::new(0),
        };
        let session_ms = self.session_timeout.as_millis().to_string();
        // A member learns that a rebalance began at its next heartbeat, so
        // the interval adds to every failover; a tenth of a session keeps
        // that short at a load the coordinator does not notice.
        let heartbeat_ms = heartbeat_interval(self.session_timeout).as_millis().to_string();
        let consumer: BaseConsumer<Membership> = self
            .cluster
            .client_config(&[
                ("group.id", self.group.clone()),
                ("enable.auto.commit", "false".into()),
                ("enable.auto.offset.store", "false".into()),
                ("partition.assignment.strategy", "roundrobin".into()),
                ("session.timeout.ms", session_ms),
                ("heartbeat.interval.ms", heartbeat_ms),
                ("allow.auto.create.topics", "false".into()),
            ])?
            .create_with_context(context)
            .map_err(|e| ConnectorError::Refused(describe(&e)))?;
        consumer.subscribe(&[&self.topic]).map_err(|e| ConnectorError::Refused(describe(&e)))?;
        Ok(Joined { consumer, rebalances: heard })
    }

    /// Serves the group's callbacks until told to stop (false) or until
    /// a rebalance hands this member back what it had (true).
    fn serve(&self, joined: &Joined, stop: &AtomicBool, watch: &mut StaleWatch) -> bool {
        while !stop.load(Ordering::Relaxed) {
            // The partitions are paused, so records never come.
            if let Some(Err(e)) = joined.consumer.poll(Duration::from_millis(100)) {
                tracing::warn!(error = %e, "consumer group");
            }
            for heard in joined.rebalances.try_iter() {
                match heard {
                    Rebalanced::Revoked(ps) => watch.revoked(&ps),
                    // A revocation came after it in the same poll: the
                    // partitions are not this member's any more.
                    Rebalanced::Assigned(_, before)
                        if before != joined.consumer.context().revocations.load(Ordering::SeqCst) => {}
                    Rebalanced::Assigned(ps, _) if watch.rejoin_after(&ps, Instant::now()) => {
                        tracing::warn!(
                            group = %self.group,
                            partitions = ?ps,
                            "a rebalance handed this member back exactly the partitions it had; if a member \
                             left, nobody may have been given its partitions, so this member joins again as \
                             a new one to make the group rebalance in full"
                        );
                        return true;
                    }
                    Rebalanced::Assigned(ps, _) if ps.is_empty() => {}
                    Rebalanced::Assigned(ps, _) => {
                        let _ = self.events.send(GroupEvent::Assigned(ps));
                    }
                }
            }
        }
        false
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
    let joining = Joining {
        cluster: cluster.clone(),
        group: group.to_string(),
        topic: topic.to_string(),
        session_timeout,
        events,
    };
    let first = joining.subscribe()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("cluster-member".into())
        .spawn(move || {
            let mut watch = StaleWatch::new(joining.session_timeout);
            let mut member = Some(first);
            while let Some(joined) = member.take() {
                let again = joining.serve(&joined, &stopping, &mut watch);
                // Leaving the group revokes what is left; the receiver may
                // be gone by now, which the callback allows for.
                joined.consumer.unsubscribe();
                drop(joined);
                if again {
                    match joining.subscribe() {
                        Ok(next) => member = Some(next),
                        Err(e) => {
                            let _ = joining.events.send(GroupEvent::Failed(format!("cannot rejoin the group: {e}")));
                        }
                    }
                }
            }
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
