//! The modules a run starts with: each operator's module as the job file
//! names it, unless the checkpoint the run resumes records a module that
//! was swapped in while the job ran (`host swap`). That checkpoint's state
//! is the swapped module's, so a resume runs it, as long as the job file
//! still names the module it replaced; a job file that names another module
//! since has the last word. A savepoint always restores into the job
//! file's modules.

use super::JobError;
use super::start::StartError;
use crate::checkpoint::metadata::SwappedModule;
use crate::checkpoint::restore::Restored;
use crate::config::job::JobSpec;
use crate::wasm::{ModuleLoader, OperatorModule};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Every operator's module for a run.
pub struct RunModules {
    /// By operator uid: what its subtasks instantiate.
    pub by_uid: HashMap<String, OperatorModule>,
    /// SHA-256 of each operator's module as the job file names it.
    pub job_file: BTreeMap<String, String>,
    /// The swapped modules the run resumes with, by operator uid.
    pub swapped: BTreeMap<String, SwappedModule>,
}

/// Loads every operator's module of `spec`, and the swapped ones `resumed`
/// (a checkpoint, not a savepoint) records where they apply.
pub fn load(spec: &JobSpec, loader: &mut ModuleLoader, resumed: Option<&Restored>) -> Result<RunModules, JobError> {
    let mut run = RunModules { by_uid: HashMap::new(), job_file: BTreeMap::new(), swapped: BTreeMap::new() };
    let recorded = resumed.filter(|r| !r.metadata.savepoint).map(|r| (&r.metadata.swapped, r.location.as_str()));
    for op in &spec.operators {
        let named = loader.load(&op.uid, &op.module)?;
        run.job_file.insert(op.uid.clone(), named.sha256.clone());
        let swapped = recorded.and_then(|(s, at)| s.get(&op.uid).map(|m| (m, at)));
        let module = match swapped {
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
            Some((m, checkpoint)) => {
                let loaded = loader.load(&op.uid, Path::new(&m.path)).map_err(|e| StartError::SwappedModuleGone {
                    uid: op.uid.clone(),
                    checkpoint: checkpoint.to_string(),
                    why: e.to_string(),
                })?;
                if loaded.sha256 != m.sha256 {
                    return Err(StartError::SwappedModuleGone {
                        uid: op.uid.clone(),
                        checkpoint: checkpoint.to_string(),
                        why: format!("{} holds other bytes now (SHA-256 {}, not {})", m.path, loaded.sha256, m.sha256),
                    }
                    .into());
                }
                tracing::info!(
                    operator = %op.uid,
                    module = %m.path,
                    "resuming with the module swapped in while the job ran (the job file names {})",
                    op.module.display()
                );
                run.swapped.insert(op.uid.clone(), m.clone());
                loaded.module
            }
            None => named.module,
        };
        run.by_uid.insert(op.uid.clone(), module);
    }
    Ok(run)
}
