//! `kind = "transactional-file"` sink: exactly-once output in part files
//! that become visible only when the checkpoint covering them completes
//! (the files' life cycle is [`super::part_files`]). Its directory is one
//! a job may write (`config::roots`, checked when the job is loaded).

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
}

/// A configured transactional file sink.
#[derive(Debug)]
pub struct TransactionalFileSink {
    dir: PathBuf,
}

/// Builds the sink from its entry; `dir` is relative to `base`.
pub fn build(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    let o: Options = options(spec, "sink")?;
    Ok(Arc::new(TransactionalFileSink { dir: base.join(o.dir) }))
}

impl Sink for TransactionalFileSink {
    fn open(&self, at: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        Ok(Box::new(match at.restore.map(|r| (r.id, r.state)) {
            Some((id, SinkState::Parts { pending })) => PartFiles::restore(&self.dir, Some(id), pending)?,
            _ => PartFiles::fresh(&self.dir)?,
        }))
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
        let (here, elsewhere): (Vec<String>, Vec<String>) = pending
            .iter()
            .cloned()
            .partition(|name| dir.join(name).exists() || published_name(name).is_some_and(|p| dir.join(p).exists()));
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
            PartFiles::restore(&self.dir, None, pending)?;
        }
        Ok(())
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
}
