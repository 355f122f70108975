//! The checkpoint cluster mode hands a partition over at
//! ([`Request::HandOver`](crate::api::Request::HandOver)): the member
//! asks its copy for it when the group revokes the partition, and cancels
//! the copy once it is answered. The next owner resumes from that
//! checkpoint, so it must hold every change the copy answered before it
//! (a swap, savepoint or rescale under way is waited for), and the copy
//! takes no change after it: a swap it accepted then would be reported done
//! and lost with the copy. Those are refused with
//! [`RequestError::HandingOver`] from the request on, until the copy ends.
//!
//! A driver: it owns its state, sees the checkpoints through a [`View`]
//! and says what it needs of them ([`Ask`]); the controller does that.

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

/// What the hand-over sees of the job's checkpoints.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// A savepoint, swap or rescale is under way.
    pub changing: bool,
    /// The checkpoint in flight.
    pub in_flight: Option<CheckpointId>,
    /// The id the next checkpoint triggered gets.
    pub next_id: CheckpointId,
    /// The latest completed checkpoint.
    pub latest: Option<CheckpointId>,
}

/// What the hand-over needs of the checkpointing.
#[derive(Debug, PartialEq, Eq)]
pub enum Ask {
    /// Nothing now.
    Nothing,
    /// A checkpoint as soon as one can be triggered, whatever the interval.
    Checkpoint,
}

impl HandOver {
    /// A hand-over asked for with `reply`: answered at once with `refused`
    /// if that says why none can be made, else under way.
    pub fn start(reply: HandOverReply, refused: Option<RequestError>) -> Option<HandOver> {
        if let Some(e) = refused {
            let _ = reply.send(Err(e));
            return None;
        }
        Some(HandOver { first: None, reply: Some(reply) })
    }

    /// Picks the hand-over's checkpoint once no swap, savepoint or rescale
    /// is under way (their barriers precede its barrier, so it holds them),
    /// and answers once it completed.
    pub fn follow(&mut self, now: View) -> Ask {
        if self.reply.is_none() {
            return Ask::Nothing;
        }
        let mut ask = Ask::Nothing;
        if self.first.is_none() && !now.changing {
            // One in flight serves: its barrier is at most a checkpoint's
            // duration old, and waiting for one more would hold up the
            // group's rebalance that long again.
            self.first = Some(now.in_flight.unwrap_or_else(|| {
                ask = Ask::Checkpoint;
                now.next_id
            }));
        }
        if let (Some(first), Some(latest)) = (self.first, now.latest)
            && latest >= first
            && let Some(reply) = self.reply.take()
        {
            let _ = reply.send(Ok(latest));
        }
        ask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(changing: bool, in_flight: Option<CheckpointId>, latest: Option<CheckpointId>) -> View {
        View { changing, in_flight, next_id: in_flight.map_or(5, |i| i + 1), latest }
    }

    #[test]
    fn it_waits_for_a_change_under_way_then_for_a_checkpoint_after_it() {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut h = HandOver::start(tx, None).expect("under way");
        // A savepoint under way: its checkpoint 4 completing is not enough.
        assert_eq!(h.follow(view(true, Some(4), Some(3))), Ask::Nothing);
        assert_eq!(h.follow(view(true, None, Some(4))), Ask::Nothing);
        assert!(rx.try_recv().is_err(), "not answered while the change is under way");
        // Once it is done, a checkpoint is asked for (none in flight): 5.
        assert_eq!(h.follow(view(false, None, Some(4))), Ask::Checkpoint);
        assert_eq!(h.follow(view(false, Some(5), Some(4))), Ask::Nothing);
        assert!(rx.try_recv().is_err());
        assert_eq!(h.follow(view(false, None, Some(5))), Ask::Nothing);
        assert!(matches!(rx.try_recv().unwrap(), Ok(5)));
        // Answered once.
        assert_eq!(h.follow(view(false, None, Some(6))), Ask::Nothing);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_checkpoint_in_flight_serves_and_a_refusal_is_answered_at_once() {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut h = HandOver::start(tx, None).unwrap();
        assert_eq!(h.follow(view(false, Some(7), Some(6))), Ask::Nothing, "7 is in flight: no other asked for");
        assert_eq!(h.follow(view(false, None, Some(7))), Ask::Nothing);
        assert!(matches!(rx.try_recv().unwrap(), Ok(7)));

        let (tx, rx) = crossbeam_channel::bounded(1);
        assert!(HandOver::start(tx, Some(RequestError::Failing)).is_none());
        assert!(matches!(rx.try_recv().unwrap(), Err(RequestError::Failing)));
    }
}
