//! The modules a run's checkpoints name: the job file's, the stored copy
//! of each recording operator's module, and the modules swapped in while
//! the job ran, each with the barrier it took effect at. A checkpoint after
//! a swap records the swapped module with its copy in the job's module
//! store, which the swap stored before it was asked of the tasks
//! ([`crate::coordinator::modules::load_for_swap`]), so `_metadata` never
//! names a module that is not already durable there.

use super::Checkpoints;
use crate::api::ModuleInfo;
use crate::checkpoint::metadata::SwappedModule;
use crate::checkpoint::modules::path_of;
use crate::checkpoint::protocol::CheckpointId;
use crate::checkpoint::storage::CheckpointStorage;
use crate::coordinator::modules::RunModules;
use crate::wasm::module::Loaded;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Checkpoints {
    /// The modules the run started with ([`RunModules`]): the job file's
    /// hashes, the swapped modules a resumed checkpoint had, which later
    /// checkpoints record again, and the stored modules of operators that
    /// record their input.
    pub fn with_modules(mut self, run: &RunModules) -> Self {
        self.job_modules = run.job_file.clone();
        self.swapped = run.swapped.iter().map(|(uid, m)| (uid.clone(), (0, m.clone()))).collect();
        self.recorded = run.recorded.clone();
        self
    }

    /// The job's module store, where a swap's module is kept before the
    /// swap is asked of the tasks: the checkpoint storage, when it
    /// outlives the process (a store in host memory keeps nothing a resume
    /// could read).
    pub fn module_store(&self) -> Option<&Arc<CheckpointStorage>> {
        Some(&self.storage).filter(|s| s.is_durable())
    }

    /// Operator `uid` runs `loaded` from the barrier of `id` on. Its bytes
    /// are in the module store already when there is one: the swap stored
    /// them before it was asked of the tasks.
    pub(in crate::coordinator) fn swapped_in(&mut self, uid: &str, id: CheckpointId, loaded: &Loaded) {
        let replaced_sha256 = self.job_modules.get(uid).cloned().unwrap_or_default();
        let module = SwappedModule {
            path: loaded.path.display().to_string(),
            sha256: loaded.sha256.clone(),
            replaced_sha256,
            stored: self.module_store().map(|_| path_of(&loaded.sha256)),
        };
        self.swapped.insert(uid.to_string(), (id, module));
    }

    /// The modules swapped in while the job ran, by operator uid.
    pub fn swapped_modules(&self) -> BTreeMap<String, ModuleInfo> {
        self.swapped
            .iter()
            .map(|(uid, (_, m))| (uid.clone(), ModuleInfo { path: m.path.clone(), sha256: m.sha256.clone() }))
            .collect()
    }
}
