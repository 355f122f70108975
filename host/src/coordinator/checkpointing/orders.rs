//! The orders a checkpoint's barrier carries for the drivers that change
//! the running job: a rescale's ([`RescaleBarrier`]) and a shadow run's
//! ([`ShadowBarrier`]). The checkpointing sends them with the next barrier
//! and says, once, which checkpoint carried one.

use super::Attempt;
use crate::checkpoint::protocol::CheckpointId;
use crate::coordinator::rescale::RescaleBarrier;
use crate::coordinator::shadow::ShadowBarrier;
use crate::runtime::message::{Control, RescaleOrder, ShadowOrder};
use crossbeam_channel::Sender;
use std::sync::Arc;

impl RescaleBarrier for Attempt<'_> {
    fn carry(&mut self, order: Arc<RescaleOrder>, controls: &[Sender<Control>]) {
        // The new subtasks take part in the checkpoint that carries it.
        self.everyone.extend(controls.iter().cloned());
        self.rescale = Some(order);
        self.protocol.request_checkpoint();
    }

    fn carried(&mut self) -> Option<CheckpointId> {
        self.rescaled_at.take()
    }

    fn withdraw(&mut self) {
        self.rescale = None;
    }

    fn input_stopped(&self) -> bool {
        self.stopped
    }
}

impl ShadowBarrier for Attempt<'_> {
    fn carry(&mut self, order: ShadowOrder) {
        self.shadow = Some(Arc::new(order));
        self.protocol.request_checkpoint();
    }

    fn carried(&mut self) -> Option<CheckpointId> {
        self.shadowed_at.take()
    }

    fn withdraw(&mut self) -> bool {
        self.shadow.take().is_some()
    }

    fn input_stopped(&self) -> bool {
        self.stopped
    }

    fn stop(&self, id: u64) {
        self.send_all(Control::ShadowStop(id));
    }
}
