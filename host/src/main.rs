//! The `host` command line: parses the arguments and hands each command to
//! its module under `cli/`. The only place where errors become exit
//! statuses.

mod cli;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use weir_host::api::SavepointRequest;
use weir_host::coordinator::StartFrom;

/// Weir runs stateful stream operators compiled to WebAssembly components.
#[derive(Parser)]
#[command(name = "host", version, about, long_about = None)]
#[command(after_help = "Logs go to stderr; filter them with RUST_LOG (e.g. RUST_LOG=weir_host=debug).")]
struct Cli {
    /// Log lines as text for people or as one JSON object per line for
    /// log collectors.
    #[arg(long, global = true, value_enum, default_value_t = cli::LogFormat::Text)]
    log_format: cli::LogFormat,
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
        /// Override the job's default parallelism (operators with their
        /// own `parallelism` keep it; none goes above its own
        /// `max_parallelism`).
        #[arg(long, short = 'p', value_name = "N")]
        parallelism: Option<u32>,
        /// Continue from the job's latest usable checkpoint in
        /// state.checkpoints.dir (falling back past damaged ones); start from
        /// the beginning if it has none. If the last run was started with
        /// --from-savepoint or --from-checkpoint and completed no checkpoint
        /// since, continue from what it started from.
        #[arg(long, conflicts_with = "from_checkpoint")]
        resume: bool,
        /// Start from this checkpoint: <dir>/<job>/chk-<n>, such as
        /// file:///var/lib/weir/checkpoints/wordcount/chk-12 or a local path
        /// like ck/wordcount/chk-12. The run never deletes it.
        #[arg(long, value_name = "URI|PATH", conflicts_with = "from_savepoint")]
        from_checkpoint: Option<String>,
        /// Start from this savepoint: the directory `host savepoint`
        /// printed, such as
        /// file:///var/lib/weir/savepoints/savepoint-wordcount-1764428000000
        /// (or its local path). State is matched to operators by uid; any
        /// backend and parallelism.
        #[arg(long, value_name = "URI|PATH", conflicts_with = "resume")]
        from_savepoint: Option<String>,
        /// With --from-checkpoint or --from-savepoint: drop the state of
        /// operators the job no longer has (listed in the log) instead of
        /// refusing to start.
        #[arg(long)]
        allow_non_restored_state: bool,
    },
    /// Show a running job: records in and out per operator, checkpoints.
    ///
    /// Given the job file of a cluster job (`[cluster]`), shows every
    /// partition of the input: who last claimed or committed it (from the
    /// commit logs on the shared checkpoint storage), its latest checkpoint,
    /// and the copies that run on this machine.
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
        /// Parent directory of the savepoint, a URI or a local path
        /// [default: the job's state.savepoints.dir].
        #[arg(long, value_name = "URI|PATH")]
        dir: Option<String>,
    },
    /// Replace one operator's module while the job runs, its state carried
    /// over (values migrated when the new module's state versions differ).
    ///
    /// A savepoint is taken at the swap and kept for rollback. If the new
    /// module fails to load, declares state of another kind, fails to
    /// migrate or traps in open, the old module keeps running and this
    /// exits non-zero with the reason. Prints the pause the swap caused.
    ///
    /// Given the job file of a cluster job (`[cluster]`), swaps every
    /// partition's copy that runs on this machine, one after the other;
    /// run it on each machine in turn for a rolling swap.
    Swap {
        /// The job's name, or its job file.
        job: String,
        /// The operator's uid.
        #[arg(long)]
        operator: String,
        /// The new component (.wasm).
        #[arg(long, value_name = "PATH")]
        module: PathBuf,
        /// Parent directory of the swap's savepoint, a URI or a local path
        /// [default: the job's state.savepoints.dir].
        #[arg(long, value_name = "URI|PATH")]
        dir: Option<String>,
    },
    /// Change an operator's parallelism, or the whole job's, while the job
    /// runs, its state carried over.
    ///
    /// At the next checkpoint barrier the operator's key groups, with their
    /// state, move between its old and new subtasks, without restarting the
    /// job or its other operators. Refused above the job's
    /// max parallelism, for an operator joined to a neighbour by a forward
    /// edge, and while a savepoint, a swap or another rescale is under way:
    /// then this exits non-zero with the reason. Prints the checkpoint that
    /// carried the rescale and the pause it caused. The job file's
    /// parallelism still applies when the job is started again.
    ///
    /// Without --operator, every operator not on N subtasks yet is
    /// rescaled, one after another, each at its own barrier; sources and
    /// sinks keep theirs, and an operator joined to another by a forward
    /// edge stays as it is (said on stderr). A refusal or failure stops
    /// there, naming the operators already rescaled.
    Rescale {
        /// The job's name, or its job file.
        job: String,
        /// The operator's uid; without it, every operator of the job.
        #[arg(long, value_name = "UID")]
        operator: Option<String>,
        /// Its new number of subtasks, from 1 to the job's max parallelism
        /// (or the operator's own, if lower).
        #[arg(long, short = 'p', value_name = "N")]
        parallelism: u32,
    },
    /// Try another module on an operator's live traffic, with its real
    /// state, before switching to it.
    ///
    /// At the next checkpoint barrier each subtask of the operator forks a
    /// copy of its state into a shadow running --module, fed the same input
    /// as the live operator from then on. The shadow's output goes nowhere:
    /// it is compared, per output key, with the live output (equal,
    /// different, only live, only shadow, the keys that differ, samples).
    /// The live job and its output are untouched; a shadow that fails or
    /// falls --max-lag batches behind is dropped with its report.
    ///
    /// With --duration this waits and prints the final report; without,
    /// the shadow runs until `--stop`, `--promote` or the end of input, and
    /// `--report` shows how it goes. `--promote` ends it and swaps its
    /// module in at the next barrier, over the live state (the state that
    /// produced the output downstream has seen). A shadow does not survive
    /// a restart of the job.
    Shadow {
        /// The job's name, or its job file.
        job: String,
        /// The operator's uid.
        #[arg(long, value_name = "UID", required_unless_present_any = ["report", "stop", "promote"])]
        operator: Option<String>,
        /// The component to try (.wasm).
        #[arg(long, value_name = "PATH", required_unless_present_any = ["report", "stop", "promote"])]
        module: Option<PathBuf>,
        /// End the shadow after this long (e.g. 30s, 5m) and print its
        /// report.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        duration: Option<std::time::Duration>,
        /// Input batches a shadow subtask may fall behind the live one
        /// before it is dropped.
        #[arg(long, value_name = "N", default_value_t = weir_host::api::DEFAULT_MAX_LAG)]
        max_lag: u32,
        /// Print the report of the shadow run so far.
        #[arg(long, conflicts_with_all = ["operator", "module", "stop", "promote"])]
        report: bool,
        /// End the shadow run and print its final report.
        #[arg(long, conflicts_with_all = ["operator", "module", "promote"])]
        stop: bool,
        /// End the shadow run and swap its module in, over the live state.
        #[arg(long, conflicts_with_all = ["operator", "module"])]
        promote: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one operator again, offline, from a checkpoint over the input
    /// it recorded after it (an operator with `replay = { record = true }`
    /// in the job file), and compare the output with the recorded one.
    ///
    /// Each subtask restores its part of the checkpoint and processes the
    /// recorded steps: the same records, watermarks and timer firings,
    /// with the guest's clocks reading the recorded processing time and
    /// its randomness seeded as it was. With the same module the output is
    /// the recorded one byte for byte; with --module or --param it reports
    /// the differences per output key, as a shadow run does. Nothing of
    /// the job is touched, and no broker or source is needed.
    Replay {
        /// The checkpoint to start from (<dir>/<job>/chk-<n>), as a URI or
        /// a local path.
        checkpoint: String,
        /// The operator's uid.
        #[arg(long, value_name = "UID")]
        operator: String,
        /// Another component to run (default: the module that ran).
        #[arg(long, value_name = "PATH")]
        module: Option<PathBuf>,
        /// A param for the module's `open`, replacing the recorded one
        /// (repeatable).
        #[arg(long, value_name = "NAME=VALUE")]
        param: Vec<String>,
        /// Stop at the barrier of this checkpoint (default: as far as the
        /// recording goes).
        #[arg(long, value_name = "CHECKPOINT")]
        until: Option<u64>,
        /// Exit with an error unless the output is the recorded one byte
        /// for byte.
        #[arg(long)]
        check: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Host settings file (S3 options, guest limits, RocksDB scratch).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Show what a checkpoint or savepoint holds, without running the job:
    /// operators, states, kinds, keys and bytes (per key group with
    /// --key-groups), or one key's value.
    Inspect {
        /// A checkpoint (<dir>/<job>/chk-<n>) or a savepoint directory, as a
        /// URI or a local path.
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
    /// Create an operator project in ./<name>: the operator's source, its
    /// build script (Cargo.toml for Rust), a job.toml that runs it on a
    /// sample input, and a README. Prints the commands that build and run it.
    New {
        /// The project's name: its directory, job name and operator uid
        /// (lowercase letters, digits, '-' and '_').
        name: String,
        /// The operator's language.
        #[arg(long, value_enum)]
        lang: cli::new::Lang,
        /// The Weir checkout whose SDK and wit/ the project builds with
        /// [default: the one this host was built from].
        #[arg(long, value_name = "DIR")]
        weir: Option<PathBuf>,
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
        /// A job file, or its <dir>/<job> directory (URI or local path).
        target: String,
        /// Host settings file (for S3 options and the default directory).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let args = Cli::parse();
    cli::init_logging(args.log_format);
    let result = match args.command {
        Command::Run {
            job,
            config,
            parallelism,
            resume,
            from_checkpoint,
            from_savepoint,
            allow_non_restored_state,
        } => (|| {
            let start = match (resume, from_checkpoint, from_savepoint) {
                (_, Some(uri), _) => StartFrom::Checkpoint { uri: cli::location(&uri)?, allow_non_restored_state },
                (_, _, Some(uri)) => StartFrom::Savepoint { uri: cli::location(&uri)?, allow_non_restored_state },
                (true, None, None) => StartFrom::Latest,
                (false, None, None) => StartFrom::Beginning,
            };
            cli::run::run(&job, config.as_deref(), parallelism, &start, args.log_format)
        })(),
        Command::Checkpoints { target, config } => cli::checkpoints::list(&target, config.as_deref()),
        Command::Status { job, json } => cli::control::status(&job, json),
        Command::Savepoint { job, stop, drain, dir } => dir
            .map(|d| cli::location(&d))
            .transpose()
            .and_then(|dir| cli::control::savepoint(&job, SavepointRequest { dir, stop, drain })),
        Command::New { name, lang, weir } => cli::new::new(&name, lang, weir.as_deref()),
        Command::Cancel { job } => cli::control::cancel(&job),
        Command::Swap { job, operator, module, dir } => {
            dir.map(|d| cli::location(&d)).transpose().and_then(|dir| cli::control::swap(&job, operator, &module, dir))
        }
        Command::Rescale { job, operator, parallelism } => cli::control::rescale(&job, operator, parallelism),
        Command::Shadow { job, operator, module, duration, max_lag, report, stop, promote, json } => {
            use cli::shadow::Action;
            let action = match (operator.zip(module), report, stop, promote) {
                (_, true, _, _) => Ok(Action::Report),
                (_, _, true, _) => Ok(Action::Stop),
                (_, _, _, true) => Ok(Action::Promote),
                (Some((operator, module)), ..) => Ok(Action::Start { operator, module, duration, max_lag }),
                (None, ..) => Err(anyhow::anyhow!("give --operator and --module, or --report, --stop or --promote")),
            };
            action.and_then(|a| cli::shadow::shadow(&job, a, json))
        }
        Command::Replay { checkpoint, operator, module, param, until, check, json, config } => {
            cli::location(&checkpoint).and_then(|checkpoint| {
                cli::replay::replay(cli::replay::Args {
                    checkpoint,
                    operator,
                    module,
                    params: param,
                    until,
                    check,
                    json,
                    config,
                })
            })
        }
        Command::Inspect { target, key_groups, operator, state, key, config } => {
            let lookup = operator.zip(state).zip(key).map(|((o, s), k)| (o, s, k));
            cli::location(&target).and_then(|t| cli::inspect::inspect(&t, key_groups, lookup, config.as_deref()))
        }
    };
    // RocksDB's static state goes as the process exits: a cache layer still
    // being written then would abort the process after the job succeeded.
    #[cfg(feature = "rocksdb")]
    if !weir_host::state::rocksdb::wait_for_writers(std::time::Duration::from_secs(120)) {
        tracing::warn!("a RocksDB cache layer was still being written after 120 s; exiting anyway");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", cli::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

// Records are allocated on one task thread and freed on another (source to
// operator to sink); mimalloc's per-thread free lists keep that cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
