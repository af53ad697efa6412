//! The walk of an array's directory for `check`: every entry under it with what it is — a
//! regular file, a directory, a FIFO or other special file, or a symbolic link out of the
//! store — so that what reads refuse is reported rather than skipped. Links inside the store
//! are followed (each directory once).

use crate::errors::{Error, Result};
use crate::stores::kind_name;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// What a walked entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A regular file (or a link to one inside the store) of this many bytes.
    File(u64),
    /// A directory (or a link to one inside the store).
    Dir,
    /// Anything else (FIFO, socket, device, a link to nothing), in words.
    Special(&'static str),
    /// A symbolic link leading out of the store, to this place (`dir`: a directory).
    Outside { target: PathBuf, dir: bool },
    /// An entry that cannot be examined: a directory that cannot be listed, or an entry
    /// whose type cannot be read (the reason).
    Unexamined(String),
}

/// One entry under the walked directory: its path relative to it (`/` separators) and kind.
pub(super) struct Entry {
    pub(super) rel: String,
    pub(super) kind: Kind,
}

/// Every entry under `dir` (inside the store rooted at `root`), sorted by path.
pub(super) fn list_entries(root: &Path, dir: &Path) -> Result<Vec<Entry>> {
    let io = |path: &Path, e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        source: e,
    };
    let real_root = std::fs::canonicalize(root).map_err(|e| io(root, e))?;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let real = std::fs::canonicalize(&d).map_err(|e| io(&d, e))?;
        if !seen.insert(real) {
            continue;
        }
        let listing = match std::fs::read_dir(&d) {
            Ok(listing) => listing,
            // Below the array's directory, a directory that cannot be listed is a finding.
            Err(e) if d != dir => {
                if let Ok(rel) = d.strip_prefix(dir) {
                    out.push(Entry {
                        rel: rel.to_string_lossy().replace('\\', "/"),
                        kind: Kind::Unexamined(e.to_string()),
                    });
                }
                continue;
            }
            Err(e) => return Err(io(&d, e)),
        };
        for entry in listing {
            let entry = entry.map_err(|e| io(&d, e))?;
            let path = entry.path();
            let kind =
                kind_of(&path, &real_root).unwrap_or_else(|e| Kind::Unexamined(e.to_string()));
            if kind == Kind::Dir {
                pending.push(path.clone());
            }
            if let Ok(rel) = path.strip_prefix(dir) {
                out.push(Entry {
                    rel: rel.to_string_lossy().replace('\\', "/"),
                    kind,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// What the entry at `path` is, following a link that stays inside `real_root`.
fn kind_of(path: &Path, real_root: &Path) -> std::io::Result<Kind> {
    let own = std::fs::symlink_metadata(path)?;
    let meta = if own.file_type().is_symlink() {
        let Ok(target) = std::fs::canonicalize(path) else {
            return Ok(Kind::Special("a symbolic link to nothing"));
        };
        if !target.starts_with(real_root) {
            let dir = target.is_dir();
            return Ok(Kind::Outside { target, dir });
        }
        std::fs::metadata(path)?
    } else {
        own
    };
    Ok(if meta.is_file() {
        Kind::File(meta.len())
    } else if meta.is_dir() {
        Kind::Dir
    } else {
        Kind::Special(kind_name(meta.file_type()))
    })
}
