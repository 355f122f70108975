//! Crash points: named places in the checkpoint code where a test can make
//! the process die, as a power cut or `kill -9` would at exactly that
//! moment. `WEIR_CRASH_AT=<name>[:<n>]` aborts the process the `n`-th time
//! (default: the first) execution passes the point `name`. Tests use it to
//! prove that a crash in the middle of an upload or a deletion leaves
//! storage a later run recovers from; a random `kill -9` rarely lands in
//! those few milliseconds.
//!
//! The points, in the order a checkpoint meets them:
//! - `storage.object-written`: an object (a snapshot, an SST file) stored,
//!   not yet synced; `storage.piece-written`: a piece of a streamed
//!   snapshot (a savepoint) handed to its upload; `upload.shared-file`: an
//!   incremental checkpoint's SST file stored;
//! - `checkpoint.metadata-written`: `_metadata` committed, tasks not told;
//!   `savepoint.committed`: a savepoint's `_metadata` committed, the job
//!   not stopped or told; `checkpoint.final`: the final checkpoint about to
//!   be written;
//! - `sink.publishing`, `sink.published`: before the transactional sink's
//!   renames into `part-<n>`, and after each;
//! - `delete.metadata-deleted`, `retention.shared-file-deleted`: retention
//!   halfway through;
//! - `swap.prepared`: every subtask opened the new module, none told to
//!   commit; `swap.rolling-back`: a subtask's old state restored, the old
//!   module not yet reopened.
//!
//! Unset, a point costs one load of an initialized `OnceLock`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable naming the point to crash at.
pub const ENV: &str = "WEIR_CRASH_AT";

struct Target {
    name: String,
    nth: u64,
    passed: AtomicU64,
}

fn target() -> Option<&'static Target> {
    static TARGET: OnceLock<Option<Target>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let spec = std::env::var(ENV).ok()?;
            let (name, nth) = match spec.rsplit_once(':') {
                Some((name, n)) => (name.to_string(), n.parse().unwrap_or(1)),
                None => (spec, 1),
            };
            Some(Target { name, nth: nth.max(1), passed: AtomicU64::new(0) })
        })
        .as_ref()
}

/// Aborts the process if `WEIR_CRASH_AT` names this point and this is the
/// pass it asks for.
pub fn crash_point(name: &str) {
    if let Some(t) = target()
        && t.name == name
        && t.passed.fetch_add(1, Ordering::SeqCst) + 1 == t.nth
    {
        eprintln!("weir: crashing at {name} ({ENV})");
        std::process::abort();
    }
}
