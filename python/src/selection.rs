//! Selections as the Python half hands them over: one `(start, stop)` range per dimension
//! and the size-1 axes to drop from the result (integer indices), for both kinds of
//! elements.

use crate::varlen::reshape;
use std::ops::Range;
use zarrbuf::{NDBuffer, VarLenBuffer};

pub(crate) fn to_ranges(ranges: &[(u64, u64)]) -> Vec<Range<u64>> {
    ranges.iter().map(|&(a, b)| a..b).collect()
}

/// The shape of `ranges` without the axes `drop`.
pub(crate) fn kept_shape(ranges: &[(u64, u64)], drop: &[usize]) -> Vec<u64> {
    ranges
        .iter()
        .enumerate()
        .filter(|(k, _)| !drop.contains(k))
        .map(|(_, &(a, b))| b.saturating_sub(a))
        .collect()
}

/// `a` with the size-1 axes `axes` (sorted) removed.
pub(crate) fn drop_axes(a: NDBuffer, axes: &[usize]) -> zarrbuf::Result<NDBuffer> {
    if axes.is_empty() {
        return Ok(a);
    }
    a.squeeze(axes)
}

/// `v` without the (size-1) axes `drop`.
pub(crate) fn drop_varlen_axes(v: VarLenBuffer, drop: &[usize]) -> zarrbuf::Result<VarLenBuffer> {
    let kept = v
        .shape()
        .iter()
        .enumerate()
        .filter(|(k, _)| !drop.contains(k))
        .map(|(_, &n)| n)
        .collect();
    reshape(v, kept)
}

/// `a` with size-1 axes inserted so that they sit at `axes` (sorted) of the result.
pub(crate) fn insert_axes(a: NDBuffer, axes: &[usize]) -> zarrbuf::Result<NDBuffer> {
    if axes.is_empty() {
        return Ok(a);
    }
    let ndim = a.ndim() + axes.len();
    let (mut shape, mut strides) = (Vec::with_capacity(ndim), Vec::with_capacity(ndim));
    let mut src = a.shape().iter().zip(a.strides());
    for k in 0..ndim {
        if axes.contains(&k) {
            shape.push(1);
            strides.push(-1); // filled in below
        } else {
            let (&n, &s) = src.next().ok_or_else(|| {
                zarrbuf::Error::ShapeMismatch(format!(
                    "cannot insert axes {axes:?} into shape {:?}",
                    a.shape()
                ))
            })?;
            shape.push(n);
            strides.push(s);
        }
    }
    // A size-1 axis may take any stride; give it the one C order would (zarrbuf's readers
    // recognise C-order windows by their strides, and a zero stride is not one).
    for k in (0..ndim).rev() {
        if strides[k] < 0 {
            strides[k] = if k + 1 < ndim {
                strides[k + 1] * shape[k + 1].max(1) as isize
            } else {
                a.dtype().size() as isize
            };
        }
    }
    NDBuffer::from_parts(
        a.buffer().clone(),
        a.dtype(),
        &shape,
        &strides,
        a.offset(),
        a.byte_order(),
    )
}
