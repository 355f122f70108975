//! `host replay`: one operator run again, offline, from a checkpoint's
//! state over the input its subtasks recorded after it
//! ([`crate::checkpoint::recording`]). Each subtask restores its part of
//! the checkpoint, opens the module (the one that ran, read from the job's
//! module store and only with the SHA-256 the checkpoint records; or the
//! one `--module` names), and follows its chain of recorded segments step
//! by step: processing time held at the step's recorded reading (for the
//! guest's clocks, its timers and state TTL), the guest's randomness seeded
//! as it was, the same input. What the module emits for each step is compared with what was
//! recorded for it: byte for byte per step, and per output key as a shadow
//! run compares ([`super::shadow::compare`]).
//!
//! Nothing of the job is touched: the replay's state lives in its own
//! backend and its output goes nowhere but the report.

use super::shadow::compare::Tally;
use super::shadow::fire;
use crate::api::{DiffSample, KeyDiff, OutputDiff, ShadowReport};
use crate::checkpoint::metadata::RecordedModule;
use crate::checkpoint::modules::{ModuleStoreError, read_named};
use crate::checkpoint::recording::{RecordingError, Segment, StepInput, read_segment};
use crate::checkpoint::restore::backend::{BackendSpec, SubtaskRestore, open_backend};
use crate::checkpoint::restore::{RestoreError, Restored};
use crate::clock::Pinned;
use crate::config::{BackendKind, Settings};
use crate::record::Batch;
use crate::state::TimeDomain;
use crate::state::key_group::{KeyGroupRange, key_hash};
use crate::wasm::engine::{EpochTicker, new_engine};
use crate::wasm::{GuestFailure, Limits, ModuleLoader, OperatorInfo, OperatorInstance, OperatorModule, WasmError};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What to replay.
pub struct ReplayRequest {
    /// The checkpoint to start from.
    pub from: Arc<Restored>,
    /// The operator.
    pub operator: String,
    /// The module to run; `None`: the one that ran (a module swapped in
    /// before the checkpoint, else the job file's).
    pub module: Option<PathBuf>,
    /// Params that replace or add to the recorded ones.
    pub params: Vec<(String, String)>,
    /// Stop at this checkpoint's barrier; `None`: as far as recorded.
    pub until: Option<u64>,
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The request does not fit the checkpoint or the recording.
    #[error("{0}")]
    Invalid(String),
    /// A recorded segment could not be read.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// The checkpoint's state could not be restored.
    #[error("cannot restore subtask {subtask}: {cause}")]
    Restore {
        /// The subtask.
        subtask: u32,
        /// Why.
        cause: RestoreError,
    },
    /// The module could not be loaded or instantiated.
    #[error(transparent)]
    Module(#[from] WasmError),
    /// The module that ran is not in the job's module store as the
    /// checkpoint records it.
    #[error(
        "operator '{uid}': {location} names module {path} (SHA-256 {sha256}), which a replay loads only from the job's module store, and cannot: {cause}; give the module to run with --module"
    )]
    StoredModule {
        /// The operator.
        uid: String,
        /// The checkpoint.
        location: String,
        /// Where the module was, for messages (never read).
        path: String,
        /// Its recorded SHA-256.
        sha256: String,
        /// Why.
        cause: Box<ModuleStoreError>,
    },
    /// The WebAssembly engine could not start.
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
    /// The module failed.
    #[error("subtask {subtask} failed in {export} at step {step} of the segment from barrier {segment}: {failure}")]
    Guest {
        /// The subtask.
        subtask: u32,
        /// The export.
        export: &'static str,
        /// The segment's start.
        segment: u64,
        /// The step (1-based).
        step: u64,
        /// The guest's failure.
        failure: GuestFailure,
    },
}

/// What a replay found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayReport {
    /// The operator.
    pub operator: String,
    /// The checkpoint it started from.
    pub checkpoint: u64,
    /// The module it ran: `--module`, or the job's stored copy of the one
    /// that ran.
    pub module: String,
    /// SHA-256 of the module it ran.
    pub module_sha256: String,
    /// SHA-256 of the module that ran when the input was recorded, as the
    /// checkpoint states it (none from a version that did not record it).
    pub recorded_sha256: Option<String>,
    /// Subtasks replayed.
    pub subtasks: u32,
    /// Recorded segments replayed (over every subtask).
    pub segments: u64,
    /// Steps replayed.
    pub steps: u64,
    /// Input records replayed.
    pub records_in: u64,
    /// Records the module emitted.
    pub records_out: u64,
    /// Steps whose output was byte for byte the recorded one.
    pub identical_steps: u64,
    /// Steps whose output was not.
    pub differing_steps: u64,
    /// Whether the whole output was byte for byte the recorded one.
    pub identical: bool,
    /// Where each subtask stopped: the barrier it reached, or `None` at the
    /// end of input.
    pub reached: Vec<Option<u64>>,
    /// Why a subtask stopped short of `--until` or the end of input.
    pub stopped: Vec<String>,
    /// Output records compared per key, as in a shadow run.
    pub counts: OutputDiff,
    /// Output keys with a difference (at most 1000).
    pub keys: Vec<KeyDiff>,
    /// Differences on keys not listed.
    pub unlisted: u64,
    /// Some differences, side by side (recorded as "live", replayed as
    /// "shadow").
    pub samples: Vec<DiffSample>,
    /// How long the replay took.
    pub elapsed_ms: u64,
}

/// Replays `request`, each subtask on a thread of its own.
pub fn replay(request: &ReplayRequest, settings: &Settings) -> Result<ReplayReport, ReplayError> {
    let started = Instant::now();
    let from = &request.from;
    let uid = request.operator.as_str();
    let checkpoint = from.metadata.id;
    let Some(state) = from.metadata.operators.get(uid) else {
        let known: Vec<&str> = from.metadata.operators.keys().map(String::as_str).collect();
        return Err(ReplayError::Invalid(format!(
            "{} holds no operator '{uid}' (it has: {})",
            from.location,
            known.join(", ")
        )));
    };
    if let Some(until) = request.until
        && until <= checkpoint
    {
        return Err(ReplayError::Invalid(format!(
            "--until {until} is not after checkpoint {checkpoint}: a replay runs forward from the checkpoint"
        )));
    }
    let parallelism = state.subtasks.len() as u32;
    let firsts = (0..parallelism)
        .map(|s| {
            read_segment(&from.storage, uid, s, checkpoint)?.ok_or_else(|| {
                ReplayError::Invalid(format!(
                    "operator '{uid}' subtask {s} recorded no input from checkpoint {checkpoint} on in {}/recordings \
                     (is `replay = {{ record = true }}` set on the operator? recording starts at the first checkpoint \
                     after the job starts, and is deleted with the checkpoints it follows)",
                    from.storage.display()
                ))
            })
        })
        .collect::<Result<Vec<Segment>, ReplayError>>()?;
    let recorded = &firsts[0].header;
    let engine = new_engine().map_err(|e| ReplayError::Engine(format!("{e:#}")))?;
    let _ticker = EpochTicker::start(&engine);
    let mut loader =
        ModuleLoader::new(&engine, settings.cache_dir.clone()).map_err(|e| ReplayError::Engine(format!("{e:#}")))?;
    let ran = module_that_ran(from, uid);
    let loaded = match (&request.module, &ran) {
        // The user's own choice, on the command line.
        (Some(m), _) => loader.load(uid, m)?,
        (None, Some(ran)) => {
            let bytes = read_named(&from.storage, Some(&ran.stored), &ran.sha256).map_err(|cause| {
                ReplayError::StoredModule {
                    uid: uid.to_string(),
                    location: from.location.clone(),
                    path: ran.path.clone(),
                    sha256: ran.sha256.clone(),
                    cause: Box::new(cause),
                }
            })?;
            loader.load_bytes(uid, Path::new(&format!("{}/{}", from.storage.display(), ran.stored)), &bytes)?
        }
        (None, None) => {
            let why = match from.metadata.swapped.get(uid) {
                Some(s) => format!(
                    "operator '{uid}' ran a module swapped in before it ({}), of which it keeps no copy",
                    s.path
                ),
                None => format!(
                    "it does not record which module operator '{uid}' ran (the recording names {})",
                    recorded.module
                ),
            };
            return Err(ReplayError::Invalid(format!(
                "{}: {why}: it was written by a version of Weir that kept only paths, and a replay loads no module \
                 from a path a stored file names; give the module to run with --module",
                from.location
            )));
        }
    };
    let module = loaded.module;
    let backend = BackendKind::from_name(&recorded.backend).ok_or_else(|| {
        ReplayError::Invalid(format!("{}: unknown state backend {:?}", firsts[0].location, recorded.backend))
    })?;
    let mut params = recorded.params.clone();
    for (k, v) in &request.params {
        params.retain(|(name, _)| name != k);
        params.push((k.clone(), v.clone()));
    }
    params.sort();
    let subtasks = firsts
        .into_iter()
        .enumerate()
        .map(|(s, first)| Subtask {
            request,
            settings,
            module: module.clone(),
            backend,
            subtask: s as u32,
            parallelism,
            params: params.clone(),
            first,
        })
        .collect::<Vec<_>>();
    let results: Vec<Result<Replayed, ReplayError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = subtasks.into_iter().map(|t| scope.spawn(move || t.run())).collect();
        handles.into_iter().map(|h| h.join().expect("a replay thread panicked")).collect()
    });
    let mut merged = ShadowReport::default();
    let mut report = ReplayReport {
        operator: uid.to_string(),
        checkpoint,
        module: loaded.path.display().to_string(),
        module_sha256: loaded.sha256.clone(),
        recorded_sha256: ran.map(|r| r.sha256),
        subtasks: parallelism,
        ..ReplayReport::default()
    };
    for r in results {
        let r = r?;
        let (keys, unlisted, samples) = r.tally.listed();
        merged.absorb(&ShadowReport { counts: r.tally.counts, keys, unlisted, samples, ..ShadowReport::default() });
        report.segments += r.segments;
        report.steps += r.steps;
        report.records_in += r.records_in;
        report.records_out += r.records_out;
        report.identical_steps += r.identical_steps;
        report.differing_steps += r.steps - r.identical_steps;
        report.reached.push(r.reached);
        report.stopped.extend(r.stopped);
    }
    report.identical = report.differing_steps == 0;
    report.counts = merged.counts;
    report.keys = merged.keys;
    report.unlisted = merged.unlisted;
    report.samples = merged.samples;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// One subtask's replay.
struct Subtask<'a> {
    request: &'a ReplayRequest,
    settings: &'a Settings,
    module: OperatorModule,
    backend: BackendKind,
    subtask: u32,
    parallelism: u32,
    params: Vec<(String, String)>,
    first: Segment,
}

/// One subtask's result.
#[derive(Default)]
struct Replayed {
    tally: Tally,
    segments: u64,
    steps: u64,
    identical_steps: u64,
    records_in: u64,
    records_out: u64,
    reached: Option<u64>,
    stopped: Option<String>,
}

impl Subtask<'_> {
    fn run(self) -> Result<Replayed, ReplayError> {
        let from = &self.request.from;
        let (uid, s) = (self.request.operator.as_str(), self.subtask);
        let header = self.first.header.clone();
        let max_parallelism = from.metadata.max_parallelism;
        let pinned = Pinned::default();
        pinned.set(header.started_at_ms);
        let spec = BackendSpec {
            kind: self.backend,
            rocksdb: self.settings.rocksdb.clone(),
            max_parallelism,
            clock: pinned.clock(),
        };
        let restore = SubtaskRestore::plan(from, uid, s, self.parallelism, max_parallelism, self.backend);
        let range = KeyGroupRange::for_subtask(s, self.parallelism, max_parallelism);
        let name = format!("replay-{uid}-{s}");
        let opened = open_backend(&spec, &name, range, restore.as_ref())
            .map_err(|cause| ReplayError::Restore { subtask: s, cause })?;
        let limits = Limits {
            call_timeout: self.settings.call_timeout,
            memory_limit: self.settings.memory_limit,
            max_output_bytes: self.settings.max_output_bytes,
            max_output_records: self.settings.max_output_records,
            budgets: self.settings.budgets,
            random_seed: header.seed,
        };
        let mut instance =
            OperatorInstance::new(&self.module, &uid.into(), s, opened.backend, max_parallelism, limits)?;
        instance.pin_clock(pinned.clone());
        let info = OperatorInfo {
            uid: uid.to_string(),
            subtask_index: s,
            parallelism: self.parallelism,
            max_parallelism,
            attempt_number: header.attempt,
            params: self.params.clone(),
        };
        instance.open(&info).map_err(failed(s, "open", header.start, 0))?;
        // The live module's `open` ran when its attempt began, not at this
        // checkpoint: what this one emits has no recorded counterpart.
        instance.drain_outputs(|_| ());
        instance.set_watermark(header.watermark);
        let mut out = Replayed::default();
        let mut segment = self.first;
        loop {
            let h = segment.header.clone();
            if h.cut_short {
                out.stopped = Some(format!(
                    "subtask {s}: the input from barrier {} on outgrew replay.max_segment and was not recorded",
                    h.start
                ));
                out.reached = Some(h.start);
                return Ok(out);
            }
            if h.parallelism != self.parallelism {
                out.stopped = Some(format!(
                    "subtask {s}: the operator ran at parallelism {} from barrier {} on (rescaled)",
                    h.parallelism, h.start
                ));
                out.reached = Some(h.start);
                return Ok(out);
            }
            instance.reseed(h.start);
            out.segments += 1;
            for (i, step) in segment.steps().enumerate() {
                let step = step?;
                let at = |export| failed(s, export, h.start, i as u64 + 1);
                pinned.set(step.time);
                fire(&mut instance, TimeDomain::ProcessingTime, step.time).map_err(at("on-timer (processing time)"))?;
                match step.input {
                    StepInput::Timers => {}
                    StepInput::Batch { keyed, records } => {
                        let records = records.0;
                        out.records_in += records.len() as u64;
                        let hashes = if keyed {
                            records.iter().map(|r| key_hash(r.key.unwrap_or_default())).collect()
                        } else {
                            Vec::new()
                        };
                        instance.process(Batch { records, hashes, keyed }).map_err(at("process"))?;
                    }
                    StepInput::Broadcast(records) => {
                        out.records_in += records.0.len() as u64;
                        for r in records.0.iter() {
                            instance.process_broadcast(r).map_err(at("process-broadcast"))?;
                        }
                    }
                    StepInput::Watermark(w) => {
                        instance.set_watermark(w);
                        fire(&mut instance, TimeDomain::EventTime, w).map_err(at("on-timer (event time)"))?;
                    }
                    StepInput::End(w) => {
                        fire(&mut instance, TimeDomain::EventTime, w).map_err(at("on-timer (event time)"))?;
                        instance.end_of_input().map_err(at("end-of-input"))?;
                    }
                }
                let recorded = step.output.0;
                let tally = &mut out.tally;
                let same = instance.drain_outputs(|replayed| {
                    out.records_out += replayed.len() as u64;
                    tally.compare(&recorded, replayed);
                    replayed.len() == recorded.len() && replayed.iter().eq(recorded.iter())
                });
                out.steps += 1;
                out.identical_steps += u64::from(same);
            }
            match h.end {
                None => {
                    out.reached = None;
                    return Ok(out);
                }
                Some(end) if self.request.until == Some(end) => {
                    out.reached = Some(end);
                    return Ok(out);
                }
                Some(end) => {
                    out.reached = Some(end);
                    match read_segment(&from.storage, uid, s, end)? {
                        Some(next) if h.continued_by(&next.header) => segment = next,
                        Some(_) => {
                            out.stopped = Some(format!(
                                "subtask {s}: the recording from barrier {end} on is another run's (the job restarted \
                                 from an earlier checkpoint before it stored this run's)"
                            ));
                            return Ok(out);
                        }
                        None => {
                            if self.request.until.is_some() {
                                out.stopped = Some(format!(
                                    "subtask {s}: nothing recorded from barrier {end} on (the job still runs, failed \
                                     before it stored more, or the recording was deleted with old checkpoints)"
                                ));
                            }
                            return Ok(out);
                        }
                    }
                }
            }
        }
    }
}

/// The module operator `uid` ran from checkpoint `from` on, as the
/// checkpoint records it with its copy in the job's module store: a module
/// swapped in before it, else the job file's (an operator that records its
/// input has its module stored); none from a version that kept only paths.
fn module_that_ran(from: &Restored, uid: &str) -> Option<RecordedModule> {
    let m = &from.metadata;
    match m.swapped.get(uid).filter(|_| !m.savepoint) {
        Some(s) => s.stored.as_ref().map(|stored| RecordedModule {
            path: s.path.clone(),
            sha256: s.sha256.clone(),
            stored: stored.clone(),
        }),
        None => m.recorded.get(uid).cloned(),
    }
}

/// The error of subtask `subtask` failing in `export` at `step` of the
/// segment from barrier `segment`.
fn failed(subtask: u32, export: &'static str, segment: u64, step: u64) -> impl FnOnce(GuestFailure) -> ReplayError {
    move |failure| ReplayError::Guest { subtask, export, segment, step, failure }
}
