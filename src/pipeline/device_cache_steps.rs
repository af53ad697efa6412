//! The steps of a staged read through a decoded-chunk cache in the device's memory (see
//! [`super::device_cache`] for the design): hits placed from the cache, the misses' run, and
//! what the coordinator and the device decoder call to decode a miss into its own buffer,
//! scatter it from there and keep it.

use super::StagedRead;
use super::batch_scatter::PendingScatter;
use super::device_cache::{Kept, ReadCache, give_back_queue, take_queue};
use super::device_parts::Scatter;
use super::staged_read::Producer;
use crate::buffer::{Buffer, NDBuffer};
use crate::data_types::{ByteOrder, Order};
use crate::device::{Queue, StridedCopy, track};
use crate::errors::{Error, Result};
use crate::memory::Region;
use crate::options::{Progress, ProgressFn};
use crate::zarr::Unit;
use std::sync::Arc;
use zarrbuf_codecs::Strided;

impl StagedRead<'_> {
    /// Runs the read with `cache`: hits placed from it on the device, misses through the
    /// staged pipeline, which decodes each into a buffer of its own for the cache.
    pub(super) fn run_cached(
        &self,
        cache: &ReadCache,
        out: &NDBuffer,
        produce: &Producer<'_>,
    ) -> Result<()> {
        // As in the uncached run: whatever is in flight on the output (its allocation, a
        // copy) is waited for once, here, not by every hit's copy.
        out.buffer().region()?.settle()?;
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
        // Every hit placed by one batched copy (per byte-swap unit).
        let placed = q.as_ref().map_or(Ok(()), |q| {
            let scatters = hits
                .iter()
                .map(|(unit, b, shape)| Ok(self.cached_scatter(unit, b.region()?, shape, out)))
                .collect::<Result<Vec<_>>>()?;
            self.enqueue_scatters(q, &scatters, out)?;
            for (unit, _, _) in &hits {
                self.report(&mut progress, &unit.region_shape(), elem);
            }
            Ok(())
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
                claim: self.claim,
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
    pub(super) fn native_to_out_swap(out: &NDBuffer) -> usize {
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
        let one = self.cached_scatter(unit, kept, shape, out);
        self.enqueue_scatters(q, &[one], out)
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
        let region = match self.ops.alloc(bytes) {
            Ok(r) => r,
            // The device is full (the cache's own chunks count there too): this unit is
            // read as without a cache, not kept.
            Err(Error::OutOfMemory { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(Kept {
            buffer: Buffer::from_region(region),
            shape,
        }))
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

    /// Prepares the placing of a decoded unit (`decoded`: the whole unit in the chain's
    /// encoded layout) into the output through `kept`, its cache buffer: the copy into the
    /// cache's layout is enqueued, and the scatter from there returned for the caller to
    /// enqueue after it (with others); without a cache buffer, the scatter straight from
    /// `decoded`.
    pub(super) fn prepare_place(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &Region,
        kept: Option<&Kept>,
        s: &Scatter<'_>,
    ) -> Result<PendingScatter> {
        let Some(kept) = kept else {
            return Ok(self.decoded_scatter(unit, decoded, s));
        };
        self.to_kept_layout(q, unit, decoded, kept, s.out)?;
        Ok(self.cached_scatter(unit, kept.region()?, &kept.shape, s.out))
    }

    /// Leaves a fence at the current end of `q` — after the work that wrote the kept
    /// buffers and the scatters that read them — on each of them: whoever uses one next (a
    /// later read on another stream, the allocator once the cache lets it go) waits for it.
    pub(super) fn fence_kept(&self, q: &Queue, kept: &[(usize, Kept)]) -> Result<()> {
        if kept.is_empty() {
            // Nothing kept (a read without a cache): no event recorded.
            return Ok(());
        }
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
