//! How the command line names stores and arrays: labels for messages, and which locations
//! are local directories.

use std::path::PathBuf;

/// A short label for messages: `store` or `store:path`.
pub(crate) fn label(location: &str, array_path: &str) -> String {
    let p = array_path.trim_matches('/');
    if p.is_empty() {
        location.to_string()
    } else {
        format!("{location}:{p}")
    }
}

/// The directory of a local store location (a path or a file:// URL); `None` for the URL of
/// an object store.
pub(crate) fn local_dir(location: &str) -> Option<PathBuf> {
    match location.split_once("://") {
        None => Some(PathBuf::from(location)),
        Some(("file", rest)) => Some(PathBuf::from(rest)),
        Some(_) => None,
    }
}

/// Whether `src` and `dst` are the same store (the same directory, or the same URL).
pub(crate) fn same_store(src: &str, dst: &str) -> bool {
    match (local_dir(src), local_dir(dst)) {
        (Some(s), Some(d)) => matches!(
            (std::fs::canonicalize(s), std::fs::canonicalize(d)),
            (Ok(s), Ok(d)) if s == d
        ),
        (None, None) => src.trim_end_matches('/') == dst.trim_end_matches('/'),
        _ => false,
    }
}
