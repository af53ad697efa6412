//! Scatters into a staged read's output: where decoded units go ([`Scatter`]), one unit's
//! scatter ([`PendingScatter`]), and scatters gathered and enqueued together — the units of
//! one device batch, or a read's cache hits, placed with one batched strided copy per
//! byte-swap unit instead of one copy (one kernel launch on CUDA) per unit.

use crate::buffer::NDBuffer;
use crate::data_types::{ByteOrder, Order};
use crate::device::{CopyBatch, CopyBatchItem, DeviceOps, Queue, StridedCopy};
use crate::errors::Result;
use crate::memory::Region;
use crate::pipeline::StagedRead;
use crate::zarr::Unit;
use zarrbuf_codecs::Strided;

/// Where decoded units go.
pub(in crate::pipeline) struct Scatter<'a> {
    pub(in crate::pipeline) out: &'a NDBuffer,
    pub(in crate::pipeline) elem: usize,
    /// Byte-swap unit from the decoded layout to the output's byte order (0: none).
    pub(in crate::pipeline) swap: usize,
}

/// One unit's scatter into the output: its source and the layouts on both sides.
pub(in crate::pipeline) struct PendingScatter {
    src: Region,
    src_offset: usize,
    src_strides: Vec<isize>,
    dst_offset: usize,
    shape: Vec<usize>,
    swap: usize,
}

impl PendingScatter {
    /// The scatter of one decoded unit (in the chain's encoded layout, at the start of
    /// `decoded`) into its place in the output: byte swap + transpose + strided copy.
    pub(in crate::pipeline) fn decoded(
        read: &StagedRead<'_>,
        unit: &Unit,
        decoded: &Region,
        s: &Scatter<'_>,
    ) -> PendingScatter {
        let src_strides = read.layout.decoded_strides(&unit.shape_usize(), s.elem);
        PendingScatter {
            src: decoded.clone(),
            src_offset: unit.offset_in_unit(&src_strides),
            src_strides,
            dst_offset: unit.offset_in_request(
                &read.request_start,
                s.out.offset(),
                s.out.strides(),
            ),
            shape: unit.region_shape(),
            swap: s.swap,
        }
    }

    /// The scatter of a unit's region from its cached buffer (`kept`, of shape `shape` in C
    /// order and native byte order) into its place in the output.
    pub(in crate::pipeline) fn cached(
        read: &StagedRead<'_>,
        unit: &Unit,
        kept: &Region,
        shape: &[usize],
        out: &NDBuffer,
    ) -> PendingScatter {
        let c = Order::C.strides(shape, out.dtype().size());
        PendingScatter {
            src: kept.clone(),
            src_offset: unit.offset_in_unit(&c),
            src_strides: c,
            dst_offset: unit.offset_in_request(&read.request_start, out.offset(), out.strides()),
            shape: unit.region_shape(),
            swap: native_to_out_swap(out),
        }
    }

    /// The bytes this scatter places in the output (`elem`: the element's size).
    pub(in crate::pipeline) fn bytes(&self, elem: usize) -> usize {
        self.shape.iter().product::<usize>() * elem
    }

    /// Enqueues `scatters` into `out` on `q`: one batched copy per byte-swap unit among
    /// them (a lone scatter as a plain strided copy), in the order given within each.
    pub(in crate::pipeline) fn enqueue_all(
        ops: &dyn DeviceOps,
        q: &Queue,
        scatters: &[PendingScatter],
        out: &NDBuffer,
    ) -> Result<()> {
        let dst = out.buffer().region()?;
        let elem = out.dtype().size();
        let mut swaps: Vec<usize> = scatters.iter().map(|p| p.swap).collect();
        swaps.sort_unstable();
        swaps.dedup();
        for swap in swaps {
            let items: Vec<CopyBatchItem<'_>> = scatters
                .iter()
                .filter(|p| p.swap == swap)
                .map(|p| CopyBatchItem {
                    src: &p.src,
                    src_view: Strided {
                        offset: p.src_offset,
                        strides: &p.src_strides,
                    },
                    dst_view: Strided {
                        offset: p.dst_offset,
                        strides: out.strides(),
                    },
                    shape: &p.shape,
                })
                .collect();
            if let [one] = items.as_slice() {
                ops.strided_copy(
                    q,
                    StridedCopy {
                        src: one.src,
                        src_view: one.src_view,
                        dst,
                        dst_view: one.dst_view,
                        shape: one.shape,
                        elem_size: elem,
                        swap_unit: swap,
                    },
                )?;
                continue;
            }
            ops.strided_copy_batch(
                q,
                CopyBatch {
                    items: &items,
                    dst,
                    elem_size: elem,
                    swap_unit: swap,
                },
            )?;
        }
        Ok(())
    }

    /// Enqueues this one scatter on `q`.
    pub(in crate::pipeline) fn enqueue(
        self,
        ops: &dyn DeviceOps,
        q: &Queue,
        out: &NDBuffer,
    ) -> Result<()> {
        Self::enqueue_all(ops, q, &[self], out)
    }
}

/// The byte-swap unit from native byte order to the output's (0: none).
pub(super) fn native_to_out_swap(out: &NDBuffer) -> usize {
    if out.byte_order() == ByteOrder::native() {
        0
    } else {
        out.dtype().swap_unit()
    }
}
