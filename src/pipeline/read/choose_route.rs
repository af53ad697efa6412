//! The one choice of a read's route, for sync and async stores and the reads of streams
//! alike ([`choose_route`]):
//!
//! 1. with a chunk cache kept on the host, the cached route (`cache/cached_read.rs`): hits
//!    copied, each miss read whole, uncached, by the route this choice gives it;
//! 2. a small `Auto` read into a C-contiguous host output (at most [`SMALL_READ_UNITS`]
//!    units), the small route (`small_read.rs`, `small_read_async.rs`), except in streams;
//! 3. from a sync store, into a host window in native byte order, zarrs' decode-into
//!    (`direct_read.rs`) for `Direct` reads and for `Auto` reads of fewer than
//!    [`STAGED_MIN_CHUNKS`] chunks;
//! 4. everything else — device outputs, large host reads, other byte orders, strided views,
//!    `Staged` reads — the staged pipeline (`read_driver.rs`), whose own route (host scatter,
//!    slots, device cache) is chosen in `read_route.rs`.

use super::direct_read::{STAGED_MIN_CHUNKS, staged_beats_direct};
use super::read_request::ReadRequest;
use super::small_read::SmallRead;
use crate::buffer::CWindow;
use crate::cache::ChunkCache;
use crate::data_types::ByteOrder;
use crate::errors::Result;
use crate::options::PipelineMode;
use crate::pipeline::cache::device_cache::caches_on_device;
use crate::zarr::has_unbounded_codec;

/// Units an `Auto` host read takes at most on the small-read route, sync or async
/// (`pipeline/read/small_read.rs`): the reads below [`STAGED_MIN_CHUNKS`].
pub(crate) const SMALL_READ_UNITS: usize = STAGED_MIN_CHUNKS as usize - 1;

/// How a read fetches, which decides the routes open to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fetching {
    /// From a sync store, on the calling thread: every route.
    Sync,
    /// From an async store: every route but zarrs' decode-into (a sync call).
    Async,
    /// The reads of a stream, from either kind of store: their units shared with the
    /// stream's other reads through its fetch stage, which the staged pipeline alone runs
    /// (the cache, then the staged pipeline).
    Shared,
}

/// The route of one read (see the module docs).
pub(crate) enum Route {
    /// Through the host chunk cache.
    Cached(ChunkCache),
    /// The small route, with its plan (the request's units, taken).
    Small(SmallRead),
    /// zarrs' decode-into the output, a C-order window of a host array.
    DecodeInto(CWindow),
    /// The staged pipeline.
    Staged,
}

/// Chooses the route of `request`, fetched as `fetching` says (see the module docs),
/// planning its units only when the small route could take it; `Route::Small` takes them.
pub(crate) fn choose_route<S: ?Sized + 'static>(
    request: &mut ReadRequest<'_, S>,
    fetching: Fetching,
) -> Result<Route> {
    let (array, subset, out, opts) = (request.array, request.subset, request.out, request.opts);
    if let Some(cache) = opts.chunk_cache().filter(|_| !caches_on_device(out, opts)) {
        return Ok(Route::Cached(cache));
    }
    // zarrs' own decode is bounded except for a v2 blosc compressor (see
    // `has_unbounded_codec`): those chunks take the staged pipeline's decoders.
    let zarrs_decodes = fetching == Fetching::Sync
        && opts.mode != PipelineMode::Staged
        && out.buffer().is_host_accessible()
        && out.byte_order() == ByteOrder::native()
        && !has_unbounded_codec(&array.codecs());
    // Small Auto reads into C-contiguous outputs: zarrbuf's own fetch and decode. From a sync
    // store only the reads zarrs could decode come here; the others stay staged.
    let small_may_take = match fetching {
        Fetching::Sync => zarrs_decodes,
        Fetching::Async => true,
        Fetching::Shared => false,
    };
    if small_may_take && let Some(small) = SmallRead::of(request, SMALL_READ_UNITS)? {
        return Ok(Route::Small(small));
    }
    // zarrs' decode-into for Direct and for small Auto reads, realigned when the output is
    // off a cache line (see `direct_read.rs`); the staged pipeline reads misaligned outputs
    // faster than the realigned slabs, so it takes them as they are.
    if zarrs_decodes
        && (opts.mode == PipelineMode::Direct || !staged_beats_direct(array, subset))
        && let Some(window) = out.c_window()
    {
        return Ok(Route::DecodeInto(window));
    }
    Ok(Route::Staged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{BufferPrototype, NDBuffer};
    use crate::data_types::{DataType, Order};
    use crate::options::ReadOptions;
    use std::ops::Range;
    use std::sync::Arc;
    use zarrs::array::{ArrayBuilder, data_type};
    use zarrs::storage::store::MemoryStore;

    /// The route a read of `subset` of a 64×64 float32 array of 8×8 chunks into a new C-order
    /// host output takes, and whether its units were left planned for the route.
    fn route(subset: &[Range<u64>], mode: PipelineMode, fetching: Fetching) -> (&str, bool) {
        let array = ArrayBuilder::new(vec![64, 64], vec![8, 8], data_type::float32(), 0.0f32)
            .build(Arc::new(MemoryStore::new()), "/a")
            .unwrap();
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
        let out =
            NDBuffer::empty(&shape, DataType::Float32, Order::C, &BufferPrototype::cpu()).unwrap();
        let opts = ReadOptions::default().with_mode(mode);
        let mut request = ReadRequest::new(&array, subset, &out, &opts);
        let name = match choose_route(&mut request, fetching).unwrap() {
            Route::Cached(_) => "cached",
            Route::Small(_) => "small",
            Route::DecodeInto(_) => "decode-into",
            Route::Staged => "staged",
        };
        (name, request.into_plan().is_some())
    }

    #[test]
    fn each_read_gets_the_route_it_got_before_the_read_core() {
        use Fetching::{Async, Shared, Sync};
        use PipelineMode::{Auto, Direct, Staged};
        let one = [0..8, 0..8];
        let seven = [0..8, 0..56];
        let eight = [0..8, 0..64];
        // Small reads: the small route, which takes the units; never in a stream.
        assert_eq!(route(&one, Auto, Sync), ("small", false));
        assert_eq!(route(&seven, Auto, Async), ("small", false));
        assert_eq!(route(&one, Auto, Shared), ("staged", false));
        // From 8 units on, the staged pipeline, given the units the small route planned.
        assert_eq!(route(&eight, Auto, Sync), ("staged", true));
        assert_eq!(route(&eight, Auto, Async), ("staged", true));
        // zarrs' decode-into for Direct reads, from sync stores only.
        assert_eq!(route(&eight, Direct, Sync), ("decode-into", false));
        assert_eq!(route(&one, Direct, Async), ("staged", false));
        assert_eq!(route(&one, Staged, Sync), ("staged", false));
    }
}
