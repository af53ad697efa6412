//! The one choice of a staged read's route ([`run_read`]), from what every route shares
//! ([`StagedRead`]) and the routes' own settings ([`RouteOptions`]):
//!
//! - with a decoded-chunk cache, the cached route ([`DeviceCachedRead`]): hits placed from
//!   the cache, the misses through the general route, which keeps them;
//! - into host memory on the host "device", with neither a device decoder nor a cache, the
//!   host route ([`HostScatter`]): the workers scatter their own units;
//! - everything else, the general route ([`SlotRing`]): slots, device copies and scatter
//!   kernels, and device batches with a device decoder.
//!
//! Both slot routes share the ring's life: taken from the slot pool, and drained and given
//! back whatever happened.

use super::host_scatter::{Claim, HostScatter};
use super::slot_ring::SlotRing;
use super::staged_read::Producer;
use crate::buffer::NDBuffer;
use crate::errors::Result;
use crate::pipeline::cache::device_cache::ReadCache;
use crate::pipeline::cache::device_cached_read::DeviceCachedRead;
use crate::pipeline::cache::miss_keeper::MissKeeper;
use crate::pipeline::gpu_decode::device_parts::DeviceDecode;
use crate::pipeline::{Slot, StagedRead, allocate_slots, finish};

/// The settings that decide a staged read's route, beside what every route shares.
pub(crate) struct RouteOptions<'a> {
    /// Decompression on the device, when this read uses it (the general route's batches).
    pub device_decode: Option<DeviceDecode>,
    /// The decoded-chunk cache in the device's memory, when the read has one
    /// ([`crate::pipeline::cache::device_cache`]).
    pub cache: Option<&'a ReadCache>,
    /// How the host route's workers take units.
    pub claim: Claim,
}

/// The route a staged read takes.
enum Route<'a> {
    Cached(&'a ReadCache),
    Host,
    Slots,
}

/// Runs `read` into `out`, writing every unit's region of the request, by the route its
/// settings and its output choose.
pub(crate) fn run_read(
    read: &StagedRead<'_>,
    options: &RouteOptions<'_>,
    out: &NDBuffer,
    produce: &Producer<'_>,
) -> Result<()> {
    if read.units.is_empty() {
        return Ok(());
    }
    let route = match options.cache {
        Some(cache) => Route::Cached(cache),
        None if options.device_decode.is_none() && HostScatter::fits(read, out) => Route::Host,
        None => Route::Slots,
    };
    match route {
        Route::Cached(cache) => DeviceCachedRead { read, cache }.run(out, |misses| {
            // A cached read takes the general route on the host twin too: its misses are
            // decoded into buffers of their own for the cache.
            with_slots(misses, out, |slots| {
                let ring = SlotRing {
                    read: misses,
                    slots,
                    device_decode: options.device_decode,
                    keep: MissKeeper::new(misses, Some(cache)),
                };
                ring.run(out, produce)
            })
        }),
        Route::Host => with_slots(read, out, |slots| {
            HostScatter::new(read, options.claim, out)?.run(produce, slots)
        }),
        Route::Slots => with_slots(read, out, |slots| {
            let ring = SlotRing {
                read,
                slots,
                device_decode: options.device_decode,
                keep: MissKeeper::new(read, None),
            };
            ring.run(out, produce)
        }),
    }
}

/// Runs `route` over a ring of slots for `read`'s units, then drains and parks the slots.
fn with_slots(
    read: &StagedRead<'_>,
    out: &NDBuffer,
    route: impl FnOnce(&[Slot]) -> Result<()>,
) -> Result<()> {
    if read.units.is_empty() {
        return Ok(());
    }
    // The slots' queues do not consult the output's fences operation by operation:
    // whatever is in flight on it (its allocation, a copy) is waited for once, here.
    out.buffer().region()?.settle()?;
    let elem = out.dtype().size();
    // Device batches hold no slots: their chunks leave the slots as they come.
    let slots = allocate_slots(
        read.ops.as_ref(),
        read.units,
        elem,
        read.staging_bytes,
        read.threads,
        0,
    )?;
    let result = route(&slots);
    // Whatever happened, no device work may outlive this call.
    let drained = finish(read.ops.as_ref(), slots, read.units, elem);
    result.and(drained)
}
