//! The wasmtime engine Weir runs every guest on, and the epoch ticker that
//! enforces per-call deadlines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::{Config, Engine, OptLevel};

/// How often the engine's epoch advances; call deadlines are counted in
/// these ticks, so a deadline is honoured to within one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Builds the engine: Cranelift optimising for speed, epoch interruption for
/// deadlines, and the component model's concurrency support off, which makes
/// every synchronous host call markedly cheaper (Weir's guests are
/// synchronous).
pub fn new_engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.cranelift_opt_level(OptLevel::Speed);
    config.epoch_interruption(true);
    config.concurrency_support(false);
    // Profiling a guest: `WEIR_PERFMAP=1` writes /tmp/perf-<pid>.map, with
    // which `perf report` names the guests' compiled functions (e.g. the
    // JavaScript engine's interpreter against its host calls) instead of
    // showing anonymous addresses.
    if std::env::var_os("WEIR_PERFMAP").is_some_and(|v| v == "1") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&config)
}

/// Number of ticks for a deadline of `timeout` (at least one).
pub fn deadline_ticks(timeout: Duration) -> u64 {
    (timeout.as_micros().div_ceil(EPOCH_TICK.as_micros())).max(1) as u64
}

/// A thread that advances the engine's epoch every [`EPOCH_TICK`] until
/// dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: &Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weir-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn the epoch ticker thread");
        EpochTicker { stop, thread: Some(thread) }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
