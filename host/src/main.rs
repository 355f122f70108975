//! The `host` command line: the user's edge. Parses arguments, sets up
//! logging, loads configuration, runs the job and turns every error into a
//! message that names the file, field or operator, with a non-zero exit.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use weir_host::config::{self, SettingsFile};
use weir_host::control::SavepointRequest;
use weir_host::control::client::Client;
use weir_host::runtime::{JobReport, StartFrom, run_job};

/// Weir runs stateful stream operators compiled to WebAssembly components.
#[derive(Parser)]
#[command(name = "host", version, about, long_about = None)]
#[command(after_help = "Logs go to stderr; filter them with RUST_LOG (e.g. RUST_LOG=weir_host=debug).")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job to completion (bounded sources) and print a summary.
    ///
    /// The job file names sources, operators (WebAssembly components with a
    /// stable uid) and sinks; its format is documented in docs/job-file.md.
    Run {
        /// The job file.
        job: PathBuf,
        /// Host settings file [default: $WEIR_CONFIG, else ./config/host.toml
        /// if present, else built-in defaults].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override the job's default parallelism.
        #[arg(long, short = 'p', value_name = "N")]
        parallelism: Option<u32>,
        /// Continue from the job's latest usable checkpoint in
        /// state.checkpoints.dir (falling back past damaged ones); start from
        /// the beginning if it has none.
        #[arg(long, conflicts_with = "from_checkpoint")]
        resume: bool,
        /// Start from this checkpoint: <dir>/<job>/chk-<n>, such as
        /// file:///var/lib/weir/checkpoints/wordcount/chk-12. The run never
        /// deletes it.
        #[arg(long, value_name = "URI", conflicts_with = "from_savepoint")]
        from_checkpoint: Option<String>,
        /// Start from this savepoint: the directory `host savepoint`
        /// printed, such as
        /// file:///var/lib/weir/savepoints/savepoint-wordcount-1764428000000.
        /// State is matched to operators by uid; any backend and parallelism.
        #[arg(long, value_name = "URI", conflicts_with = "resume")]
        from_savepoint: Option<String>,
        /// With --from-checkpoint or --from-savepoint: drop the state of
        /// operators the job no longer has (listed in the log) instead of
        /// refusing to start.
        #[arg(long)]
        allow_non_restored_state: bool,
    },
    /// Show a running job: records in and out per operator, checkpoints.
    Status {
        /// The job's name, or its job file.
        job: String,
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Take a savepoint of a running job, and optionally stop it.
    ///
    /// Prints the savepoint's directory, to restore with
    /// `host run job.toml --from-savepoint <dir>`.
    Savepoint {
        /// The job's name, or its job file.
        job: String,
        /// Stop the job once the savepoint completed (sinks publish what it
        /// covers; nothing after it is published).
        #[arg(long)]
        stop: bool,
        /// With --stop: advance event time to the end first, so every
        /// event-time timer fires before the savepoint.
        #[arg(long, requires = "stop")]
        drain: bool,
        /// Parent directory of the savepoint [default: the job's
        /// state.savepoints.dir].
        #[arg(long, value_name = "URI")]
        dir: Option<String>,
    },
    /// Replace one operator's module while the job runs, its state carried
    /// over (values migrated when the new module's state versions differ).
    ///
    /// A savepoint is taken at the swap and kept for rollback. If the new
    /// module fails to load, declares state of another kind, fails to
    /// migrate or traps in open, the old module keeps running and this
    /// exits non-zero with the reason. Prints the pause the swap caused.
    Swap {
        /// The job's name, or its job file.
        job: String,
        /// The operator's uid.
        #[arg(long)]
        operator: String,
        /// The new component (.wasm).
        #[arg(long, value_name = "PATH")]
        module: PathBuf,
        /// Parent directory of the swap's savepoint [default: the job's
        /// state.savepoints.dir].
        #[arg(long, value_name = "URI")]
        dir: Option<String>,
    },
    /// Show what a checkpoint or savepoint holds, without running the job:
    /// operators, states, kinds, keys and bytes (per key group with
    /// --key-groups), or one key's value.
    Inspect {
        /// A checkpoint (<dir>/<job>/chk-<n>) or a savepoint directory.
        target: String,
        /// Keys and bytes per key group too.
        #[arg(long)]
        key_groups: bool,
        /// With --state and --key: the operator whose value to print.
        #[arg(long, requires_all = ["state", "key"])]
        operator: Option<String>,
        /// The state whose value to print.
        #[arg(long, requires = "operator")]
        state: Option<String>,
        /// The key (as the records carry it: the word, the digits).
        #[arg(long, requires = "operator")]
        key: Option<String>,
        /// Host settings file (for S3 options).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Cancel a running job (no savepoint; its checkpoints stay).
    Cancel {
        /// The job's name, or its job file.
        job: String,
    },
    /// List a job's completed checkpoints: id, time, size, duration.
    ///
    /// Give the job file (its state.checkpoints.dir and name are used) or the
    /// job's checkpoint directory, <dir>/<job>, such as
    /// file:///var/lib/weir/checkpoints/wordcount.
    Checkpoints {
        /// A job file, or a <dir>/<job> URI.
        target: String,
        /// Host settings file (for S3 options and the default directory).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            job,
            config,
            parallelism,
            resume,
            from_checkpoint,
            from_savepoint,
            allow_non_restored_state,
        } => {
            let start = match (resume, from_checkpoint, from_savepoint) {
                (_, Some(uri), _) => StartFrom::Checkpoint { uri, allow_non_restored_state },
                (_, _, Some(uri)) => StartFrom::Savepoint { uri, allow_non_restored_state },
                (true, None, None) => StartFrom::Latest,
                (false, None, None) => StartFrom::Beginning,
            };
            run(&job, config.as_deref(), parallelism, &start)
        }
        Command::Checkpoints { target, config } => list_checkpoints(&target, config.as_deref()),
        Command::Status { job, json } => status(&job, json),
        Command::Savepoint { job, stop, drain, dir } => savepoint(&job, SavepointRequest { dir, stop, drain }),
        Command::Cancel { job } => cancel(&job),
        Command::Swap { job, operator, module, dir } => swap(&job, operator, &module, dir),
        Command::Inspect { target, key_groups, operator, state, key, config } => {
            let lookup = operator.zip(state).zip(key).map(|((o, s), k)| (o, s, k));
            inspect(&target, key_groups, lookup, config.as_deref())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,weir_host=info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

/// Picks the host settings file: the flag, `$WEIR_CONFIG`, or
/// `./config/host.toml` if it exists.
fn host_config_path(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("WEIR_CONFIG").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let default = PathBuf::from("config/host.toml");
    default.is_file().then_some(default)
}

/// The host settings file, parsed, with its path.
fn host_settings(config_flag: Option<&Path>) -> anyhow::Result<(Option<PathBuf>, Option<SettingsFile>)> {
    let host_path = host_config_path(config_flag);
    let host_file: Option<SettingsFile> = match &host_path {
        Some(p) => Some(config::load_host_file(p)?),
        None => None,
    };
    match &host_path {
        Some(p) => tracing::info!(config = %p.display(), "host settings"),
        None => tracing::info!("host settings: built-in defaults"),
    }
    Ok((host_path, host_file))
}

fn run(job_path: &Path, config_flag: Option<&Path>, parallelism: Option<u32>, start: &StartFrom) -> anyhow::Result<()> {
    let (host_path, host_file) = host_settings(config_flag)?;
    let host = host_path.as_deref().zip(host_file.as_ref());
    let job = config::load_job(job_path, host, parallelism)?;
    let report =
        run_job(&job, start).with_context(|| format!("job '{}' ({}) failed", job.spec.name, job_path.display()))?;
    print_summary(&report);
    Ok(())
}

/// A job named on the command line: its name, or a job file whose `name`
/// is read.
fn job_name(arg: &str) -> anyhow::Result<String> {
    let path = Path::new(arg);
    if !path.is_file() {
        return Ok(arg.to_string());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {arg}"))?;
    let value: toml::Table = toml::from_str(&text).with_context(|| format!("{arg} is not valid TOML"))?;
    value
        .get("name")
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .with_context(|| format!("{arg} has no name = \"...\""))
}

/// `host status`.
fn status(job: &str, json: bool) -> anyhow::Result<()> {
    let s = Client::find(&job_name(job)?)?.status()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "job '{}' running (pid {}, attempt {}, up {:.1}s): {} records read, {} written",
        s.job,
        s.pid,
        s.attempt,
        s.uptime_ms as f64 / 1e3,
        s.records_read,
        s.records_written
    );
    if let Some(c) = &s.checkpoints {
        println!("  {c}");
    }
    println!("  {:<10} {:<24} {:>4} {:>14} {:>14}", "role", "id", "par", "records in", "records out");
    for n in &s.nodes {
        println!("  {:<10} {:<24} {:>4} {:>14} {:>14}", n.role, n.id, n.parallelism, n.records_in, n.records_out);
    }
    Ok(())
}

/// `host savepoint`.
fn savepoint(job: &str, request: SavepointRequest) -> anyhow::Result<()> {
    let client = Client::find(&job_name(job)?)?;
    let started = std::time::Instant::now();
    let done = client.savepoint(&request).context("savepoint failed")?;
    println!("{}", done.location);
    eprintln!(
        "savepoint {} of {} complete in {} ms (asked {} ms ago){}",
        done.id,
        weir_host::runtime::checkpoints::human_bytes(done.size),
        done.duration_ms,
        started.elapsed().as_millis(),
        if done.stopped { "; the job stops" } else { "" }
    );
    Ok(())
}

/// `host inspect`.
fn inspect(
    target: &str,
    key_groups: bool,
    lookup: Option<(String, String, String)>,
    config_flag: Option<&Path>,
) -> anyhow::Result<()> {
    use weir_host::checkpoint::inspect::{Found, show, summarize};
    use weir_host::checkpoint::restore;
    use weir_host::runtime::checkpoints::human_bytes;
    let (_, host_file) = host_settings(config_flag)?;
    let base = host_file.unwrap_or_default().resolve("host settings").map_err(anyhow::Error::msg)?;
    let restored = match restore::parse_uri(target) {
        Ok(_) => {
            let (storage, _, id) = restore::open_uri(target, &base.storage)?;
            restore::load(&storage, id)?
        }
        Err(_) => restore::load_savepoint(target, &base.storage)?,
    };
    let scratch = tempfile_dir()?;
    let m = &restored.metadata;
    if let Some((uid, state, key)) = lookup {
        let (encoding, found) =
            weir_host::checkpoint::inspect::lookup(&restored, &uid, &state, key.as_bytes(), &scratch)
                .map_err(anyhow::Error::msg)?;
        if found.is_empty() {
            anyhow::bail!("operator '{uid}', state '{state}': no value for key {key:?} in {}", restored.location);
        }
        for f in found {
            match f {
                Found::Value(v) | Found::Element(v) => println!("{}", show(&encoding, &v)),
                Found::Entry(k, v) => println!("{} => {}", show(&encoding, &k), show(&encoding, &v)),
            }
        }
        return Ok(());
    }
    println!(
        "{} {} of job '{}': id {}, taken {} UTC, max_parallelism {}{}",
        if m.savepoint { "savepoint" } else { "checkpoint" },
        restored.location,
        m.job,
        m.id,
        utc(m.triggered_at_ms),
        m.max_parallelism,
        if m.finished { ", job finished" } else { "" }
    );
    for (id, offset) in &m.sources {
        println!("source '{id}': position {offset}");
    }
    for op in summarize(&restored, &scratch).map_err(anyhow::Error::msg)? {
        println!("operator '{}' (parallelism {}), {} timers", op.uid, op.parallelism, op.timers);
        for s in &op.states {
            println!(
                "  state '{}': {} v{} ({}), {} {}, {}",
                s.name,
                s.kind.name(),
                s.version,
                s.encoding,
                s.keys,
                if s.kind.shape() == weir_host::state::Shape::OperatorList { "elements" } else { "keys" },
                human_bytes(s.bytes)
            );
            if key_groups {
                for (g, (k, b)) in &s.key_groups {
                    println!("    key group {g:>5}: {k} keys, {}", human_bytes(*b));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// A fresh scratch directory for downloads.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("weir-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// `host swap`.
fn swap(job: &str, operator: String, module: &Path, dir: Option<String>) -> anyhow::Result<()> {
    let client = Client::find(&job_name(job)?)?;
    // The host resolves paths from its own directory: send an absolute one.
    let module = std::fs::canonicalize(module).with_context(|| format!("cannot read {}", module.display()))?;
    let request = weir_host::control::SwapRequest { operator, module: module.display().to_string(), dir };
    let done = client.swap(&request).context("module swap failed")?;
    println!("{}", done.savepoint.location);
    eprintln!(
        "operator '{}' now runs {}; paused {:.1} ms; savepoint {} kept for rollback",
        request.operator,
        module.display(),
        done.pause_ms,
        done.savepoint.location
    );
    Ok(())
}

/// `host cancel`.
fn cancel(job: &str) -> anyhow::Result<()> {
    let name = job_name(job)?;
    Client::find(&name)?.cancel()?;
    eprintln!("job '{name}' is being cancelled");
    Ok(())
}

/// `host checkpoints`: one line per checkpoint, damaged ones included.
fn list_checkpoints(target: &str, config_flag: Option<&Path>) -> anyhow::Result<()> {
    use weir_host::checkpoint::metadata::CheckpointMetadata;
    use weir_host::checkpoint::storage::CheckpointStorage;
    use weir_host::runtime::checkpoints::human_bytes;
    let (host_path, host_file) = host_settings(config_flag)?;
    let (storage_settings, job_name) = if target.starts_with("file://") || target.starts_with("s3://") {
        let (dir, job) = target
            .trim_end_matches('/')
            .rsplit_once('/')
            .filter(|(d, j)| !j.is_empty() && !d.ends_with(':'))
            .with_context(|| format!("{target:?} is not a <dir>/<job> URI such as file:///var/ck/wordcount"))?;
        let base = host_file.clone().unwrap_or_default().resolve("host settings").map_err(anyhow::Error::msg)?;
        (weir_host::config::StorageSettings { dir: Some(dir.to_string()), ..base.storage }, job.to_string())
    } else {
        let host = host_path.as_deref().zip(host_file.as_ref());
        let job = config::load_job(Path::new(target), host, None)?;
        if job.settings.storage.dir.is_none() {
            anyhow::bail!(
                "job '{}' ({target}) has no state.checkpoints.dir: its checkpoints, if any, lived in host memory",
                job.spec.name
            );
        }
        (job.settings.storage.clone(), job.spec.name.clone())
    };
    let storage = CheckpointStorage::open(&storage_settings, &job_name)?;
    let ids = storage.list_checkpoints()?;
    if ids.is_empty() {
        println!("no checkpoints in {}", storage.display());
        return Ok(());
    }
    println!("checkpoints in {}", storage.display());
    println!("{:>8}  {:<24} {:>12} {:>10}  status", "id", "triggered (UTC)", "size", "duration");
    for id in ids {
        match storage
            .read_metadata(id)
            .map_err(|e| e.to_string())
            .and_then(|b| CheckpointMetadata::decode(&b).map_err(|e| e.to_string()))
        {
            Ok(m) => println!(
                "{:>8}  {:<24} {:>12} {:>8}ms  {}",
                id,
                utc(m.triggered_at_ms),
                human_bytes(m.state_size()),
                m.duration_ms,
                if m.finished { "complete (job finished)" } else { "complete" }
            ),
            Err(e) => println!("{id:>8}  {:<24} {:>12} {:>10}  unusable: {e}", "-", "-", "-"),
        }
    }
    Ok(())
}

/// Milliseconds since the epoch as `2026-11-29 13:05:01.123`.
fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

fn print_summary(report: &JobReport) {
    if let Some(s) = &report.stopped_with {
        eprintln!(
            "job '{}' stopped with savepoint {} (id {}); continue it with --from-savepoint {}",
            report.name, s.location, s.id, s.location
        );
    }
    if report.already_finished {
        eprintln!(
            "job '{}' had already finished ({}); nothing to run",
            report.name,
            report.restored_from.as_deref().unwrap_or("?")
        );
        return;
    }
    let secs = report.elapsed.as_secs_f64();
    eprintln!("job '{}' finished in {:.3}s (startup {:.0} ms)", report.name, secs, report.startup.as_secs_f64() * 1e3);
    eprintln!("  {:<10} {:<24} {:>4} {:>14} {:>14} {:>12}", "role", "id", "par", "records in", "records out", "in/s");
    for n in &report.nodes {
        let rate = if secs > 0.0 { n.counters.records_in as f64 / secs } else { 0.0 };
        eprintln!(
            "  {:<10} {:<24} {:>4} {:>14} {:>14} {:>12}",
            n.role,
            n.id,
            n.parallelism,
            n.counters.records_in,
            n.counters.records_out,
            weir_host::runtime::progress::human(rate)
        );
    }
    if let Some(from) = &report.restored_from {
        eprintln!("  restored from {from}");
    }
    if report.restarts > 0 {
        eprintln!("  restarted {} time(s) after failures", report.restarts);
    }
    let c = &report.checkpoints;
    if c.completed + c.failed > 0 {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let mut pauses = c.sync_pauses.clone();
        pauses.sort();
        let mut durations = c.durations.clone();
        durations.sort();
        let mid = |v: &[std::time::Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
        eprintln!(
            "  checkpoints: {} completed, {} failed; latest {}; sync pause median {:.3} ms, max {:.3} ms; duration median {:.0} ms, max {:.0} ms; last size {}",
            c.completed,
            c.failed,
            c.latest.map_or("-".to_string(), |l| format!("chk-{l}")),
            ms(mid(&pauses)),
            ms(pauses.last().copied().unwrap_or_default()),
            ms(mid(&durations)),
            ms(durations.last().copied().unwrap_or_default()),
            weir_host::runtime::checkpoints::human_bytes(c.sizes.last().copied().unwrap_or(0))
        );
    }
}

// Records are allocated on one task thread and freed on another (source to
// operator to sink); mimalloc's per-thread free lists keep that cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
