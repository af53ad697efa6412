//! Batched strided copies: many items, each its own source region and layout, all into one
//! destination region, validated together before any byte moves.

use crate::error::{Result, invalid};
use crate::layout::{Plan, Strided, check_swap_unit};

/// One item of a batched strided copy ([`host::strided_copy_batch`](crate::host::strided_copy_batch),
/// [`cuda::CudaKernels::strided_copy_batch`](crate::cuda::CudaKernels::strided_copy_batch)):
/// the elements of `shape` that `src_view` places in the `src_len`-byte source region at
/// address `src` go where `dst_view` places them in the batch's destination region.
///
/// `src` is an address: a host pointer as an integer for the host twin (`ptr as u64`), a
/// device pointer (`CUdeviceptr`) for CUDA.
///
/// ```
/// use zarrbuf_codecs::{CopyItem, Strided};
/// let src = [1u8, 2, 3, 4];
/// let item = CopyItem {
///     src: src.as_ptr() as u64,
///     src_len: src.len(),
///     src_view: Strided { offset: 0, strides: &[1] },
///     dst_view: Strided { offset: 4, strides: &[1] },
///     shape: &[4],
/// };
/// assert_eq!(item.shape, &[4]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CopyItem<'a> {
    /// Address of the item's source region.
    pub src: u64,
    /// Bytes in the source region.
    pub src_len: usize,
    /// Where the item's elements are in the source region.
    pub src_view: Strided<'a>,
    /// Where they go in the batch's destination region.
    pub dst_view: Strided<'a>,
    /// The item's index space.
    pub shape: &'a [usize],
}

/// A validated batch: the swap unit and the plan of every non-empty item (with its index).
pub(crate) struct BatchPlan {
    pub unit: usize,
    pub plans: Vec<(usize, Plan)>,
}

/// Checks every item of a batch into the `dst_len`-byte destination at address `dst`: swap
/// unit, both views in bounds ([`Plan::new`]), no null address for a non-empty region, and
/// no source region overlapping the destination. The first bad item is named in the error;
/// nothing is planned for a batch with one.
pub(crate) fn plan_batch(
    items: &[CopyItem<'_>],
    dst: u64,
    dst_len: usize,
    elem_size: usize,
    swap_unit: usize,
) -> Result<BatchPlan> {
    let unit = check_swap_unit(swap_unit, elem_size)?;
    let mut plans = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let bad = |why: String| invalid(format!("item {i} of a batched copy: {why}"));
        let plan = Plan::new(
            it.src_len,
            it.src_view,
            elem_size,
            dst_len,
            it.dst_view,
            elem_size,
            it.shape,
        )
        .map_err(|e| bad(e.to_string()))?;
        let Some(plan) = plan else { continue };
        if it.src == 0 || dst == 0 {
            return Err(bad("null address for a non-empty region".into()));
        }
        let overlap = |a: u64, al: usize, b: u64, bl: usize| {
            a < b.saturating_add(bl as u64) && b < a.saturating_add(al as u64)
        };
        if overlap(it.src, it.src_len, dst, dst_len) {
            return Err(bad(format!(
                "its source region ({} bytes at {:#x}) overlaps the destination ({dst_len} \
                 bytes at {dst:#x}); a batched copy needs distinct regions",
                it.src_len, it.src
            )));
        }
        plans.push((i, plan));
    }
    Ok(BatchPlan { unit, plans })
}
