//! A swap's or shadow run's new module, read and compiled on a thread of
//! its own: a large module, or a file that blocks, must not stop the
//! coordinator. One compile at a time; one that takes longer than
//! [`COMPILE_TIMEOUT`] is answered with that. A swap's module goes into the
//! job's module store, where a resume loads it from, before the swap is
//! asked of the tasks.

use super::checkpointing::SwapReply;
use super::modules::{SwapModuleError, load_for_swap};
use super::shadow::ShadowReply;
use crate::api::{RequestError, ShadowRequest, SwapRequest};
use crate::checkpoint::storage::CheckpointStorage;
use crate::wasm::module::{Loaded, ModuleCompiler};
use crossbeam_channel::Receiver;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a swap's or shadow run's module may take to read and compile.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// What a module is compiled for.
pub enum Purpose {
    Swap(SwapRequest, SwapReply),
    Shadow(ShadowRequest, ShadowReply),
}

impl Purpose {
    /// Answers that the module could not be used.
    pub fn fail(self, e: RequestError) {
        match self {
            Purpose::Swap(_, reply) => {
                let _ = reply.send(Err(e));
            }
            Purpose::Shadow(_, reply) => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// The compile under way, if any.
#[derive(Default)]
pub struct Compiling {
    current: Option<Compile>,
}

struct Compile {
    purpose: Purpose,
    started: Instant,
    done: Receiver<Result<Loaded, SwapModuleError>>,
}

impl Compiling {
    /// Whether a module is being compiled.
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Starts compiling operator `uid`'s module at `module` for `purpose`;
    /// a swap's goes into `store` too. The caller checked that none is
    /// under way.
    pub fn start(
        &mut self,
        compiler: &ModuleCompiler,
        uid: String,
        module: String,
        purpose: Purpose,
        store: Option<&Arc<CheckpointStorage>>,
    ) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (compiler, path) = (compiler.clone(), PathBuf::from(module));
        let store = store.filter(|_| matches!(purpose, Purpose::Swap(..))).cloned();
        let spawned = std::thread::Builder::new().name("weir-compile".into()).spawn(move || {
            let _ = tx.send(load_for_swap(&compiler, &uid, &path, store.as_deref()));
        });
        if let Err(e) = spawned {
            purpose.fail(RequestError::Module(format!("cannot start a thread to compile it: {e}")));
            return;
        }
        self.current = Some(Compile { purpose, started: Instant::now(), done: rx });
    }

    /// Where the compile under way answers (a channel that never does if
    /// none is).
    pub fn done(&self) -> Receiver<Result<Loaded, SwapModuleError>> {
        self.current.as_ref().map_or_else(crossbeam_channel::never, |c| c.done.clone())
    }

    /// The compile answered: what it was for.
    pub fn finish(&mut self) -> Option<Purpose> {
        self.current.take().map(|c| c.purpose)
    }

    /// Answers a compile that took too long with that, and forgets it.
    pub fn expire(&mut self) {
        if self.current.as_ref().is_some_and(|c| c.started.elapsed() > COMPILE_TIMEOUT) {
            let c = self.current.take().expect("checked");
            c.purpose
                .fail(RequestError::Module(format!("compiling it took longer than {} s", COMPILE_TIMEOUT.as_secs())));
        }
    }
}
