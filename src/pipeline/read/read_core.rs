//! The read core: one read of a fixed-size array into an `NDBuffer`, from a sync store
//! ([`read_array`]), an async one ([`read_array_async`]) or for a stream ([`read_shared`]).
//! The fronts (`api/read.rs`, `api/read_async.rs`, the stream sources) check their arguments
//! and allocate the output; here the read becomes one [`ReadRequest`], [`choose_route`] picks
//! its route once, and the route runs with the store's fetch stage
//! (`FetchStage::for_sync_store`, `FetchStage::for_async_store`, or a stream's shared one).
//!
//! Async reads run the small route on their task; the others run on a blocking thread
//! (decoding and device work), fetching through the runtime, and dropping the future cancels
//! them: the pipeline stops at its next unit, drains its device queues, and the output is
//! kept alive until then.

use super::choose_route::{Fetching, Route, choose_route};
use super::direct_read::read_decode_into;
use super::read_driver::run_staged;
use super::read_request::ReadRequest;
use super::small_read::read_small;
use super::small_read_async::read_small_async;
use crate::buffer::NDBuffer;
use crate::cache::ChunkCache;
use crate::errors::{Error, Result};
use crate::options::ReadOptions;
use crate::pipeline::cache::cached_read::{
    CachedRead, miss_options, miss_output, read_through_cache,
};
use crate::pipeline::cancel::Cancel;
use crate::pipeline::fetch::fetch_stage::{AsyncUnits, FetchStage};
use crate::pipeline::fetch::shard_reads::InnerFetch;
use crate::stores::reading_inline;
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::Array;
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

/// Reads `subset` of `array` (a sync store) into `out`, checked by the front and not empty,
/// by the route [`choose_route`] gives it.
pub(crate) fn read_array<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
) -> Result<()> {
    let mut request = ReadRequest::new(array, subset, out, opts);
    match choose_route(&mut request, Fetching::Sync)? {
        Route::Cached(cache) => read_cached(array, subset, out, &cache, opts),
        Route::Small(small) => read_small(&request, small, &FetchStage::for_sync_store(array)),
        Route::DecodeInto(window) => read_decode_into(&mut request, window),
        Route::Staged => run_staged(
            request,
            InnerFetch::for_store(array),
            &FetchStage::for_sync_store(array),
        ),
    }
}

/// A read through `cache`: each miss is read whole, uncached, by its own route.
fn read_cached<S: ?Sized + ReadableStorageTraits + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    cache: &ChunkCache,
    opts: &ReadOptions,
) -> Result<()> {
    let uncached = miss_options(opts);
    read_through_cache(array, subset, out, cache, opts, &|region| {
        let chunk = miss_output(region, out.dtype())?;
        read_array(array, region, &chunk, &uncached)?;
        Ok(chunk)
    })
}

/// Reads one subset of a stream: through the host cache, each miss read the same way, else
/// by the staged pipeline, every unit fetched through `stage` (which shares it with the
/// stream's other reads) and inner chunks as `inner_fetch` says.
pub(crate) fn read_shared<S: ?Sized + Send + Sync + 'static>(
    mut request: ReadRequest<'_, S>,
    inner_fetch: InnerFetch,
    stage: &FetchStage<'_>,
) -> Result<()> {
    let (array, subset, out, opts) = (request.array, request.subset, request.out, request.opts);
    match choose_route(&mut request, Fetching::Shared)? {
        Route::Cached(cache) => {
            let uncached = miss_options(opts);
            read_through_cache(array, subset, out, &cache, opts, &|region| {
                let chunk = miss_output(region, out.dtype())?;
                let miss = ReadRequest::new(array, region, &chunk, &uncached);
                read_shared(miss, inner_fetch, stage)?;
                Ok(chunk)
            })
        }
        // (A stream's reads are never given the small route or zarrs' decode-into.)
        Route::Small(_) | Route::DecodeInto(_) | Route::Staged => {
            run_staged(request, inner_fetch, stage)
        }
    }
}

/// The largest cached async read looked up on its task and, when every unit is a hit,
/// copied there (a larger one, or one with a miss, finishes on a blocking thread): host
/// copies run at 10 GB/s or more, so 256 KiB is tens of microseconds, the order of the
/// hand-off it saves.
const INLINE_HIT_BYTES: usize = 256 << 10;

/// Reads `subset` of `array` (an async store) into `out`, checked by the front and not
/// empty, by the route [`choose_route`] gives it (never zarrs' decode-into, a sync call).
pub(crate) async fn read_array_async<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Arc<Array<S>>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    opts: &ReadOptions,
) -> Result<()> {
    let mut request = ReadRequest::new(array.as_ref(), subset, out, opts);
    let route = choose_route(&mut request, Fetching::Async)?;
    // Units planned on the task (a small read's, which the small route declined) go on with
    // the read to its blocking thread.
    let plan = request.into_plan();
    let host_cache = match route {
        // Small host reads: fetched on the runtime, decoded without the pipeline.
        Route::Small(small) => return read_small_async(array, subset, out, opts, small).await,
        Route::Cached(cache) => Some(cache),
        Route::DecodeInto(_) | Route::Staged => None,
    };
    let handle = tokio::runtime::Handle::try_current().map_err(|_| {
        Error::InvalidArgument("async reads need a tokio runtime (call them inside one)".into())
    })?;
    // A small read is looked up on the task, and one of only hits is copied here, without a
    // hand-off to a blocking thread (which costs more than the copies); a larger one is
    // looked up on the blocking thread, off the runtime.
    let cached = match host_cache {
        Some(cache) => {
            let begun = if out.nbytes() <= INLINE_HIT_BYTES {
                let begun = CachedRead::begin(array.as_ref(), subset, out.dtype(), &cache)?;
                if begun.all_hits() {
                    return begun.finish(array.shape(), subset, out, &cache, opts, &|_| {
                        Err(Error::InvalidArgument(
                            "internal error: a read of cache hits decoded a chunk (please \
                             report)"
                                .into(),
                        ))
                    });
                }
                Some(begun)
            } else {
                None
            };
            Some((cache, begun))
        }
        None => None,
    };
    // Dropping this future cancels the blocking half and waits until it has stopped writing
    // into `out`.
    let (_stop, finish) = Cancel::pair();
    let (array, subset, out, opts) = (array.clone(), subset.to_vec(), out.clone(), opts.clone());
    let task = tokio::task::spawn_blocking(move || match cached {
        Some((cache, begun)) => read_cached_blocking(
            &array,
            &subset,
            &out,
            (&cache, begun),
            &opts,
            &handle,
            finish.cancel(),
        ),
        None => read_blocking(
            ReadRequest::new(array.as_ref(), &subset, &out, &opts).with_plan(plan),
            &handle,
            finish.cancel(),
        ),
    });
    task.await
        .map_err(|e| Error::Cancelled(format!("the read task stopped: {e}")))?
}

/// The blocking half of a read through a host cache (its units looked up here unless the
/// task did): hits copied, each miss read whole, uncached, by the small route (or
/// [`read_blocking`]) and kept.
fn read_cached_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    array: &Arc<Array<S>>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    (cache, begun): (&ChunkCache, Option<CachedRead>),
    opts: &ReadOptions,
    handle: &tokio::runtime::Handle,
    cancel: &Cancel,
) -> Result<()> {
    let uncached = miss_options(opts);
    let begun = match begun {
        Some(begun) => begun,
        None => CachedRead::begin(array.as_ref(), subset, out.dtype(), cache)?,
    };
    begun.finish(array.shape(), subset, out, cache, opts, &|region| {
        let chunk = miss_output(region, out.dtype())?;
        let mut miss = ReadRequest::new(array.as_ref(), region, &chunk, &uncached);
        // A miss is one unit: the small route's fetch and decode, as sync misses take (its
        // options hold no cache, so no other route but the staged one is left).
        match choose_route(&mut miss, Fetching::Async)? {
            Route::Small(small) => reading_inline(|| {
                handle.block_on(cancel.unless_dropped(
                    "read",
                    read_small_async(array, region, &chunk, &uncached, small),
                ))
            })?,
            Route::Cached(_) | Route::DecodeInto(_) | Route::Staged => {
                read_blocking(miss, handle, cancel)?
            }
        }
        Ok(chunk)
    })
}

/// The blocking half of an uncached read (or of a device-cached one, which the staged
/// pipeline handles): the staged pipeline, whose producers fetch through the runtime.
fn read_blocking<S: ?Sized + AsyncReadableStorageTraits + 'static>(
    request: ReadRequest<'_, S>,
    handle: &tokio::runtime::Handle,
    cancel: &Cancel,
) -> Result<()> {
    let array = request.array;
    let units = AsyncUnits {
        array,
        handle,
        cancel,
        what: "read",
    };
    run_staged(
        request,
        InnerFetch::for_async_store(array),
        &FetchStage::for_async_store(&units),
    )
}
