//! Where Weir keeps its own files when the settings do not say: the
//! per-user data and cache directories of the XDG base directory rules.

use std::path::PathBuf;

/// Where savepoints go when neither `--dir` nor `state.savepoints.dir`
/// says: `$XDG_DATA_HOME/weir/savepoints`, else
/// `$HOME/.local/share/weir/savepoints`, as a `file://` URI. (Savepoints
/// are kept data, not cache.)
pub(super) fn default_savepoint_dir() -> Option<String> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("share")))?;
    let dir = std::path::absolute(base.join("weir").join("savepoints")).ok()?;
    url::Url::from_file_path(dir).ok().map(|u| u.to_string())
}

/// `$XDG_CACHE_HOME/weir/components`, else `$HOME/.cache/weir/components`.
pub(super) fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("weir").join("components"))
}
