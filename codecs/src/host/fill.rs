//! Fill every element of a strided view with one pattern.

use crate::error::{Result, invalid};
use crate::layout::{Plan, Strided};

/// Writes `pattern` (one element of `pattern.len()` bytes) to every element of `shape` at
/// `view` in `dst`.
///
/// Rows that are contiguous are filled by writing the first row (pattern, then doubling
/// copies) and copying it to the others; a pattern whose bytes are all equal is a `memset`.
///
/// ```
/// use zarrbuf_codecs::{host, Strided};
/// let mut dst = [0u8; 8];
/// // every other u16 of a 4-element array
/// host::fill(&mut dst, Strided { offset: 0, strides: &[4] }, &[2], &[0xAB, 0xCD])?;
/// assert_eq!(dst, [0xAB, 0xCD, 0, 0, 0xAB, 0xCD, 0, 0]);
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn fill(dst: &mut [u8], view: Strided<'_>, shape: &[usize], pattern: &[u8]) -> Result<()> {
    let es = pattern.len();
    if es == 0 {
        return Err(invalid("fill pattern is empty (element size 0)"));
    }
    let Some(plan) = Plan::new(dst.len(), view, es, dst.len(), view, es, shape)? else {
        return Ok(());
    };
    let (n, _, sb) = plan.inner();
    let uniform = pattern.iter().all(|&b| b == pattern[0]);
    if sb == es as isize {
        let row = n * es;
        if uniform {
            plan.for_each_row(|_, d| dst[d..d + row].fill(pattern[0]));
            return Ok(());
        }
        let mut first: Option<usize> = None;
        plan.for_each_row(|_, d| match first {
            None => {
                first = Some(d);
                let r = &mut dst[d..d + row];
                r[..es].copy_from_slice(pattern);
                let mut done = es;
                while done < row {
                    let len = done.min(row - done);
                    r.copy_within(0..len, done);
                    done += len;
                }
            }
            Some(f) => dst.copy_within(f..f + row, d),
        });
        return Ok(());
    }
    // Strided innermost dimension: element by element.
    macro_rules! each {
        ($N:literal) => {{
            let mut p = [0u8; $N];
            p.copy_from_slice(pattern);
            plan.for_each_row(|_, d| {
                for i in 0..n as isize {
                    let o = (d as isize + i * sb) as usize;
                    dst[o..o + $N].copy_from_slice(&p);
                }
            })
        }};
    }
    match es {
        1 => each!(1),
        2 => each!(2),
        4 => each!(4),
        8 => each!(8),
        16 => each!(16),
        _ => plan.for_each_row(|_, d| {
            for i in 0..n as isize {
                let o = (d as isize + i * sb) as usize;
                dst[o..o + es].copy_from_slice(pattern);
            }
        }),
    }
    Ok(())
}
