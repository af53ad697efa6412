//! The fetch stage: one unit's encoded bytes from a sync or an async store — a whole chunk,
//! or an inner chunk's byte range through its shard's (cached) index. `None`: not stored,
//! reads as the fill value.

use crate::error::{Error, Result};
use crate::zarr::{ShardIndex, Unit, UnitPlan, UnitSource, chunk_error};
use zarrs::array::Array;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// An error about inner chunk `within` of `shard` (stored under `key`).
fn inner_chunk_error<S: ?Sized>(
    array: &Array<S>,
    shard: &[u64],
    key: &impl std::fmt::Display,
    within: &[u64],
    e: String,
) -> Error {
    Error::zarr(
        array.path().as_str(),
        format!("shard {shard:?} (key {key}), inner chunk {within:?}: {e}"),
        None,
    )
}

/// Fetches the encoded bytes of one inner chunk through its shard's index.
fn fetch_inner_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardIndex,
    inner: &[u64],
) -> Result<Option<Vec<u8>>> {
    let (shard, within) = shards.split(inner);
    let key = array.chunk_key(&shard);
    let storage = array.storage();
    let fail = |e: String| inner_chunk_error(array, &shard, &key, &within, e);
    let index = shards
        .index_of(&shard, |range| {
            storage.get_partial(&key, range).map_err(|e| e.to_string())
        })
        .map_err(fail)?;
    let Some(index) = index else {
        return Ok(None);
    };
    let Some(range) = shards.inner_range(&index, &within).map_err(fail)? else {
        return Ok(None);
    };
    let bytes = storage
        .get_partial(&key, ByteRange::new(range.clone()))
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("the shard disappeared while it was being read".into()))?;
    if bytes.len() as u64 != range.end - range.start {
        return Err(fail(format!(
            "the shard is truncated: {} bytes at {}..{} expected, {} read",
            range.end - range.start,
            range.start,
            range.end,
            bytes.len()
        )));
    }
    Ok(Some(bytes.to_vec()))
}

/// Fetches one unit's encoded bytes (`None`: not stored, reads as the fill value).
pub(crate) fn fetch_unit<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    shards: Option<&ShardIndex>,
    unit: &Unit,
) -> Result<Option<Vec<u8>>> {
    match plan.source {
        UnitSource::Chunk | UnitSource::ZarrsDecoded => array
            .retrieve_encoded_chunk(&unit.indices)
            .map_err(|e| chunk_error(array, &unit.indices, e)),
        UnitSource::Subchunk => {
            let shards = shards.expect("sharded plans carry their index");
            fetch_inner_chunk(array, shards, &unit.indices)
        }
    }
}

/// Fetches one unit's encoded bytes from an async store (`None`: not stored).
pub(crate) async fn fetch_unit_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    shards: Option<&ShardIndex>,
    unit: &Unit,
) -> Result<Option<Vec<u8>>> {
    match plan.source {
        UnitSource::Chunk | UnitSource::ZarrsDecoded => Ok(array
            .async_retrieve_encoded_chunk(&unit.indices)
            .await
            .map_err(|e| chunk_error(array, &unit.indices, e))?
            .map(|b| b.to_vec())),
        UnitSource::Subchunk => {
            let shards = shards.expect("sharded plans carry their index");
            let (shard, within) = shards.split(&unit.indices);
            let key = array.chunk_key(&shard);
            let storage = array.storage();
            let fail = |e: String| inner_chunk_error(array, &shard, &key, &within, e);
            let index = match shards.cached(&shard) {
                Some(hit) => hit,
                None => {
                    let encoded = storage
                        .get_partial(&key, shards.index_range())
                        .await
                        .map_err(|e| fail(e.to_string()))?;
                    shards.remember(&shard, encoded.as_deref()).map_err(fail)?
                }
            };
            let Some(index) = index else { return Ok(None) };
            let Some(range) = shards.inner_range(&index, &within).map_err(fail)? else {
                return Ok(None);
            };
            let bytes = storage
                .get_partial(&key, ByteRange::new(range.clone()))
                .await
                .map_err(|e| fail(e.to_string()))?
                .ok_or_else(|| fail("the shard disappeared while it was being read".into()))?;
            if bytes.len() as u64 != range.end - range.start {
                return Err(fail(format!(
                    "the shard is truncated at {}..{}",
                    range.start, range.end
                )));
            }
            Ok(Some(bytes.to_vec()))
        }
    }
}
