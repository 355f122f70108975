//! `host new`: scaffolds an operator project in `./<name>` from the
//! templates in `host/templates/` (embedded in the binary): the operator's
//! source, its build script or `Cargo.toml`, a `job.toml` that runs it on a
//! sample input written beside it, and a three-line README; then prints the
//! commands that build and run it. The project finds the SDKs and `wit/` in
//! the Weir checkout the host was built from (or `--weir`).
//!
//! It writes nothing outside `./<name>`, and nothing at all when a check
//! fails: the project is written in a temporary directory beside it and
//! renamed into place.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// An operator's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
}

/// One file of a project: its path in the project, its text, whether it is
/// a script to run.
struct File {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

const fn file(path: &'static str, text: &'static str) -> File {
    File { path, text, executable: false }
}

const fn script(path: &'static str, text: &'static str) -> File {
    File { path, text, executable: true }
}

/// What every project has, whatever its language.
const COMMON: &[File] = &[
    file("job.toml", include_str!("../../templates/job.toml")),
    file("events.jsonl", include_str!("../../templates/events.jsonl")),
    file("README.md", include_str!("../../templates/README.md")),
];

const RUST: &[File] = &[
    file("Cargo.toml", include_str!("../../templates/rust/Cargo.toml")),
    file("src/lib.rs", include_str!("../../templates/rust/src/lib.rs")),
    // The toolchain Weir is built and tested with, with the wasm32-wasip2
    // target.
    file("rust-toolchain.toml", include_str!("../../../rust-toolchain.toml")),
];

const PYTHON: &[File] = &[
    file("app.py", include_str!("../../templates/python/app.py")),
    script("build.sh", include_str!("../../templates/python/build.sh")),
];

const JS: &[File] = &[
    file("app.js", include_str!("../../templates/js/app.js")),
    // The project's npm root: build.sh installs the SDK package into it.
    file("package.json", include_str!("../../templates/js/package.json")),
    script("build.sh", include_str!("../../templates/js/build.sh")),
];

const C: &[File] = &[
    file("app.c", include_str!("../../templates/c/app.c")),
    script("build.sh", include_str!("../../templates/c/build.sh")),
];

/// The files of a `lang` project.
fn files(lang: Lang) -> &'static [File] {
    match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
        Lang::C => C,
    }
}

impl Lang {
    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::C => "C",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Lang::Rust => "src/lib.rs",
            Lang::Python => "app.py",
            Lang::Js => "app.js",
            Lang::C => "app.c",
        }
    }

    /// The command that builds the component, run in the project.
    fn build(self) -> &'static str {
        match self {
            // An explicit target directory: the job file names the
            // component under ./target, wherever CARGO_TARGET_DIR points.
            Lang::Rust => "cargo build --release --target wasm32-wasip2 --target-dir target",
            Lang::Python | Lang::Js | Lang::C => "./build.sh",
        }
    }

    /// The component the build writes, relative to the project.
    fn module(self, name: &str) -> String {
        match self {
            Lang::Rust => format!("target/wasm32-wasip2/release/{}.wasm", name.replace('-', "_")),
            Lang::Python | Lang::Js | Lang::C => format!("{name}.wasm"),
        }
    }
}

/// The Weir checkout this binary was built from, where the SDKs and
/// `wit/` are.
fn built_from() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("/")).to_path_buf()
}

/// Checks a project name: it becomes a directory, a job name, an operator
/// uid and a Rust crate name, so it is kept to what all four accept.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!("bad project name {name:?}: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter");
    }
    Ok(())
}

/// `text` with the placeholders filled in.
fn render(text: &str, vars: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    debug_assert!(!out.contains("{{"), "a template placeholder is left in:\n{out}");
    out
}

/// The project's files as (path, text, executable), rendered.
fn project(name: &str, lang: Lang, weir: &Path) -> Vec<(&'static str, String, bool)> {
    let weir = weir.display().to_string();
    let module = lang.module(name);
    let vars = [
        ("name", name),
        ("weir", weir.as_str()),
        ("module", module.as_str()),
        ("language", lang.title()),
        ("source", lang.source()),
        ("build", lang.build()),
    ];
    files(lang).iter().chain(COMMON).map(|f| (f.path, render(f.text, &vars), f.executable)).collect()
}

/// How to run this `host` binary: `host` if that is what PATH finds,
/// else its full path.
fn host_command() -> String {
    let exe = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok());
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("host")).find(|p| p.is_file()).and_then(|p| p.canonicalize().ok())
    });
    match exe {
        Some(exe) if on_path.as_ref() != Some(&exe) => exe.display().to_string(),
        _ => "host".to_string(),
    }
}

/// Scaffolds project `name` in `lang` in the current directory, its SDK
/// from the Weir checkout `weir` (default: the one this binary was built
/// from), and prints how to build and run it.
pub fn new(name: &str, lang: Lang, weir: Option<&Path>) -> anyhow::Result<()> {
    check_name(name)?;
    let weir = match weir {
        Some(w) => std::path::absolute(w).with_context(|| format!("{} is not a usable path", w.display()))?,
        None => built_from(),
    };
    if !weir.join("wit/world.wit").is_file() || !weir.join("sdk").is_dir() {
        bail!(
            "{} is not a Weir checkout (no wit/world.wit and sdk/): the project needs its SDK and WIT; pass --weir <path to a Weir checkout>",
            weir.display()
        );
    }
    let dir = Path::new(name);
    if dir.symlink_metadata().is_ok() {
        bail!("./{name} already exists: choose another name, or remove it first");
    }
    // Written aside, then renamed into place: a failure leaves nothing.
    let staging = PathBuf::from(format!(".{name}.new-{}", std::process::id()));
    let written = write_project(&staging, &project(name, lang, &weir));
    let result =
        written.and_then(|()| std::fs::rename(&staging, dir).with_context(|| format!("cannot create ./{name}")));
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }

    let host = host_command();
    println!("Created the {} operator project ./{name}:", lang.title());
    println!("  {:<24} the operator: counts the events of each user", lang.source());
    println!("  {:<24} runs it on events.jsonl and writes output/counts.txt", "job.toml");
    println!("Build and run it:");
    println!("  cd {name}");
    println!("  {}", lang.build());
    println!("  {host} run job.toml");
    Ok(())
}

fn write_project(dir: &Path, files: &[(&str, String, bool)]) -> anyhow::Result<()> {
    for (path, text, executable) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_directories_uids_and_crate_names_are_accepted() {
        for good in ["counter", "my-op", "op_2", "a"] {
            check_name(good).unwrap();
        }
        for bad in ["", "My-Op", "2op", "-op", "op/x", "..", "op x", "é", &"a".repeat(65)] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.contains("bad project name"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn every_placeholder_of_every_template_is_filled() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::C] {
            let files = project("my-op", lang, Path::new("/opt/weir"));
            for (path, text, _) in &files {
                assert!(!text.contains("{{"), "{lang:?} {path}: {text}");
            }
            let job = &files.iter().find(|f| f.0 == "job.toml").unwrap().1;
            assert!(job.contains(&format!("module = \"{}\"", lang.module("my-op"))), "{job}");
            let readme = &files.iter().find(|f| f.0 == "README.md").unwrap().1;
            assert_eq!(readme.lines().count(), 3, "{readme}");
            assert!(readme.contains(lang.build()), "{readme}");
        }
        let rust = project("my-op", Lang::Rust, Path::new("/opt/weir"));
        let cargo = &rust.iter().find(|f| f.0 == "Cargo.toml").unwrap().1;
        assert!(cargo.contains("weir-sdk = { path = \"/opt/weir/sdk\" }"), "{cargo}");
        assert_eq!(Lang::Rust.module("my-op"), "target/wasm32-wasip2/release/my_op.wasm");
    }
}
