//! `kind = "file"` sink: each record's payload as one line of a file. With
//! checkpointing, the file's length at each barrier is recorded and a
//! restore cuts the file back to it, so the file ends exactly-once, though
//! a reader may see lines that a failure later takes back (use
//! `transactional-file` where that matters). The path is one a job may
//! write (`config::roots`, checked when the job is loaded), and the file is
//! opened without following a link.

use super::{OptionsError, options};
use crate::checkpoint::metadata::SinkState;
use crate::config::ConnectorSpec;
use crate::record::Batch;
use crate::runtime::error::ConnectorError;
use crate::runtime::sink::{OpenAt, Sink, SinkWriter, SnapshotAt};
use serde::Deserialize;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The entry's options.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Output file, relative to the job file.
    path: PathBuf,
}

/// A configured file sink.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
}

/// Builds the sink from its entry; `path` is relative to `base`.
pub fn build(spec: &ConnectorSpec, base: &Path) -> Result<Arc<dyn Sink>, OptionsError> {
    let o: Options = options(spec, "sink")?;
    Ok(Arc::new(FileSink { path: base.join(o.path) }))
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ConnectorError {
    let path = path.to_path_buf();
    move |source| ConnectorError::Io { op, path, cause: source }
}

impl Sink for FileSink {
    fn open(&self, at: OpenAt<'_>) -> Result<Box<dyn SinkWriter>, ConnectorError> {
        let path = &self.path;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::durable::create_dir_all(dir).map_err(io("create", dir))?;
        }
        let file = match at.restore.map(|r| r.state) {
            Some(SinkState::File { length }) => resume(path, *length)?,
            _ => {
                let file = open_no_link(path, true).map_err(io("create", path))?;
                // The file's name survives a power loss; its bytes are
                // synced at each checkpoint.
                let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                crate::durable::sync(dir).map_err(io("sync", dir))?;
                file
            }
        };
        Ok(Box::new(FileWriter { w: BufWriter::with_capacity(1 << 20, file), path: path.clone() }))
    }
}

/// Opens `path` for writing (`create`: created or truncated), never
/// through a link at its end: the job's load checked where the path leads
/// (`config::roots`), and a link put there since would lead elsewhere.
fn open_no_link(path: &Path, create: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(create)
        .truncate(create)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32)
        .open(path)
}

/// Opens `path` as of a checkpoint: cut back to `length`, append after it.
fn resume(path: &Path, length: u64) -> Result<File, ConnectorError> {
    let mut f = open_no_link(path, false).map_err(io("reopen", path))?;
    let have = f.metadata().map_err(io("read", path))?.len();
    if have < length {
        return Err(ConnectorError::Inconsistent(format!(
            "{} has {have} bytes, but the checkpoint recorded {length}: it was changed or truncated outside the job",
            path.display()
        )));
    }
    f.set_len(length).map_err(io("truncate", path))?;
    f.seek(std::io::SeekFrom::Start(length)).map_err(io("seek in", path))?;
    Ok(f)
}

struct FileWriter {
    w: BufWriter<File>,
    path: PathBuf,
}

impl SinkWriter for FileWriter {
    fn write(&mut self, batch: &Batch) -> Result<(), ConnectorError> {
        for r in batch.iter() {
            self.w.write_all(r.payload).and_then(|_| self.w.write_all(b"\n")).map_err(io("write", &self.path))?;
        }
        Ok(())
    }

    /// Flushes and syncs, then records the length.
    fn checkpoint(&mut self, _: &SnapshotAt<'_>) -> Result<Option<SinkState>, ConnectorError> {
        self.w.flush().map_err(io("write", &self.path))?;
        let f = self.w.get_mut();
        f.sync_data().map_err(io("sync", &self.path))?;
        let length = f.stream_position().map_err(io("read", &self.path))?;
        Ok(Some(SinkState::File { length }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::roots::{Access, FILE_OPTIONS};

    /// The option `config::roots` checks is the one this sink writes to.
    #[test]
    fn the_path_the_roots_check_is_the_path_written() {
        let option = FILE_OPTIONS.iter().find(|o| o.role == "sink" && o.kind == "file").expect("listed");
        assert_eq!(option.access, Access::Write);
        let dir = tempfile::tempdir().unwrap();
        let mut options = toml::Table::new();
        options.insert(option.key.into(), toml::Value::String("out.txt".into()));
        let spec = ConnectorSpec { id: "o".into(), kind: "file".into(), options, parallelism: 1 };
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
        assert!(dir.path().join("out.txt").is_file());
    }

    #[test]
    fn a_link_at_the_paths_end_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "kept\n").unwrap();
        let link = dir.path().join("out.txt");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(open_no_link(&link, true).is_err());
        assert!(open_no_link(&link, false).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"kept\n");
    }
}
