//! Reads through a decoded-chunk cache ([`crate::cache::ChunkCache`]): each unit of the read
//! (chunk, or inner chunk of a shard) is looked up; a hit is copied from the cache into the
//! output, a miss is decoded whole by the read route the caller passes (the same route an
//! uncached read takes, bounded decoders included), kept, and copied. Every output memory
//! works: the copies are `NDBuffer` copies (strided, byte-swapping, host to device).

use crate::buffer::{BufferPrototype, NDBuffer};
use crate::cache::{ArrayId, ChunkCache, ChunkKey, Epoch};
use crate::data_types::{DataType, Order};
use crate::errors::Result;
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

/// A read of `subset` into `out` through `cache` (host copies, `Device::Cpu`): hits are
/// copied out; misses are decoded by `decode` in groups of two per thread (in parallel),
/// kept unless a write came since the read began, and copied out, so a read's temporaries
/// are one group of chunks whatever its size.
pub(crate) fn read_through_cache<S: ?Sized + Send + Sync + 'static>(
    array: &Array<S>,
    subset: &[Range<u64>],
    out: &NDBuffer,
    cache: &ChunkCache,
    opts: &ReadOptions,
    decode: &DecodeRegion<'_>,
) -> Result<()> {
    CachedRead::begin(array, subset, out.dtype(), cache)?.finish(
        array.shape(),
        subset,
        out,
        cache,
        opts,
        decode,
    )
}

/// A host read through a cache, begun: its units looked up (each counted once, as a hit or
/// a miss) under the epoch taken before the look-ups. Finishing it copies the hits and
/// decodes the misses; an async read finishes a small one of only hits on its task
/// ([`all_hits`](Self::all_hits)), any other on a blocking thread.
pub(crate) struct CachedRead {
    epoch: Epoch,
    units: Vec<CachedUnit>,
}

impl CachedRead {
    /// Looks up every unit `subset` touches.
    pub(crate) fn begin<S: ?Sized + Send + Sync + 'static>(
        array: &Array<S>,
        subset: &[Range<u64>],
        dtype: DataType,
        cache: &ChunkCache,
    ) -> Result<CachedRead> {
        // Taken before anything is looked up or decoded: a write from here on keeps what
        // this read decodes out of the cache.
        let id = ArrayId::of(array);
        let epoch = cache.epoch(&id);
        let units = look_up(&id, array, subset, dtype, cache, Device::Cpu)?;
        Ok(CachedRead { epoch, units })
    }

    /// Whether every unit was a hit.
    pub(crate) fn all_hits(&self) -> bool {
        self.units.iter().all(|u| u.hit.is_some())
    }

    /// Copies the hits into `out`, then decodes, keeps and copies the misses (see
    /// [`read_through_cache`]); `array_shape` is the shape of the array it began on.
    pub(crate) fn finish(
        self,
        array_shape: &[u64],
        subset: &[Range<u64>],
        out: &NDBuffer,
        cache: &ChunkCache,
        opts: &ReadOptions,
        decode: &DecodeRegion<'_>,
    ) -> Result<()> {
        let units = self.units;
        let mut progress = Done::new(units.len(), out.dtype().size() as u64, opts);
        for u in &units {
            if let Some(chunk) = &u.hit {
                copy_unit(out, subset, &u.unit, chunk)?;
                progress.unit(&u.unit);
            }
        }
        let misses: Vec<&CachedUnit> = units.iter().filter(|u| u.hit.is_none()).collect();
        if misses.is_empty() {
            // All hits: not even the thread count is asked for (it reads the cgroup's files).
            return Ok(());
        }
        for group in misses.chunks(2 * opts.threads()) {
            let decoded: Vec<NDBuffer> = crate::thread_pool::install(|| {
                group
                    .par_iter()
                    .map(|u| decode(&cached_region(&u.unit, array_shape)))
                    .collect::<Result<_>>()
            })?;
            for (u, chunk) in group.iter().zip(decoded) {
                copy_unit(out, subset, &u.unit, &chunk)?;
                let bytes = chunk
                    .buffer()
                    .slice(chunk.offset()..chunk.offset() + chunk.nbytes());
                cache.insert_since(u.key.clone(), bytes, self.epoch);
                progress.unit(&u.unit);
            }
        }
        Ok(())
    }
}

/// The progress reports of a cached read, one per unit copied out.
struct Done<'a> {
    chunks: usize,
    total: usize,
    bytes: u64,
    elem: u64,
    opts: &'a ReadOptions,
}

impl<'a> Done<'a> {
    fn new(total: usize, elem: u64, opts: &'a ReadOptions) -> Self {
        Done {
            chunks: 0,
            total,
            bytes: 0,
            elem,
            opts,
        }
    }

    fn unit(&mut self, unit: &Unit) {
        self.chunks += 1;
        self.bytes += unit.region_shape().iter().product::<usize>() as u64 * self.elem;
        if let Some(cb) = &self.opts.progress {
            cb(Progress {
                chunks_done: self.chunks,
                chunks_total: self.total,
                bytes_done: self.bytes,
            });
        }
    }
}

/// The options of a miss's own read: no cache, no progress reports (the cached read makes
/// them), the whole chunk decoded (it is kept), the rest as given.
pub(crate) fn miss_options(opts: &ReadOptions) -> ReadOptions {
    let mut o = opts.clone();
    o.cache = None;
    o.progress = None;
    o.decode_needed_prefix = false;
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
