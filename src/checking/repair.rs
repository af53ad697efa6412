//! Repairs after a check: leftovers and undecodable chunks removed, shards rewritten
//! without their damaged inner chunks (`shard_rewrite.rs`: every other inner chunk kept as
//! stored, numbers and strings alike).
//!
//! Only what the check proved damaged is touched: chunks whose bytes were read and did not
//! decode (never one that could not be read), chunk files outside the grid, and temporary
//! files whose writer is gone (asked again just before removing). A key is removed only
//! when it is a regular file or link whose directory lies inside the array's directory.

use super::finding::{Finding, Problem, chunk_indices};
use super::shard_rewrite::rewrite_shard;
use crate::errors::{Error, Result};
use crate::stores::{DynArray, writer_is_gone};
use std::path::Path;

/// Removes leftovers and undecodable chunks and rewrites shards without their damaged inner
/// chunks; returns one sentence per key.
pub(super) fn repair(
    array: &DynArray,
    root: &Path,
    array_dir: &Path,
    findings: &[Finding],
) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let mut shards: Vec<(&str, Vec<Vec<u64>>)> = Vec::new();
    // A shard with an inner chunk that could not be read is left as it is.
    let unreadable: Vec<&str> = findings
        .iter()
        .filter(|f| f.inner.is_some() && !f.problem.is_repairable())
        .map(|f| f.key.as_str())
        .collect();
    for f in findings.iter().filter(|f| f.problem.is_repairable()) {
        match &f.inner {
            Some(_) if unreadable.contains(&f.key.as_str()) => {}
            Some(inner) => match shards.last_mut() {
                Some((key, list)) if *key == f.key => list.push(inner.clone()),
                _ => shards.push((&f.key, vec![inner.clone()])),
            },
            None => {
                if let Some(why) = remove_key(root, array_dir, f)? {
                    done.push(why);
                }
            }
        }
    }
    for (key, inner) in shards {
        let indices = chunk_indices(array, key).ok_or_else(|| {
            Error::zarr(
                array.path().as_str(),
                format!("{key} is not a chunk key"),
                None,
            )
        })?;
        let r = rewrite_shard(array, key, &indices, &inner)?;
        done.push(if r.removed {
            format!(
                "removed {key}: none of its inner chunks decodes any more (dropped {:?})",
                r.dropped
            )
        } else {
            format!(
                "rewrote {key}: kept {} intact inner chunk(s), dropped {} damaged {:?} (they now read as the fill value)",
                r.kept,
                r.dropped.len(),
                r.dropped
            )
        });
    }
    if !done.is_empty() {
        // Removed chunks now read as the fill value: no cache may serve what they held.
        crate::cache::invalidate_node(array);
    }
    Ok(done)
}

/// Removes the file of finding `f` when it may be (see the module docs); returns what was
/// done, `None` when the file was already gone.
fn remove_key(root: &Path, array_dir: &Path, f: &Finding) -> Result<Option<String>> {
    let path = root.join(&f.key);
    let io = |e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        source: e,
    };
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let inside = match (
        path.parent().map(std::fs::canonicalize),
        std::fs::canonicalize(array_dir),
    ) {
        (Some(Ok(dir)), Ok(array)) => dir.starts_with(array),
        _ => false,
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if !(meta.is_file() || meta.file_type().is_symlink()) || !inside {
        return Ok(Some(format!(
            "left {} alone: it is not a file inside the array's directory",
            f.key
        )));
    }
    if f.problem == Problem::Leftover && !writer_is_gone(name, &path) {
        return Ok(Some(format!(
            "left {} alone: its writer is writing it again",
            f.key
        )));
    }
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Some(format!("removed {} ({})", f.key, f.problem.name()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(e)),
    }
}
