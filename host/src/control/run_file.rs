//! Reading a run file, and whether to believe it. A run file tells a
//! command where a job's control endpoint listens and which token to send
//! it; one planted by another user would point `host savepoint`, `swap` or
//! `cancel` at that user's server, which would then answer for the job.
//! So a run file is read only if it is a regular file of the user's own,
//! writable by no one else, in a directory of the user's own that no one
//! else can write: what the server demands of the directory it writes the
//! file in ([`super::server`]), and how ssh treats its keys.

use super::RunFile;
use rustix::fs::OFlags;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use thiserror::Error;

/// The most bytes a run file is read to (one is about 150).
const MAX_BYTES: u64 = 64 << 10;

/// A run file that is there but not to be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "refusing the run file {file}: {why}; a command trusts only a run file of its user's own, in a directory no one \
     else can write (remove it, or set WEIR_RUN_DIR to a directory of your own)"
)]
pub struct UntrustedRunFile {
    /// The run file.
    pub file: String,
    /// What is wrong with it or its directory.
    pub why: String,
}

/// The run file at `file`: `None` when there is none (or it is not a run
/// file), an error naming what is wrong when it or its directory could be
/// another user's. Never blocks on a FIFO, never follows a link.
pub fn read(file: &Path) -> Result<Option<RunFile>, UntrustedRunFile> {
    let untrusted = |why: String| UntrustedRunFile { file: file.display().to_string(), why };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(file);
    let handle = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(untrusted("it is a symbolic link".into()));
        }
        Err(e) => return Err(untrusted(format!("it cannot be opened ({e})"))),
    };
    let me = rustix::process::geteuid().as_raw();
    let meta = handle.metadata().map_err(|e| untrusted(format!("it cannot be read ({e})")))?;
    if !meta.is_file() {
        return Err(untrusted("it is not a regular file".into()));
    }
    if let Some(why) = not_private("it", meta.uid(), meta.permissions().mode(), me) {
        return Err(untrusted(why));
    }
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir_meta = std::fs::symlink_metadata(dir)
        .map_err(|e| untrusted(format!("its directory {} cannot be read ({e})", dir.display())))?;
    if !dir_meta.is_dir() {
        return Err(untrusted(format!("its directory {} is a symbolic link", dir.display())));
    }
    let what = format!("its directory {}", dir.display());
    if let Some(why) = not_private(&what, dir_meta.uid(), dir_meta.permissions().mode(), me) {
        return Err(untrusted(why));
    }
    let mut text = String::new();
    handle.take(MAX_BYTES).read_to_string(&mut text).map_err(|e| untrusted(format!("it cannot be read ({e})")))?;
    Ok(serde_json::from_str(&text).ok())
}

/// Why a file or directory of owner `uid` and `mode` is not `me`'s alone
/// to write, if it is not.
fn not_private(what: &str, uid: u32, mode: u32, me: u32) -> Option<String> {
    if uid != me {
        return Some(format!("{what} belongs to user {uid}, not to the user running this command ({me})"));
    }
    if mode & 0o022 != 0 {
        return Some(format!("{what} is writable by others (mode {:o})", mode & 0o777));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn run_file(dir: &Path) -> std::path::PathBuf {
        let file = dir.join("job.json");
        let run = RunFile { job: "job".into(), pid: 1, host: "127.0.0.1".into(), port: 9, token: "t".into() };
        std::fs::write(&file, serde_json::to_vec(&run).unwrap()).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        file
    }

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn the_users_own_run_file_is_read_and_a_missing_one_is_none() {
        let dir = private_dir();
        assert!(matches!(read(&dir.path().join("none.json")), Ok(None)));
        let run = read(&run_file(dir.path())).unwrap().unwrap();
        assert_eq!((run.job.as_str(), run.port), ("job", 9));
        std::fs::write(dir.path().join("bad.json"), "not json").unwrap();
        assert!(matches!(read(&dir.path().join("bad.json")), Ok(None)));
    }

    #[test]
    fn a_run_file_others_could_have_written_is_refused_by_name() {
        let dir = private_dir();
        let file = run_file(dir.path());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o622)).unwrap();
        let e = read(&file).unwrap_err();
        assert_eq!(e.file, file.display().to_string());
        assert!(e.why.contains("it is writable by others (mode 622)"), "{e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = read(&file).unwrap_err().to_string();
        assert!(e.contains(&format!("its directory {} is writable by others (mode 777)", dir.path().display())), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();

        // A link to a run file, and a FIFO (read at once, not waited on).
        let link = dir.path().join("link.json");
        symlink(&file, &link).unwrap();
        assert!(read(&link).unwrap_err().why.contains("symbolic link"));
        let fifo = dir.path().join("fifo.json");
        let mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
        assert!(read(&fifo).unwrap_err().why.contains("not a regular file"));
        // A run directory that is a link.
        let linked_dir = tempfile::tempdir().unwrap();
        let via = linked_dir.path().join("run");
        symlink(dir.path(), &via).unwrap();
        assert!(read(&via.join("job.json")).unwrap_err().why.contains("is a symbolic link"));
    }

    #[test]
    fn ownership_and_modes_are_judged_as_ssh_does() {
        assert_eq!(not_private("it", 1000, 0o100600, 1000), None);
        assert_eq!(not_private("it", 1000, 0o040755, 1000), None);
        assert!(not_private("it", 65534, 0o100600, 1000).unwrap().contains("belongs to user 65534"));
        assert!(not_private("it", 1000, 0o040777, 1000).unwrap().contains("writable by others (mode 777)"));
        assert!(not_private("it", 1000, 0o040720, 1000).unwrap().contains("(mode 720)"));
    }
}
