//! Kernel parameter blocks passed by value, and the host-side planning that fills them.

use crate::layout::{MAX_DIMS, Plan};
use cudarc::driver::DeviceRepr;

/// `ZbLayout.flags`: 64-bit index arithmetic.
pub(crate) const INDEX64: u32 = 1;
/// `ZbLayout.flags`: every source element is aligned to `min(size, 8)` (cast).
pub(crate) const SRC_ALIGNED: u32 = 2;
/// `ZbLayout.flags`: every destination element is aligned to `min(size, 8)` (cast).
pub(crate) const DST_ALIGNED: u32 = 4;

thread_local! {
    /// Self-test hook: use the kernels' 64-bit index path even for small launches made from
    /// this thread (results are identical, only slower).
    pub(crate) static FORCE_INDEX64: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Mirror of `struct ZbLayout` in `kernels/common.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelLayout {
    pub n: u64,
    pub ndim: u32,
    pub elem_size: u32,
    pub swap_unit: u32,
    pub src_kind: u32,
    pub dst_kind: u32,
    pub flags: u32,
    pub shape: [u64; MAX_DIMS],
    pub src_strides: [i64; MAX_DIMS],
    pub dst_strides: [i64; MAX_DIMS],
}

// SAFETY: `KernelLayout` is `repr(C)` plain data (integers and integer arrays, no padding
// between fields given their order) laid out exactly like `struct ZbLayout` in
// kernels/common.cuh, so the kernel may read it by value.
unsafe impl DeviceRepr for KernelLayout {}

/// Longest fill pattern the CUDA byte-wise fill kernel accepts.
pub(crate) const MAX_PATTERN: usize = 256;

/// Mirror of `struct ZbPattern` in `kernels/common.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelPattern {
    pub bytes: [u8; MAX_PATTERN],
}

// SAFETY: `repr(C)` byte array matching `struct ZbPattern`.
unsafe impl DeviceRepr for KernelPattern {}

impl KernelLayout {
    /// Parameter block for `plan` with `elem_size`-byte elements (every number of a valid
    /// plan fits the kernel's types: extents and strides are bounded by region lengths).
    pub fn from_plan(plan: &Plan, elem_size: usize, swap_unit: usize) -> KernelLayout {
        let mut l = KernelLayout {
            n: plan.numel as u64,
            ndim: plan.ndim() as u32,
            elem_size: elem_size as u32,
            swap_unit: swap_unit as u32,
            src_kind: 0,
            dst_kind: 0,
            flags: 0,
            shape: [1; MAX_DIMS],
            src_strides: [0; MAX_DIMS],
            dst_strides: [0; MAX_DIMS],
        };
        for d in 0..plan.ndim() {
            l.shape[d] = plan.shape[d] as u64;
            l.src_strides[d] = plan.src[d] as i64;
            l.dst_strides[d] = plan.dst[d] as i64;
        }
        if l.n > u32::MAX as u64 || FORCE_INDEX64.with(|f| f.get()) {
            l.flags |= INDEX64;
        }
        l
    }
}

/// Widens a plan whose innermost dimension is contiguous on both sides to the widest word
/// (2, 4, 8 or 16 bytes, a multiple of `elem_size`) that divides the row and to which both
/// start addresses and every outer stride are aligned. Returns the new element size; `plan`
/// is updated in place. A byte swap stays correct because its unit divides `elem_size`.
pub(crate) fn widen(plan: &mut Plan, src_addr: u64, dst_addr: u64, elem_size: usize) -> usize {
    let (n, sa, sb) = plan.inner();
    if sa != elem_size as isize || sb != elem_size as isize {
        return elem_size;
    }
    let row = n * elem_size;
    for w in [16usize, 8, 4, 2] {
        if w <= elem_size || w % elem_size != 0 || !row.is_multiple_of(w) {
            continue;
        }
        let outer = plan.ndim() - 1;
        let aligned = src_addr.is_multiple_of(w as u64)
            && dst_addr.is_multiple_of(w as u64)
            && plan.src[..outer]
                .iter()
                .chain(&plan.dst[..outer])
                .all(|&s| s % w as isize == 0);
        if aligned {
            let d = plan.ndim() - 1;
            plan.shape[d] = row / w;
            plan.src[d] = w as isize;
            plan.dst[d] = w as isize;
            plan.numel = plan.numel / n * (row / w);
            return w;
        }
    }
    elem_size
}

/// One side of a copy plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Source,
    Destination,
}

/// Whether every element of `plan` on `side` (based at `addr`) sits at an address that is a
/// multiple of `align`.
pub(crate) fn all_aligned(plan: &Plan, addr: u64, align: usize, side: Side) -> bool {
    let strides = match side {
        Side::Source => &plan.src,
        Side::Destination => &plan.dst,
    };
    addr.is_multiple_of(align as u64) && strides.iter().all(|&s| s % align as isize == 0)
}

/// For a transpose-like plan — destination innermost dimension contiguous, source innermost
/// not, some outer dimension `p` contiguous in the source, and both at least `min_extent`
/// long — returns the plan reordered as `[batch dims.., p, innermost]` for the tiled
/// transpose kernels.
pub(crate) fn transpose_plan(plan: &Plan, elem_size: usize, min_extent: usize) -> Option<Plan> {
    let q = plan.ndim().checked_sub(1)?;
    let es = elem_size as isize;
    let (nq, sq, dq) = plan.inner();
    if dq != es || sq.abs() == es || nq < min_extent {
        return None;
    }
    let p = (0..q).find(|&d| plan.src[d].abs() == es && plan.shape[d] >= min_extent)?;
    let mut out = Plan {
        shape: vec![],
        src: vec![],
        dst: vec![],
        src_offset: plan.src_offset,
        dst_offset: plan.dst_offset,
        numel: plan.numel,
    };
    for d in (0..q).filter(|&d| d != p).chain([p, q]) {
        out.shape.push(plan.shape[d]);
        out.src.push(plan.src[d]);
        out.dst.push(plan.dst[d]);
    }
    Some(out)
}
