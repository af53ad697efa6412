//! What a store location names on local disk.

use std::path::PathBuf;

/// The local path of a location: a plain path, or the path of a `file://` URL; `None` for
/// any other URL (object stores, `memory://`).
pub(crate) fn local_path(location: &str) -> Option<PathBuf> {
    match location.split_once("://") {
        None => Some(PathBuf::from(location)),
        Some(("file", rest)) => Some(PathBuf::from(rest)),
        Some(_) => None,
    }
}
