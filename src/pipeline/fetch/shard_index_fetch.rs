//! A shard's index as the fetch stage gets it: fetched once by the concurrent reads that
//! need it before the index cache holds it (`fetch_flight.rs`, keyed by the index's byte
//! range), from sync and async stores; the one ranged read of an async store the shard
//! fetch stage keeps; and the error that names an inner chunk of a shard.

use super::fetch_flight::{FlightKey, Readers, fetch_shared, fetch_shared_async};
use super::shard_reads::Fetched;
use crate::errors::{Error, Result};
use crate::zarr::ShardIndex;
use bytes::Bytes;
use zarrs::array::Array;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// An error about inner chunk `within` of `shard` (stored under `key`).
pub(crate) fn inner_chunk_error<S: ?Sized>(
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

/// A shard's encoded index from a sync store, shared with the reads fetching it now.
pub(crate) fn get_index_sync<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    key: &zarrs::storage::StoreKey,
    index: &ShardIndex,
) -> Fetched {
    let flight = index_flight(array, key, index, Readers::Sync);
    from_shared(fetch_shared(&flight, || {
        to_shared(
            array,
            array
                .storage()
                .get_partial(key, index.index_range())
                .map_err(|e| e.to_string()),
        )
    }))
}

/// One ranged read of `key` from an async store, as the shard fetch stage keeps it.
pub(crate) async fn get_async<S: ?Sized + AsyncReadableStorageTraits>(
    storage: &S,
    key: &zarrs::storage::StoreKey,
    range: ByteRange,
) -> Fetched {
    storage
        .get_partial(key, range)
        .await
        .map_err(|e| e.to_string())
}

/// What a shard's index fetch is shared under (`fetch_flight.rs`): concurrent first reads of
/// a shard, whose index is not cached yet, fetch it once. The key names the index's byte
/// range, so readers that disagree on the layout never share bytes.
fn index_flight<S: ?Sized>(
    array: &Array<S>,
    key: &zarrs::storage::StoreKey,
    index: &ShardIndex,
    readers: Readers,
) -> FlightKey {
    let unit = format!("{key} index {:?}", index.index_range());
    FlightKey::new(array, unit, readers)
}

/// A fetch's outcome as the shared-fetch table carries it (errors name the array).
fn to_shared<S: ?Sized>(array: &Array<S>, fetched: Fetched) -> Result<Option<Bytes>> {
    fetched.map_err(|e| Error::zarr(array.path().as_str(), e, None))
}

/// A shared fetch's outcome as the shard fetch stage keeps it: the error's own message (the
/// caller names the shard and inner chunk).
fn from_shared(shared: Result<Option<Bytes>>) -> Fetched {
    shared.map_err(|e| match e {
        Error::Zarr { message, .. } => message,
        other => other.to_string(),
    })
}

/// A shard's encoded index from an async store, shared with the async reads fetching it now.
pub(crate) async fn get_index_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    key: &zarrs::storage::StoreKey,
    index: &ShardIndex,
) -> Fetched {
    let flight = index_flight(array, key, index, Readers::Async);
    let storage = array.storage();
    let fetch = async {
        to_shared(
            array,
            get_async(storage.as_ref(), key, index.index_range()).await,
        )
    };
    from_shared(fetch_shared_async(&flight, fetch).await)
}
