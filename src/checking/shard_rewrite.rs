//! A damaged shard rewritten with every inner chunk that still decodes: their encoded bytes
//! copied as stored (nothing is decoded into an array and encoded again, so numbers and
//! variable-length strings alike keep exactly what they held), a new index in the array's
//! index codecs with the dropped inner chunks missing (they then read as the fill value), and
//! the whole shard stored in one synced atomic write (the directory store's `set`: a
//! temporary file renamed into place), so a crash leaves the old shard or the new one.

use super::finding::Problem;
use super::shard_check::ShardCheck;
use crate::errors::{Error, Result};
use crate::stores::{DynArray, SyncedWrites};
use zarrs::storage::StoreKey;

/// What a rewrite of one shard kept and dropped.
#[derive(Debug, Default)]
pub(super) struct Rewritten {
    /// Inner chunks kept: stored and decoding.
    pub(super) kept: usize,
    /// Inner chunks dropped (indices within the shard): the damaged ones the check found,
    /// and any that no longer decodes.
    pub(super) dropped: Vec<Vec<u64>>,
    /// Whether the shard was removed: nothing in it decoded any more.
    pub(super) removed: bool,
}

/// Rewrites the shard `key` (at shard indices `indices`) without its `damaged` inner chunks
/// (indices within the shard), keeping every other one that decodes.
///
/// # Errors
///
/// When the shard's index no longer decodes, an inner chunk cannot be read at all (an I/O
/// error: nothing proves it damaged, so the shard is left as it is), or the write fails.
pub(super) fn rewrite_shard(
    array: &DynArray,
    key: &str,
    indices: &[u64],
    damaged: &[Vec<u64>],
) -> Result<Rewritten> {
    let fail = |why: String| {
        Error::zarr(
            array.path().as_str(),
            format!("cannot rewrite shard {key}, left as it is: {why}"),
            None,
        )
    };
    let shards = ShardCheck::new(array).map_err(fail)?;
    let Some((index, stored)) = shards.index_of(array, key).map_err(|(_, why)| fail(why))? else {
        return Ok(Rewritten::default());
    };
    let layout = shards.index();
    let per = layout.chunks_per_shard().to_vec();
    let count: u64 = per.iter().product();
    let base = if layout.at_start() {
        layout.encoded_size()
    } else {
        0
    };
    let mut out = Rewritten::default();
    let mut body: Vec<u8> = Vec::new();
    let mut pairs: Vec<u64> = Vec::new();
    for flat in 0..count {
        let local = unflatten(flat, &per);
        let inner = if damaged.contains(&local) {
            Err((Problem::Undecodable, String::new()))
        } else {
            shards.inner_bytes(array, key, stored, &index, &local)
        };
        match inner {
            Ok(Some(bytes)) => {
                pairs.extend([base + body.len() as u64, bytes.len() as u64]);
                body.extend_from_slice(&bytes);
                out.kept += 1;
            }
            Ok(None) => pairs.extend([u64::MAX, u64::MAX]),
            Err((Problem::Unreadable, why)) => {
                return Err(fail(format!("inner chunk {local:?} cannot be read: {why}")));
            }
            Err(_) => {
                pairs.extend([u64::MAX, u64::MAX]);
                out.dropped.push(local);
            }
        }
    }
    let store_key = StoreKey::new(key).map_err(|e| fail(e.to_string()))?;
    let storage = array.storage();
    let written = if out.kept == 0 {
        out.removed = true;
        storage.erase(&store_key)
    } else {
        let encoded = layout.encode(&pairs).map_err(fail)?;
        let shard = if layout.at_start() {
            [encoded, body].concat()
        } else {
            [body, encoded].concat()
        };
        let _synced = SyncedWrites::begin();
        storage.set(&store_key, shard.into())
    };
    written.map_err(|e| fail(e.to_string()))?;
    // Reads must not find the old index in the process's cache of shard indexes.
    if let Ok(subset) = array.chunk_subset(indices) {
        crate::zarr::forget_written_shard_indexes(array, &subset.to_ranges());
    }
    Ok(out)
}

/// The indices (C order) of inner chunk number `flat` in a shard of `per` inner chunks along
/// each dimension.
fn unflatten(flat: u64, per: &[u64]) -> Vec<u64> {
    let mut local = vec![0u64; per.len()];
    let mut rest = flat;
    for d in (0..per.len()).rev() {
        local[d] = rest % per[d];
        rest /= per[d];
    }
    local
}
