//! Lending a host region to zarrs' decode-into as a disjoint n-d view.

use crate::errors::{Error, Result};
use unsafe_cell_slice::UnsafeCellSlice;
use zarrs::array::{ArrayBytesDecodeIntoTarget, ArrayBytesFixedDisjointView, ArraySubset};

/// Runs `f` with a decode-into target covering `window` of a C-contiguous array of
/// `parent_shape` elements of `elem` bytes stored in `bytes`.
pub(crate) fn with_decode_target<R>(
    bytes: &mut [u8],
    elem: usize,
    parent_shape: &[u64],
    window: ArraySubset,
    f: impl FnOnce(ArrayBytesDecodeIntoTarget<'_>) -> Result<R>,
) -> Result<R> {
    let cells = UnsafeCellSlice::new(bytes);
    // SAFETY: the only view over `bytes` is this one: the caller holds `&mut [u8]` (the
    // storage's write guard), so no other disjoint view can overlap it.
    let mut view = unsafe { ArrayBytesFixedDisjointView::new(cells, elem, parent_shape, window) }
        .map_err(|e| Error::ShapeMismatch(format!("decode target: {e}")))?;
    f(ArrayBytesDecodeIntoTarget::Fixed(&mut view))
}
