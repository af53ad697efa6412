//! Repairs after a check: leftovers and undecodable chunks removed, shards rewritten
//! without their damaged inner chunks.
//!
//! Only what the check proved damaged is touched: chunks whose bytes were read and did not
//! decode (never one that could not be read), chunk files outside the grid, and temporary
//! files whose writer is gone (asked again just before removing). A key is removed only
//! when it is a regular file or link whose directory lies inside the array's directory.

use super::finding::{Finding, Problem, chunk_indices, guarded};
use crate::error::{Error, Result};
use crate::store::{DynArray, writer_is_gone};
use crate::zarr::{data_type_of, fill_bytes};
use ndarray::{ArrayD, ArrayViewD, IxDyn, Slice};
use std::path::Path;
use zarrs::array::{
    ArrayBytes, ArrayShardedExt, ArrayShardedReadableExt, ArrayShardedReadableExtCache,
    CodecOptions,
};

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
        rewrite_shard(array, &indices, &inner)?;
        done.push(format!(
            "rewrote {key} without its {} damaged inner chunk(s) {inner:?} (they now read as the fill value)",
            inner.len()
        ));
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

/// Rewrites the shard at `indices` with every inner chunk but the `damaged` ones (local
/// indices within the shard), which then read as the fill value. The shard is written whole
/// through the array's store (atomically for directory stores).
fn rewrite_shard(array: &DynArray, indices: &[u64], damaged: &[Vec<u64>]) -> Result<()> {
    let zerr = |e: zarrs::array::ArrayError| crate::zarr::chunk_error(array, indices, e);
    let elem = data_type_of(array)?.size();
    let fill = fill_bytes(array);
    if fill.len() != elem {
        return Err(Error::Unsupported(format!(
            "cannot rewrite shard {indices:?}: its data type has no fixed size; remove the shard instead"
        )));
    }
    let shard: Vec<usize> = array
        .chunk_shape(indices)
        .map_err(zerr)?
        .iter()
        .map(|n| n.get() as usize)
        .collect();
    let inner: Vec<usize> = array
        .subchunk_shape()
        .ok_or_else(|| Error::zarr(array.path().as_str(), "the array is not sharded", None))?
        .iter()
        .map(|n| n.get() as usize)
        .collect();
    let mut full: Vec<usize> = shard.clone();
    full.push(elem);
    let mut out = ArrayD::<u8>::zeros(IxDyn(&full));
    for mut cell in out.lanes_mut(ndarray::Axis(shard.len())) {
        cell.iter_mut().zip(&fill).for_each(|(d, s)| *d = *s);
    }
    let cache = ArrayShardedReadableExtCache::new(array);
    let per: Vec<usize> = shard.iter().zip(&inner).map(|(s, i)| s / i).collect();
    let options = CodecOptions::default();
    for flat in 0..per.iter().product::<usize>() {
        let mut local = vec![0usize; per.len()];
        let mut rest = flat;
        for d in (0..per.len()).rev() {
            local[d] = rest % per[d];
            rest /= per[d];
        }
        let local64: Vec<u64> = local.iter().map(|&l| l as u64).collect();
        if damaged.contains(&local64) {
            continue;
        }
        let global: Vec<u64> = local64
            .iter()
            .zip(indices)
            .zip(&per)
            .map(|((l, s), p)| s * *p as u64 + l)
            .collect();
        let bytes = guarded(|| {
            array.retrieve_subchunk_opt::<ArrayBytes<'static>>(&cache, &global, &options)
        })
        .map_err(|(_, why)| {
            Error::zarr(
                array.path().as_str(),
                format!("inner chunk {local:?} of shard {indices:?} no longer decodes: {why}"),
                None,
            )
        })?
        .into_fixed()
        .map_err(|e| Error::Unsupported(e.to_string()))?;
        let mut shape = inner.clone();
        shape.push(elem);
        let view = ArrayViewD::from_shape(IxDyn(&shape), &bytes)
            .map_err(|e| Error::ShapeMismatch(e.to_string()))?;
        let mut target = out.view_mut();
        for (d, (&l, &i)) in local.iter().zip(&inner).enumerate() {
            target.slice_axis_inplace(ndarray::Axis(d), Slice::from(l * i..(l + 1) * i));
        }
        target.assign(&view);
    }
    let flat = out.into_raw_vec_and_offset().0;
    array
        .store_chunk_opt(indices, ArrayBytes::new_flen(flat), &options)
        .map_err(zerr)
}
