//! The modules a run starts with, and where a swapped module's bytes come
//! from. Each operator runs its module as the job file names it, unless
//! the checkpoint the run resumes records a module that was swapped in
//! while the job ran (`host swap`). That checkpoint's state is the swapped
//! module's, so a resume runs it, as long as the job file still names the
//! module it replaced; a job file that names another module since has the
//! last word. A savepoint always restores into the job file's modules.
//!
//! A swapped module is loaded only from the module store of the
//! checkpoint's own job directory ([`crate::checkpoint::modules`]), and
//! only bytes that hash to the SHA-256 `_metadata` records; the path
//! `_metadata` names is never opened (it says, in logs and `host status`,
//! where the module came from). The bytes get there before any checkpoint
//! names them: a swap's module is stored once it compiled, before the swap
//! is asked of the tasks ([`load_for_swap`]), and a run copies the swapped
//! modules it resumes with, and the job file's module of each operator
//! that records its input (for `host replay`), into its own store.

use super::error::{JobError, StartError};
use crate::checkpoint::metadata::{RecordedModule, SwappedModule};
use crate::checkpoint::modules::{self as store, ModuleStoreError};
use crate::checkpoint::restore::Restored;
use crate::checkpoint::storage::CheckpointStorage;
use crate::config::job::JobSpec;
use crate::fault::{Classify, Domain, RetryHint};
use crate::wasm::module::{Loaded, ModuleCompiler};
use crate::wasm::{ModuleLoader, OperatorModule, WasmError};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Every operator's module for a run.
pub struct RunModules {
    /// By operator uid: what its subtasks instantiate.
    pub by_uid: HashMap<String, OperatorModule>,
    /// SHA-256 of each operator's module as the job file names it.
    pub job_file: BTreeMap<String, String>,
    /// The swapped modules the run resumes with, by operator uid.
    pub swapped: BTreeMap<String, SwappedModule>,
    /// The job file's module of each operator that records its input, kept
    /// in the run's module store, by operator uid.
    pub recorded: BTreeMap<String, RecordedModule>,
}

/// Why a swap's new module cannot be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SwapModuleError {
    /// It does not load.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// It loads, but the job's module store cannot keep it: checkpoints
    /// after the swap would name a module no resume could run.
    #[error(
        "operator '{uid}': cannot keep module {} in {store}/modules, where a resume would load it from: {cause}; the swap is refused",
        path.display()
    )]
    Store {
        /// Operator uid.
        uid: String,
        /// The module, as the swap named it.
        path: PathBuf,
        /// The job's directory.
        store: String,
        /// Why.
        cause: Box<ModuleStoreError>,
    },
}

impl Classify for SwapModuleError {
    fn domain(&self) -> Domain {
        match self {
            SwapModuleError::Wasm(e) => e.domain(),
            SwapModuleError::Store { cause, .. } => cause.domain(),
        }
    }

    fn retry(&self) -> RetryHint {
        match self {
            SwapModuleError::Wasm(e) => e.retry(),
            SwapModuleError::Store { cause, .. } => cause.retry(),
        }
    }
}

/// Loads every operator's module of `spec`, and the swapped ones `resumed`
/// (a checkpoint, not a savepoint) records where they apply. `store` is the
/// run's module store when its checkpoints go to disk
/// ([`super::checkpointing::Checkpoints::module_store`]).
pub fn load(
    spec: &JobSpec,
    loader: &mut ModuleLoader,
    resumed: Option<&Restored>,
    store: Option<&CheckpointStorage>,
) -> Result<RunModules, JobError> {
    let mut run = RunModules {
        by_uid: HashMap::new(),
        job_file: BTreeMap::new(),
        swapped: BTreeMap::new(),
        recorded: BTreeMap::new(),
    };
    let resumed = resumed.filter(|r| !r.metadata.savepoint);
    let compiler = loader.compiler();
    for op in &spec.operators {
        let (bytes, _) = compiler.read(&op.uid, &op.module)?;
        let named = loader.load_bytes(&op.uid, &op.module, &bytes)?;
        run.job_file.insert(op.uid.clone(), named.sha256.clone());
        if let (Some(_), Some(s)) = (op.record, store) {
            let path = op.module.display().to_string();
            let stored = keep(s, &op.uid, &path, &bytes)?;
            run.recorded.insert(op.uid.clone(), RecordedModule { path, sha256: named.sha256.clone(), stored });
        }
        let module = match resumed.and_then(|r| r.metadata.swapped.get(&op.uid).map(|m| (m, r))) {
            Some((m, _)) if m.sha256 == named.sha256 => named.module,
            Some((m, _)) if m.replaced_sha256 != named.sha256 => {
                tracing::warn!(
                    operator = %op.uid,
                    swapped_in = %m.path,
                    "the job file names another module than the one swapped out while the job ran: running the job file's {}",
                    op.module.display()
                );
                named.module
            }
            Some((m, r)) => {
                let (swapped, module) = load_swapped(loader, &op.uid, m, r, store)?;
                tracing::info!(
                    operator = %op.uid,
                    module = %m.path,
                    sha256 = %m.sha256,
                    from = %r.storage.display(),
                    "resuming with the module swapped in while the job ran, from the job's module store (the job file names {})",
                    op.module.display()
                );
                run.swapped.insert(op.uid.clone(), swapped);
                module
            }
            None => named.module,
        };
        run.by_uid.insert(op.uid.clone(), module);
    }
    Ok(run)
}

/// Operator `uid`'s module `m`, swapped in before checkpoint `r`: read from
/// that checkpoint's own module store and checked against the SHA-256
/// `_metadata` records, and kept in the run's `store` too when that is
/// another directory (a run from a checkpoint of another job directory).
fn load_swapped(
    loader: &mut ModuleLoader,
    uid: &str,
    m: &SwappedModule,
    r: &Restored,
    store: Option<&CheckpointStorage>,
) -> Result<(SwappedModule, OperatorModule), JobError> {
    let bytes =
        store::read_named(&r.storage, m.stored.as_deref(), &m.sha256).map_err(|e| StartError::SwappedModuleGone {
            uid: uid.to_string(),
            checkpoint: r.location.clone(),
            path: m.path.clone(),
            sha256: m.sha256.clone(),
            why: e.to_string(),
        })?;
    let from = format!("{}/{}", r.storage.display(), store::path_of(&m.sha256));
    let loaded = loader.load_bytes(uid, Path::new(&from), &bytes)?;
    debug_assert_eq!(loaded.sha256, m.sha256, "read_named checked the bytes' hash");
    let stored = match store {
        Some(s) if std::ptr::eq(s, &*r.storage) => m.stored.clone(),
        Some(s) => Some(keep(s, uid, &m.path, &bytes)?),
        None => None,
    };
    Ok((SwappedModule { stored, ..m.clone() }, loaded.module))
}

/// Keeps operator `uid`'s module (`path`, for messages) in `store`.
fn keep(store: &CheckpointStorage, uid: &str, path: &str, bytes: &[u8]) -> Result<String, StartError> {
    store::store(store, bytes).map_err(|cause| StartError::KeepModule {
        uid: uid.to_string(),
        path: path.to_string(),
        store: store.display().to_string(),
        cause: Box::new(cause),
    })
}

/// A swap's new module for operator `uid`, from `path` as the swap request
/// names it: read, compiled, and then kept in `store` (the job's module
/// store, when its checkpoints go to disk) before the swap is asked of the
/// tasks, so that every checkpoint after the swap names a stored copy. A
/// module the store cannot keep is refused: no resume could run it. Runs
/// on a thread of its own, off the coordinator's.
pub fn load_for_swap(
    compiler: &ModuleCompiler,
    uid: &str,
    path: &Path,
    store: Option<&CheckpointStorage>,
) -> Result<Loaded, SwapModuleError> {
    let (bytes, _) = compiler.read(uid, path)?;
    let loaded = compiler.load_bytes(uid, path, &bytes)?;
    if let Some(s) = store {
        store::store(s, &bytes).map_err(|cause| SwapModuleError::Store {
            uid: uid.to_string(),
            path: path.to_path_buf(),
            store: s.display().to_string(),
            cause: Box::new(cause),
        })?;
    }
    Ok(loaded)
}
