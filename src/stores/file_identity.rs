//! Places compared by what they are rather than by how they are named: a directory reached
//! through a bind mount (or any other path that resolving symlinks and `..` leaves as another
//! string) has the same device and inode numbers whatever path reaches it.
//! [`Location::contains`](super::Location::contains) asks this beside its path comparison,
//! so that a copy never writes into its source through a second path to it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The identity of an existing file or directory: its device and inode numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of what `path` names (symlinks followed); `None` when it does not exist
    /// or cannot be examined.
    pub(crate) fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Whether `id` is what `path` names or any directory above it (by `path`'s components, so
/// give it absolute and resolved); the parts of `path` that do not exist yet are skipped,
/// so a destination not yet created is compared by its existing ancestors.
pub(crate) fn is_at_or_above(id: FileId, path: &Path) -> bool {
    path.ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .any(|p| FileId::of(p) == Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_found_above_every_path_inside_it_however_it_is_named() {
        let dir = std::env::temp_dir().join(format!("zarrbuf-file-id-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("store.zarr/inner")).unwrap();
        std::fs::create_dir_all(dir.join("other")).unwrap();
        std::os::unix::fs::symlink(dir.join("store.zarr"), dir.join("alias")).unwrap();
        let store = FileId::of(&dir.join("store.zarr")).unwrap();
        // The same directory through a symlink the comparison does not resolve: identity
        // alone tells.
        assert_eq!(FileId::of(&dir.join("alias")), Some(store));
        assert!(is_at_or_above(store, &dir.join("alias")));
        assert!(is_at_or_above(store, &dir.join("alias/inner/not/yet")));
        assert!(is_at_or_above(store, &dir.join("store.zarr")));
        // Beside it, above it, and a directory that does not exist are not it.
        assert!(!is_at_or_above(store, &dir.join("other/x")));
        assert!(!is_at_or_above(store, &dir));
        assert!(FileId::of(&dir.join("missing")).is_none());
        let inner = FileId::of(&dir.join("store.zarr/inner")).unwrap();
        assert!(!is_at_or_above(inner, &dir.join("alias")));
        assert!(is_at_or_above(inner, &dir.join("alias/inner")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
