//! What changes of the running job are under way, as the drivers that
//! start one see them: a swap, rescale or shadow run changes an operator's
//! module or wiring, so one runs at a time, none starts while a savepoint
//! is being taken, and none once the job stops taking changes (failing,
//! finishing, handing its partition over). The controller fills it in from
//! every driver; each driver checks its own request against it, in its own
//! order of reasons.

use crate::api::RequestError;

/// The attempt's changes under way, when a request to start one comes.
#[derive(Debug, Clone, Default)]
pub struct UnderWay {
    /// A swap's or shadow run's module is being compiled.
    pub compiling: bool,
    /// A swap rides (or waits for) a savepoint.
    pub swap: bool,
    /// A rescale waits for its barrier or its new subtasks.
    pub rescale: bool,
    /// A shadow run is under way and not ending.
    pub shadow: bool,
    /// A savepoint is being taken.
    pub savepoint: bool,
    /// The job runs as it started: not failing or ending, no task's work
    /// over, its input not stopped by a savepoint.
    pub running: bool,
    /// Why the job takes no change now (failing, finishing, handing over),
    /// if it takes none.
    pub refused: Option<RequestError>,
}

impl UnderWay {
    /// Refuses with why the job takes no change now, if it takes none.
    pub fn accepting(&self) -> Result<(), RequestError> {
        self.refused.clone().map_or(Ok(()), Err)
    }
}
