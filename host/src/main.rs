//! The `host` command line: the user's edge. Parses arguments, sets up
//! logging, loads configuration, runs the job and turns every error into a
//! message that names the file, field or operator, with a non-zero exit.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use weir_host::config::{self, SettingsFile};
use weir_host::runtime::{JobReport, run_job};

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
    },
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { job, config, parallelism } => run(&job, config.as_deref(), parallelism),
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

fn run(job_path: &Path, config_flag: Option<&Path>, parallelism: Option<u32>) -> anyhow::Result<()> {
    let host_path = host_config_path(config_flag);
    let host_file: Option<SettingsFile> = match &host_path {
        Some(p) => Some(config::load_host_file(p)?),
        None => None,
    };
    match &host_path {
        Some(p) => tracing::info!(config = %p.display(), "host settings"),
        None => tracing::info!("host settings: built-in defaults"),
    }
    let host = host_path.as_deref().zip(host_file.as_ref());
    let job = config::load_job(job_path, host, parallelism)?;
    let report = run_job(&job).with_context(|| format!("job '{}' ({}) failed", job.spec.name, job_path.display()))?;
    print_summary(&report);
    Ok(())
}

fn print_summary(report: &JobReport) {
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
}

// Records are allocated on one task thread and freed on another (source to
// operator to sink); mimalloc's per-thread free lists keep that cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
