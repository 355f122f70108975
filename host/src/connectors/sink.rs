//! Sinks: write each record's payload as one line to a file, to part files
//! published with checkpoints, or to stdout, or drop it (for benchmarks).
//!
//! With checkpointing, every sink acknowledges each barrier with its
//! position, and at the end of input waits for the job's final checkpoint
//! before it makes its last output visible:
//! - `transactional-file`: exactly-once; see [`super::part_files`];
//! - `file`: the file's length at each barrier is recorded and a restore
//!   cuts the file back to it, so the file ends exactly-once, though a
//!   reader may see lines that a failure later takes back;
//! - `stdout`: lines after the last checkpoint are written again after a
//!   restore (at-least-once).

use super::part_files::PartFiles;
use crate::checkpoint::metadata::{SinkState, TaskSnapshot};
use crate::config::SinkKind;
use crate::runtime::events::{Control, Counters, TaskError, TaskEvent};
use crate::runtime::task::{Inputs, Next, Reporter};
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Everything a sink task needs.
pub struct SinkTask {
    /// Sink id.
    pub id: Arc<str>,
    /// Where it writes.
    pub kind: SinkKind,
    /// Its input.
    pub inputs: Inputs,
    /// Progress and events.
    pub reporter: Reporter,
    /// Whether the job checkpoints (then the end waits for the final one).
    pub checkpointing: bool,
    /// The position to resume from, and the checkpoint it is from.
    pub restore: Option<(u64, SinkState)>,
}

enum Output {
    File { w: BufWriter<File>, path: std::path::PathBuf },
    Parts(PartFiles),
    Stdout(BufWriter<std::io::Stdout>),
    Discard,
}

impl Output {
    fn open(kind: &SinkKind, restore: Option<&(u64, SinkState)>) -> Result<Self, String> {
        let id = restore.map(|(id, _)| *id);
        Ok(match (kind, restore.map(|(_, s)| s)) {
            (SinkKind::File(path), restore) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                }
                let f = match restore {
                    Some(SinkState::File { length }) => resume_file(path, *length)?,
                    _ => File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?,
                };
                Output::File { w: BufWriter::with_capacity(1 << 20, f), path: path.clone() }
            }
            (SinkKind::TransactionalFile(dir), Some(SinkState::Parts { pending })) => {
                Output::Parts(PartFiles::restore(dir, id, pending)?)
            }
            (SinkKind::TransactionalFile(dir), _) => Output::Parts(PartFiles::fresh(dir)?),
            (SinkKind::Stdout, _) => Output::Stdout(BufWriter::new(std::io::stdout())),
            (SinkKind::Discard, _) => Output::Discard,
        })
    }

    #[inline]
    fn write(&mut self, line: &[u8]) -> Result<(), String> {
        match self {
            Output::File { w, path } => w
                .write_all(line)
                .and_then(|_| w.write_all(b"\n"))
                .map_err(|e| format!("cannot write {}: {e}", path.display())),
            Output::Parts(p) => p.write_line(line),
            Output::Stdout(w) => {
                w.write_all(line).and_then(|_| w.write_all(b"\n")).map_err(|e| format!("write failed: {e}"))
            }
            Output::Discard => Ok(()),
        }
    }

    /// Makes everything written so far durable and says where the sink is.
    fn checkpoint(&mut self, tag: &str) -> Result<Option<SinkState>, String> {
        match self {
            Output::File { w, path } => {
                w.flush().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                let f = w.get_mut();
                f.sync_data().map_err(|e| format!("cannot sync {}: {e}", path.display()))?;
                let length = f.stream_position().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                Ok(Some(SinkState::File { length }))
            }
            Output::Parts(p) => p.seal(tag).map(Some),
            Output::Stdout(w) => w.flush().map(|_| None).map_err(|e| format!("write failed: {e}")),
            Output::Discard => Ok(None),
        }
    }

    /// Checkpoint `id` completed (`None`: the job's final one): publish
    /// what it covers.
    fn commit(&mut self, id: Option<u64>) -> Result<(), String> {
        match (self, id) {
            (Output::Parts(p), Some(id)) => p.publish_through(id),
            (Output::Parts(p), None) => p.publish_all(),
            _ => Ok(()),
        }
    }

    /// The job stopped with a savepoint: drop what came after it.
    fn discard(&mut self) -> Result<(), String> {
        match self {
            Output::Parts(p) => p.discard_pending(),
            _ => Ok(()),
        }
    }
}

/// Opens `path` as of a checkpoint: cut back to `length`, append after it.
fn resume_file(path: &Path, length: u64) -> Result<File, String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot reopen {} to resume: {e}", path.display()))?;
    let have = f.metadata().map_err(|e| format!("cannot read {}: {e}", path.display()))?.len();
    if have < length {
        return Err(format!(
            "{} has {have} bytes, but the checkpoint recorded {length}: it was changed or truncated outside the job",
            path.display()
        ));
    }
    f.set_len(length).map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
    f.seek(std::io::SeekFrom::Start(length)).map_err(|e| format!("cannot seek in {}: {e}", path.display()))?;
    Ok(f)
}

impl SinkTask {
    /// Runs the sink until every upstream subtask ended (and, with
    /// checkpointing, the final checkpoint completed).
    pub fn run(mut self) -> Result<Counters, TaskError> {
        let id = self.id.clone();
        let error = |message: String| TaskError::Sink { id: id.clone(), message };
        let mut out = Output::open(&self.kind, self.restore.as_ref()).map_err(error)?;
        let mut counters = Counters::default();
        let mut last_barrier = 0;
        loop {
            match self.inputs.next_batch() {
                Next::Batch { batch, .. } => {
                    counters.records_in += batch.len() as u64;
                    if !matches!(out, Output::Discard) {
                        for r in batch.iter() {
                            out.write(r.payload).map_err(error)?;
                        }
                    }
                    counters.records_out = counters.records_in;
                    self.reporter.tick(counters);
                }
                Next::Barrier(cid) => {
                    last_barrier = cid;
                    let started = Instant::now();
                    match out.checkpoint(&format!("{cid:010}")) {
                        Ok(state) => self.reporter.send(TaskEvent::Acknowledged {
                            task: self.reporter.id().clone(),
                            id: cid,
                            snapshot: TaskSnapshot::Sink(state),
                            sync: started.elapsed(),
                        }),
                        Err(reason) => return Err(error(reason)),
                    }
                }
                Next::Control(Control::Complete(c)) => out.commit(Some(c)).map_err(error)?,
                Next::Watermark(_) | Next::Timeout | Next::BarrierAborted(_) | Next::Control(_) => {}
                Next::Ended => break,
                Next::Disconnected => return Err(TaskError::Disconnected(id.clone())),
                Next::Cancelled => return Err(TaskError::Cancelled),
            }
        }
        let state = out.checkpoint("end").map_err(error)?;
        if self.checkpointing {
            // The last output becomes visible only once the final
            // checkpoint records it, so a crash now cannot repeat it.
            self.reporter.send(TaskEvent::SinkEnded { task: self.reporter.id().clone(), state, counters });
            loop {
                match self.inputs.next_control() {
                    // Only the final checkpoint, triggered after every
                    // barrier this sink saw, covers the end.
                    Control::Complete(c) if c > last_barrier => break,
                    Control::Complete(c) => out.commit(Some(c)).map_err(error)?,
                    Control::EndStopped => {
                        out.discard().map_err(error)?;
                        return Ok(counters);
                    }
                    Control::Cancel => return Err(TaskError::Cancelled),
                    Control::Trigger(_)
                    | Control::Stop { .. }
                    | Control::Resume
                    | Control::SwapCommit(_)
                    | Control::SwapAbort(_) => {}
                }
            }
        }
        out.commit(None).map_err(error)?;
        Ok(counters)
    }
}
