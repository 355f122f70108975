//! Shared helpers of Weir's end-to-end tests and benchmarks: paths of the
//! guest components this crate's build script compiled, the `host` binary,
//! and a way to run it as a user would.

#![allow(missing_docs)]

#[cfg(feature = "kafka")]
pub mod bench;
pub mod kafka;
pub mod nexmark;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Absolute paths of the compiled guest components.
pub mod artifacts {
    include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    // Read when the test runs (cargo sets it then too): a binary built in
    // one checkout sharing the target directory may run in another.
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from);
    manifest.parent().expect("the crate is inside the repository").to_path_buf()
}

/// The `host` binary of the same build profile as the running test.
pub fn host_binary() -> PathBuf {
    // Tests run from <target>/<profile>/deps/; the binary is in <profile>/.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile_dir.join("host");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build --release -p weir-host`, which scripts/test does)",
        bin.display()
    );
    bin
}

/// The `XDG_CACHE_HOME` every test's `host` runs with: its compiled-module
/// cache (`weir/components`), in the target directory beside the test
/// binary and kept from run to run. A component is then compiled once per
/// machine and version of it, not once per test: a Python operator is an
/// 18 MB component, and the Python session-window test took 22 s of CPU
/// with a cache of its own against 5 s with this one warm. The cache is keyed by the component's SHA-256 and the
/// engine, and written atomically, so tests running side by side share it
/// safely. A test of the cache itself gives the host a directory of its
/// own (a later `.env("XDG_CACHE_HOME", …)` on [`host_command`] wins).
pub fn shared_cache_home() -> PathBuf {
    // Tests run from <target>/<profile>/deps/.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).expect("the test binary is in <target>/<profile>/deps");
    target.join("weir-test-cache")
}

/// Runs `host` with `args` in `dir`, with the tests' shared module cache
/// and no host settings file unless the args name one.
pub fn run_host(dir: &Path, args: &[&str]) -> Output {
    host_command(dir, args).output().expect("run the host binary")
}

/// `host <args>` in `dir`, set up as [`run_host`] runs it, to start and
/// watch (or kill) while it runs.
pub fn host_command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(host_binary());
    c.args(args)
        .current_dir(dir)
        .env("XDG_CACHE_HOME", shared_cache_home())
        // Default savepoints stay in the test's directory too.
        .env("XDG_DATA_HOME", dir.join(".data"))
        // Run files (the control endpoint's address) per test directory:
        // tests run jobs of the same name side by side.
        .env("WEIR_RUN_DIR", dir.join(".run"))
        .env_remove("WEIR_CONFIG")
        .env("RUST_LOG", "warn,weir_host=info");
    c
}

/// A Python, JavaScript or C operator's component, built by `scripts/test`
/// (componentize-py, componentize-js, sdk/c/build.sh) into
/// `target/wasm/<name>.wasm`.
pub fn script_guest(name: &str) -> String {
    let path = repo_root().join("target").join("wasm").join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: scripts/test builds the Python, JavaScript and C operators (or: source scripts/common.sh; build_python_guests; build_js_guests; build_c_guests)",
        path.display()
    );
    path.display().to_string()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `host run <job> <extra...>` from a scratch directory (with the
/// tests' shared module cache): how the committed examples are run, from
/// anywhere.
pub fn run_example(job: &Path, extra: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    let mut args = vec!["run", job.to_str().unwrap()];
    args.extend_from_slice(extra);
    Command::new(host_binary())
        .args(&args)
        .current_dir(scratch.path())
        .env("XDG_CACHE_HOME", shared_cache_home())
        .env("WEIR_RUN_DIR", scratch.path().join(".run"))
        .env_remove("WEIR_CONFIG")
        .output()
        .expect("run the host binary")
}

/// The job time in seconds from a summary (`job '…' finished in 1.234s`).
pub fn elapsed_secs(stderr: &str) -> f64 {
    stderr
        .split("finished in ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no elapsed time in:\n{stderr}"))
}

/// Runs `host run job.toml` in `dir` with logs at error level, asserts
/// success, and returns stderr (the summary).
pub fn run_quiet(dir: &Path) -> String {
    run_quiet_with(&host_binary(), dir)
}

/// As [`run_quiet`], with the `host` binary `bin` (a benchmark's baseline).
pub fn run_quiet_with(bin: &Path, dir: &Path) -> String {
    let out = Command::new(bin)
        .args(["run", "job.toml"])
        .current_dir(dir)
        // The compiled-module cache of this directory alone: benchmarks
        // time a cold start, then a warm one.
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .env("RUST_LOG", "error")
        .env("WEIR_RUN_DIR", dir.join(".run"))
        .env_remove("WEIR_CONFIG")
        .output()
        .expect("run the host binary");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// A real S3-compatible server (moto) on 127.0.0.1, for checkpoint storage
/// tests. `scripts/test` installs it; `WEIR_MOTO_SERVER` names the binary
/// (default: `~/.cache/weir/venv/bin/moto_server`).
pub struct S3Server {
    port: u16,
    child: Option<std::process::Child>,
}

/// The bucket every test uses (each test under its own prefix).
pub const S3_BUCKET: &str = "weir-test";

impl S3Server {
    /// Starts a server on a free port, with [`S3_BUCKET`] created.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut s = S3Server { port, child: None };
        s.resume();
        s
    }

    fn binary() -> PathBuf {
        match std::env::var_os("WEIR_MOTO_SERVER") {
            Some(p) => PathBuf::from(p),
            None => {
                let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
                home.join(".cache/weir/venv/bin/moto_server")
            }
        }
    }

    /// (Re)starts the server on its port and creates the bucket (a
    /// restarted moto starts empty, like a store that lost its data).
    pub fn resume(&mut self) {
        let bin = Self::binary();
        assert!(
            bin.is_file(),
            "{} is missing: scripts/test installs moto (pip install 'moto[server]'); or set WEIR_MOTO_SERVER",
            bin.display()
        );
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto_server");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Ok(status) = self.http("PUT", &format!("/{S3_BUCKET}"), b"") {
                assert!(status == 200 || status == 409, "creating the bucket answered {status}");
                return;
            }
            assert!(std::time::Instant::now() < deadline, "moto_server did not start on port {}", self.port);
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Stops the server (an outage).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment `host` needs to reach the server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// Stores `bytes` as object `key` of [`S3_BUCKET`], as another tool
    /// copying files into the bucket would.
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let status = self.http("PUT", &format!("/{S3_BUCKET}/{key}"), bytes).unwrap();
        assert_eq!(status, 200, "PUT {key}");
    }

    /// One request (moto does not check signatures); the status code.
    fn http(&self, method: &str, path: &str, body: &[u8]) -> std::io::Result<u16> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )?;
        s.write_all(body)?;
        let mut response = String::new();
        s.read_to_string(&mut response)?;
        response
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad HTTP response {response:?}")))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The keyed-count job as a job file: the generator (`count` records over
/// `keys` keys from `seed`) into the word-count counter (a `ValueState<u64>`
/// per key) at parallelism 1, into a discard sink. `settings` (TOML tables
/// such as `[checkpointing]`) go before the graph.
pub fn counter_job(name: &str, count: u64, keys: u64, seed: u64, settings: &str) -> String {
    keyed_count(name, 1, settings, &format!("count = {count}\nkeys = {keys}\nseed = {seed}"), "kind = \"discard\"")
}

/// The keyed count measured for latency, as a job file: a generator
/// (`count` records over `keys` keys, `rate` records per second if set)
/// stamping each record with the time it was due (`timestamps =
/// "wall-clock-us"`), into the word-count counter, which passes the stamp
/// on, into a `latency` sink that writes `latency.json` beside the job
/// file. `settings` (TOML tables) go before the graph.
pub fn latency_job(parallelism: u32, count: u64, keys: u64, rate: Option<u64>, settings: &str) -> String {
    let pace = rate.map(|r| format!("records_per_second = {r}")).unwrap_or_default();
    let source = format!("count = {count}\nkeys = {keys}\ntimestamps = \"wall-clock-us\"\n{pace}");
    keyed_count(
        "latency",
        parallelism,
        settings,
        &source,
        "kind = \"latency\"\nunit = \"us\"\noutput = \"latency.json\"",
    )
}

/// A generator (`gen`, with the `source` fields) into the word-count
/// counter keyed by word, into a sink (`out`, with the `sink` fields).
fn keyed_count(name: &str, parallelism: u32, settings: &str, source: &str, sink: &str) -> String {
    format!(
        r#"name = "{name}"
parallelism = {parallelism}

{settings}

[[sources]]
id = "gen"
kind = "generator"
{source}

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
{sink}
input = "counter"
"#,
        counter = artifacts::WORD_COUNT_COUNTER
    )
}
