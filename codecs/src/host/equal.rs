//! Whether every element of a strided view holds one pattern: the read-only twin of
//! [`fill`](super::fill), used to find chunks of only the fill value without copying them.

use crate::error::{Result, invalid};
use crate::layout::{Plan, Strided, c_strides};

/// True when every element of `shape` at `view` in `src` is `pattern` (one element of
/// `pattern.len()` bytes), compared byte for byte. An empty shape holds no element that
/// differs, so it is `true`.
///
/// The view may have any strides, zero (broadcast) and negative ones included; it is
/// checked against `src` first, so a view that reaches outside it is an error, never a
/// read out of bounds.
///
/// ```
/// use zarrbuf_codecs::{host, Strided};
/// let src = [7u8, 0, 7, 0, 7, 1];
/// // elements 0, 2 and 4 of a byte array (stride 2), and elements 0 and 1 of it
/// assert!(host::all_equal(&src, Strided { offset: 0, strides: &[2] }, &[3], &[7])?);
/// assert!(!host::all_equal(&src, Strided { offset: 0, strides: &[1] }, &[2], &[7])?);
/// assert!(host::all_equal(&src, Strided { offset: 0, strides: &[8] }, &[1], &[7])?);
/// assert!(host::all_equal(&src, Strided { offset: 0, strides: &[9] }, &[2], &[7]).is_err());
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn all_equal(src: &[u8], view: Strided<'_>, shape: &[usize], pattern: &[u8]) -> Result<bool> {
    let es = pattern.len();
    if es == 0 {
        return Err(invalid("comparison pattern is empty (element size 0)"));
    }
    // The plan's second operand only orders the walk: a C-order array of the shape (the
    // view's own strides may be zero, which a plan refuses on that side). It is never read.
    let (order, len) = c_strides(shape, es)?;
    let walk = Strided {
        offset: 0,
        strides: &order,
    };
    let Some(plan) = Plan::new(src.len(), view, es, len, walk, es, shape)? else {
        return Ok(true);
    };
    let (n, step, _) = plan.inner();
    let mut equal = true;
    if step == es as isize {
        let row = n * es;
        plan.for_each_row(|s, _| {
            equal = equal && src[s..s + row].chunks_exact(es).all(|e| e == pattern);
        });
    } else {
        plan.for_each_row(|s, _| {
            equal = equal
                && (0..n as isize).all(|i| {
                    let at = (s as isize + i * step) as usize;
                    &src[at..at + es] == pattern
                });
        });
    }
    Ok(equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(offset: usize, strides: &[isize]) -> Strided<'_> {
        Strided { offset, strides }
    }

    #[test]
    fn a_differing_element_anywhere_is_found() {
        // A 3x4 u16 array, C order, all 0xABCD but one element, tried at every position.
        for wrong in 0..12 {
            let mut src: Vec<u8> = (0..12).flat_map(|_| [0xAB, 0xCD]).collect();
            src[wrong * 2 + 1] = 0;
            let c = view(0, &[8, 2]);
            assert!(
                !all_equal(&src, c, &[3, 4], &[0xAB, 0xCD]).unwrap(),
                "{wrong}"
            );
            // The same array transposed (read column by column) and with both axes reversed.
            let f = view(0, &[2, 8]);
            assert!(
                !all_equal(&src, f, &[4, 3], &[0xAB, 0xCD]).unwrap(),
                "{wrong}"
            );
            let r = view(22, &[-8, -2]);
            assert!(
                !all_equal(&src, r, &[3, 4], &[0xAB, 0xCD]).unwrap(),
                "{wrong}"
            );
        }
        let src: Vec<u8> = (0..12).flat_map(|_| [0xAB, 0xCD]).collect();
        assert!(all_equal(&src, view(22, &[-8, -2]), &[3, 4], &[0xAB, 0xCD]).unwrap());
    }

    #[test]
    fn only_the_viewed_elements_count() {
        // Column 1 of a 3x3 u8 array is all 5; the rest is not.
        let src = [0, 5, 0, 1, 5, 1, 2, 5, 2];
        assert!(all_equal(&src, view(1, &[3, 1]), &[3, 1], &[5]).unwrap());
        assert!(!all_equal(&src, view(0, &[3, 1]), &[3, 2], &[5]).unwrap());
        // A broadcast axis (stride 0) repeats one row.
        assert!(all_equal(&src, view(1, &[0, 3]), &[4, 3], &[5]).unwrap());
        assert!(!all_equal(&src, view(0, &[0, 1]), &[4, 2], &[0]).unwrap());
    }

    #[test]
    fn empty_shapes_hold_no_differing_element_and_bad_views_are_errors() {
        assert!(all_equal(&[], view(0, &[4]), &[0], &[9]).unwrap());
        assert!(all_equal(&[1, 2], view(0, &[1]), &[3], &[1]).is_err());
        assert!(all_equal(&[1, 2], view(0, &[1, 1]), &[2], &[1]).is_err());
        assert!(all_equal(&[1, 2], view(0, &[1]), &[2], &[]).is_err());
    }
}
