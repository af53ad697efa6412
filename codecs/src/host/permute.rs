//! Transpose of a C-contiguous n-d block.

use super::copy::strided_copy_slices;
use crate::error::{Result, invalid};
use crate::layout::{Strided, c_strides, check_axes};

/// Writes the transpose of the C-contiguous block `src` (shape `src_shape`, `elem_size`-byte
/// elements) into `dst` in C order: `dst` has shape `[src_shape[axes[0]], src_shape[axes[1]],
/// ..]`, like `numpy.transpose(x, axes).copy()`.
///
/// Both slices must be at least `product(src_shape) * elem_size` bytes long; `axes` must be a
/// permutation of `0..src_shape.len()`. This is a [`strided_copy`](super::strided_copy) with
/// permuted source strides.
///
/// ```
/// // [[0, 1, 2], [3, 4, 5]] transposed
/// let src = [0u8, 1, 2, 3, 4, 5];
/// let mut dst = [0u8; 6];
/// zarrbuf_codecs::host::permute(&src, &mut dst, &[2, 3], &[1, 0], 1)?;
/// assert_eq!(dst, [0, 3, 1, 4, 2, 5]);
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn permute(
    src: &[u8],
    dst: &mut [u8],
    src_shape: &[usize],
    axes: &[usize],
    elem_size: usize,
) -> Result<()> {
    let p = PermutePlan::new(src_shape, axes, elem_size)?;
    if src.len() < p.bytes || dst.len() < p.bytes {
        return Err(invalid(format!(
            "permute of shape {src_shape:?} needs {} bytes on each side, got {} (src) and {} \
             (dst)",
            p.bytes,
            src.len(),
            dst.len()
        )));
    }
    strided_copy_slices(
        src,
        Strided {
            offset: 0,
            strides: &p.src_strides,
        },
        dst,
        Strided {
            offset: 0,
            strides: &p.dst_strides,
        },
        &p.dst_shape,
        elem_size,
        0,
    )
}

/// The strided copy a permute amounts to (shared with the CUDA implementation).
pub(crate) struct PermutePlan {
    /// Output shape.
    pub dst_shape: Vec<usize>,
    /// Source strides, permuted into output order.
    pub src_strides: Vec<isize>,
    /// C-contiguous output strides.
    pub dst_strides: Vec<isize>,
    /// Bytes of the block (same on both sides).
    pub bytes: usize,
}

impl PermutePlan {
    /// Validates `axes` and builds the plan.
    pub fn new(src_shape: &[usize], axes: &[usize], elem_size: usize) -> Result<Self> {
        if elem_size == 0 {
            return Err(invalid("element size must be at least 1 byte"));
        }
        check_axes(axes, src_shape.len())?;
        let (strides, bytes) = c_strides(src_shape, elem_size)?;
        let dst_shape: Vec<usize> = axes.iter().map(|&a| src_shape[a]).collect();
        let src_strides = axes.iter().map(|&a| strides[a]).collect();
        let (dst_strides, _) = c_strides(&dst_shape, elem_size)?;
        Ok(PermutePlan {
            dst_shape,
            src_strides,
            dst_strides,
            bytes,
        })
    }
}
