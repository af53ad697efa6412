//! The fetch of one unit (behind the fetch seam, `fetch_stage.rs`): its encoded bytes from a
//! sync or an async store — a whole chunk, or an inner chunk's byte range through its shard's
//! (cached) index. `None`: not stored, reads as the fill value. A whole chunk stored larger
//! than any encoding of it is refused before it is fetched, where the store tells its size
//! cheaply (`zarr::check_stored_size`).

use super::fetch_flight::{FlightKey, Readers, fetch_shared_async, flight_unit};
use super::fetch_ranges::{fetch_chunk_ranges_async, fetch_inner_ranges_async};
use super::shard_index_fetch::{get_async, get_index_async, get_index_sync, inner_chunk_error};
use super::shard_reads::{Ahead, Fetched, InnerPlan, Role, check_length, inner_chunk_sync};
use super::unit_ranges::UnitRanges;
use crate::errors::Result;
use crate::pipeline::ShardReads;
use crate::zarr::{
    ShardIndex, Unit, UnitPlan, UnitSource, check_stored_size, check_stored_size_async, chunk_error,
};
use bytes::Bytes;
use futures::future::join_all;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// Fetches the encoded bytes of one inner chunk: its shard's index once per read, then the
/// merged request that holds it (see [`ShardReads`]).
fn fetch_inner_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardReads,
    inner: &[u64],
) -> Result<Option<Bytes>> {
    let (shard, within) = shards.index().split(inner);
    let key = array.chunk_key(&shard);
    let storage = array.storage();
    let fail = |e: String| inner_chunk_error(array, &shard, &key, &within, e);
    let get = |range: Range<u64>| -> Fetched {
        storage
            .get_partial(&key, ByteRange::new(range))
            .map_err(|e| e.to_string())
    };
    let get_index = || -> Fetched { get_index_sync(array, &key, shards.index()) };
    inner_chunk_sync(shards, &shard, &within, &get, &get_index).map_err(fail)
}

/// The stored bytes of the unsharded chunk at `indices` of a sync store, whole (`None`: not
/// stored), as the fetch seam carries them; no size is checked first.
pub(crate) fn encoded_chunk<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    indices: &[u64],
) -> Result<Option<Bytes>> {
    array
        .retrieve_encoded_chunk(indices)
        .map(|chunk| chunk.map(Bytes::from))
        .map_err(|e| chunk_error(array, indices, e))
}

/// Fetches one unit's encoded bytes (`None`: not stored, reads as the fill value).
pub(crate) fn fetch_unit<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    shards: Option<&ShardReads>,
    unit: &Unit,
) -> Result<Option<Bytes>> {
    match plan.source {
        UnitSource::Chunk | UnitSource::ZarrsDecoded => {
            check_stored_size(array, &unit.indices)?;
            encoded_chunk(array, &unit.indices)
        }
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
    shards: Option<&ShardReads>,
    unit: &Unit,
) -> Result<Option<Bytes>> {
    match plan.source {
        UnitSource::Chunk | UnitSource::ZarrsDecoded => {
            check_stored_size_async(array, &unit.indices).await?;
            Ok(array
                .async_retrieve_encoded_chunk(&unit.indices)
                .await
                .map_err(|e| chunk_error(array, &unit.indices, e))?)
        }
        UnitSource::Subchunk => {
            let shards = shards.expect("sharded plans carry their index");
            fetch_inner_chunk_async(array, shards, &unit.indices).await
        }
    }
}

/// Each shard's decoded index (`None`: the shard is not stored), or why it could not be read.
type ShardIndexes = HashMap<Vec<u64>, std::result::Result<Option<Arc<Vec<u64>>>, String>>;

/// Which byte ranges of a unit a small read fetches (`None`: the whole unit).
pub(crate) type RangesOf<'a> = dyn Fn(&Unit) -> Option<UnitRanges> + Sync + 'a;

/// The encoded bytes of every unit of a small async read (`small_read_async.rs`), in unit
/// order: each shard's index once (cached, checked: [`ShardIndex`]), then every unit's
/// bytes — or only the byte ranges `ranges` gives for it (`fetch_ranges.rs`) —, all requests
/// of a step at once; a unit another async read is fetching at the same time is taken from
/// it (`fetch_flight.rs`). Each unit's outcome is its own, so the caller reports the first
/// error in unit order, as the sync route does.
pub(crate) async fn fetch_units_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    index: Option<&ShardIndex>,
    ranges: &RangesOf<'_>,
) -> Vec<Result<Option<Bytes>>> {
    let mut indexes: ShardIndexes = HashMap::new();
    if let Some(index) = index {
        let shards: BTreeSet<Vec<u64>> = plan
            .units
            .iter()
            .map(|u| index.split(&u.indices).0)
            .collect();
        let got = join_all(shards.iter().map(|shard| async {
            if let Some(hit) = index.cached(shard) {
                return Ok(hit);
            }
            let key = array.chunk_key(shard);
            let encoded = get_index_async(array, &key, index).await?;
            index.remember(shard, encoded.as_deref())
        }))
        .await;
        indexes = shards.into_iter().zip(got).collect();
    }
    let indexes = &indexes;
    join_all(
        plan.units
            .iter()
            .map(|unit| fetch_small_unit(array, plan, index, indexes, unit, ranges(unit))),
    )
    .await
}

/// One unit of [`fetch_units_async`], its shard's index (or the error reading it) given;
/// only the byte ranges `ranged` when given.
async fn fetch_small_unit<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    plan: &UnitPlan,
    index: Option<&ShardIndex>,
    indexes: &ShardIndexes,
    unit: &Unit,
    ranged: Option<UnitRanges>,
) -> Result<Option<Bytes>> {
    let flight = FlightKey::new(
        array,
        flight_unit(array, index, unit, ranged.as_ref()),
        Readers::Async,
    );
    let fetch = async {
        let Some(index) = index else {
            return match &ranged {
                Some(ranges) => fetch_chunk_ranges_async(array, unit, ranges).await,
                None => fetch_unit_async(array, plan, None, unit).await,
            };
        };
        let (shard, within) = index.split(&unit.indices);
        let key = array.chunk_key(&shard);
        let fail = |e: String| inner_chunk_error(array, &shard, &key, &within, e);
        let cached = indexes
            .get(&shard)
            .cloned()
            .unwrap_or_else(|| {
                Err("the shard index was not read (internal error: please report)".into())
            })
            .map_err(fail)?;
        let Some(shard_index) = cached else {
            return Ok(None);
        };
        let Some(range) = index.inner_range(&shard_index, &within).map_err(fail)? else {
            return Ok(None);
        };
        if let Some(ranges) = &ranged {
            let storage = array.storage();
            return fetch_inner_ranges_async(storage.as_ref(), &key, &range, ranges)
                .await
                .map(|joined| Some(joined.into()))
                .map_err(fail);
        }
        let bytes = get_async(
            array.storage().as_ref(),
            &key,
            ByteRange::new(range.clone()),
        )
        .await
        .map_err(fail)?
        .ok_or_else(|| fail("the shard disappeared while it was being read".into()))?;
        check_length(&range, bytes.len()).map_err(fail)?;
        Ok(Some(bytes))
    };
    fetch_shared_async(&flight, fetch).await
}

/// [`fetch_inner_chunk`] on an async store: the leading worker awaits the request.
async fn fetch_inner_chunk_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardReads,
    inner: &[u64],
) -> Result<Option<Bytes>> {
    let (shard, within) = shards.index().split(inner);
    let key = array.chunk_key(&shard);
    let storage = array.storage();
    let fail = |e: String| inner_chunk_error(array, &shard, &key, &within, e);
    let index = match shards.index_of(&shard) {
        Ok(hit) => hit.flatten(),
        Err(Role::Lead(leader)) => {
            let encoded = get_index_async(array, &key, shards.index()).await;
            shards.finish_index(leader, &shard, encoded).map_err(fail)?
        }
        Err(Role::Wait(flight)) => {
            start_one_ahead(array, shards, inner).await;
            shards.waited_index(&flight, &shard).map_err(fail)?
        }
    };
    let Some(index) = index else {
        return Ok(None);
    };
    let InnerPlan::InGroup { group, range } =
        shards.plan_inner(&shard, &index, &within).map_err(fail)?
    else {
        return Ok(None);
    };
    let fetched = match shards.join_group(&shard, &group) {
        Role::Lead(leader) => {
            let got = get_async(storage.as_ref(), &key, ByteRange::new(group.clone())).await;
            shards.finish_group(leader, got.clone());
            got
        }
        Role::Wait(flight) => {
            start_one_ahead(array, shards, inner).await;
            shards.waited_group(&flight)
        }
    }
    .map_err(fail)?;
    let bytes =
        fetched.ok_or_else(|| fail("the shard disappeared while it was being read".into()))?;
    shards
        .take(&shard, &group, bytes, &range)
        .map(Some)
        .map_err(fail)
}

/// Before waiting for a request another worker runs, starts the next request nobody has
/// started yet (a later shard's index or merged range), so several are in flight at once.
/// Its outcome, error included, is kept for the workers that need it.
async fn start_one_ahead<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardReads,
    inner: &[u64],
) {
    if let Some(job) = shards.next_to_lead(inner) {
        run_ahead_async(array, shards, job).await;
    }
}

/// Runs one shard request led ahead of the workers (by a waiting worker or the fetch-ahead
/// stage) on an async store, and publishes its outcome, error included, to the workers.
pub(super) async fn run_ahead_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardReads,
    job: Ahead<'_>,
) {
    match job {
        Ahead::Index { shard, leader } => {
            let key = array.chunk_key(&shard);
            let encoded = get_index_async(array, &key, shards.index()).await;
            let _ = shards.finish_index(leader, &shard, encoded);
        }
        Ahead::Group {
            shard,
            group,
            leader,
        } => {
            let key = array.chunk_key(&shard);
            let got = get_async(array.storage().as_ref(), &key, ByteRange::new(group)).await;
            shards.finish_group(leader, got);
        }
    }
}

/// [`run_ahead_async`] on a sync store.
pub(crate) fn run_ahead_sync<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    shards: &ShardReads,
    job: Ahead<'_>,
) {
    match job {
        Ahead::Index { shard, leader } => {
            let key = array.chunk_key(&shard);
            let encoded = get_index_sync(array, &key, shards.index());
            let _ = shards.finish_index(leader, &shard, encoded);
        }
        Ahead::Group {
            shard,
            group,
            leader,
        } => {
            let key = array.chunk_key(&shard);
            let got = array
                .storage()
                .get_partial(&key, ByteRange::new(group))
                .map_err(|e| e.to_string());
            shards.finish_group(leader, got);
        }
    }
}
