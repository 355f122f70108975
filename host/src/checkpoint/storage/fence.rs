//! The commit log of a job whose input partition can move between
//! processes (cluster mode), and with it the fence against a process that
//! lost the partition but does not know it yet (one paused past the
//! group's session timeout).
//!
//! The log is `_commits/<seq>`, one small JSON object per entry, each
//! written create-only at the sequence number right after the last one its
//! writer knows: a run claims the job when it starts (an entry after the
//! last), and commits each checkpoint with the next entry after its own
//! previous one. A write at `n` succeeds only if nobody wrote `n` before,
//! so a run that wrote `n - 1` and then `n` knows nothing came between;
//! once another run claimed, every later commit of the old run finds its
//! number taken and fails ([`StorageError::Fenced`]). The latest
//! committed checkpoint is the one the last entry names, never merely the
//! highest `chk-<n>` directory. No clocks and no leases: the store's
//! create-only write (`If-None-Match` on S3, a hard link on a local
//! directory) is the whole mechanism.
//!
//! Where a run stands in the log is a value, [`LogPosition`], that the
//! coordinator owns: [`CheckpointStorage::claim`] gives the first, each
//! commit moves it on. A sink learns it by message (at open, then with
//! each completed checkpoint) and looks at the log from there before it
//! publishes ([`CheckpointStorage::check_fence`]); nothing mutable is
//! shared between them.

use super::{CheckpointStorage, StorageError};
use object_store::{PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

/// The log's directory, in the job's.
const LOG: &str = "_commits";
/// The checkpoint ids of each claim: the run that claimed at `n` numbers
/// its checkpoints from `n * CLAIM_IDS + 1`. A run that lost the job may
/// still write the files of a checkpoint or two before its commit is
/// refused; with ids of its own, it never writes over (or, refused,
/// deletes) a file of the run that took over.
pub const CLAIM_IDS: u64 = 1_000_000_000;
/// Entries kept behind the last (older ones are deleted as it grows).
const KEEP: u64 = 256;
/// Claims tried while other runs keep writing first.
const CLAIM_TRIES: u32 = 32;
/// The most an entry may hold.
const MAX_ENTRY: u64 = 4096;

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// "claim" or "commit".
    kind: String,
    /// The latest committed checkpoint once this entry is written.
    checkpoint: Option<u64>,
    /// Who wrote it.
    owner: String,
    /// The writing run's [`Fence::run`] (absent in logs written before it
    /// was kept).
    #[serde(default)]
    run: Option<u64>,
}

/// Who this run is in the log; never changes.
#[derive(Debug)]
pub(super) struct Fence {
    owner: String,
    /// Random, this run's alone: its entries carry it, so a look at the
    /// fence from another thread (a sink about to publish) that finds
    /// entries the run wrote since the sink last heard knows they are not
    /// another run's.
    run: u64,
}

impl Fence {
    pub(super) fn new(owner: &str) -> Self {
        Fence { owner: owner.to_string(), run: rand::random() }
    }

    fn entry(&self, kind: &str, checkpoint: Option<u64>) -> Entry {
        Entry { kind: kind.into(), checkpoint, owner: self.owner.clone(), run: Some(self.run) }
    }
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    /// The claim's number in the log.
    pub seq: u64,
    /// The latest committed checkpoint, which this run resumes from.
    pub checkpoint: Option<u64>,
}

impl Claimed {
    /// Where the run stands in the log right after its claim.
    pub fn position(&self) -> LogPosition {
        LogPosition { next: self.seq + 1 }
    }
}

/// Where a run stands in the commit log: the number of the entry it
/// writes next. The coordinator owns it, and moves it on with each commit
/// ([`CheckpointStorage::write_metadata`]); a sink holds a copy it was
/// sent, which may lag behind by the run's own later entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPosition {
    next: u64,
}

/// The last entry of a commit log, as `host status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastEntry {
    /// Its number.
    pub seq: u64,
    /// A claim (a run started) rather than a commit.
    pub claim: bool,
    /// The latest committed checkpoint it names.
    pub checkpoint: Option<u64>,
    /// Who wrote it (`member <pid> on <host>` in cluster mode).
    pub owner: String,
}

fn entry_name(seq: u64) -> String {
    format!("{LOG}/{seq:020}")
}

impl CheckpointStorage {
    /// Whether commits go through the log.
    pub fn is_fenced(&self) -> bool {
        self.fence.is_some()
    }

    /// The commit log's last entry; `None` while nobody claimed the job.
    pub fn last_commit(&self) -> Result<Option<LastEntry>, StorageError> {
        Ok(self.last_entry()?.map(|(seq, e)| LastEntry {
            seq,
            claim: e.kind == "claim",
            checkpoint: e.checkpoint,
            owner: e.owner,
        }))
    }

    /// Claims the job for this run: from here on, no run that started
    /// before it can commit a checkpoint. Returns the checkpoint to resume
    /// from.
    pub fn claim(&self) -> Result<Claimed, StorageError> {
        let fence = self.fence.as_ref().expect("claim on fenced storage");
        for _ in 0..CLAIM_TRIES {
            let last = self.last_entry()?;
            let seq = last.as_ref().map_or(0, |(s, _)| s + 1);
            let checkpoint = last.and_then(|(_, e)| e.checkpoint);
            let entry = fence.entry("claim", checkpoint);
            if self.append(seq, &entry)? {
                return Ok(Claimed { seq, checkpoint });
            }
        }
        Err(StorageError::Fenced {
            location: self.location(LOG),
            seq: 0,
            why: format!("other runs kept writing first through {CLAIM_TRIES} claims"),
        })
    }

    /// Fails with [`StorageError::Fenced`] once another run claimed the
    /// job after `at`, where this run stood when the caller last heard
    /// (`None`: it never claimed):
    /// what this run holds must then not be published. Entries this run
    /// wrote since are passed over. Storage without a commit log is never
    /// fenced.
    pub fn check_fence(&self, at: Option<LogPosition>) -> Result<(), StorageError> {
        let Some(fence) = self.fence.as_ref() else { return Ok(()) };
        let Some(LogPosition { next: mut seq }) = at else {
            return Err(StorageError::Fenced {
                location: self.location(LOG),
                seq: 0,
                why: "this run never claimed the job".into(),
            });
        };
        loop {
            let relative = entry_name(seq);
            match self.runtime.block_on(self.store.head(&self.path(&relative))) {
                Err(object_store::Error::NotFound { .. }) => return Ok(()),
                Err(cause) => {
                    return Err(StorageError::Io { op: "reading", location: self.location(&relative), cause });
                }
                Ok(_) => {}
            }
            let entry = self.read_entry(seq);
            // This run's own commit, written a moment ago by another thread.
            if entry.as_ref().is_ok_and(|e| e.run == Some(fence.run)) {
                seq += 1;
                continue;
            }
            let other = entry.map(|e| e.owner).unwrap_or_else(|_| "another run".into());
            return Err(StorageError::Fenced {
                location: self.location(&relative),
                seq,
                why: format!("{other} took the job over"),
            });
        }
    }

    /// Commits checkpoint `id` (its `_metadata` is durable): the log's
    /// entry at `log`, which then moves on. Fails with
    /// [`StorageError::Fenced`] once another run claimed, or when this run
    /// never did (`log` is `None`).
    pub(super) fn append_commit(&self, id: u64, log: Option<&mut LogPosition>) -> Result<(), StorageError> {
        let Some(fence) = self.fence.as_ref() else { return Ok(()) };
        let Some(log) = log else {
            return Err(StorageError::Fenced {
                location: self.location(LOG),
                seq: 0,
                why: "this run never claimed the job".into(),
            });
        };
        let seq = log.next;
        let entry = fence.entry("commit", Some(id));
        if !self.append(seq, &entry)? {
            let other = self.read_entry(seq).map(|e| e.owner).unwrap_or_else(|_| "another run".into());
            return Err(StorageError::Fenced {
                location: self.location(&entry_name(seq)),
                seq,
                why: format!("{other} took the job over"),
            });
        }
        log.next = seq + 1;
        if seq >= KEEP {
            // Old entries only make the listing longer; a reader needs the last.
            let _ = self.delete_object(&entry_name(seq - KEEP));
        }
        Ok(())
    }

    /// Writes entry `seq` unless it exists; whether it wrote it.
    fn append(&self, seq: u64, entry: &Entry) -> Result<bool, StorageError> {
        let relative = entry_name(seq);
        let bytes = serde_json::to_vec(entry).expect("an entry encodes");
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.runtime.block_on(self.store.put_opts(&self.path(&relative), PutPayload::from(bytes), opts)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(cause) => Err(StorageError::Io { op: "writing", location: self.location(&relative), cause }),
        }
    }

    fn read_entry(&self, seq: u64) -> Result<Entry, StorageError> {
        let relative = entry_name(seq);
        let bytes = self.read_bounded(&relative, MAX_ENTRY, "not a commit-log entry Weir wrote")?;
        serde_json::from_slice(&bytes)
            .map_err(|e| StorageError::Corrupt { location: self.location(&relative), message: e.to_string() })
    }

    /// The log's last entry and its number.
    fn last_entry(&self) -> Result<Option<(u64, Entry)>, StorageError> {
        let last = self
            .list_under(LOG)?
            .iter()
            .filter_map(|name| name.strip_prefix(LOG)?.strip_prefix('/')?.parse::<u64>().ok())
            .max();
        last.map(|seq| self.read_entry(seq).map(|e| (seq, e))).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StorageSettings;

    fn open(dir: &std::path::Path, owner: &str) -> CheckpointStorage {
        let settings = StorageSettings {
            dir: Some(format!("file://{}", dir.display())),
            inline_threshold: 16,
            memory_max_state_size: 64,
            fsync: true,
            s3: crate::config::S3Settings::default(),
            fenced_by: Some(owner.into()),
            limits: crate::config::settings::ReadLimits::default(),
        };
        CheckpointStorage::open(&settings, "job-p0").unwrap()
    }

    #[test]
    fn a_later_claim_fences_every_commit_of_the_earlier_run() {
        let tmp = tempfile::tempdir().unwrap();
        let a = open(tmp.path(), "a");
        let claimed = a.claim().unwrap();
        assert_eq!(claimed, Claimed { seq: 0, checkpoint: None });
        let (a_claimed, mut a_log) = (claimed.position(), claimed.position());
        a.write_metadata(1, b"m1".to_vec(), Some(&mut a_log)).unwrap();
        a.write_metadata(2, b"m2".to_vec(), Some(&mut a_log)).unwrap();
        // From where a stood at any time: its own entries are no fence.
        assert!(a.check_fence(Some(a_claimed)).is_ok());
        assert!(a.check_fence(Some(a_log)).is_ok());
        // b takes over from a's latest commit.
        let b = open(tmp.path(), "b");
        let claimed = b.claim().unwrap();
        assert_eq!(claimed, Claimed { seq: 3, checkpoint: Some(2) });
        let mut b_log = claimed.position();
        // a may no longer publish what it holds; b may.
        let err = a.check_fence(Some(a_log)).unwrap_err();
        assert!(err.to_string().contains("b took the job over"), "{err}");
        assert!(a.check_fence(Some(a_claimed)).is_err());
        assert!(b.check_fence(Some(b_log)).is_ok());
        // a, paused through the claim, can no longer commit, and its
        // _metadata does not stay behind looking complete.
        let err = a.write_metadata(3, b"m3".to_vec(), Some(&mut a_log)).unwrap_err();
        assert!(matches!(err, StorageError::Fenced { seq: 3, .. }), "{err}");
        assert!(err.to_string().contains("b took the job over"), "{err}");
        assert_eq!(a.list_checkpoints().unwrap(), [1, 2]);
        // b commits on; a third run resumes from b's checkpoint.
        b.write_metadata(4, b"m4".to_vec(), Some(&mut b_log)).unwrap();
        assert_eq!(open(tmp.path(), "c").claim().unwrap(), Claimed { seq: 5, checkpoint: Some(4) });
        assert!(matches!(b.write_metadata(5, b"m5".to_vec(), Some(&mut b_log)), Err(StorageError::Fenced { .. })));
    }

    #[test]
    fn a_run_that_never_claimed_cannot_commit_and_old_entries_are_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        let a = open(tmp.path(), "a");
        assert!(matches!(a.write_metadata(1, b"m".to_vec(), None), Err(StorageError::Fenced { .. })));
        let mut log = a.claim().unwrap().position();
        for id in 1..=(KEEP + 10) {
            a.write_metadata(id, b"m".to_vec(), Some(&mut log)).unwrap();
        }
        let entries = a.list_under(LOG).unwrap().len() as u64;
        assert!(entries <= KEEP + 1, "{entries} entries");
        assert_eq!(open(tmp.path(), "b").claim().unwrap().checkpoint, Some(KEEP + 10));
    }

    #[test]
    fn a_look_at_the_fence_during_the_runs_own_commits_never_finds_it_fenced() {
        let tmp = tempfile::tempdir().unwrap();
        let a = std::sync::Arc::new(open(tmp.path(), "a"));
        let claimed = a.claim().unwrap().position();
        // The committer owns the position; the reader holds the copy it
        // had at the start, as a sink holds the one it was last sent.
        let committer = {
            let a = a.clone();
            let mut log = claimed;
            std::thread::spawn(move || {
                (1..=200).for_each(|id| a.write_metadata(id, b"m".to_vec(), Some(&mut log)).unwrap());
                log
            })
        };
        while !committer.is_finished() {
            a.check_fence(Some(claimed)).unwrap();
        }
        let log = committer.join().unwrap();
        a.check_fence(Some(log)).unwrap();
    }
}
