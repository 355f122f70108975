//! `kind = "file"` sink: each record's payload as one line of a file. With
//! checkpointing, the file's length at each barrier is recorded and a
//! restore cuts the file back to it, so the file ends exactly-once, though
//! a reader may see lines that a failure later takes back (use
//! `transactional-file` where that matters).

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
                let file = File::create(path).map_err(io("create", path))?;
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

/// Opens `path` as of a checkpoint: cut back to `length`, append after it.
fn resume(path: &Path, length: u64) -> Result<File, ConnectorError> {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(io("reopen", path))?;
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
