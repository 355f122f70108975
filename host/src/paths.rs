//! Names the host did not choose, made safe before they touch the file
//! system. A file name read from a stored checkpoint becomes part of a
//! local path only through [`join_under`], which accepts a single plain
//! component; ids (job names, operator uids, source and sink ids) follow
//! one rule, [`is_id`], wherever they come from. Such names, and any other
//! text the host did not write, reach a terminal or a log only escaped
//! ([`terminal`]). A leaf module.

pub mod terminal;

use std::path::{Path, PathBuf};
use thiserror::Error;

/// A name that would leave the directory it is joined onto, or is no name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("refusing the file name {name:?}: {why}")]
pub struct UnsafeName {
    /// The name, as given.
    pub name: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// `name` if it is one plain path component: not empty, not `.` or `..`,
/// no `/`, `\` or NUL (so not absolute either), at most 255 bytes.
pub fn plain_name(name: &str) -> Result<&str, UnsafeName> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name == "." || name == ".." {
        "it names a directory itself"
    } else if name.contains(['/', '\\']) {
        "it has a directory separator"
    } else if name.contains('\0') {
        "it has a NUL byte"
    } else if name.len() > 255 {
        "it is longer than 255 bytes"
    } else {
        return Ok(name);
    };
    Err(UnsafeName { name: name.to_string(), why })
}

/// `root/name`, for a `name` that is one plain component: the result is
/// always directly inside `root`.
pub fn join_under(root: &Path, name: &str) -> Result<PathBuf, UnsafeName> {
    let name = plain_name(name)?;
    let path = root.join(name);
    debug_assert_eq!(path.parent(), Some(root), "{} escaped {}", path.display(), root.display());
    Ok(path)
}

/// The most components a [`relative_dir`] has.
pub const MAX_DIR_DEPTH: usize = 8;
/// The longest [`relative_dir`], in bytes.
const MAX_DIR_NAME: usize = 512;

/// Why a name cannot be a [`relative_dir`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct BadDir(pub String);

/// `name` if it is a relative directory path a host may make beneath one
/// of its own: 1 to [`MAX_DIR_DEPTH`] components separated by `/`, none
/// empty or hidden (so no `.` or `..`), each of letters, digits and
/// `- _ = : + , @ % .` only (`dt=2025-01-01/hm=10:07`), at most 512 bytes in
/// all. Otherwise why not.
pub fn relative_dir(name: &str) -> Result<&str, BadDir> {
    if name.is_empty() || name.len() > MAX_DIR_NAME {
        return Err(BadDir(format!("it must be 1 to {MAX_DIR_NAME} bytes long")));
    }
    let parts = name.split('/').count();
    if parts > MAX_DIR_DEPTH {
        return Err(BadDir(format!("it has {parts} components separated by '/', at most {MAX_DIR_DEPTH} are allowed")));
    }
    for part in name.split('/') {
        if part.is_empty() {
            return Err(BadDir("it has an empty component (a leading, trailing or double '/')".into()));
        }
        if part.len() > 255 {
            return Err(BadDir("a component is longer than 255 bytes".into()));
        }
        if part.starts_with('.') {
            return Err(BadDir(format!("component {part:?} starts with '.' (hidden names and '..' are not allowed)")));
        }
        if let Some(c) = part.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_=:+,@%.".contains(*c))) {
            return Err(BadDir(format!("component {part:?} holds {c:?}: letters, digits and - _ = : + , @ % . only")));
        }
    }
    Ok(name)
}

/// Whether `id` is a valid job name, operator uid, source or sink id: 1-128
/// letters, digits, `-`, `_` or `.`, and not `.` or `..`. Ids name files
/// and directories, so the rule keeps them plain names.
pub fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_are_joined() {
        let root = Path::new("/var/lib/weir/scratch");
        for good in ["000012.sst", "MANIFEST-000005", "CURRENT", ".part-0000000003.pending", "a..b"] {
            assert_eq!(join_under(root, good).unwrap(), root.join(good));
        }
        for bad in ["", ".", "..", "../../etc/passwd", "/etc/passwd", "a/b", "a\\b", "x\0y", &"n".repeat(256)] {
            assert!(join_under(root, bad).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_joined_path_stays_directly_under_its_root(name in ".{0,40}") {
            let root = Path::new("/var/lib/weir/scratch");
            if let Ok(path) = join_under(root, &name) {
                proptest::prop_assert_eq!(path.parent(), Some(root));
                proptest::prop_assert!(path.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_))));
            }
        }
    }

    #[test]
    fn ids_are_plain_names() {
        for good in ["wc", "word-count", "op_1", "v1.2"] {
            assert!(is_id(good), "{good}");
            assert!(plain_name(good).is_ok());
        }
        for bad in ["", ".", "..", "a/b", "/abs", "x y", "é", &"n".repeat(129)] {
            assert!(!is_id(bad), "{bad:?}");
        }
    }
}
