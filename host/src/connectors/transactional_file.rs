//! `kind = "transactional-file"` sink: exactly-once output in part files
//! that become visible only when the checkpoint covering them completes
//! (the files' life cycle is [`super::part_files`]). Its directory is one
//! a job may write (`config::roots`, checked when the job is loaded). With
//! `buckets = "key"`, each record goes to the bucket directory its key
//! names ([`super::buckets`]).

use super::buckets::Buckets;
use super::part_files::{PartFiles, published_name};
use super::{OptionsError, options};
use crate::checkpoint::metadata::SinkState;
use crate::checkpoint::storage::LogPosition;
use crate::config::ConnectorSpec;
use crate::record::Batch;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::{OpenAt, Sink, SinkWriter, SnapshotAt};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Output directory, relative to the job file.
    dir: PathBuf,
    /// Where each record goes beneath `dir`.
    buckets: Option<BucketBy>,
    /// With buckets: how many may be written between two checkpoints.
    max_buckets: Option<usize>,
}

/// What names a record's bucket.
#[derive(Deserialize, Debug, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum BucketBy {
    /// The record's key: a relative directory (`dt=2025-01-01/hm=10:07`).
    Key,
}

/// `max_buckets` unless set: a bucket per minute for a week, or per key
/// of a modest key space, between two checkpoints.
const MAX_BUCKETS: usize = 10_000;
/// The largest `max_buckets`: each bucket written costs a directory and
/// a few hundred bytes of host memory until its checkpoint completes.
const MAX_BUCKETS_LIMIT: usize = 100_000;

/// A configured transactional file sink.
#[derive(Debug)]
pub struct TransactionalFileSink {
    id: String,
    dir: PathBuf,
    /// With `buckets = "key"`: the most buckets between two checkpoints.
    max_buckets: Option<usize>,
}

/// Builds the sink from its entry; `dir` is relative to `base`.
pub fn build(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    let o: Options = options(spec, "sink")?;
    let node = || format!("sink '{}' (kind = {:?})", spec.id, spec.kind);
    let max_buckets = match (o.buckets, o.max_buckets) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(OptionsError { node: node(), message: "max_buckets is set without buckets = \"key\"".into() });
        }
        (Some(BucketBy::Key), n) => {
            let n = n.unwrap_or(MAX_BUCKETS);
            if !(1..=MAX_BUCKETS_LIMIT).contains(&n) {
                return Err(OptionsError {
                    node: node(),
                    message: format!("max_buckets = {n}: must be between 1 and {MAX_BUCKETS_LIMIT}"),
                });
            }
            Some(n)
        }
    };
    Ok(Arc::new(TransactionalFileSink { id: spec.id.clone(), dir: base.join(o.dir), max_buckets }))
}

impl Sink for TransactionalFileSink {
    fn open(&self, at: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        let restore = at.restore.and_then(|r| match r.state {
            SinkState::Parts { pending } => Some((r.id, pending)),
            _ => None,
        });
        let writer: Box<dyn SinkWriter> = match (self.max_buckets, restore) {
            (None, Some((id, pending))) => Box::new(PartFiles::restore(&self.dir, Some(id), pending)?),
            (None, None) => Box::new(PartFiles::fresh(&self.dir)?),
            (Some(max), Some((id, pending))) => {
                Box::new(Buckets::restore(&self.id, &self.dir, Some(id), pending, max)?)
            }
            (Some(max), None) => Box::new(Buckets::fresh(&self.id, &self.dir, max)?),
        };
        Ok(writer)
    }

    /// A savepoint can be restored by a job writing elsewhere (it was
    /// copied, or the job moved): pending files of the savepoint that are
    /// not in this sink's directory belonged to the run that took it, which
    /// published them there; they are left out, with a warning. A
    /// checkpoint missing them is damaged, and the restore says so.
    fn restore_state(&self, state: &SinkState, from_savepoint: bool) -> SinkState {
        let SinkState::Parts { pending } = state else { return state.clone() };
        if !from_savepoint {
            return state.clone();
        }
        let dir = &self.dir;
        let (here, elsewhere): (Vec<String>, Vec<String>) = pending.iter().cloned().partition(|name| {
            // `<bucket>/<file>` with buckets, `<file>` without.
            let (bucket, file) = name.rsplit_once('/').unwrap_or(("", name));
            dir.join(name).exists() || published_name(file).is_some_and(|p| dir.join(bucket).join(p).exists())
        });
        if !elsewhere.is_empty() {
            tracing::warn!(
                dir = %dir.display(),
                files = ?elsewhere,
                "the savepoint's pending output is not in this sink's directory (it belongs to the run that took the savepoint); not published here"
            );
        }
        SinkState::Parts { pending: here }
    }

    fn publish_finished(&self, at: OpenAt<'_>) -> Result<(), ConnectorError> {
        if let Some(SinkState::Parts { pending }) = at.restore.map(|r| r.state) {
            match self.max_buckets {
                None => drop(PartFiles::restore(&self.dir, None, pending)?),
                Some(max) => drop(Buckets::restore(&self.id, &self.dir, None, pending, max)?),
            }
        }
        Ok(())
    }
}

impl SinkWriter for Buckets {
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError> {
        for r in batch.iter() {
            Buckets::write(self, r.key, r.payload)?;
        }
        Ok(())
    }

    fn checkpoint(&mut self, at: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        self.seal(at.tag).map(Some)
    }

    fn commit(&mut self, upto: Option<u64>, _: Option<LogPosition>) -> Result<(), ConnectorError> {
        self.publish(upto)
    }

    fn discard(&mut self) -> Result<(), ConnectorError> {
        Buckets::discard(self)
    }
}

impl SinkWriter for PartFiles {
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError> {
        for r in batch.iter() {
            self.write_line(r.payload)?;
        }
        Ok(())
    }

    fn checkpoint(&mut self, at: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        self.seal(at.tag).map(Some)
    }

    fn commit(&mut self, upto: Option<u64>, _: Option<LogPosition>) -> Result<(), ConnectorError> {
        match upto {
            Some(id) => self.publish_through(id),
            None => self.publish_all(),
        }
    }

    fn discard(&mut self) -> Result<(), ConnectorError> {
        self.discard_pending()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::roots::{Access, FILE_OPTIONS};

    /// The option `config::roots` checks is the directory written.
    #[test]
    fn the_directory_the_roots_check_is_the_one_written() {
        let option = FILE_OPTIONS.iter().find(|o| o.role == "sink" && o.kind == "transactional-file").expect("listed");
        assert_eq!(option.access, Access::Write);
        let dir = tempfile::tempdir().unwrap();
        let mut options = toml::Table::new();
        options.insert(option.key.into(), toml::Value::String("out".into()));
        let spec = ConnectorSpec { id: "o".into(), kind: "transactional-file".into(), options, parallelism: 1 };
        let at = OpenAt {
            job: "j",
            subtask: 0,
            restore: None,
            fence: None,
            log: None,
            checkpoint_interval: None,
            cancelled: &|| false,
        };
        build(&spec, dir.path()).unwrap().open(at).unwrap();
        assert!(dir.path().join("out").is_dir());
    }

    /// `max_buckets` is bounded and only means something with buckets.
    #[test]
    fn bucket_options_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |extra: &[(&str, toml::Value)]| {
            let mut options = toml::Table::new();
            options.insert("dir".into(), toml::Value::String("out".into()));
            for (k, v) in extra {
                options.insert(k.to_string(), v.clone());
            }
            ConnectorSpec { id: "o".into(), kind: "transactional-file".into(), options, parallelism: 1 }
        };
        let key = ("buckets", toml::Value::String("key".into()));
        assert!(build(&spec(std::slice::from_ref(&key)), dir.path()).is_ok());
        for (extra, want) in [
            (vec![("max_buckets", toml::Value::Integer(5))], "without buckets"),
            (vec![key.clone(), ("max_buckets", toml::Value::Integer(0))], "max_buckets = 0: must be between 1"),
            (vec![key.clone(), ("max_buckets", toml::Value::Integer(200_000))], "between 1 and 100000"),
            (vec![("buckets", toml::Value::String("time".into()))], "unknown variant"),
        ] {
            let err = build(&spec(&extra), dir.path()).err().expect("refused");
            assert_eq!(err.node, "sink 'o' (kind = \"transactional-file\")");
            assert!(err.message.contains(want), "{}", err.message);
        }
    }
}
