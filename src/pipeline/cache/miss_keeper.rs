//! How the general route keeps the units a cached read missed ([`MissKeeper`]; the design is
//! in [`super::device_cache`]): each miss is decoded into a device buffer of its own in the
//! cache's layout, scattered from there, fenced and handed to the cache. The coordinator
//! (`slot_ring.rs`) and the device decoder (`device_batches.rs`) call it for every unit;
//! without a cache it keeps nothing and every call is the plain route's.

use super::device_cache::{Kept, ReadCache};
use crate::buffer::{Buffer, NDBuffer};
use crate::data_types::{ByteOrder, Order};
use crate::device::{Queue, StridedCopy, track};
use crate::errors::{Error, Result};
use crate::memory::Region;
use crate::pipeline::StagedRead;
use crate::pipeline::read::scatter::{PendingScatter, Scatter};
use crate::zarr::Unit;
use zarrbuf_codecs::Strided;

/// The misses of a read kept for its cache: the read, and the cache (`None`: a read without
/// one, which keeps nothing).
#[derive(Clone, Copy)]
pub(in crate::pipeline) struct MissKeeper<'r> {
    read: &'r StagedRead<'r>,
    cache: Option<&'r ReadCache>,
}

impl<'r> MissKeeper<'r> {
    pub(in crate::pipeline) fn new(read: &'r StagedRead<'r>, cache: Option<&'r ReadCache>) -> Self {
        MissKeeper { read, cache }
    }

    /// True when a unit's decoded bytes (the chain's encoded layout) are already the way the
    /// cache keeps it: C order, native byte order, and the unit whole inside the array.
    pub(in crate::pipeline) fn decoded_is_kept_layout(
        &self,
        unit: &Unit,
        kept: &Kept,
        out: &NDBuffer,
    ) -> bool {
        let layout = &self.read.layout;
        layout.order.is_none()
            && (layout.endian == ByteOrder::native() || out.dtype().swap_unit() == 0)
            && kept.shape == unit.shape_usize()
    }

    /// Enqueues the copy of a whole decoded unit (`decoded`, in the chain's encoded layout)
    /// into its cache buffer: its elements inside the array, in C order and native order.
    fn copy_to_kept_layout(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &Region,
        kept: &Kept,
        out: &NDBuffer,
    ) -> Result<()> {
        let elem = out.dtype().size();
        let src_strides = self.read.layout.decoded_strides(&unit.shape_usize(), elem);
        let c = Order::C.strides(&kept.shape, elem);
        let swap = if self.read.layout.endian == ByteOrder::native() {
            0
        } else {
            out.dtype().swap_unit()
        };
        self.read.ops.strided_copy(
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
    fn scatter_cached(
        &self,
        q: &Queue,
        unit: &Unit,
        kept: &Region,
        shape: &[usize],
        out: &NDBuffer,
    ) -> Result<()> {
        PendingScatter::cached(self.read, unit, kept, shape, out).enqueue(
            self.read.ops.as_ref(),
            q,
            out,
        )
    }

    /// The scatter from `kept`, a unit's cache buffer, into its place in the output.
    pub(in crate::pipeline) fn kept_scatter(
        &self,
        unit: &Unit,
        kept: &Kept,
        out: &NDBuffer,
    ) -> Result<PendingScatter> {
        Ok(PendingScatter::cached(
            self.read,
            unit,
            kept.region()?,
            &kept.shape,
            out,
        ))
    }

    /// A device buffer for `unit`'s decoded elements, to be kept in the cache; `None`
    /// without a cache, or when the cache would not keep a unit of this size.
    pub(in crate::pipeline) fn new_kept(&self, unit: &Unit, elem: usize) -> Result<Option<Kept>> {
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
        let region = match self.read.ops.alloc(bytes) {
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
    pub(in crate::pipeline) fn stage_kept(
        &self,
        q: &Queue,
        unit: &Unit,
        (staged, scratch): (&Buffer, &Buffer),
        kept: &Kept,
        out: &NDBuffer,
    ) -> Result<()> {
        if self.decoded_is_kept_layout(unit, kept, out) {
            self.read.ops.copy(q, staged.region()?, kept.region()?)?;
        } else {
            self.read.ops.copy(q, staged.region()?, scratch.region()?)?;
            self.copy_to_kept_layout(q, unit, scratch.region()?, kept, out)?;
        }
        self.scatter_cached(q, unit, kept.region()?, &kept.shape, out)
    }

    /// A missing unit (it reads as the fill value), kept too: `kept` filled with the fill
    /// value (native byte order) and scattered from there.
    pub(in crate::pipeline) fn fill_kept(
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
        self.read
            .ops
            .fill(q, kept.region()?, view, &kept.shape, &self.read.fill_value)?;
        self.scatter_cached(q, unit, kept.region()?, &kept.shape, out)
    }

    /// Prepares the placing of a decoded unit (`decoded`: the whole unit in the chain's
    /// encoded layout) into the output through `kept`, its cache buffer: the copy into the
    /// cache's layout is enqueued, and the scatter from there returned for the caller to
    /// enqueue after it (with others); without a cache buffer, the scatter straight from
    /// `decoded`.
    pub(in crate::pipeline) fn prepare_place(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &Region,
        kept: Option<&Kept>,
        s: &Scatter<'_>,
    ) -> Result<PendingScatter> {
        let Some(kept) = kept else {
            return Ok(PendingScatter::decoded(self.read, unit, decoded, s));
        };
        self.copy_to_kept_layout(q, unit, decoded, kept, s.out)?;
        self.kept_scatter(unit, kept, s.out)
    }

    /// Leaves a fence at the current end of `q` — after the work that wrote the kept
    /// buffers and the scatters that read them — on each of them: whoever uses one next (a
    /// later read on another stream, the allocator once the cache lets it go) waits for it.
    pub(in crate::pipeline) fn fence_kept(&self, q: &Queue, kept: &[(usize, Kept)]) -> Result<()> {
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
    pub(in crate::pipeline) fn keep_now(&self, q: &Queue, unit: usize, kept: Kept) -> Result<()> {
        let kept = vec![(unit, kept)];
        self.fence_kept(q, &kept)?;
        self.insert_kept(kept);
        Ok(())
    }

    /// Hands fenced decoded units (unit index, buffer) to the cache; call only once the
    /// work that wrote them is known to have succeeded.
    pub(in crate::pipeline) fn insert_kept(&self, kept: Vec<(usize, Kept)>) {
        if let Some(cache) = self.cache {
            for (i, k) in kept {
                cache.insert(&self.read.units[i].indices, k.buffer);
            }
        }
    }
}
