//! A staged read with a decoded-chunk cache on its device.
//!
//! Hits — units whose decoded bytes the cache already holds in the device's memory — are
//! placed into the output on the device by the strided-copy kernel, straight from the
//! cached buffer: nothing is fetched, decoded, staged or copied from the host. The misses
//! go through the staged pipeline as without a cache, except that each one is decoded into
//! a device buffer of its own, in the layout the cache keeps (the unit's elements inside the
//! array, C order, native byte order: what the host route, `super::cached_read`, keeps
//! too), which the pipeline then scatters into the output and hands to the cache. A buffer reaches the cache with a
//! completion fence covering the work that wrote it (and the scatter that read it) —
//! [`track`] — so a later read on another stream is ordered after that work; the device
//! decoder's chunks reach it only once their batch has finished and every chunk of it was
//! checked, so a chunk the decoder rejected is never cached.
//!
//! Without a cache nothing here runs: [`StagedRead::run`] takes its usual route. Which reads
//! with a cache come here: [`caches_on_device`].

use super::StagedRead;
use super::cached_read::cached_region;
use super::device_parts::Scatter;
use super::staged_read::Producer;
use crate::buffer::{Buffer, NDBuffer};
use crate::cache::{ArrayId, ChunkCache, ChunkKey, Epoch};
use crate::device::{DeviceOps, Queue, StridedCopy, track};
use crate::dtype::{ByteOrder, Order};
use crate::error::Result;
use crate::memory::Region;
use crate::options::{PipelineMode, Progress, ProgressFn, ReadOptions};
use crate::place::{Device, Memory};
use crate::zarr::Unit;
use std::sync::{Arc, Mutex, OnceLock};
use zarrbuf_codecs::Strided;
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
    fn get(&self, indices: &[u64]) -> Option<Buffer> {
        self.cache.get(&self.key(indices))
    }

    /// Keeps `decoded` as the unit at `indices`, unless a write came since the read began.
    fn insert(&self, indices: &[u64], decoded: Buffer) {
        self.cache
            .insert_since(self.key(indices), decoded, self.epoch);
    }

    /// Whether a unit of `bytes` decoded bytes may be kept at all (a unit larger than the
    /// whole cache is not decoded into a buffer of its own).
    fn admits(&self, bytes: usize) -> bool {
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
pub(super) struct Kept {
    pub(super) buffer: Buffer,
    pub(super) shape: Vec<usize>,
}

impl Kept {
    pub(super) fn region(&self) -> Result<&Region> {
        self.buffer.region()
    }
}

impl StagedRead<'_> {
    /// Runs the read with `cache`: hits placed from it on the device, misses through the
    /// staged pipeline, which decodes each into a buffer of its own for the cache.
    pub(super) fn run_cached(
        &self,
        cache: &ReadCache,
        out: &NDBuffer,
        produce: &Producer<'_>,
    ) -> Result<()> {
        let elem = out.dtype().size();
        let memory = self.ops.memory();
        let mut hits: Vec<(&Unit, Buffer, Vec<usize>)> = Vec::new();
        let mut misses: Vec<Unit> = Vec::new();
        for unit in self.units {
            let shape = cache.kept_shape(unit);
            let bytes = shape.iter().product::<usize>() * elem;
            // A buffer of another size or memory is not this unit's (never the case for
            // what zarrbuf inserts): the unit is read again.
            match cache
                .get(&unit.indices)
                .filter(|b| b.len() == bytes && b.memory() == memory && b.is_allocated())
            {
                Some(b) => hits.push((unit, b, shape)),
                None => misses.push(unit.clone()),
            }
        }
        let mut progress = Progress {
            chunks_done: 0,
            chunks_total: self.units.len(),
            bytes_done: 0,
        };
        let q = match hits.is_empty() {
            true => None,
            false => Some(take_queue(self.ops.as_ref())?),
        };
        let placed = q.as_ref().map_or(Ok(()), |q| {
            hits.iter().try_for_each(|(unit, b, shape)| {
                self.scatter_cached(q, unit, b.region()?, shape, out)?;
                self.report(&mut progress, &unit.region_shape(), elem);
                Ok(())
            })
        });
        let missed = placed.and_then(|()| {
            if misses.is_empty() {
                return Ok(());
            }
            let rest = StagedRead {
                ops: self.ops.clone(),
                units: &misses,
                layout: self.layout.clone(),
                request_start: self.request_start.clone(),
                fill_value: self.fill_value.clone(),
                staging_bytes: self.staging_bytes,
                threads: self.threads,
                progress: self.progress.clone().map(|cb| after(cb, progress)),
                device_decode: self.device_decode,
                unit_error: self.unit_error,
                cache: Some(cache),
            };
            rest.run_staged(out, produce)
        });
        // The hits' copies are done before the read returns (and before the buffers the
        // cache may evict meanwhile are let go here).
        let drained = q.map_or(Ok(()), |q| {
            self.ops.synchronize(&q)?;
            give_back_queue(memory, q);
            Ok(())
        });
        drop(hits);
        missed.and(drained)
    }

    /// The byte-swap unit from native byte order to the output's (0: none).
    fn native_to_out_swap(out: &NDBuffer) -> usize {
        if out.byte_order() == ByteOrder::native() {
            0
        } else {
            out.dtype().swap_unit()
        }
    }

    /// True when a unit's decoded bytes (the chain's encoded layout) are already the way the
    /// cache keeps it: C order, native byte order, and the unit whole inside the array.
    pub(super) fn decoded_is_kept_layout(&self, unit: &Unit, kept: &Kept, out: &NDBuffer) -> bool {
        self.layout.order.is_none()
            && (self.layout.endian == ByteOrder::native() || out.dtype().swap_unit() == 0)
            && kept.shape == unit.shape_usize()
    }

    /// Enqueues the copy of a whole decoded unit (`decoded`, in the chain's encoded layout)
    /// into its cache buffer: its elements inside the array, in C order and native order.
    pub(super) fn to_kept_layout(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &Region,
        kept: &Kept,
        out: &NDBuffer,
    ) -> Result<()> {
        let elem = out.dtype().size();
        let src_strides = self.layout.decoded_strides(&unit.shape_usize(), elem);
        let c = Order::C.strides(&kept.shape, elem);
        let swap = if self.layout.endian == ByteOrder::native() {
            0
        } else {
            out.dtype().swap_unit()
        };
        self.ops.strided_copy(
            q,
            StridedCopy {
                src: decoded,
                src_view: Strided {
                    offset: 0,
                    strides: &src_strides,
                },
                dst: kept.region()?,
                dst_view: Strided {
                    offset: 0,
                    strides: &c,
                },
                shape: &kept.shape,
                elem_size: elem,
                swap_unit: swap,
            },
        )
    }

    /// Enqueues the scatter of a unit's region from its cached buffer (`kept`, of shape
    /// `shape` in C order and native byte order) into its place in the output.
    pub(super) fn scatter_cached(
        &self,
        q: &Queue,
        unit: &Unit,
        kept: &Region,
        shape: &[usize],
        out: &NDBuffer,
    ) -> Result<()> {
        let elem = out.dtype().size();
        let c = Order::C.strides(shape, elem);
        self.ops.strided_copy(
            q,
            StridedCopy {
                src: kept,
                src_view: Strided {
                    offset: unit.offset_in_unit(&c),
                    strides: &c,
                },
                dst: out.buffer().region()?,
                dst_view: Strided {
                    offset: unit.offset_in_request(
                        &self.request_start,
                        out.offset(),
                        out.strides(),
                    ),
                    strides: out.strides(),
                },
                shape: &unit.region_shape(),
                elem_size: elem,
                swap_unit: Self::native_to_out_swap(out),
            },
        )
    }

    /// A device buffer for `unit`'s decoded elements, to be kept in the cache; `None`
    /// without a cache, or when the cache would not keep a unit of this size.
    pub(super) fn new_kept(&self, unit: &Unit, elem: usize) -> Result<Option<Kept>> {
        let Some(cache) = self.cache else {
            return Ok(None);
        };
        let shape = cache.kept_shape(unit);
        let bytes = shape.iter().product::<usize>() * elem;
        if !cache.admits(bytes) {
            return Ok(None);
        }
        // Every byte is written by the device work enqueued right after (a copy of the
        // whole decoded unit, the decoder's output of exactly its size, the layout copy or
        // fill over its whole shape) before anything reads it, and a unit whose work failed
        // is never inserted.
        let buffer = Buffer::from_region(self.ops.alloc(bytes)?);
        Ok(Some(Kept { buffer, shape }))
    }

    /// Copies a unit the CPU decoded (`staged`: its decoded bytes in the slot) to the device,
    /// into `kept` in the cache's layout (through the slot's `scratch` when the layout
    /// differs), and scatters it from there into the output.
    pub(super) fn stage_kept(
        &self,
        q: &Queue,
        unit: &Unit,
        (staged, scratch): (&Buffer, &Buffer),
        kept: &Kept,
        out: &NDBuffer,
    ) -> Result<()> {
        if self.decoded_is_kept_layout(unit, kept, out) {
            self.ops.copy(q, staged.region()?, kept.region()?)?;
        } else {
            self.ops.copy(q, staged.region()?, scratch.region()?)?;
            self.to_kept_layout(q, unit, scratch.region()?, kept, out)?;
        }
        self.scatter_cached(q, unit, kept.region()?, &kept.shape, out)
    }

    /// A missing unit (it reads as the fill value), kept too: `kept` filled with `fill`
    /// (one element, native byte order) and scattered from there.
    pub(super) fn fill_kept(
        &self,
        q: &Queue,
        unit: &Unit,
        kept: &Kept,
        out: &NDBuffer,
    ) -> Result<()> {
        let c = Order::C.strides(&kept.shape, out.dtype().size());
        let view = Strided {
            offset: 0,
            strides: &c,
        };
        self.ops
            .fill(q, kept.region()?, view, &kept.shape, &self.fill_value)?;
        self.scatter_cached(q, unit, kept.region()?, &kept.shape, out)
    }

    /// Places a decoded unit (`decoded`: the whole unit in the chain's encoded layout) into
    /// the output through `kept`, its cache buffer: into the cache's layout, then scattered
    /// from there; or, without one, scattered straight from `decoded`.
    pub(super) fn place_decoded(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &Region,
        kept: Option<&Kept>,
        s: &Scatter<'_>,
    ) -> Result<()> {
        let Some(kept) = kept else {
            return self.scatter(q, unit, decoded, s);
        };
        self.to_kept_layout(q, unit, decoded, kept, s.out)?;
        self.scatter_cached(q, unit, kept.region()?, &kept.shape, s.out)
    }

    /// Leaves a fence at the current end of `q` — after the work that wrote the kept
    /// buffers and the scatters that read them — on each of them: whoever uses one next (a
    /// later read on another stream, the allocator once the cache lets it go) waits for it.
    pub(super) fn fence_kept(&self, q: &Queue, kept: &[(usize, Kept)]) -> Result<()> {
        let regions = kept
            .iter()
            .map(|(_, k)| k.region())
            .collect::<Result<Vec<_>>>()?;
        track(q, &regions)
    }

    /// Fences and caches one unit at once (its work cannot fail on the device: the CPU
    /// decoded it, or it is missing).
    pub(super) fn keep_now(&self, q: &Queue, unit: usize, kept: Kept) -> Result<()> {
        let kept = vec![(unit, kept)];
        self.fence_kept(q, &kept)?;
        self.insert_kept(kept);
        Ok(())
    }

    /// Hands fenced decoded units (unit index, buffer) to the cache; call only once the
    /// work that wrote them is known to have succeeded.
    pub(super) fn insert_kept(&self, kept: Vec<(usize, Kept)>) {
        if let Some(cache) = self.cache {
            for (i, k) in kept {
                cache.insert(&self.units[i].indices, k.buffer);
            }
        }
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
fn take_queue(ops: &dyn DeviceOps) -> Result<Queue> {
    let memory = ops.memory();
    if let Ok(mut pool) = queue_pool().lock()
        && let Some(k) = pool.iter().position(|(m, _)| *m == memory)
    {
        return Ok(pool.swap_remove(k).1);
    }
    ops.new_queue()
}

/// Keeps a drained queue for the next read (see [`take_queue`]).
fn give_back_queue(memory: Memory, q: Queue) {
    if let Ok(mut pool) = queue_pool().lock()
        && pool.len() < POOLED_QUEUES
    {
        pool.push((memory, q));
    }
}

/// `cb`, reporting the units of a run that follows `base` as part of the whole read.
fn after(cb: ProgressFn, base: Progress) -> ProgressFn {
    Arc::new(move |p: Progress| {
        cb(Progress {
            chunks_done: base.chunks_done + p.chunks_done,
            chunks_total: base.chunks_total,
            bytes_done: base.bytes_done + p.bytes_done,
        })
    })
}
