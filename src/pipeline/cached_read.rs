//! Reads through a decoded-chunk cache ([`crate::cache::ChunkCache`]): each unit of the read
//! (chunk, or inner chunk of a shard) is looked up; a hit is copied from the cache into the
//! output, a miss is decoded whole by the read route the caller passes (the same route an
//! uncached read takes, bounded decoders included), kept, and copied. Every output memory
//! works: the copies are `NDBuffer` copies (strided, byte-swapping, host to device).

use crate::buffer::{BufferPrototype, NDBuffer};
use crate::cache::{ArrayId, ChunkCache, ChunkKey};
use crate::dtype::{DataType, Order};
use crate::error::Result;
use crate::options::{Progress, ReadOptions};
use crate::place::Device;
use crate::zarr::{Unit, plan_units};
use rayon::prelude::*;
use std::ops::Range;
use zarrs::array::Array;

/// A unit of a cached read: its key, and its chunk if the cache held it.
pub(crate) struct CachedUnit {
    pub unit: Unit,
    pub key: ChunkKey,
    pub hit: Option<NDBuffer>,
}

/// Decodes the region of one unit the cache keeps into a new C-order host array.
pub(crate) type DecodeRegion<'a> = dyn Fn(&[Range<u64>]) -> Result<NDBuffer> + Sync + 'a;

/// The region of `unit` a cache keeps: the unit cut at the array's end.
pub(crate) fn cached_region(unit: &Unit, array_shape: &[u64]) -> Vec<Range<u64>> {
    unit.origin
        .iter()
        .zip(&unit.shape)
        .zip(array_shape)
        .map(|((&o, n), &end)| o..(o + n.get()).min(end))
        .collect()
}

fn region_shape(region: &[Range<u64>]) -> Vec<usize> {
    region.iter().map(|r| (r.end - r.start) as usize).collect()
}

/// The units `subset` touches, each looked up in `cache` under `memory` (a hit counts as
/// one, a miss as one). A cached chunk whose size is not its region's is an error.
pub(crate) fn look_up<S: ?Sized>(
    id: &ArrayId,
    array: &Array<S>,
    subset: &[Range<u64>],
    dtype: DataType,
    cache: &ChunkCache,
    memory: Device,
) -> Result<Vec<CachedUnit>> {
    let plan = plan_units(array, subset, dtype.size())?;
    plan.units
        .into_iter()
        .map(|unit| {
            let key = ChunkKey::new(id.clone(), unit.indices.clone(), memory);
            let hit = match cache.get(&key) {
                Some(b) => Some(NDBuffer::from_buffer(
                    b,
                    dtype,
                    &region_shape(&cached_region(&unit, array.shape())),
                    Order::C,
                )?),
                None => None,
            };
            Ok(CachedUnit { unit, key, hit })
        })
        .collect()
}

/// Copies the part of `chunk` (the unit's cached region) that the read of `subset` needs
/// into its place in `out`.
pub(crate) fn copy_unit(
    out: &NDBuffer,
    subset: &[Range<u64>],
    unit: &Unit,
    chunk: &NDBuffer,
) -> Result<()> {
    let within: Vec<Range<usize>> = unit
        .region
        .iter()
        .zip(&unit.origin)
        .map(|(r, &o)| (r.start - o) as usize..(r.end - o) as usize)
        .collect();
    let place: Vec<Range<usize>> = unit
        .region
        .iter()
        .zip(subset)
        .map(|(r, s)| (r.start - s.start) as usize..(r.end - s.start) as usize)
        .collect();
    out.get(&place)?.copy_from(&chunk.get(&within)?)
}

/// A read of `subset` into `out` through `cache` (host copies, `Device::Cpu`): misses are
/// decoded by `decode` in parallel and kept unless a write came since the read began.
pub(crate) fn read_through_cache<S: ?Sized + Send + Sync + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    cache: &ChunkCache,
    opts: &ReadOptions,
    decode: &DecodeRegion<'_>,
) -> Result<()> {
    // Taken before anything is looked up or decoded: a write from here on keeps what this
    // read decodes out of the cache.
    let id = ArrayId::of(array);
    let epoch = cache.epoch(&id);
    let mut units = look_up(&id, array, subset, out.dtype(), cache, Device::Cpu)?;
    let shape = array.shape();
    let decoded: Vec<(usize, NDBuffer)> = units
        .par_iter()
        .enumerate()
        .filter(|(_, u)| u.hit.is_none())
        .map(|(k, u)| decode(&cached_region(&u.unit, shape)).map(|nd| (k, nd)))
        .collect::<Result<_>>()?;
    for (k, chunk) in decoded {
        let bytes = chunk
            .buffer()
            .slice(chunk.offset()..chunk.offset() + chunk.nbytes());
        cache.insert_since(units[k].key.clone(), bytes, epoch);
        units[k].hit = Some(chunk);
    }
    let (total, elem) = (units.len(), out.dtype().size() as u64);
    let mut bytes_done = 0u64;
    for (done, u) in units.iter().enumerate() {
        if let Some(chunk) = &u.hit {
            copy_unit(out, subset, &u.unit, chunk)?;
        }
        bytes_done += u.unit.region_shape().iter().product::<usize>() as u64 * elem;
        if let Some(cb) = &opts.progress {
            cb(Progress {
                chunks_done: done + 1,
                chunks_total: total,
                bytes_done,
            });
        }
    }
    Ok(())
}

/// The options of a miss's own read: no cache, no progress reports (the cached read makes
/// them), the rest as given.
pub(crate) fn miss_options(opts: &ReadOptions) -> ReadOptions {
    let mut o = opts.clone();
    o.cache = None;
    o.progress = None;
    o
}

/// A new C-order host array for the cached region `region`, to decode a miss into.
pub(crate) fn miss_output(region: &[Range<u64>], dtype: DataType) -> Result<NDBuffer> {
    // Every element is written by the miss's read; on an error it is dropped unread.
    NDBuffer::empty_unwritten(
        &region_shape(region),
        dtype,
        Order::C,
        &BufferPrototype::cpu(),
    )
}
