//! Durability on a local disk. A file's bytes survive a power loss once the
//! file is fsynced; its name (a create, a rename) once the directory holding
//! it is fsynced, and that directory's own name once its parent is. Until
//! then the kernel may lose any of them, whatever order they were written
//! in. The transactional sink's part files go through here; checkpoint
//! storage syncs through the directories it holds open
//! (`checkpoint::storage::local`), which never follow a link.

use std::fs::File;
use std::io;
use std::path::Path;

/// Fsyncs the file or directory at `path`.
pub fn sync(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Creates `path` and its missing parents, fsyncing the parent of each
/// directory it creates, so that the whole chain survives.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_all(parent)?;
    }
    match std::fs::create_dir(path) {
        Ok(()) => {}
        // Another thread made it meanwhile.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => sync(parent),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_makes_the_chain() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all(&deep).unwrap();
        let file = deep.join("f");
        std::fs::write(&file, b"x").unwrap();
        sync(&file).unwrap();
        assert!(sync(&tmp.path().join("missing")).is_err());
    }
}
