//! A `transactional-file` sink with `buckets = "key"`: each record goes to
//! the bucket its key names, a directory beneath the sink's `dir`
//! (`dt=2025-01-01/hm=10:07`), as Flink's `FileSink` with a bucket assigner
//! or its filesystem SQL connector's partitions. Each bucket holds part
//! files with the life cycle of [`super::part_files`]; a checkpoint records
//! every bucket's pending files as `<bucket>/<file>`, so a restore publishes
//! and discards bucket by bucket exactly as an unbucketed sink does.
//!
//! Keys come from operator code, and checkpoints may come from elsewhere,
//! so a bucket name is checked before a directory is made or entered
//! ([`check_bucket`]): plain components, none hidden, none that looks like
//! the sink's own file names. No link is followed into a bucket. What a
//! guest can make the host hold is bounded: at most `max_buckets` buckets
//! written between two checkpoints (a clear error past it) and
//! [`OPEN_FILES`] files open at once (the others are closed, their lines
//! flushed, and opened again to append).

use super::part_files::{PartFiles, WeirName};
use crate::checkpoint::metadata::SinkState;
use crate::paths::{BadDir, MAX_DIR_DEPTH, relative_dir};
use crate::runtime::error::ConnectorError;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// In-progress files a bucketed sink keeps open at once.
pub const OPEN_FILES: usize = 64;
/// The write buffer of each open bucket file.
const BUFFER: usize = 64 << 10;

/// `key` as a bucket name, or why it cannot be one: a relative directory
/// ([`relative_dir`]) none of whose components has the form of the sink's
/// own file names.
pub fn check_bucket(key: &[u8]) -> Result<&str, BadDir> {
    let name = std::str::from_utf8(key).map_err(|_| BadDir("it is not UTF-8".into()))?;
    relative_dir(name)?;
    if let Some(part) = name.split('/').find(|part| WeirName::parse(part).is_some()) {
        return Err(BadDir(format!("component {part:?} has the form of the sink's own file names")));
    }
    Ok(name)
}

/// One directory name of a bucket.
fn check_component(part: &str) -> Result<(), BadDir> {
    relative_dir(part)?;
    if WeirName::parse(part).is_some() {
        return Err(BadDir(format!("component {part:?} has the form of the sink's own file names")));
    }
    Ok(())
}

/// A bucketed sink's directory and the buckets written since they were
/// last all published.
pub struct Buckets {
    sink: String,
    dir: PathBuf,
    max_buckets: usize,
    /// By name: buckets written since the last seal or with files pending.
    buckets: BTreeMap<String, PartFiles>,
    /// Buckets written since the last seal.
    writing: usize,
    /// Buckets whose file is open, the least recently opened first.
    open: VecDeque<String>,
}

impl Buckets {
    /// Opens `dir` for a fresh run of sink `sink`: refuses it if any bucket
    /// holds published output, removes what earlier runs left unpublished.
    pub fn fresh(sink: &str, dir: &Path, max_buckets: usize) -> Result<Self, ConnectorError> {
        crate::durable::create_dir_all(dir).map_err(io("create", dir))?;
        for bucket in tree(dir)? {
            PartFiles::fresh(&dir.join(&bucket))?;
        }
        Ok(Buckets::empty(sink, dir, max_buckets))
    }

    /// Opens `dir` as of checkpoint `id` (`None`: the job's final one),
    /// whose pending files were `pending` (`<bucket>/<file>`, or a plain
    /// `<file>` from a sink without buckets): each bucket publishes its
    /// files, discards everything else unpublished, and withdraws files
    /// published after `id`.
    pub fn restore(
        sink: &str,
        dir: &Path,
        id: Option<u64>,
        pending: &[String],
        max_buckets: usize,
    ) -> Result<Self, ConnectorError> {
        crate::durable::create_dir_all(dir).map_err(io("create", dir))?;
        let mut by_bucket: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in pending {
            let (bucket, file) = name.rsplit_once('/').unwrap_or(("", name));
            if !bucket.is_empty() {
                check_bucket(bucket.as_bytes()).map_err(|why| {
                    ConnectorError::Inconsistent(format!(
                        "the checkpoint lists {name:?} as pending for sink '{sink}', and {bucket:?} cannot be a bucket: {why}"
                    ))
                })?;
                make_bucket(dir, bucket)?;
            }
            by_bucket.entry(bucket.to_string()).or_default().push(file.to_string());
        }
        for bucket in tree(dir)? {
            let files = by_bucket.remove(&bucket).unwrap_or_default();
            PartFiles::restore(&dir.join(&bucket), id, &files)?;
        }
        // Made above, so the walk found them; but a pending file that is
        // nowhere must still fail its restore, not pass unnoticed.
        for (bucket, files) in by_bucket {
            PartFiles::restore(&dir.join(&bucket), id, &files)?;
        }
        Ok(Buckets::empty(sink, dir, max_buckets))
    }

    fn empty(sink: &str, dir: &Path, max_buckets: usize) -> Self {
        Buckets {
            sink: sink.to_string(),
            dir: dir.to_path_buf(),
            max_buckets,
            buckets: BTreeMap::new(),
            writing: 0,
            open: VecDeque::new(),
        }
    }

    /// Writes `line` to the bucket `key` names.
    pub fn write(&mut self, key: Option<&[u8]>, line: &[u8]) -> Result<(), ConnectorError> {
        let sink = &self.sink;
        let key = key.ok_or_else(|| {
            ConnectorError::BadRecord(format!(
                "sink '{sink}': a record without a key; with buckets = \"key\" each record's key names its bucket"
            ))
        })?;
        let bucket = check_bucket(key).map_err(|why| {
            let shown = String::from_utf8_lossy(&key[..key.len().min(80)]);
            ConnectorError::BadRecord(format!("sink '{sink}': the record key {shown:?} is not a bucket name: {why}"))
        })?;
        if !self.buckets.contains_key(bucket) {
            make_bucket(&self.dir, bucket)?;
            self.buckets.insert(bucket.to_string(), PartFiles::unchecked(&self.dir.join(bucket), BUFFER));
        }
        let files = self.buckets.get_mut(bucket).expect("inserted above");
        if !files.is_writing() {
            if self.writing == self.max_buckets {
                return Err(ConnectorError::BadRecord(format!(
                    "sink '{}': more than max_buckets = {} buckets written between two checkpoints (the next was {bucket:?}); raise max_buckets or checkpoint more often",
                    self.sink, self.max_buckets
                )));
            }
            self.writing += 1;
        }
        if !files.is_open() {
            if self.open.len() == OPEN_FILES {
                let oldest = self.open.pop_front().expect("OPEN_FILES > 0");
                if let Some(f) = self.buckets.get_mut(&oldest) {
                    f.park()?;
                }
            }
            self.open.push_back(bucket.to_string());
        }
        self.buckets.get_mut(bucket).expect("inserted above").write_line(line)
    }

    /// Seals every bucket's in-progress file under `tag`; the sink's state
    /// lists every bucket's pending files.
    pub fn seal(&mut self, tag: &str) -> Result<SinkState, ConnectorError> {
        let mut pending = Vec::new();
        for (bucket, files) in &mut self.buckets {
            files.seal(tag)?;
            pending.extend(files.pending().iter().map(|f| format!("{bucket}/{f}")));
        }
        self.writing = 0;
        self.open.clear();
        Ok(SinkState::Parts { pending })
    }

    /// Publishes pending files up to checkpoint `upto` (`None`: all), and
    /// forgets buckets with nothing left to publish.
    pub fn publish(&mut self, upto: Option<u64>) -> Result<(), ConnectorError> {
        for files in self.buckets.values_mut() {
            match upto {
                Some(id) => files.publish_through(id)?,
                None => files.publish_all()?,
            }
        }
        self.buckets.retain(|_, f| f.is_writing() || !f.pending().is_empty());
        Ok(())
    }

    /// Deletes every bucket's pending and in-progress files.
    pub fn discard(&mut self) -> Result<(), ConnectorError> {
        for files in self.buckets.values_mut() {
            files.discard_pending()?;
        }
        self.buckets.clear();
        self.writing = 0;
        self.open.clear();
        Ok(())
    }
}

/// Makes the directories of `bucket` beneath `dir`, each synced into its
/// parent, refusing to pass through anything that is not a directory (a
/// link planted there would lead the sink's files elsewhere).
fn make_bucket(dir: &Path, bucket: &str) -> Result<(), ConnectorError> {
    let mut path = dir.to_path_buf();
    for part in bucket.split('/') {
        let parent = path.clone();
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_dir() => continue,
            Ok(_) => {
                return Err(ConnectorError::Inconsistent(format!(
                    "{} is not a directory (a link or a file): the sink does not write through it",
                    path.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("read", &path)(e)),
        }
        match std::fs::create_dir(&path) {
            Ok(()) => crate::durable::sync(&parent).map_err(io("sync", &parent))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("create", &path)(e)),
        }
    }
    Ok(())
}

/// The buckets under `dir` (`""`: `dir` itself), found by walking the
/// directories whose names can be bucket components, never through a link,
/// at most [`MAX_DIR_DEPTH`] deep. Other directories are the user's.
fn tree(dir: &Path) -> Result<Vec<String>, ConnectorError> {
    let mut found = vec![String::new()];
    let mut next = 0;
    while next < found.len() {
        let bucket = found[next].clone();
        next += 1;
        let depth = if bucket.is_empty() { 0 } else { bucket.split('/').count() };
        if depth == MAX_DIR_DEPTH {
            continue;
        }
        let here = dir.join(&bucket);
        let entries = std::fs::read_dir(&here).map_err(io("read", &here))?;
        let mut subdirs: Vec<String> = entries
            .filter_map(|e| e.ok())
            // `file_type` of a directory entry does not follow a link.
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| check_component(name).is_ok())
            .collect();
        subdirs.sort();
        found.extend(subdirs.into_iter().map(|s| if bucket.is_empty() { s } else { format!("{bucket}/{s}") }));
    }
    Ok(found)
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ConnectorError {
    let path = path.to_path_buf();
    move |source| ConnectorError::Io { op, path, cause: source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_tree(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for bucket in tree(dir).unwrap() {
            for e in std::fs::read_dir(dir.join(&bucket)).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_file() {
                    let name = e.file_name().into_string().unwrap();
                    let text = std::fs::read_to_string(e.path()).unwrap();
                    out.push((format!("{bucket}/{name}"), text));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn bucket_names_are_plain_relative_directories() {
        for good in ["dt=2025-01-01/hm=10:07", "a", "a/b/c", "x.y", "v%2F", "p+q,r@s"] {
            assert_eq!(check_bucket(good.as_bytes()), Ok(good), "{good}");
        }
        let long = "a".repeat(256);
        let deep = ["a"; MAX_DIR_DEPTH + 1].join("/");
        for bad in [
            "",
            "/abs",
            "a/",
            "a//b",
            "..",
            "a/../b",
            ".hidden",
            "a/.x",
            "a b",
            "a\\b",
            "part-1",
            "x/part-end",
            ".part-1.pending",
            "a\0b",
            long.as_str(),
            deep.as_str(),
        ] {
            assert!(check_bucket(bad.as_bytes()).is_err(), "{bad:?} accepted");
        }
        assert!(check_bucket(&[0xff, 0x61]).is_err());
    }

    #[test]
    fn each_bucket_is_published_at_its_checkpoint_and_a_restore_works_per_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        let mut b = Buckets::fresh("out", &dir, 100).unwrap();
        b.write(Some(b"dt=1/hm=a"), b"one").unwrap();
        b.write(Some(b"dt=1/hm=b"), b"two").unwrap();
        b.write(Some(b"dt=1/hm=a"), b"three").unwrap();
        let SinkState::Parts { pending } = b.seal("0000000001").unwrap() else { unreachable!() };
        assert_eq!(pending, ["dt=1/hm=a/.part-0000000001.pending", "dt=1/hm=b/.part-0000000001.pending"]);
        b.publish(Some(1)).unwrap();
        b.write(Some(b"dt=2/hm=a"), b"four").unwrap();
        let SinkState::Parts { pending } = b.seal("0000000002").unwrap() else { unreachable!() };
        b.write(Some(b"dt=2/hm=a"), b"lost").unwrap();
        drop(b); // the process dies before checkpoint 2 completes
        Buckets::restore("out", &dir, Some(2), &pending, 100).unwrap();
        assert_eq!(
            read_tree(&dir),
            [
                ("dt=1/hm=a/part-0000000001".to_string(), "one\nthree\n".to_string()),
                ("dt=1/hm=b/part-0000000001".to_string(), "two\n".to_string()),
                ("dt=2/hm=a/part-0000000002".to_string(), "four\n".to_string()),
            ]
        );
        // An older checkpoint withdraws what later ones published, in
        // every bucket.
        Buckets::restore("out", &dir, Some(1), &[], 100).unwrap();
        assert_eq!(read_tree(&dir).len(), 2);
        // A fresh run refuses the directory: it holds published output.
        let err = Buckets::fresh("out", &dir, 100).err().unwrap().to_string();
        assert!(err.contains("already holds published output"), "{err}");
    }

    #[test]
    fn files_beyond_the_open_limit_are_parked_and_appended_to() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        let mut b = Buckets::fresh("out", &dir, 1000).unwrap();
        let n = OPEN_FILES * 2 + 3;
        for round in 0..3 {
            for i in 0..n {
                b.write(Some(format!("b{i}").as_bytes()), format!("{round}").as_bytes()).unwrap();
                assert!(b.open.len() <= OPEN_FILES);
            }
        }
        b.seal("end").unwrap();
        b.publish(None).unwrap();
        let files = read_tree(&dir);
        assert_eq!(files.len(), n);
        assert!(files.iter().all(|(_, text)| text == "0\n1\n2\n"), "{files:?}");
        assert!(b.buckets.is_empty(), "published buckets are forgotten");
    }

    #[test]
    fn bad_keys_too_many_buckets_and_planted_links_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        let mut b = Buckets::fresh("out", &dir, 2).unwrap();
        let err = b.write(None, b"x").unwrap_err().to_string();
        assert!(err.contains("sink 'out'") && err.contains("without a key"), "{err}");
        let err = b.write(Some(b"../escape"), b"x").unwrap_err().to_string();
        assert!(err.contains("\"../escape\" is not a bucket name"), "{err}");
        b.write(Some(b"a"), b"x").unwrap();
        b.write(Some(b"b"), b"x").unwrap();
        let err = b.write(Some(b"c"), b"x").unwrap_err().to_string();
        assert!(err.contains("max_buckets = 2") && err.contains("\"c\""), "{err}");
        b.seal("0000000001").unwrap();
        b.write(Some(b"c"), b"x").unwrap(); // a new interval
        // A link where a bucket's directory would be.
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("link")).unwrap();
        let err = b.write(Some(b"link/x"), b"x").unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        // A crafted checkpoint naming a pending file outside the tree.
        let err =
            Buckets::restore("out", &dir, Some(1), &["../victim/.part-1.pending".into()], 2).err().unwrap().to_string();
        assert!(err.contains("cannot be a bucket"), "{err}");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "nothing written through the link");
    }
}
