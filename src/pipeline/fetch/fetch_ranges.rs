//! Fetching only the byte ranges a small read needs of a unit stored in its decoded layout
//! (no bytes-to-bytes codecs; the requests are planned by `unit_ranges.rs`), from a sync or
//! an async store. The bytes come back as the requests' bytes one after another.
//!
//! No byte is returned that the unit's own structure does not vouch for. For an uncompressed
//! unit that structure is its exact size, and it is checked before any range is used:
//!
//! - an inner chunk of a shard: the shard index gives its offset and length, and the index
//!   refuses an entry whose length is not the fixed encoded size (`ShardIndex`); the ranges
//!   lie inside that verified extent, and a shard shorter than the extent is refused;
//! - an unsharded chunk, where the store tells sizes cheaply (a directory, a zip file:
//!   `zarr::check_exact_size`): its stored size must be its decoded size exactly;
//! - an unsharded chunk of an object store read through [`RemoteStore`] (the async API):
//!   the ranged `GET` itself carries the object's size (`Content-Range`'s total, which
//!   object_store hands over as the object's size), and it must be the decoded size before
//!   the bytes are used — one request, no `HEAD`. A request that fails (a range past the
//!   end of a short object) asks the size then, to name the damage.
//!
//! Elsewhere (the sync API over an object-store URL, whose store zarrs' sync adapter hides,
//! or a store zarrbuf did not open) unsharded chunks are fetched whole, as before: the size
//! would cost a request of its own. A chunk whose size is wrong is the same error as a whole
//! read of it gives ("stored as N bytes, but its encoding takes exactly M: the chunk is
//! damaged", naming the chunk).

use super::shard_index_fetch::{get_index_sync, inner_chunk_error};
use super::shard_reads::shard_index_sync;
use super::unit_ranges::UnitRanges;
use crate::errors::{Error, Result};
use crate::pipeline::ShardReads;
use crate::stores::{RemoteStore, SizedBytes};
use crate::zarr::{
    Unit, UnitPlan, UnitSource, check_exact_size, check_exact_size_async, chunk_error,
    not_exact_size,
};
use futures::StreamExt;
use std::ops::Range;
use zarrs::array::Array;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{AsyncReadableStorageTraits, Bytes, ReadableStorageTraits, StorageError};

/// Whether a small read may fetch unsharded chunks of `storage` by ranges: their size can be
/// checked first at no extra request (see the module docs).
pub(crate) fn chunks_sized_cheaply<S: ?Sized + 'static>(storage: &S) -> bool {
    crate::stores::sizes_are_cheap(storage)
        || RemoteStore::of(storage).is_some_and(RemoteStore::sizes_ranged_reads)
}

/// Whether each request to `storage` is a network round trip: a store zarrbuf opened at an
/// object-store URL, or a [`RemoteStore`] over an object store however it was made (one a
/// caller built with `RemoteStore::new` has no recorded location).
pub(crate) fn requests_are_round_trips<S: ?Sized + 'static>(storage: &S) -> bool {
    crate::stores::fetches_are_remote(storage)
        || RemoteStore::of(storage).is_some_and(RemoteStore::sizes_ranged_reads)
}

/// `requests` as a store takes them.
fn byte_ranges(requests: &[Range<u64>]) -> Vec<ByteRange> {
    requests.iter().cloned().map(ByteRange::new).collect()
}

/// The requests' bytes one after another, each checked to be exactly its request.
fn join(
    parts: impl Iterator<Item = std::result::Result<Bytes, StorageError>>,
    requests: &[Range<u64>],
) -> std::result::Result<Vec<u8>, String> {
    let total: u64 = requests.iter().map(|r| r.end - r.start).sum();
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    let mut answered = 0;
    for (part, r) in parts.zip(requests) {
        let bytes = part.map_err(|e| e.to_string())?;
        let want = r.end - r.start;
        if bytes.len() as u64 != want {
            return Err(format!(
                "{want} bytes at {}..{} were asked for, {} came back: the object is shorter \
                 than its size or index says (truncated, or rewritten while it was read)",
                r.start,
                r.end,
                bytes.len()
            ));
        }
        out.extend_from_slice(&bytes);
        answered += 1;
    }
    if answered != requests.len() {
        return Err(format!(
            "the store answered {answered} of {} byte ranges",
            requests.len()
        ));
    }
    Ok(out)
}

/// Refuses an inner chunk whose extent in the shard (from its index) is not the unit's size.
fn check_extent(extent: &Range<u64>, ranges: &UnitRanges) -> std::result::Result<(), String> {
    let len = extent.end - extent.start;
    if len != ranges.unit_len() {
        return Err(not_exact_size(len, ranges.unit_len()));
    }
    Ok(())
}

fn not_sharded() -> Error {
    Error::InvalidArgument(
        "internal error: a sharded small read has no shard index (please report)".into(),
    )
}

/// Fetches the bytes of `ranges` of `unit` from a sync store (`None`: not stored, reads as
/// the fill value). See the module docs for what is checked first.
pub(crate) fn fetch_unit_ranges<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    shards: Option<&ShardReads>,
    unit: &Unit,
    ranges: &UnitRanges,
) -> Result<Option<Bytes>> {
    let storage = array.storage();
    match plan.source {
        UnitSource::Chunk | UnitSource::ZarrsDecoded => {
            let fail = |e: String| chunk_error(array, &unit.indices, e);
            if !check_exact_size(array, &unit.indices, ranges.unit_len())? {
                return Ok(None);
            }
            let key = array.chunk_key(&unit.indices);
            let requests = ranges.requests();
            let parts = storage
                .get_partial_many(&key, Box::new(byte_ranges(requests).into_iter()))
                .map_err(|e| fail(e.to_string()))?
                .ok_or_else(|| fail("the chunk disappeared while it was being read".into()))?;
            join(parts, requests)
                .map(|joined| Some(joined.into()))
                .map_err(fail)
        }
        UnitSource::Subchunk => {
            let shards = shards.ok_or_else(not_sharded)?;
            let (shard, within) = shards.index().split(&unit.indices);
            let key = array.chunk_key(&shard);
            let fail = |e: String| inner_chunk_error(array, &shard, &key, &within, e);
            let get_index = || get_index_sync(array, &key, shards.index());
            let Some(index) = shard_index_sync(shards, &shard, &get_index).map_err(fail)? else {
                return Ok(None);
            };
            let Some(extent) = shards.index().inner_range(&index, &within).map_err(fail)? else {
                return Ok(None);
            };
            check_extent(&extent, ranges).map_err(fail)?;
            let requests = ranges.requests_at(extent.start);
            let parts = storage
                .get_partial_many(&key, Box::new(byte_ranges(&requests).into_iter()))
                .map_err(|e| fail(e.to_string()))?
                .ok_or_else(|| fail("the shard disappeared while it was being read".into()))?;
            join(parts, &requests)
                .map(|joined| Some(joined.into()))
                .map_err(fail)
        }
    }
}

/// Fetches the bytes of `ranges` of the unsharded chunk `unit` from an async store (`None`:
/// not stored). See the module docs for what is checked first.
pub(crate) async fn fetch_chunk_ranges_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    unit: &Unit,
    ranges: &UnitRanges,
) -> Result<Option<Bytes>> {
    let storage = array.storage();
    let key = array.chunk_key(&unit.indices);
    let fail = |e: String| chunk_error(array, &unit.indices, e);
    let requests = ranges.requests();
    if let Some(remote) = RemoteStore::of(storage.as_ref()).filter(|r| r.sizes_ranged_reads()) {
        let mut out = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            let got = match remote.get_range_sized(&key, r.clone()).await {
                Ok(Some(got)) => got,
                // Not stored (or, after the first request, gone meanwhile).
                Ok(None) if i == 0 => return Ok(None),
                Ok(None) => {
                    return Err(fail("the chunk disappeared while it was being read".into()));
                }
                Err(e) => {
                    // A range past the end of a short object fails: say it is short.
                    if let Ok(Some(n)) = remote.size_key(&key).await
                        && n != ranges.unit_len()
                    {
                        return Err(fail(not_exact_size(n, ranges.unit_len())));
                    }
                    return Err(fail(e.to_string()));
                }
            };
            let SizedBytes { bytes, object_size } = got;
            if object_size != ranges.unit_len() {
                return Err(fail(not_exact_size(object_size, ranges.unit_len())));
            }
            out.extend_from_slice(
                &join(std::iter::once(Ok(bytes)), std::slice::from_ref(r)).map_err(fail)?,
            );
        }
        return Ok(Some(out.into()));
    }
    if !check_exact_size_async(array, &unit.indices, ranges.unit_len()).await? {
        return Ok(None);
    }
    let parts = storage
        .get_partial_many(&key, Box::new(byte_ranges(requests).into_iter()))
        .await
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("the chunk disappeared while it was being read".into()))?;
    let parts: Vec<_> = parts.collect().await;
    join(parts.into_iter(), requests)
        .map(|joined| Some(joined.into()))
        .map_err(fail)
}

/// Fetches the bytes of `ranges` of an inner chunk at `extent` (from its shard's checked
/// index) in the shard stored under `key`, from an async store. The caller names the inner
/// chunk in an error.
pub(crate) async fn fetch_inner_ranges_async<S: ?Sized + AsyncReadableStorageTraits>(
    storage: &S,
    key: &zarrs::storage::StoreKey,
    extent: &Range<u64>,
    ranges: &UnitRanges,
) -> std::result::Result<Vec<u8>, String> {
    check_extent(extent, ranges)?;
    let requests = ranges.requests_at(extent.start);
    let parts = storage
        .get_partial_many(key, Box::new(byte_ranges(&requests).into_iter()))
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the shard disappeared while it was being read")?;
    let parts: Vec<_> = parts.collect().await;
    join(parts.into_iter(), &requests)
}
