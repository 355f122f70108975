//! Where a run starts: a fresh start (refused if the job already has
//! checkpoints it would collide with), the latest usable checkpoint
//! (`--resume`), a given checkpoint or a savepoint. Everything is read and
//! checked before any module is compiled, so a bad directory or a damaged
//! checkpoint is reported at once. `--resume` also passes over a checkpoint
//! whose swapped module is not in the job's module store as recorded
//! (written by an earlier version, or the copy missing or altered): its
//! state belongs to a module no resume may load from elsewhere.

use super::error::{JobError, StartError};
use crate::checkpoint::leftovers::{self, Inherited, Sweep};
use crate::checkpoint::modules;
use crate::checkpoint::restore::origin::{self, Origin};
use crate::checkpoint::restore::{self, RestoreError, Restored, Target};
use crate::checkpoint::storage::{CLAIM_IDS, CheckpointStorage, LogPosition};
use crate::config::LoadedJob;
use crate::config::job::JobSpec;
use crate::config::units::human_bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a run starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StartFrom {
    /// The beginning (refused if the job already has checkpoints in a
    /// durable directory, which a fresh run would collide with).
    #[default]
    Beginning,
    /// The latest usable checkpoint of the job (`--resume`); the
    /// beginning if it has none.
    Latest,
    /// A given checkpoint (`--from-checkpoint <uri>`).
    Checkpoint {
        /// `<dir>/<job>/chk-<n>`.
        uri: String,
        /// State of operators the job no longer has is dropped, not refused.
        allow_non_restored_state: bool,
    },
    /// A savepoint (`--from-savepoint <uri>`).
    Savepoint {
        /// The savepoint's directory.
        uri: String,
        /// State of operators the job no longer has is dropped, not refused.
        allow_non_restored_state: bool,
    },
}

impl StartFrom {
    fn allows_non_restored_state(&self) -> bool {
        matches!(
            self,
            StartFrom::Checkpoint { allow_non_restored_state: true, .. }
                | StartFrom::Savepoint { allow_non_restored_state: true, .. }
        )
    }
}

/// What a run starts with.
pub struct Start {
    /// Checkpoint storage, when the job checkpoints or restores.
    pub storage: Option<Arc<CheckpointStorage>>,
    /// The highest checkpoint id in storage (new ids continue after it).
    pub highest_id: u64,
    /// The checkpoint or savepoint to restore, checked.
    pub restored: Option<Arc<Restored>>,
    /// On `--resume`, the job's complete checkpoints older than the one
    /// restored, which this run's retention deletes as its own.
    pub inherited: Vec<Inherited>,
    /// Cluster mode: where the run stands in the commit log after its
    /// claim. The coordinator owns it from here on.
    pub log: Option<LogPosition>,
}

/// Opens storage and reads what `start` names.
pub fn prepare(job: &LoadedJob, start: &StartFrom) -> Result<Start, JobError> {
    let spec = &job.spec;
    let settings = &job.settings;
    let restoring = *start != StartFrom::Beginning;
    if restoring && settings.storage.dir.is_none() && *start == StartFrom::Latest {
        return Err(StartError::ResumeNeedsDir { job: spec.name.clone() }.into());
    }
    let storage = if settings.checkpointing.is_some() || restoring {
        Some(Arc::new(CheckpointStorage::open(&settings.storage, &spec.name)?))
    } else {
        None
    };
    let existing = match &storage {
        Some(s) if s.is_durable() => s.list_checkpoints()?,
        _ => Vec::new(),
    };
    // The lowest id this run's checkpoints may take, past the restored one.
    let mut first_id = 0;
    let mut log = None;
    // On --resume, what the last run started from, if not a checkpoint of
    // its own.
    let mut resumed_origin = None;
    // How long finding and reading the checkpoint takes: a restart's or
    // a cluster takeover's first phase.
    let began = std::time::Instant::now();
    let restored = match start {
        StartFrom::Beginning => {
            if let (Some(&latest), Some(s)) = (existing.last(), &storage) {
                return Err(StartError::HasCheckpoints {
                    job: spec.name.clone(),
                    dir: s.display().to_string(),
                    latest,
                }
                .into());
            }
            None
        }
        StartFrom::Latest if storage.as_ref().is_some_and(|s| s.is_fenced()) => {
            // Cluster mode: the checkpoint the commit log names, claimed so
            // that a run that started before this one commits nothing more.
            let s = storage.as_ref().expect("checked");
            let claimed = s.claim()?;
            first_id = claimed.seq.saturating_mul(CLAIM_IDS);
            log = Some(claimed.position());
            tracing::info!(
                dir = %s.display(),
                claim = claimed.seq,
                checkpoint = ?claimed.checkpoint,
                took_ms = began.elapsed().as_millis() as u64,
                "claimed the job's commit log"
            );
            claimed.checkpoint.map(|id| restore::load(s, id)).transpose()?
        }
        StartFrom::Latest => {
            let s = storage.as_ref().expect("opened for a restore");
            resumed_origin = origin::read(s)?;
            let mut hashes = BTreeMap::new();
            let mut usable = |r: &Restored| swapped_modules_kept(spec, &mut hashes, r);
            let latest = restore::load_latest_with(s, resumed_origin.as_ref(), &settings.storage, &mut usable)?;
            if latest.is_none() {
                tracing::warn!(dir = %s.display(), "--resume: no checkpoint yet; starting from the beginning");
            }
            latest
        }
        StartFrom::Checkpoint { uri, .. } => {
            let target = match Target::parse(uri) {
                t @ Target::Checkpoint { .. } => t,
                Target::Savepoint(_) => return Err(restore::RestoreError::BadUri(uri.clone()).into()),
            };
            if let Target::Checkpoint { job, .. } = &target
                && *job != spec.name
            {
                tracing::warn!(checkpoint = %uri, "restoring a checkpoint of job '{job}' into job '{}'", spec.name);
            }
            Some(target.load(&settings.storage)?)
        }
        StartFrom::Savepoint { uri, .. } => {
            let r = restore::load_savepoint(uri, &settings.storage)?;
            if r.metadata.job != spec.name {
                tracing::warn!(savepoint = %uri, "restoring a savepoint of job '{}' into job '{}'", r.metadata.job, spec.name);
            }
            Some(r)
        }
    };
    if let Some(r) = &restored {
        check_compatible(job, r, start.allows_non_restored_state())?;
        tracing::info!(
            checkpoint = %r.location,
            size = %human_bytes(r.metadata.state_size()),
            found_in_ms = began.elapsed().as_millis() as u64,
            "restoring"
        );
    }
    let highest_id =
        existing.last().copied().unwrap_or(0).max(restored.as_ref().map_or(0, |r| r.metadata.id)).max(first_id);
    if let Some(s) = storage.as_ref().filter(|s| s.is_durable() && !s.is_fenced()) {
        record_origin(s, start, highest_id)?;
    }
    // What earlier runs of the job left: only on --resume, where the
    // directory is the job's own and its latest state is what goes on. In
    // cluster mode only the checkpoints of earlier claims, which can no
    // longer complete (this run's claim fenced them).
    let inherited = match (&storage, start) {
        (Some(s), StartFrom::Latest) if s.is_durable() => {
            let sweep = if s.is_fenced() { Sweep::EarlierClaims { below: first_id + 1 } } else { Sweep::OnlyWriter };
            // Resumed from the origin (a savepoint, or a checkpoint kept
            // elsewhere): the job's checkpoints all predate it.
            let resumed = match (&restored, &resumed_origin) {
                (Some(r), Some(o)) if r.location != s.checkpoint_location(r.metadata.id) => {
                    Some(o.after.saturating_add(1))
                }
                (r, _) => r.as_ref().map(|r| r.metadata.id),
            };
            leftovers::take_over(s, resumed, sweep)?
        }
        _ => Vec::new(),
    };
    Ok(Start { storage, highest_id, restored: restored.map(Arc::new), inherited, log })
}

/// Writes down what a run starts from, for a later `--resume` (see
/// [`origin`]): a savepoint or given checkpoint is recorded, a fresh start
/// deletes the record, a resume leaves it as it is. `highest_id`: the
/// highest checkpoint id before this run's.
fn record_origin(storage: &CheckpointStorage, start: &StartFrom, highest_id: u64) -> Result<(), JobError> {
    match start {
        StartFrom::Beginning => origin::clear(storage)?,
        StartFrom::Latest => {}
        StartFrom::Checkpoint { uri, .. } | StartFrom::Savepoint { uri, .. } => {
            origin::record(storage, &Origin { uri: uri.clone(), after: highest_id })?
        }
    }
    Ok(())
}

/// Whether the modules swapped in before checkpoint `r` that this job
/// would run are in `r`'s module store with the bytes `_metadata` records.
/// Without them `r` cannot resume as it was taken (its state is theirs), so
/// `--resume` passes over it. A swapped module the job file names itself,
/// or one whose replaced module the job file names no more, is not needed
/// (see [`super::modules::load`]). `hashes` keeps the job file's modules'
/// SHA-256, by uid, read once when first needed.
fn swapped_modules_kept(
    spec: &JobSpec,
    hashes: &mut BTreeMap<String, Option<String>>,
    r: &Restored,
) -> Result<(), RestoreError> {
    // A finished job's checkpoint runs no module: resuming it only
    // publishes what its sinks held.
    if r.metadata.savepoint || r.metadata.finished {
        return Ok(());
    }
    for (uid, m) in &r.metadata.swapped {
        let Some(op) = spec.operators.iter().find(|o| o.uid == *uid) else { continue };
        // A job file's module that cannot be read is reported when it is
        // loaded; until then the swapped module counts as needed.
        let named = hashes.entry(uid.clone()).or_insert_with(|| modules::sha256_of_file(&op.module).ok());
        if named.as_deref().is_some_and(|n| n == m.sha256 || n != m.replaced_sha256) {
            continue;
        }
        modules::read_named(&r.storage, m.stored.as_deref(), &m.sha256).map_err(|cause| {
            RestoreError::SwappedModule {
                location: r.location.clone(),
                uid: uid.clone(),
                path: m.path.clone(),
                cause: Box::new(cause),
            }
        })?;
    }
    Ok(())
}

/// Refuses a checkpoint this job cannot take; says what a restore changes.
fn check_compatible(job: &LoadedJob, r: &Restored, allow_non_restored_state: bool) -> Result<(), StartError> {
    let m = &r.metadata;
    let spec = &job.spec;
    if m.max_parallelism != spec.max_parallelism {
        tracing::info!(
            "{} was taken with max_parallelism = {}, the job has {}: every key is re-hashed into the new key groups",
            r.location,
            m.max_parallelism,
            spec.max_parallelism
        );
    }
    let orphans: Vec<&String> =
        m.operators.keys().filter(|uid| !spec.operators.iter().any(|o| &o.uid == *uid)).collect();
    if !orphans.is_empty() {
        if !allow_non_restored_state {
            let operators = orphans.iter().map(|u| format!("'{u}'")).collect::<Vec<_>>().join(", ");
            return Err(StartError::NonRestoredState { location: r.location.clone(), operators });
        }
        for uid in orphans {
            let size: u64 = m.operators[uid].subtasks.iter().map(|h| h.size()).sum();
            tracing::warn!(operator = %uid, size = %human_bytes(size), "not restored: the job has no operator of this uid (--allow-non-restored-state)");
        }
    }
    for o in &spec.operators {
        if let Some(state) = m.operators.get(&o.uid)
            && state.parallelism != o.parallelism
        {
            tracing::warn!(
                operator = %o.uid,
                "parallelism changed from {} to {}: keyed state is redistributed by key group, operator lists are dealt out anew (union lists to every subtask), broadcast state is copied",
                state.parallelism,
                o.parallelism
            );
        }
    }
    Ok(())
}
