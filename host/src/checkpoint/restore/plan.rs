//! Which state each operator subtask takes from a checkpoint or savepoint,
//! decided without touching any file: the restore plan. Pure, so every
//! combination (checkpoint or savepoint, same or other backend, same or
//! other parallelism, same or other number of key groups) is a unit test.
//!
//! The rules:
//! - same parallelism and key groups: a subtask's key groups are exactly
//!   its predecessor's, so it reads that one snapshot only (and takes over
//!   its RocksDB files as they are when both sides are RocksDB and the
//!   checkpoint is incremental);
//! - same parallelism, other key groups: keys are re-hashed, so every old
//!   subtask's keyed state is read; operator state comes from the
//!   predecessor only;
//! - other parallelism: every old subtask's keyed state is read (only the
//!   key groups in the new range are kept), operator lists are dealt out
//!   anew, union lists go to everyone, broadcast state is copied once.

use crate::config::BackendKind;
use crate::state::snapshot::OperatorShare;

/// How an old subtask's state is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceForm {
    /// The canonical snapshot format (every savepoint, full checkpoints).
    Canonical,
    /// An incremental RocksDB checkpoint's files.
    RocksdbFiles,
}

/// What one operator subtask restores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubtaskPlan {
    /// The old subtask whose RocksDB files become this subtask's database
    /// unchanged (no conversion, no re-insertion).
    pub adopt: Option<usize>,
    /// Old subtasks whose state is read entry by entry, in order, each with
    /// the share of operator and broadcast state this subtask takes.
    pub read: Vec<(usize, OperatorShare)>,
}

/// The plan for subtask `subtask` of `parallelism`, restoring from the old
/// subtasks `sources` (one per old subtask, in order) into `backend`;
/// `same_key_groups` when the job's max parallelism did not change.
pub fn plan_subtask(
    sources: &[SourceForm],
    subtask: u32,
    parallelism: u32,
    same_key_groups: bool,
    backend: BackendKind,
) -> SubtaskPlan {
    let old_parallelism = sources.len() as u32;
    if old_parallelism == parallelism && same_key_groups {
        let own = subtask as usize;
        return match sources.get(own) {
            Some(SourceForm::RocksdbFiles) if backend == BackendKind::RocksDb => {
                SubtaskPlan { adopt: Some(own), read: Vec::new() }
            }
            Some(_) => SubtaskPlan { adopt: None, read: vec![(own, OperatorShare::All)] },
            None => SubtaskPlan::default(),
        };
    }
    let read = (0..sources.len())
        .map(|i| {
            let share = if old_parallelism != parallelism {
                OperatorShare::Rescaled { from: i as u32, to: subtask, parallelism }
            } else if i == subtask as usize {
                OperatorShare::All
            } else {
                OperatorShare::Nothing
            };
            (i, share)
        })
        .collect();
    SubtaskPlan { adopt: None, read }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BackendKind::{HashMap, RocksDb};
    use SourceForm::{Canonical, RocksdbFiles};

    #[test]
    fn nothing_to_restore_means_an_empty_plan() {
        assert_eq!(plan_subtask(&[], 0, 1, true, HashMap), SubtaskPlan::default());
    }

    #[test]
    fn same_shape_reads_only_the_predecessor_and_adopts_rocksdb_files_into_rocksdb() {
        // A full checkpoint or a savepoint (canonical), either backend.
        for backend in [HashMap, RocksDb] {
            let p = plan_subtask(&[Canonical, Canonical, Canonical], 1, 3, true, backend);
            assert_eq!(p, SubtaskPlan { adopt: None, read: vec![(1, OperatorShare::All)] });
        }
        // An incremental RocksDB checkpoint into RocksDB: taken over as is.
        let p = plan_subtask(&[RocksdbFiles, RocksdbFiles], 1, 2, true, RocksDb);
        assert_eq!(p, SubtaskPlan { adopt: Some(1), read: Vec::new() });
        // ... into the hashmap backend: converted.
        let p = plan_subtask(&[RocksdbFiles, RocksdbFiles], 1, 2, true, HashMap);
        assert_eq!(p, SubtaskPlan { adopt: None, read: vec![(1, OperatorShare::All)] });
    }

    #[test]
    fn other_parallelism_reads_every_old_subtask_and_deals_operator_state() {
        for (forms, backend) in [
            (vec![Canonical, Canonical], HashMap),
            (vec![Canonical, Canonical], RocksDb),
            (vec![RocksdbFiles, RocksdbFiles], RocksDb),
            (vec![RocksdbFiles, RocksdbFiles], HashMap),
        ] {
            let p = plan_subtask(&forms, 2, 3, true, backend);
            assert_eq!(p.adopt, None, "files of another key-group range are never taken over");
            assert_eq!(
                p.read,
                vec![
                    (0, OperatorShare::Rescaled { from: 0, to: 2, parallelism: 3 }),
                    (1, OperatorShare::Rescaled { from: 1, to: 2, parallelism: 3 }),
                ]
            );
        }
        // Scaling in: one subtask reads all three.
        let p = plan_subtask(&[Canonical; 3], 0, 1, true, HashMap);
        assert_eq!(p.read.len(), 3);
    }

    #[test]
    fn other_key_groups_at_the_same_parallelism_rehash_every_snapshot() {
        for forms in [[Canonical, Canonical], [RocksdbFiles, RocksdbFiles]] {
            let p = plan_subtask(&forms, 0, 2, false, RocksDb);
            assert_eq!(
                p,
                SubtaskPlan { adopt: None, read: vec![(0, OperatorShare::All), (1, OperatorShare::Nothing)] }
            );
        }
    }
}
