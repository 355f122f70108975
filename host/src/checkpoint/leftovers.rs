//! What earlier runs of a job left in its checkpoint directory, looked at
//! when a run resumes (`--resume`). A run deletes only what it created, so
//! a run that dies leaves its retained checkpoints behind, one more when it
//! died between completing a checkpoint and deleting the one before, the
//! files of a checkpoint it had not finished, and shared files that only
//! that checkpoint would have used. Without this, every crash of a job that
//! a supervisor restarts with `--resume` would grow the directory for good.
//!
//! - Complete checkpoints older than the one resumed from are handed to the
//!   new run's retention, oldest first: it deletes them as its own
//!   checkpoints complete, as the dead run would have.
//! - Objects no checkpoint can ever read are deleted at once: `chk-<n>/`
//!   directories without `_metadata` whose `n` is below the sweep's bound,
//!   files under `shared/` that no complete checkpoint references, and in
//!   a local directory the files a write cut short left. A `_metadata`
//!   that cannot be read keeps every shared file: what it references is
//!   unknown. A run that is the job's only writer sweeps every checkpoint
//!   id; in cluster mode the bound is the first id of the run's claim,
//!   since the runs that claimed before it can no longer commit anything
//!   (they are fenced), though one may still be writing the files of a
//!   checkpoint it will never complete. There, complete checkpoints above
//!   the committed one are deleted too: an owner wrote them whose commit
//!   was refused.
//!
//! - Modules in the job's module store (`modules/<sha256>.wasm`,
//!   [`super::modules`]) that no complete checkpoint names are deleted
//!   here, and only here: a running job's retention leaves them, since a
//!   swap under way may be about to name one again. An unreadable
//!   `_metadata` keeps every module.
//!
//! Checkpoints newer than the one resumed from (unusable ones the restore
//! skipped) and everything outside `chk-<n>/`, `shared/` and the names
//! Weir writes under `modules/` are left as they are.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::metadata::CheckpointMetadata;
use super::storage::{CheckpointStorage, StorageError};

/// A complete checkpoint an earlier run left, with the shared files it
/// uses: retention deletes it like one of the run's own.
pub type Inherited = (u64, Vec<String>);

/// What a resuming run deletes at once, besides handing older complete
/// checkpoints to its retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// The run is the job's only writer: every unfinished checkpoint.
    OnlyWriter,
    /// Cluster mode, the run's claim numbering its checkpoints from
    /// `below`: what earlier claims wrote, which the claim's fence keeps
    /// from ever being committed. Their unfinished checkpoints, and their
    /// complete ones newer than the committed one (an owner fenced off
    /// deletes the checkpoint whose commit was refused, unless it dies
    /// first).
    EarlierClaims {
        /// The first id of the run's own claim.
        below: u64,
    },
}

/// Looks at the job directory of `storage` for a run resuming from
/// checkpoint `resumed` (none: the job had no checkpoint yet). First
/// deletes what `sweep` says and the shared files no remaining checkpoint
/// uses; returns the complete checkpoints older than `resumed`, oldest
/// first.
pub fn take_over(
    storage: &CheckpointStorage,
    resumed: Option<u64>,
    sweep: Sweep,
) -> Result<Vec<Inherited>, StorageError> {
    let objects = storage.list_under("")?;
    let complete: BTreeSet<u64> = objects.iter().filter_map(|o| metadata_of(o)).collect();
    let uncommitted = uncommitted(&complete, resumed, sweep);
    // The shared files and modules each complete checkpoint uses; None:
    // unreadable.
    let mut modules = Some(HashSet::new());
    let shared: BTreeMap<u64, Option<Vec<String>>> = complete
        .difference(&uncommitted)
        .map(|&id| match read_checkpoint(storage, id) {
            Ok(metadata) => {
                if let Some(m) = modules.as_mut() {
                    m.extend(metadata.stored_modules().map(str::to_string));
                }
                (id, Some(metadata.shared_files()))
            }
            Err(e) => {
                tracing::warn!(checkpoint = id, error = %e, "cannot read a checkpoint an earlier run left; keeping it, every shared file and every module");
                modules = None;
                (id, None)
            }
        })
        .collect();
    let below = match sweep {
        Sweep::OnlyWriter => u64::MAX,
        Sweep::EarlierClaims { below } => below,
    };
    // Cleaning up is not worth failing the run for: what cannot be deleted
    // now is found again by the next resume.
    if let Err(e) = sweep_unreachable(storage, &objects, &shared, below) {
        tracing::warn!(error = %e, "cannot delete what an earlier run left unfinished; the job goes on");
    }
    match modules.map(|keep| super::modules::sweep(storage, &keep)) {
        Some(Ok(0)) | None => {}
        Some(Ok(n)) => tracing::info!(modules = n, "deleted stored modules no checkpoint names any more"),
        Some(Err(e)) => tracing::warn!(error = %e, "cannot delete stored modules no checkpoint names; the job goes on"),
    }
    let resumed = resumed.unwrap_or(0);
    Ok(shared.into_iter().filter(|&(id, _)| id < resumed).filter_map(|(id, files)| Some((id, files?))).collect())
}

/// Of the `complete` checkpoints, those earlier claims wrote but never
/// committed: above the committed one (`resumed`), below the run's claim.
/// Empty when nothing was committed yet: the directory may then hold
/// checkpoints of runs from before cluster mode, which no claim wrote.
fn uncommitted(complete: &BTreeSet<u64>, resumed: Option<u64>, sweep: Sweep) -> BTreeSet<u64> {
    match (sweep, resumed) {
        (Sweep::EarlierClaims { below }, Some(committed)) => {
            complete.iter().copied().filter(|&id| id > committed && id < below).collect()
        }
        _ => BTreeSet::new(),
    }
}

/// Checkpoint `id`'s `_metadata`, or why it cannot be read.
fn read_checkpoint(storage: &CheckpointStorage, id: u64) -> Result<CheckpointMetadata, StorageError> {
    let bytes = storage.read_metadata(id)?;
    CheckpointMetadata::decode(&bytes)
        .map_err(|e| StorageError::Corrupt { location: storage.checkpoint_location(id), message: e.to_string() })
}

/// Deletes the half-written files, then the objects no checkpoint reaches.
fn sweep_unreachable(
    storage: &CheckpointStorage,
    objects: &[String],
    shared: &BTreeMap<u64, Option<Vec<String>>>,
    below: u64,
) -> Result<(), StorageError> {
    let staged = storage.delete_staged()?;
    if staged > 0 {
        tracing::info!(files = staged, "deleted files an earlier run's writes left half written");
    }
    let (mut unfinished, unused) = unreachable_objects(objects, shared, below);
    if !unfinished.is_empty() || !unused.is_empty() {
        let dirs: BTreeSet<&str> = unfinished.iter().filter_map(|o| o.split('/').next()).collect();
        tracing::info!(unfinished = ?dirs, unused_shared_files = unused.len(), "deleting what an earlier run left unfinished");
    }
    // A complete checkpoint that was never committed loses its `_metadata`
    // first, so a deletion cut short never leaves one that looks complete
    // with files missing.
    unfinished.sort_by_key(|o| !o.ends_with("/_metadata"));
    for object in unfinished.iter().chain(&unused) {
        storage.delete_object(object)?;
    }
    Ok(())
}

/// The checkpoint id of `object` when it is a `chk-<n>/_metadata`.
fn metadata_of(object: &str) -> Option<u64> {
    let (dir, file) = object.split_once('/')?;
    if file != "_metadata" {
        return None;
    }
    dir.strip_prefix("chk-")?.parse().ok()
}

/// The checkpoint id of `object` when it lies in a `chk-<n>/` directory.
fn checkpoint_of(object: &str) -> Option<u64> {
    object.split_once('/')?.0.strip_prefix("chk-")?.parse().ok()
}

/// Of `objects`, those in directories of checkpoints below `below` without
/// `_metadata`, and the shared files no complete checkpoint in `shared`
/// uses (none when one of them could not be read).
fn unreachable_objects(
    objects: &[String],
    shared: &BTreeMap<u64, Option<Vec<String>>>,
    below: u64,
) -> (Vec<String>, Vec<String>) {
    let unfinished = objects
        .iter()
        .filter(|o| checkpoint_of(o).is_some_and(|id| id < below && !shared.contains_key(&id)))
        .cloned()
        .collect();
    let Some(used) = shared.values().try_fold(HashSet::new(), |mut used, files| {
        used.extend(files.as_ref()?.iter().map(String::as_str));
        Some(used)
    }) else {
        return (unfinished, Vec::new());
    };
    let unused = objects.iter().filter(|o| o.starts_with("shared/") && !used.contains(o.as_str())).cloned().collect();
    (unfinished, unused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unfinished_checkpoints_and_unused_shared_files_are_found() {
        let objects = names(&[
            "chk-3/_metadata",
            "chk-3/counter-0/MANIFEST",
            "chk-4/counter-0/MANIFEST",
            "chk-4/counter-0/WEIR-DESCRIPTORS",
            "chk-12/x",
            "shared/a/1.sst",
            "shared/a/2.sst",
            "shared/b/9.sst",
            "recordings/counter/0/from-3.rec",
            "_commits/1",
            "modules/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.wasm",
        ]);
        let shared = BTreeMap::from([(3, Some(names(&["shared/a/1.sst"])))]);
        let (unfinished, unused) = unreachable_objects(&objects, &shared, u64::MAX);
        assert_eq!(unfinished, names(&["chk-4/counter-0/MANIFEST", "chk-4/counter-0/WEIR-DESCRIPTORS", "chk-12/x"]));
        assert_eq!(unused, names(&["shared/a/2.sst", "shared/b/9.sst"]));
        // Below a cluster claim's first id: the claim's own are left.
        assert_eq!(
            unreachable_objects(&objects, &shared, 12).0,
            names(&["chk-4/counter-0/MANIFEST", "chk-4/counter-0/WEIR-DESCRIPTORS"])
        );
    }

    #[test]
    fn an_unreadable_checkpoint_keeps_every_shared_file() {
        let objects = names(&["chk-3/_metadata", "chk-5/_metadata", "chk-6/y", "shared/a/2.sst"]);
        let shared = BTreeMap::from([(3, Some(Vec::new())), (5, None)]);
        let (unfinished, unused) = unreachable_objects(&objects, &shared, u64::MAX);
        assert_eq!(unfinished, names(&["chk-6/y"]));
        assert!(unused.is_empty());
    }

    #[test]
    fn only_earlier_claims_checkpoints_above_the_committed_one_are_uncommitted() {
        let complete = BTreeSet::from([4, 7, 1_000_000_003, 1_000_000_005, 2_000_000_001]);
        let claim = Sweep::EarlierClaims { below: 2_000_000_001 };
        assert_eq!(uncommitted(&complete, Some(1_000_000_003), claim), BTreeSet::from([1_000_000_005]));
        // Nothing committed yet: checkpoints from before cluster mode stay.
        assert!(uncommitted(&complete, None, claim).is_empty());
        // The job's only writer keeps checkpoints newer than the one it
        // resumed from (damaged ones the restore skipped).
        assert!(uncommitted(&complete, Some(4), Sweep::OnlyWriter).is_empty());
    }

    #[test]
    fn only_checkpoint_directories_name_checkpoints() {
        assert_eq!(metadata_of("chk-17/_metadata"), Some(17));
        assert_eq!(metadata_of("chk-17/op/_metadata"), None);
        assert_eq!(metadata_of("chk-x/_metadata"), None);
        assert_eq!(checkpoint_of("chk-9/a/b"), Some(9));
        assert_eq!(checkpoint_of("chk-9"), None);
        assert_eq!(checkpoint_of("savepoint-chk-9/a"), None);
    }
}
