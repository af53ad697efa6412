//! A staged read's decoded-chunk cache in its device's memory: which reads use it
//! ([`caches_on_device`]), the cache as a read sees it ([`ReadCache`]: where its units are
//! filed and how they are cut), a missed unit's own buffer ([`Kept`]) and the queues that
//! place hits, pooled between reads. The read itself is the cached route,
//! `device_cached_read.rs`; the misses are kept by `miss_keeper.rs`.
//!
//! Hits — units whose decoded bytes the cache already holds in the device's memory — are
//! placed into the output on the device by the strided-copy kernel, straight from the
//! cached buffer: nothing is fetched, decoded, staged or copied from the host. The misses
//! go through the staged pipeline as without a cache, except that each one is decoded into
//! a device buffer of its own, in the layout the cache keeps (the unit's elements inside the
//! array, C order, native byte order: what the host route, `super::cached_read`, keeps
//! too), which the pipeline then scatters into the output and hands to the cache. A buffer
//! reaches the cache with a completion fence covering the work that wrote it (and the
//! scatter that read it) — `crate::device::track` — so a later read on another stream is
//! ordered after that work; the device decoder's chunks reach it only once their batch has
//! finished and every chunk of it was checked, so a chunk the decoder rejected is never
//! cached.
//!
//! Without a cache nothing of this runs: `read_route::run_read` takes another route.

use super::cached_read::cached_region;
use crate::buffer::{Buffer, NDBuffer};
use crate::cache::{ArrayId, ChunkCache, ChunkKey, Epoch};
use crate::device::{DeviceOps, Queue};
use crate::errors::Result;
use crate::memory::Region;
use crate::options::{PipelineMode, ReadOptions};
use crate::place::{Device, Memory};
use crate::zarr::Unit;
use std::sync::{Mutex, OnceLock};
use zarrs::array::Array;

/// A staged read's decoded-chunk cache: the cache, the array and the memory its units are
/// filed under (the memory the read's device computes on: `Device::Cpu` on the host twin,
/// whose entries are the host routes' too — the same bytes in the same layout), the write
/// epoch the read began in, and the array's shape, which cuts the units the cache keeps
/// ([`cached_region`]).
pub(crate) struct ReadCache {
    cache: ChunkCache,
    array: ArrayId,
    memory: Device,
    epoch: Epoch,
    array_shape: Vec<u64>,
}

/// Whether a read into `out` with a cache takes the staged pipeline's device cache (this
/// file) rather than the host route (`super::cached_read`): outputs in device memory, and
/// reads forced onto the staged pipeline (`PipelineMode::Staged`, where host outputs are the
/// device's host twin: how CI runs the device route).
pub(crate) fn caches_on_device(out: &NDBuffer, opts: &ReadOptions) -> bool {
    !out.memory().is_host_accessible() || opts.mode == PipelineMode::Staged
}

impl ReadCache {
    /// The cache of a read of `array` whose device computes on `memory`. Call it before
    /// anything is fetched: a write from then on keeps what the read decodes out of the cache.
    pub(crate) fn new<S: ?Sized + Send + Sync + 'static>(
        cache: ChunkCache,
        array: &Array<S>,
        memory: Memory,
    ) -> ReadCache {
        let id = ArrayId::of(array);
        ReadCache {
            epoch: cache.epoch(&id),
            cache,
            array: id,
            memory: memory.device(),
            array_shape: array.shape().to_vec(),
        }
    }

    fn key(&self, indices: &[u64]) -> ChunkKey {
        ChunkKey::new(self.array.clone(), indices.to_vec(), self.memory)
    }

    /// The cached decoded unit at `indices`, if any (counted as a hit or a miss).
    pub(in crate::pipeline) fn get(&self, indices: &[u64]) -> Option<Buffer> {
        self.cache.get(&self.key(indices))
    }

    /// Keeps `decoded` as the unit at `indices`, unless a write came since the read began.
    pub(in crate::pipeline) fn insert(&self, indices: &[u64], decoded: Buffer) {
        self.cache
            .insert_since(self.key(indices), decoded, self.epoch);
    }

    /// Whether a unit of `bytes` decoded bytes may be kept at all (a unit larger than the
    /// whole cache is not decoded into a buffer of its own).
    pub(super) fn admits(&self, bytes: usize) -> bool {
        bytes as u64 <= self.cache.capacity()
    }

    /// The shape a unit is kept in: its elements inside the array.
    pub(super) fn kept_shape(&self, unit: &Unit) -> Vec<usize> {
        cached_region(unit, &self.array_shape)
            .iter()
            .map(|r| (r.end - r.start) as usize)
            .collect()
    }
}

/// A unit's cache buffer, made by the read that missed it, and the shape it is kept in.
pub(in crate::pipeline) struct Kept {
    pub(in crate::pipeline) buffer: Buffer,
    pub(in crate::pipeline) shape: Vec<usize>,
}

impl Kept {
    pub(in crate::pipeline) fn region(&self) -> Result<&Region> {
        self.buffer.region()
    }
}

/// Drained queues for placing hits, kept between reads: creating a CUDA stream costs about
/// as much as placing a few small hits.
fn queue_pool() -> &'static Mutex<Vec<(Memory, Queue)>> {
    static POOL: OnceLock<Mutex<Vec<(Memory, Queue)>>> = OnceLock::new();
    POOL.get_or_init(Mutex::default)
}

/// Most queues kept (as many reads at once as are likely).
const POOLED_QUEUES: usize = 64;

/// A queue of `ops`' device: a pooled one, or a new one.
pub(super) fn take_queue(ops: &dyn DeviceOps) -> Result<Queue> {
    let memory = ops.memory();
    if let Ok(mut pool) = queue_pool().lock()
        && let Some(k) = pool.iter().position(|(m, _)| *m == memory)
    {
        return Ok(pool.swap_remove(k).1);
    }
    ops.new_queue()
}

/// Keeps a drained queue for the next read (see [`take_queue`]).
pub(super) fn give_back_queue(memory: Memory, q: Queue) {
    if let Ok(mut pool) = queue_pool().lock()
        && pool.len() < POOLED_QUEUES
    {
        pool.push((memory, q));
    }
}
