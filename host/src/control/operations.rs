//! The control API's actions as resources: a savepoint, a stop with
//! savepoint, a module swap, a rescale or the start of a shadow run is
//! accepted at once with a request id, runs in the background, and is
//! followed at `GET /v1/savepoints/{id}` (or `/v1/swaps/{id}`,
//! `/v1/rescales/{id}`, `/v1/shadows/{id}`) until it completes or fails,
//! as Flink's asynchronous operations. One task owns the table of the last
//! [`KEPT`] operations; the request handlers talk to it by messages. It
//! also knows which outcomes nobody has read yet, so that the server can
//! stay up for the client of a stop with savepoint after the job itself has
//! ended.

use crate::api::{Operation, RequestError, RescaleDone, SavepointDone, ShadowStarted, SwapDone};
use crate::clock::now_ms;
use std::collections::VecDeque;
use tokio::sync::{mpsc, oneshot};

/// Operations kept, the oldest finished ones dropped first.
pub const KEPT: usize = 100;

/// How an operation ended.
#[derive(Debug)]
pub enum Outcome {
    /// A savepoint (or a stop with one) completed.
    Savepoint(SavepointDone),
    /// A swap took effect.
    Swap(SwapDone),
    /// A rescale took effect.
    Rescale(RescaleDone),
    /// A shadow run started.
    Shadow(ShadowStarted),
    /// The job refused it or it failed.
    Failed(RequestError),
    /// The job ended or restarted before answering.
    Lost,
}

enum Message {
    Start { kind: &'static str, reply: oneshot::Sender<String> },
    Finish { id: String, outcome: Outcome },
    Get { id: String, reply: oneshot::Sender<Option<Operation>> },
    List { reply: oneshot::Sender<Vec<Operation>> },
    Unread { reply: oneshot::Sender<bool> },
}

/// A handle on the operations table; cloned into every request handler.
#[derive(Clone)]
pub struct Operations {
    tx: mpsc::UnboundedSender<Message>,
}

impl Operations {
    /// Starts the task that owns the table, on the current runtime.
    pub fn spawn() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(own(rx));
        Operations { tx }
    }

    /// Records a new operation of `kind` ("savepoint", "stop", "swap",
    /// "rescale", "shadow"), in progress; returns its id.
    pub async fn start(&self, kind: &'static str) -> Option<String> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Message::Start { kind, reply }).ok()?;
        rx.await.ok()
    }

    /// Operation `id` ended with `outcome`.
    pub fn finish(&self, id: String, outcome: Outcome) {
        let _ = self.tx.send(Message::Finish { id, outcome });
    }

    /// Operation `id`, if kept.
    pub async fn get(&self, id: String) -> Option<Operation> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Message::Get { id, reply }).ok()?;
        rx.await.ok().flatten()
    }

    /// Whether an operation is in progress, or ended and nobody has read
    /// its outcome yet (`GET` of it).
    pub async fn unread(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Message::Unread { reply }).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Every kept operation, newest first.
    pub async fn list(&self) -> Vec<Operation> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Message::List { reply }).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }
}

/// The table's owner, until every handle is gone.
async fn own(mut rx: mpsc::UnboundedReceiver<Message>) {
    let mut table: VecDeque<Operation> = VecDeque::new();
    // Ids of operations whose outcome a `GET` has returned.
    let mut read: std::collections::HashSet<String> = Default::default();
    let mut next = 1u64;
    while let Some(m) = rx.recv().await {
        match m {
            Message::Start { kind, reply } => {
                let request_id = format!("{kind}-{next}");
                next += 1;
                if table.len() >= KEPT {
                    // The oldest finished one goes; one in progress stays
                    // (at most one savepoint, swap, rescale and shadow run
                    // at a time).
                    let at = table.iter().position(|o| o.status != "in-progress").unwrap_or(0);
                    if let Some(gone) = table.remove(at) {
                        read.remove(&gone.request_id);
                    }
                }
                table.push_back(Operation {
                    request_id: request_id.clone(),
                    kind: kind.to_string(),
                    status: "in-progress".into(),
                    start_time_ms: now_ms().max(0) as u64,
                    end_time_ms: None,
                    savepoint: None,
                    swap: None,
                    rescale: None,
                    shadow: None,
                    error: None,
                });
                let _ = reply.send(request_id);
            }
            Message::Finish { id, outcome } => {
                let Some(o) = table.iter_mut().find(|o| o.request_id == id) else { continue };
                o.end_time_ms = Some(now_ms().max(0) as u64);
                o.status = "completed".into();
                match outcome {
                    Outcome::Savepoint(done) => o.savepoint = Some(done),
                    Outcome::Swap(done) => o.swap = Some(done),
                    Outcome::Rescale(done) => o.rescale = Some(done),
                    Outcome::Shadow(started) => o.shadow = Some(started),
                    Outcome::Failed(e) => {
                        o.status = "failed".into();
                        o.error = Some(e.to_string());
                    }
                    Outcome::Lost => {
                        o.status = "failed".into();
                        o.error = Some("the job ended or restarted before it completed".into());
                    }
                }
            }
            Message::Get { id, reply } => {
                let found = table.iter().find(|o| o.request_id == id).cloned();
                if found.as_ref().is_some_and(|o| o.status != "in-progress") {
                    read.insert(id);
                }
                let _ = reply.send(found);
            }
            Message::Unread { reply } => {
                let _ = reply.send(table.iter().any(|o| !read.contains(&o.request_id)));
            }
            Message::List { reply } => {
                let _ = reply.send(table.iter().rev().cloned().collect());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_go_from_in_progress_to_their_outcome_and_the_oldest_finished_go_first() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let ops = Operations::spawn();
            assert!(!ops.unread().await);
            let first = ops.start("savepoint").await.unwrap();
            let second = ops.start("swap").await.unwrap();
            assert_ne!(first, second);
            assert_eq!(ops.get(first.clone()).await.unwrap().status, "in-progress");
            ops.finish(second.clone(), Outcome::Failed(RequestError::SwapInProgress));
            assert!(ops.unread().await);
            let failed = ops.get(second.clone()).await.unwrap();
            assert_eq!((failed.status.as_str(), failed.kind.as_str()), ("failed", "swap"));
            assert!(failed.error.unwrap().contains("already in progress"));
            for _ in 0..KEPT {
                let id = ops.start("stop").await.unwrap();
                ops.finish(id, Outcome::Lost);
            }
            let all = ops.list().await;
            assert_eq!(all.len(), KEPT);
            // The one in progress outlives the finished ones.
            assert!(all.iter().any(|o| o.request_id == first));
            assert!(ops.get(second).await.is_none());
            ops.finish(first.clone(), Outcome::Lost);
            assert!(ops.unread().await, "the last outcome is not read yet");
            assert_eq!(ops.get(first).await.unwrap().status, "failed");
            assert!(ops.unread().await, "the outcomes of the other 100 were not read either");
        });
    }
}
