//! The transactional file sink's files, as Flink's `FileSink` keeps them:
//! records go to a hidden in-progress file; at checkpoint *n*'s barrier it
//! is closed, synced and renamed `.part-<n>.pending`; when *n* completes
//! (or any later id: completion subsumes), pending files are renamed to
//! `part-<n>`, which is the only name readers should look at. Renames are
//! atomic, so a reader sees a part file whole or not at all.
//!
//! On restore from checkpoint *n*, the files pending in *n* are published
//! (their records are covered by *n*) and every other unpublished file is
//! deleted (its records come after *n* and will be written again). Files
//! published by checkpoints after *n* (a restore from an older checkpoint,
//! when newer ones are damaged) are withdrawn too, with a warning: their
//! records come again, and keeping them would duplicate them.
//!
//! Every rename is made durable (the directory fsynced) before the state
//! that relies on it is reported: a sealed file before the checkpoint
//! records it as pending, a publish before the sink acknowledges it, a
//! restore's withdrawals before new output is written.
//!
//! The directory may hold the user's own files: only names Weir writes
//! ([`WeirName`]: `.inprogress-<pid>`, `.part-<tag>.pending`, `part-<tag>`,
//! the tag a zero-padded checkpoint id or `end`) are ever deleted or
//! counted as output, so `part-notes` is left alone. No link is followed:
//! the in-progress file is opened with `O_NOFOLLOW`, a link under one of
//! Weir's names is removed as a link (never what it names), and a pending
//! file that is not a regular file is not published.

use crate::checkpoint::metadata::SinkState;
use crate::runtime::error::ConnectorError;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const IN_PROGRESS: &str = ".inprogress";

/// A name the sink writes, parsed: nothing else in its directory is its.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeirName {
    /// `.inprogress-<pid>`.
    InProgress,
    /// `.part-<tag>.pending`.
    Pending(Tag),
    /// `part-<tag>`.
    Published(Tag),
}

/// What a part file's name says it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Checkpoint `n`'s barrier sealed it.
    Checkpoint(u64),
    /// The job's end sealed it.
    End,
}

impl Tag {
    fn parse(tag: &str) -> Option<Tag> {
        match tag {
            "end" => Some(Tag::End),
            // Digits only: `u64::from_str` would also take a leading `+`.
            t if !t.is_empty() && t.len() <= 20 && t.bytes().all(|b| b.is_ascii_digit()) => {
                t.parse().ok().map(Tag::Checkpoint)
            }
            _ => None,
        }
    }
}

impl WeirName {
    /// What `name` is, if it is one of the sink's.
    pub fn parse(name: &str) -> Option<WeirName> {
        if let Some(pid) = name.strip_prefix(IN_PROGRESS).and_then(|n| n.strip_prefix('-')) {
            return (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(WeirName::InProgress);
        }
        if let Some(tag) = name.strip_prefix(".part-").and_then(|n| n.strip_suffix(".pending")) {
            return Tag::parse(tag).map(WeirName::Pending);
        }
        name.strip_prefix("part-").and_then(Tag::parse).map(WeirName::Published)
    }
}

/// The sink's directory and the files it has not published yet.
pub struct PartFiles {
    dir: PathBuf,
    /// The in-progress file, if anything was written since the last seal,
    /// and its writer while it is open (`None`: parked, closed to bound the
    /// files a bucketed sink holds open, opened again to append).
    current: Option<(Option<BufWriter<File>>, PathBuf)>,
    /// Pending files, in order.
    pending: Vec<String>,
    /// The write buffer of the in-progress file.
    buffer: usize,
}

/// The write buffer of a sink's only in-progress file.
const BUFFER: usize = 1 << 20;

/// The name a pending file is published under.
pub fn published_name(pending: &str) -> Option<String> {
    let WeirName::Pending(_) = WeirName::parse(pending)? else { return None };
    let tag = pending.strip_prefix(".part-")?.strip_suffix(".pending")?;
    Some(format!("part-{tag}"))
}

impl PartFiles {
    /// Opens `dir` for a fresh run: removes unpublished files left by a
    /// run that was never checkpointed, and refuses a directory that holds
    /// published output (it would mix two runs).
    pub fn fresh(dir: &Path) -> Result<Self, ConnectorError> {
        crate::durable::create_dir_all(dir).map_err(io("create", dir))?;
        let published = list(dir)?
            .into_iter()
            .filter(|n| matches!(WeirName::parse(n), Some(WeirName::Published(_))))
            .collect::<Vec<_>>();
        if !published.is_empty() {
            return Err(ConnectorError::Refused(format!(
                "{} already holds published output of an earlier run ({}{}): remove it to start over, or continue that run with --resume",
                dir.display(),
                published[0],
                if published.len() > 1 { format!(" and {} more", published.len() - 1) } else { String::new() }
            )));
        }
        let files = PartFiles::unchecked(dir, BUFFER);
        files.discard_unpublished(&[])?;
        Ok(files)
    }

    /// Opens `dir` as of checkpoint `id` (`None`: the job's final one),
    /// whose pending files were `pending`: publishes them, discards
    /// everything else unpublished, and withdraws files published by later
    /// checkpoints.
    pub fn restore(dir: &Path, id: Option<u64>, pending: &[String]) -> Result<Self, ConnectorError> {
        crate::durable::create_dir_all(dir).map_err(io("create", dir))?;
        let mut files = PartFiles { pending: pending.to_vec(), ..PartFiles::unchecked(dir, BUFFER) };
        files.publish_all()?;
        files.discard_unpublished(&[])?;
        if let Some(id) = id {
            // Published names carry the checkpoint id, zero-padded, or "end"
            // (the job's last output, after every checkpoint). Anything
            // else is not the sink's, whatever its name starts with.
            let later: Vec<String> = list(dir)?
                .into_iter()
                .filter(|n| match WeirName::parse(n) {
                    Some(WeirName::Published(Tag::Checkpoint(c))) => c > id,
                    Some(WeirName::Published(Tag::End)) => true,
                    _ => false,
                })
                .collect();
            if !later.is_empty() {
                tracing::warn!(
                    dir = %dir.display(),
                    files = ?later,
                    "withdrawing output published after checkpoint {id}: the job restarts from an older checkpoint and writes these records again"
                );
                for name in later {
                    remove_own(dir, &name)?;
                }
                // Withdrawn for good: a power loss must not bring them back
                // beside the records written again.
                crate::durable::sync(dir).map_err(io("sync", dir))?;
            }
        }
        Ok(files)
    }

    /// `dir` with nothing pending and no look at what is in it: for a
    /// bucket of a sink whose whole tree was opened as fresh or restored
    /// (`super::buckets`), with a write buffer of `buffer` bytes.
    pub fn unchecked(dir: &Path, buffer: usize) -> Self {
        PartFiles { dir: dir.to_path_buf(), current: None, pending: Vec::new(), buffer }
    }

    /// The files sealed and not yet published, in order.
    pub fn pending(&self) -> &[String] {
        &self.pending
    }

    /// Whether anything was written since the last seal.
    pub fn is_writing(&self) -> bool {
        self.current.is_some()
    }

    /// Whether the in-progress file is open.
    pub fn is_open(&self) -> bool {
        matches!(self.current, Some((Some(_), _)))
    }

    /// Closes the in-progress file, its lines flushed, to be opened again
    /// by the next write: a bucketed sink keeps a bounded number open.
    pub fn park(&mut self) -> Result<(), ConnectorError> {
        if let Some((w @ Some(_), path)) = &mut self.current {
            let writer = w.take().expect("matched Some");
            writer.into_inner().map_err(|e| io("write", path)(e.into_error()))?;
        }
        Ok(())
    }

    fn discard_unpublished(&self, keep: &[String]) -> Result<(), ConnectorError> {
        for name in list(&self.dir)? {
            let unpublished = matches!(WeirName::parse(&name), Some(WeirName::InProgress | WeirName::Pending(_)));
            if unpublished && !keep.contains(&name) {
                remove_own(&self.dir, &name)?;
            }
        }
        Ok(())
    }

    /// Writes one line to the in-progress file.
    pub fn write_line(&mut self, line: &[u8]) -> Result<(), ConnectorError> {
        let (w, path) = match &mut self.current {
            Some((w @ Some(_), path)) => (w.as_mut().expect("matched Some"), &*path),
            Some((w, path)) => {
                // Parked: the lines before are in the file; append to it.
                let f = open_no_link(path, false).map_err(io("open", path))?;
                (&mut *w.insert(BufWriter::with_capacity(self.buffer, f)), &*path)
            }
            None => {
                let path = self.dir.join(format!("{IN_PROGRESS}-{}", std::process::id()));
                let f = open_no_link(&path, true).map_err(io("create", &path))?;
                let (w, path) = self.current.insert((Some(BufWriter::with_capacity(self.buffer, f)), path));
                (w.as_mut().expect("just made"), &*path)
            }
        };
        w.write_all(line).and_then(|_| w.write_all(b"\n")).map_err(io("write", path))
    }

    /// Closes the in-progress file (if it has anything) as pending under
    /// `tag` (a checkpoint id, or "end"), and returns the sink's state.
    pub fn seal(&mut self, tag: &str) -> Result<SinkState, ConnectorError> {
        if let Some((w, path)) = self.current.take() {
            let f = match w {
                Some(w) => w.into_inner().map_err(|e| io("write", &path)(e.into_error()))?,
                None => open_no_link(&path, false).map_err(io("open", &path))?,
            };
            f.sync_all().map_err(io("sync", &path))?;
            let name = format!(".part-{tag}.pending");
            let to = self.dir.join(&name);
            std::fs::rename(&path, &to).map_err(io("rename", &path))?;
            crate::durable::sync(&self.dir).map_err(io("sync", &self.dir))?;
            self.pending.push(name);
        }
        Ok(SinkState::Parts { pending: self.pending.clone() })
    }

    /// Publishes every pending file: the checkpoint covering them completed.
    pub fn publish_all(&mut self) -> Result<(), ConnectorError> {
        self.publish(|_| true)
    }

    /// Publishes the files pending for checkpoints up to `id`: checkpoint
    /// `id` completed, and files sealed at later barriers (or at the end)
    /// wait for theirs.
    pub fn publish_through(&mut self, id: u64) -> Result<(), ConnectorError> {
        self.publish(|name| {
            let tag = name.strip_prefix(".part-").and_then(|n| n.strip_suffix(".pending"));
            tag.and_then(|t| t.parse::<u64>().ok()).is_some_and(|t| t <= id)
        })
    }

    /// Deletes every pending file and what is in progress: the job stopped
    /// with a savepoint, and these records come after it.
    pub fn discard_pending(&mut self) -> Result<(), ConnectorError> {
        if let Some((_, path)) = self.current.take() {
            std::fs::remove_file(&path).map_err(io("remove", &path))?;
        }
        for name in std::mem::take(&mut self.pending) {
            let path = self.file(&name)?;
            std::fs::remove_file(&path).map_err(io("remove", &path))?;
        }
        Ok(())
    }

    /// A file of the sink's directory by a name a checkpoint recorded.
    fn file(&self, name: &str) -> Result<PathBuf, ConnectorError> {
        crate::paths::join_under(&self.dir, name).map_err(|e| ConnectorError::Inconsistent(e.to_string()))
    }

    fn publish(&mut self, due: impl Fn(&str) -> bool) -> Result<(), ConnectorError> {
        let (now, later): (Vec<String>, Vec<String>) =
            std::mem::take(&mut self.pending).into_iter().partition(|n| due(n));
        self.pending = later;
        if !now.is_empty() {
            crate::crash_point::crash_point("sink.publishing");
        }
        for name in now {
            let from = self.file(&name)?;
            let to = self.dir.join(
                published_name(&name)
                    .ok_or_else(|| ConnectorError::Inconsistent(format!("{name} is not a pending part file")))?,
            );
            let kind = std::fs::symlink_metadata(&from).ok().map(|m| m.file_type());
            if kind.is_some_and(|k| !k.is_file()) {
                return Err(ConnectorError::Inconsistent(format!(
                    "{} is not a regular file (a link or a special file): not published",
                    from.display()
                )));
            }
            if kind.is_some() {
                std::fs::rename(&from, &to).map_err(io("publish", &from))?;
                crate::crash_point::crash_point("sink.published");
            } else if std::fs::symlink_metadata(&to).is_err() {
                return Err(ConnectorError::Inconsistent(format!(
                    "{} is missing: the checkpoint lists it as pending and it was never published",
                    from.display()
                )));
            }
        }
        // Make the renames durable before anyone is told they happened.
        crate::durable::sync(&self.dir).map_err(io("sync", &self.dir))
    }
}

/// Opens the in-progress file at `path` for writing, never through a link
/// planted under its name: created empty (`create`), or to append to.
fn open_no_link(path: &Path, create: bool) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(create)
        .truncate(create)
        .append(!create)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// An I/O failure of `op` on `path`.
fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ConnectorError {
    let path = path.to_path_buf();
    move |source| ConnectorError::Io { op, path, cause: source }
}

/// Removes `name`, one of the sink's own names, from `dir`: a file, or a
/// link planted under the name (the link itself, never what it names);
/// anything else there (a directory) is left, with a warning.
fn remove_own(dir: &Path, name: &str) -> Result<(), ConnectorError> {
    debug_assert!(WeirName::parse(name).is_some(), "{name} is not the sink's");
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_file() || m.file_type().is_symlink() => {
            std::fs::remove_file(&path).map_err(io("remove", &path))
        }
        Ok(_) => {
            tracing::warn!(path = %path.display(), "not a file the sink wrote: left as it is");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("remove", &path)(e)),
    }
}

fn list(dir: &Path) -> Result<Vec<String>, ConnectorError> {
    let entries = std::fs::read_dir(dir).map_err(io("read", dir))?;
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        list(dir).unwrap()
    }

    #[test]
    fn files_go_in_progress_then_pending_then_published() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = PartFiles::fresh(tmp.path()).unwrap();
        p.write_line(b"a").unwrap();
        assert_eq!(names(tmp.path()), [format!("{IN_PROGRESS}-{}", std::process::id())]);
        let state = p.seal("01").unwrap();
        assert_eq!(state, SinkState::Parts { pending: vec![".part-01.pending".into()] });
        assert_eq!(p.seal("02").unwrap(), state, "nothing written: no new file");
        p.write_line(b"b").unwrap();
        p.seal("03").unwrap();
        p.write_line(b"c").unwrap();
        p.seal("end").unwrap();
        p.publish_all().unwrap();
        assert_eq!(names(tmp.path()), ["part-01", "part-03", "part-end"], "name order is output order");
        assert_eq!(std::fs::read_to_string(tmp.path().join("part-03")).unwrap(), "b\n");
    }

    #[test]
    fn a_restore_publishes_what_the_checkpoint_had_pending_and_drops_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = PartFiles::fresh(tmp.path()).unwrap();
        p.write_line(b"covered").unwrap();
        let SinkState::Parts { pending } = p.seal("4").unwrap() else { unreachable!() };
        p.write_line(b"after").unwrap();
        p.seal("5").unwrap(); // checkpoint 5 never completes
        p.write_line(b"in progress").unwrap();
        drop(p); // the process dies
        PartFiles::restore(tmp.path(), Some(4), &pending).unwrap();
        assert_eq!(names(tmp.path()), ["part-4"]);
        // Restoring again (a crash during the restore) changes nothing.
        PartFiles::restore(tmp.path(), Some(4), &pending).unwrap();
        assert_eq!(names(tmp.path()), ["part-4"]);
        // A fresh run refuses to mix with published output.
        let err = PartFiles::fresh(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("already holds published output") && err.contains("part-4"), "{err}");
        // An older checkpoint withdraws what later ones published.
        PartFiles::restore(tmp.path(), Some(3), &[]).unwrap();
        assert!(names(tmp.path()).is_empty());
    }

    #[test]
    fn only_the_sinks_own_names_are_deleted_and_no_link_is_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        std::fs::create_dir(&dir).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        for user in ["part-notes", ".part-notes", ".inprogress-notes", "part-0x1", ".part-1.pending.bak"] {
            std::fs::write(dir.join(user), b"mine").unwrap();
        }
        std::os::unix::fs::symlink(&victim, dir.join(format!("{IN_PROGRESS}-{}", std::process::id()))).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(".part-0000000002.pending")).unwrap();
        // A fresh run: the user's files stay and do not count as output;
        // the links under the sink's names go, their target stays.
        let mut p = PartFiles::fresh(&dir).unwrap();
        let mine = ["part-notes", ".part-notes", ".inprogress-notes", "part-0x1", ".part-1.pending.bak"];
        let mut want: Vec<&str> = mine.to_vec();
        want.sort();
        assert_eq!(names(&dir), want);
        p.write_line(b"out").unwrap();
        p.seal("0000000001").unwrap();
        p.publish_all().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A restore from a savepoint numbered 0 withdraws the sink's own
        // later output only.
        PartFiles::restore(&dir, Some(0), &[]).unwrap();
        assert_eq!(names(&dir), want);
        assert_eq!(WeirName::parse("part-end"), Some(WeirName::Published(Tag::End)));
        assert_eq!(WeirName::parse("part-+1"), None);
        assert_eq!(WeirName::parse(".inprogress-12"), Some(WeirName::InProgress));
        assert_eq!(published_name(".part-notes.pending"), None);
    }
}
