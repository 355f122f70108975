//! Sinks: write each record's payload as one line to a file or stdout, or
//! drop it (for benchmarks).

use crate::config::SinkKind;
use crate::runtime::events::{Counters, TaskError};
use crate::runtime::task::{Inputs, Next, Reporter};
use std::io::Write;
use std::sync::Arc;

/// Runs sink `id` until every upstream subtask ended.
pub fn run(id: Arc<str>, kind: &SinkKind, mut inputs: Inputs, mut reporter: Reporter) -> Result<Counters, TaskError> {
    let error = |message: String| TaskError::Sink { id: id.clone(), message };
    let mut out: Option<Box<dyn Write>> = match kind {
        SinkKind::File(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| error(format!("cannot create {}: {e}", dir.display())))?;
            }
            let f = std::fs::File::create(path).map_err(|e| error(format!("cannot create {}: {e}", path.display())))?;
            Some(Box::new(std::io::BufWriter::with_capacity(1 << 20, f)))
        }
        SinkKind::Stdout => Some(Box::new(std::io::BufWriter::new(std::io::stdout()))),
        SinkKind::Discard => None,
    };
    let mut counters = Counters::default();
    loop {
        match inputs.next_batch() {
            Next::Batch { batch, .. } => {
                counters.records_in += batch.len() as u64;
                if let Some(w) = out.as_mut() {
                    for r in batch.iter() {
                        w.write_all(r.payload)
                            .and_then(|_| w.write_all(b"\n"))
                            .map_err(|e| error(format!("write failed: {e}")))?;
                    }
                }
                counters.records_out = counters.records_in;
                reporter.tick(counters);
            }
            Next::Watermark(_) | Next::Timeout | Next::Barrier(_) | Next::BarrierAborted(_) => {}
            Next::Ended => break,
            Next::Disconnected => return Err(TaskError::Disconnected(id.clone())),
            Next::Cancelled => return Err(TaskError::Cancelled),
        }
    }
    if let Some(mut w) = out {
        w.flush().map_err(|e| error(format!("flush failed: {e}")))?;
    }
    if let SinkKind::File(path) = kind {
        // The job reports success only once the output is durable.
        std::fs::File::open(path)
            .and_then(|f| f.sync_all())
            .map_err(|e| error(format!("cannot sync {}: {e}", path.display())))?;
    }
    Ok(counters)
}
