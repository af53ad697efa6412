//! Strided layouts: views over byte regions, bounds checks, and dimension merging.

use crate::error::{Result, invalid};

/// The most dimensions an operation accepts *after* [`merge_dims`] has merged contiguous
/// dimensions and dropped size-1 ones.
///
/// ```
/// assert_eq!(zarrbuf_codecs::MAX_DIMS, 16);
/// ```
pub const MAX_DIMS: usize = 16;

/// One operand of a strided operation.
///
/// `offset` is the byte offset of element `[0, 0, ..]` from the start of the region, and
/// `strides[d]` the distance in bytes between neighbours along dimension `d`. Strides may be
/// negative (reversed axes) or zero (broadcast); a zero stride is accepted on the *source*
/// side of a copy or cast only, since a destination must not write one element twice.
///
/// ```
/// use zarrbuf_codecs::Strided;
/// // a 2x3 C-contiguous array of u32
/// let v = Strided { offset: 0, strides: &[12, 4] };
/// // the same array read with both axes reversed
/// let r = Strided { offset: 20, strides: &[-12, -4] };
/// assert_eq!(v.strides.len(), r.strides.len());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    /// Byte offset of element `[0, 0, ..]` from the region start.
    pub offset: usize,
    /// Byte stride of each dimension.
    pub strides: &'a [isize],
}

/// Checks that every element of `shape` at `view` lies inside a region of `region_len` bytes,
/// elements being `elem_size` bytes long.
///
/// Errors with [`CodecError::InvalidLayout`](crate::CodecError::InvalidLayout) when
/// `view.strides.len() != shape.len()`, `elem_size == 0`, or some element would start before
/// the region or end after it. An empty shape (some extent 0) addresses nothing and is always
/// in bounds; a shape with no dimensions is one element at `view.offset`.
///
/// ```
/// use zarrbuf_codecs::{check_extent, Strided};
/// let v = Strided { offset: 0, strides: &[8, 2] };
/// assert!(check_extent(24, v, &[3, 4], 2).is_ok());
/// assert!(check_extent(23, v, &[3, 4], 2).is_err());
/// // reversed rows: the offset must point at the last row
/// assert!(check_extent(24, Strided { offset: 16, strides: &[-8, 2] }, &[3, 4], 2).is_ok());
/// assert!(check_extent(24, Strided { offset: 8, strides: &[-8, 2] }, &[3, 4], 2).is_err());
/// ```
pub fn check_extent(
    region_len: usize,
    view: Strided<'_>,
    shape: &[usize],
    elem_size: usize,
) -> Result<()> {
    if view.strides.len() != shape.len() {
        return Err(invalid(format!(
            "shape has {} dimensions but strides has {}",
            shape.len(),
            view.strides.len()
        )));
    }
    if elem_size == 0 {
        return Err(invalid("element size must be at least 1 byte"));
    }
    if shape.contains(&0) {
        return Ok(());
    }
    let overflow = || invalid("layout extent overflows 128-bit arithmetic");
    let mut lo = view.offset as i128;
    let mut hi = view.offset as i128;
    for (&n, &s) in shape.iter().zip(view.strides) {
        let span = (s as i128)
            .checked_mul(n as i128 - 1)
            .ok_or_else(overflow)?;
        if span < 0 {
            lo = lo.checked_add(span).ok_or_else(overflow)?;
        } else {
            hi = hi.checked_add(span).ok_or_else(overflow)?;
        }
    }
    let end = hi.checked_add(elem_size as i128).ok_or_else(overflow)?;
    if lo < 0 || end > region_len as i128 {
        return Err(invalid(format!(
            "view (offset {}, strides {:?}) of shape {:?} with {}-byte elements spans bytes \
             {}..{}, outside the {}-byte region",
            view.offset, view.strides, shape, elem_size, lo, end, region_len
        )));
    }
    Ok(())
}

/// Merges adjacent dimensions that are contiguous for *both* operands, and drops size-1
/// dimensions, so that kernels iterate over as few dimensions as possible.
///
/// Returns `(shape, a_strides, b_strides)`. Dimension `d` merges into its inner neighbour
/// `d + 1` when `a[d] == a[d + 1] * shape[d + 1]` and likewise for `b`. The element order is
/// unchanged. If some extent is 0 the result is `([0], [0], [0])`; if every extent is 1 it is
/// three empty vectors (one element, no dimensions). Dimensions beyond the shortest of the three
/// slices are ignored: validate lengths with [`check_extent`] first.
///
/// ```
/// use zarrbuf_codecs::merge_dims;
/// // a C-contiguous 2x3x4 u8 block copied into rows of 16 bytes: the two outer dims merge
/// let (shape, a, b) = merge_dims(&[2, 3, 4], &[12, 4, 1], &[48, 16, 1]);
/// assert_eq!(shape, [6, 4]);
/// assert_eq!((a, b), (vec![4, 1], vec![16, 1]));
/// // both contiguous: one dimension
/// let (shape, a, b) = merge_dims(&[2, 1, 3, 4], &[12, 12, 4, 1], &[12, 99, 4, 1]);
/// assert_eq!((shape, a, b), (vec![24], vec![1], vec![1]));
/// ```
pub fn merge_dims(
    shape: &[usize],
    a: &[isize],
    b: &[isize],
) -> (Vec<usize>, Vec<isize>, Vec<isize>) {
    let nd = shape.len().min(a.len()).min(b.len());
    if shape[..nd].contains(&0) {
        return (vec![0], vec![0], vec![0]);
    }
    // Built innermost first, reversed at the end.
    let mut out: Vec<(usize, isize, isize)> = Vec::with_capacity(nd);
    for d in (0..nd).rev() {
        let (n, sa, sb) = (shape[d], a[d], b[d]);
        if n == 1 {
            continue;
        }
        if let Some(last) = out.last_mut() {
            let (cn, ca, cb) = *last;
            let merges = (cn as isize).checked_mul(ca).is_some_and(|v| v == sa)
                && (cn as isize).checked_mul(cb).is_some_and(|v| v == sb);
            if merges && let Some(m) = cn.checked_mul(n) {
                last.0 = m;
                continue;
            }
        }
        out.push((n, sa, sb));
    }
    out.reverse();
    let shape = out.iter().map(|t| t.0).collect();
    let a = out.iter().map(|t| t.1).collect();
    let b = out.iter().map(|t| t.2).collect();
    (shape, a, b)
}

/// A validated, merged two-operand iteration plan (crate-internal).
///
/// Invariants: `shape.len() == src.len() == dst.len()` and is between 1 and [`MAX_DIMS`];
/// every extent is at least 1; every element addressed lies inside both regions; `numel`
/// is the product of `shape`. Dimensions are ordered so that the destination's smallest
/// stride is innermost.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub shape: Vec<usize>,
    pub src: Vec<isize>,
    pub dst: Vec<isize>,
    pub src_offset: usize,
    pub dst_offset: usize,
    pub numel: usize,
}

impl Plan {
    /// Validates both operands and builds the merged plan; `Ok(None)` when there is nothing to
    /// do (some extent is 0).
    pub fn new(
        src_len: usize,
        src_view: Strided<'_>,
        src_elem: usize,
        dst_len: usize,
        dst_view: Strided<'_>,
        dst_elem: usize,
        shape: &[usize],
    ) -> Result<Option<Plan>> {
        check_extent(src_len, src_view, shape, src_elem)
            .map_err(|e| invalid(format!("source: {e}")))?;
        check_extent(dst_len, dst_view, shape, dst_elem)
            .map_err(|e| invalid(format!("destination: {e}")))?;
        if src_len > isize::MAX as usize || dst_len > isize::MAX as usize {
            return Err(invalid("region longer than isize::MAX bytes"));
        }
        if shape.contains(&0) {
            return Ok(None);
        }
        let mut numel = 1usize;
        for (d, &n) in shape.iter().enumerate() {
            numel = numel
                .checked_mul(n)
                .ok_or_else(|| invalid(format!("element count of shape {shape:?} overflows")))?;
            if n > 1 && dst_view.strides[d] == 0 {
                return Err(invalid(format!(
                    "destination stride of dimension {d} (extent {n}) is 0: a destination \
                     must not write one element twice (zero strides are for sources only)"
                )));
            }
        }
        // Order dims so that the destination's smallest |stride| is innermost (stable).
        let mut order: Vec<usize> = (0..shape.len()).collect();
        order.sort_by_key(|&d| std::cmp::Reverse(dst_view.strides[d].unsigned_abs()));
        let oshape: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
        let osrc: Vec<isize> = order.iter().map(|&d| src_view.strides[d]).collect();
        let odst: Vec<isize> = order.iter().map(|&d| dst_view.strides[d]).collect();
        let (mut mshape, mut msrc, mut mdst) = merge_dims(&oshape, &osrc, &odst);
        if mshape.len() > MAX_DIMS {
            return Err(invalid(format!(
                "{} dimensions remain after merging contiguous ones; at most {MAX_DIMS} are \
                 supported",
                mshape.len()
            )));
        }
        if mshape.is_empty() {
            mshape.push(1);
            msrc.push(src_elem as isize);
            mdst.push(dst_elem as isize);
        }
        Ok(Some(Plan {
            shape: mshape,
            src: msrc,
            dst: mdst,
            src_offset: src_view.offset,
            dst_offset: dst_view.offset,
            numel,
        }))
    }

    /// Number of dimensions (at least 1).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Extent and strides of the innermost dimension.
    pub fn inner(&self) -> (usize, isize, isize) {
        let d = self.ndim() - 1;
        (self.shape[d], self.src[d], self.dst[d])
    }

    /// Calls `row(src_offset, dst_offset)` with the byte offsets of the first element of every
    /// row (every index of the outer dimensions), in C order. Offsets are in bounds by
    /// construction.
    pub fn for_each_row(&self, mut row: impl FnMut(usize, usize)) {
        let outer = self.ndim() - 1;
        let mut idx = [0usize; MAX_DIMS];
        let mut so = self.src_offset as isize;
        let mut dof = self.dst_offset as isize;
        loop {
            row(so as usize, dof as usize);
            let mut d = outer;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                // Wrapping arithmetic: intermediate values may leave the region (one stride
                // past the end of a dimension) but every offset handed to `row` is in bounds.
                so = so.wrapping_add(self.src[d]);
                dof = dof.wrapping_add(self.dst[d]);
                if idx[d] < self.shape[d] {
                    break;
                }
                let n = self.shape[d] as isize;
                so = so.wrapping_sub(self.src[d].wrapping_mul(n));
                dof = dof.wrapping_sub(self.dst[d].wrapping_mul(n));
                idx[d] = 0;
            }
        }
    }
}

/// Validates a byte-swap unit against an element size: 0 and 1 mean "no swap"; 2, 4, 8 and 16
/// must divide `elem_size`. Returns the effective unit (0 normalised to 1).
pub(crate) fn check_swap_unit(swap_unit: usize, elem_size: usize) -> Result<usize> {
    match swap_unit {
        0 | 1 => Ok(1),
        2 | 4 | 8 | 16 if elem_size.is_multiple_of(swap_unit) => Ok(swap_unit),
        2 | 4 | 8 | 16 => Err(invalid(format!(
            "swap unit {swap_unit} does not divide the element size {elem_size}"
        ))),
        _ => Err(invalid(format!(
            "swap unit must be 0, 1, 2, 4, 8 or 16, got {swap_unit}"
        ))),
    }
}

/// Computes the C-contiguous byte strides of `shape` with `elem_size`-byte elements, and the
/// total byte length; errors on overflow.
pub(crate) fn c_strides(shape: &[usize], elem_size: usize) -> Result<(Vec<isize>, usize)> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = elem_size;
    for d in (0..shape.len()).rev() {
        strides[d] =
            isize::try_from(acc).map_err(|_| invalid(format!("shape {shape:?} is too large")))?;
        acc = acc
            .checked_mul(shape[d])
            .ok_or_else(|| invalid(format!("shape {shape:?} is too large")))?;
    }
    Ok((strides, acc))
}

/// Validates that `axes` is a permutation of `0..ndim`.
pub(crate) fn check_axes(axes: &[usize], ndim: usize) -> Result<()> {
    if axes.len() != ndim {
        return Err(invalid(format!(
            "permutation {axes:?} has {} axes, the array has {ndim} dimensions",
            axes.len()
        )));
    }
    let mut seen = vec![false; ndim];
    for &a in axes {
        if a >= ndim || std::mem::replace(&mut seen[a], true) {
            return Err(invalid(format!(
                "{axes:?} is not a permutation of 0..{ndim}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_drops_ones_and_merges() {
        let (s, a, b) = merge_dims(&[1, 4, 1, 5], &[0, 5, 7, 1], &[20, 5, 5, 1]);
        assert_eq!((s, a, b), (vec![20], vec![1], vec![1]));
        let (s, a, b) = merge_dims(&[1, 1], &[3, 3], &[3, 3]);
        assert!(s.is_empty() && a.is_empty() && b.is_empty());
        let (s, _, _) = merge_dims(&[3, 0], &[1, 1], &[1, 1]);
        assert_eq!(s, [0]);
    }

    #[test]
    fn rows_visit_every_outer_index() {
        let p = Plan::new(
            1000,
            Strided {
                offset: 0,
                strides: &[100, -10, 1],
            },
            1,
            1000,
            Strided {
                offset: 0,
                strides: &[200, 20, 2],
            },
            1,
            &[2, 3, 4],
        );
        // source offset 0 with a negative stride is out of bounds
        assert!(p.is_err());
        let p = Plan::new(
            1000,
            Strided {
                offset: 20,
                strides: &[100, -10, 1],
            },
            1,
            1000,
            Strided {
                offset: 0,
                strides: &[200, 20, 2],
            },
            1,
            &[2, 3, 4],
        )
        .unwrap()
        .unwrap();
        let mut rows = vec![];
        p.for_each_row(|s, d| rows.push((s, d)));
        assert_eq!(
            rows,
            [
                (20, 0),
                (10, 20),
                (0, 40),
                (120, 200),
                (110, 220),
                (100, 240)
            ]
        );
    }

    #[test]
    fn swap_units() {
        assert_eq!(check_swap_unit(0, 3).unwrap(), 1);
        assert_eq!(check_swap_unit(4, 8).unwrap(), 4);
        assert!(check_swap_unit(4, 6).is_err());
        assert!(check_swap_unit(3, 6).is_err());
    }
}
