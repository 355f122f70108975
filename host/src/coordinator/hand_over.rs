//! The checkpoint cluster mode hands a partition over at
//! ([`Request::HandOver`](crate::api::Request::HandOver)): the member
//! asks its copy for it when the group revokes the partition, and cancels
//! the copy once it is answered. The next owner resumes from that
//! checkpoint, so it must hold every change the copy answered before it
//! (a swap, savepoint or rescale under way is waited for), and the copy
//! takes no change after it: a swap it accepted then would be reported done
//! and lost with the copy. Those are refused with
//! [`RequestError::HandingOver`] from the request on, until the copy ends.

use super::controller::Controller;
use crate::api::RequestError;
use crate::checkpoint::protocol::CheckpointId;
use crossbeam_channel::Sender;

/// Where the hand-over's checkpoint id goes once it completed.
pub type HandOverReply = Sender<Result<CheckpointId, RequestError>>;

/// A hand-over asked for: the copy refuses changes while this is set.
pub struct HandOver {
    /// The first checkpoint that answers it; none yet while a change under
    /// way must be in it.
    first: Option<CheckpointId>,
    /// None once answered.
    reply: Option<HandOverReply>,
}

impl Controller<'_> {
    /// Cluster mode hands this copy's partition over.
    pub(super) fn start_hand_over(&mut self, reply: HandOverReply) {
        let refused = match self.accepting() {
            Err(e) => Some(e),
            Ok(c) if !c.cp.periodic() => Some(RequestError::Refused("the job takes no checkpoints".into())),
            Ok(_) => None,
        };
        if let Some(e) = refused {
            let _ = reply.send(Err(e));
            return;
        }
        self.hand_over = Some(HandOver { first: None, reply: Some(reply) });
        self.answer_hand_over();
    }

    /// Picks the hand-over's checkpoint once no swap, savepoint or rescale
    /// is under way (their barriers precede its barrier, so it holds them),
    /// and answers once it completed.
    pub(super) fn answer_hand_over(&mut self) {
        let changing = self.checkpoints.savepoint_pending() || self.rescale.is_some();
        let c = &mut self.checkpoints;
        let Some(h) = self.hand_over.as_mut().filter(|h| h.reply.is_some()) else { return };
        if h.first.is_none() && !changing {
            // One in flight serves: its barrier is at most a checkpoint's
            // duration old, and waiting for one more would hold up the
            // group's rebalance that long again.
            h.first = Some(c.protocol.in_flight().unwrap_or_else(|| {
                c.protocol.request_checkpoint();
                c.protocol.next_id()
            }));
        }
        if let (Some(first), Some(latest)) = (h.first, c.cp.stats.latest)
            && latest >= first
            && let Some(reply) = h.reply.take()
        {
            let _ = reply.send(Ok(latest));
        }
    }
}
