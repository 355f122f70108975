//! Where a job's file connectors may write and read: beneath the roots
//! `[limits]` lists and the job file's own directory. A path a job file
//! names is resolved as the operating system will resolve it when the
//! connector opens it (links followed in the part that exists, `..` taken
//! after them, the part still to be created normalised), and must end
//! beneath a root, resolved the same way; a link that leaves the root is
//! caught where it points. Checked by `load_job`, before any task starts.
//! Which connector options are paths is [`FILE_OPTIONS`]: the connectors
//! sit below this module, so they name it in their tests rather than the
//! other way round.

use super::job::{ConnectorSpec, InvalidJob, JobSpec};
use super::limits::Limits;
use std::path::{Component, Path, PathBuf};

/// A path whose existing part the operating system cannot resolve.
#[derive(Debug, thiserror::Error)]
#[error("{} cannot be resolved ({cause}): a link that leads nowhere, or a loop of links", path.display())]
struct Unresolvable {
    path: PathBuf,
    cause: std::io::Error,
}

/// Whether a connector reads or writes the path it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A file source: confined only when `limits.source_roots` is set.
    Read,
    /// A sink: always confined.
    Write,
}

/// A connector option that names a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOption {
    /// `"source"` or `"sink"`.
    pub role: &'static str,
    /// The connector's `kind`.
    pub kind: &'static str,
    /// The option holding the path.
    pub key: &'static str,
    /// What the connector does there.
    pub access: Access,
}

/// Every connector option that names a path on this machine. A connector
/// that takes a new one must be listed here, or its path goes unchecked.
pub const FILE_OPTIONS: &[FileOption] = &[
    FileOption { role: "source", kind: "file", key: "path", access: Access::Read },
    FileOption { role: "sink", kind: "file", key: "path", access: Access::Write },
    FileOption { role: "sink", kind: "transactional-file", key: "dir", access: Access::Write },
    FileOption { role: "sink", kind: "latency", key: "output", access: Access::Write },
];

/// Checks every path option of `spec`'s sources and sinks against the
/// roots of `limits`; the message names the node, the option, where the
/// path leads and the roots.
pub fn check_paths(spec: &JobSpec, limits: &Limits) -> Result<(), InvalidJob> {
    let job_dir = limits.job_dir_is_root.then_some(spec.base.as_path());
    let sink_roots = roots(job_dir, &limits.sink_roots, &[]);
    let source_roots = limits.source_roots.as_ref().map(|r| roots(job_dir, r, &limits.sink_roots));
    let nodes = spec.sources.iter().map(|s| ("source", s));
    for (role, c) in nodes.chain(spec.sinks.iter().map(|s| ("sink", &s.connector))) {
        for option in FILE_OPTIONS.iter().filter(|o| o.role == role && o.kind == c.kind) {
            let Some(written) = c.options.get(option.key).and_then(|v| v.as_str()) else {
                // Missing or not a string: the connector says so itself.
                continue;
            };
            let allowed = match option.access {
                Access::Write => &sink_roots,
                Access::Read => match &source_roots {
                    Some(roots) => roots,
                    None => continue,
                },
            };
            check_one(c, option, written, &spec.base, allowed, option.access, limits.job_dir_is_root)?;
        }
    }
    Ok(())
}

/// The roots, resolved: the job's directory (when it is one) and the
/// listed directories. A root that cannot be resolved (a broken link) has
/// nothing beneath it.
fn roots(job_dir: Option<&Path>, listed: &[PathBuf], more: &[PathBuf]) -> Vec<PathBuf> {
    job_dir
        .into_iter()
        .chain(listed.iter().map(PathBuf::as_path))
        .chain(more.iter().map(PathBuf::as_path))
        .filter_map(|r| resolve(r).ok())
        .collect()
}

fn check_one(
    c: &ConnectorSpec,
    option: &FileOption,
    written: &str,
    base: &Path,
    roots: &[PathBuf],
    access: Access,
    job_dir_is_root: bool,
) -> Result<(), InvalidJob> {
    let node = format!("{} '{}'", option.role, c.id);
    let key = option.key;
    if written.starts_with('~') {
        return Err(InvalidJob(format!(
            "{node}: {key} = {written:?}: the host does not expand ~ (a path is relative to the job file's directory, or absolute); write the path in full"
        )));
    }
    let path = base.join(written);
    let resolved = resolve(&path).map_err(|why| InvalidJob(format!("{node}: {key} = {written:?}: {why}")))?;
    if roots.iter().any(|root| resolved.starts_with(root)) {
        return Ok(());
    }
    let listed: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    let listed = if listed.is_empty() { "none".to_string() } else { listed.join(", ") };
    let (verb, keys, add_to) = match access {
        Access::Write => ("write", "limits.sink_roots", "limits.sink_roots"),
        Access::Read => ("read", "limits.source_roots and limits.sink_roots", "limits.source_roots"),
    };
    let whose = if job_dir_is_root {
        format!("the job file's directory, and {keys} in the host settings file")
    } else {
        format!("{keys} in the host settings file; limits.job_dir_is_root = false leaves out the job file's directory")
    };
    Err(InvalidJob(format!(
        "{node}: {key} = {written:?} leads to {}, outside the directories a job may {verb} beneath: {listed} ({whose}); use a path beneath one of them, or have the host's operator add a root to {add_to}",
        resolved.display(),
    )))
}

/// Where `path` leads: its longest part that exists (a link at its end
/// included) resolved by the operating system, then the rest taken
/// component by component (`..` going up from what the system resolved).
fn resolve(path: &Path) -> Result<PathBuf, Unresolvable> {
    let path = std::path::absolute(path).map_err(|cause| Unresolvable { path: path.to_path_buf(), cause })?;
    let components: Vec<Component<'_>> = path.components().collect();
    let mut exists = components.len();
    while exists > 1 {
        let prefix: PathBuf = components[..exists].iter().collect();
        match std::fs::symlink_metadata(&prefix) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => exists -= 1,
            // A prefix that is a file, or unreadable: the connector will
            // fail to open it; judge what the system can resolve.
            Err(_) => exists -= 1,
        }
    }
    let prefix: PathBuf = components[..exists].iter().collect();
    let mut resolved = std::fs::canonicalize(&prefix).map_err(|cause| Unresolvable { path: prefix.clone(), cause })?;
    for c in &components[exists..] {
        match c {
            Component::Normal(name) => resolved.push(name),
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::job::SinkSpec;

    fn spec(base: &Path, sinks: &[(&str, &str, &str)]) -> JobSpec {
        let sinks = sinks
            .iter()
            .map(|(kind, key, path)| {
                let mut options = toml::Table::new();
                options.insert(key.to_string(), toml::Value::String(path.to_string()));
                SinkSpec {
                    connector: ConnectorSpec { id: "out".into(), kind: kind.to_string(), options, parallelism: 1 },
                    input: "in".into(),
                }
            })
            .collect();
        JobSpec {
            name: "j".into(),
            max_parallelism: 128,
            base: base.to_path_buf(),
            sources: Vec::new(),
            operators: Vec::new(),
            sinks,
            cluster: None,
        }
    }

    #[test]
    fn sinks_write_beneath_the_job_directory_and_the_listed_roots_only() {
        let tmp = tempfile::tempdir().unwrap();
        let job = tmp.path().join("job");
        let home = tmp.path().join("home");
        let shared = tmp.path().join("shared");
        for d in [&job, &home, &shared] {
            std::fs::create_dir(d).unwrap();
        }
        std::os::unix::fs::symlink(&home, job.join("link")).unwrap();
        std::os::unix::fs::symlink(home.join(".bashrc"), job.join("dangling")).unwrap();
        let limits = Limits::default();
        for ok in ["out.txt", "new/dir/out.txt", "./a/../b.txt", "new/../x.txt"] {
            check_paths(&spec(&job, &[("file", "path", ok)]), &limits).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        check_paths(&spec(&job, &[("transactional-file", "dir", ".")]), &limits).unwrap();
        let bashrc = home.join(".bashrc").display().to_string();
        for (bad, says) in [
            ("../home/.bashrc", "leads to"),
            (bashrc.as_str(), "leads to"),
            ("link/.bashrc", "leads to"),
            ("dangling", "cannot be resolved"),
            ("new/../../home/x", "leads to"),
            ("~/.bashrc", "does not expand ~"),
        ] {
            let e = check_paths(&spec(&job, &[("file", "path", bad)]), &limits).unwrap_err().0;
            assert!(e.starts_with("sink 'out': path = ") && e.contains(says), "{bad}: {e}");
        }
        let e = check_paths(&spec(&job, &[("latency", "output", "../shared/l.json")]), &limits).unwrap_err().0;
        assert!(e.contains("sink 'out': output = ") && e.contains(&job.display().to_string()), "{e}");
        // A listed root lets it through; without the job's directory as a
        // root, relative output is refused.
        let mut listed = Limits { sink_roots: vec![shared.clone()], ..Limits::default() };
        check_paths(&spec(&job, &[("latency", "output", "../shared/l.json")]), &listed).unwrap();
        listed.job_dir_is_root = false;
        let e = check_paths(&spec(&job, &[("file", "path", "out.txt")]), &listed).unwrap_err().0;
        let shared = std::fs::canonicalize(&shared).unwrap();
        let says = format!(
            "beneath: {} (limits.sink_roots in the host settings file; limits.job_dir_is_root = false leaves out the job file's directory)",
            shared.display()
        );
        assert!(e.contains(&says), "{e}");
    }

    #[test]
    fn file_sources_read_anywhere_unless_the_host_lists_source_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let job = tmp.path().join("job");
        std::fs::create_dir(&job).unwrap();
        let mut options = toml::Table::new();
        options.insert("path".into(), toml::Value::String("/etc/passwd".into()));
        let source = ConnectorSpec { id: "in".into(), kind: "file".into(), options, parallelism: 1 };
        let spec = JobSpec { sources: vec![source], ..spec(&job, &[]) };
        check_paths(&spec, &Limits::default()).unwrap();
        let confined = Limits { source_roots: Some(vec![tmp.path().to_path_buf()]), ..Limits::default() };
        let e = check_paths(&spec, &confined).unwrap_err().0;
        assert!(e.starts_with("source 'in': path = \"/etc/passwd\" leads to /etc/passwd, outside"), "{e}");
        assert!(e.contains("limits.source_roots"), "{e}");
    }
}
