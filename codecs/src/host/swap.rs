//! In-place byte swap of a contiguous run of elements.

use crate::error::{Result, invalid};
use crate::layout::check_swap_unit;

/// Reverses the bytes of every `swap_unit`-byte group of `data` in place (0 or 1: nothing to
/// do; 2, 4, 8 or 16 must divide `data.len()`).
///
/// ```
/// let mut d = [1u8, 2, 3, 4, 5, 6, 7, 8];
/// zarrbuf_codecs::host::byte_swap(&mut d, 4)?;
/// assert_eq!(d, [4, 3, 2, 1, 8, 7, 6, 5]);
/// assert!(zarrbuf_codecs::host::byte_swap(&mut d[..6], 4).is_err());
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn byte_swap(data: &mut [u8], swap_unit: usize) -> Result<()> {
    let unit = check_swap_unit(swap_unit, swap_unit.max(1))?;
    if !data.len().is_multiple_of(unit) {
        return Err(invalid(format!(
            "{} bytes are not a whole number of {unit}-byte swap units",
            data.len()
        )));
    }
    match unit {
        2 => swap_words::<2>(data, |w| u16::from_ne_bytes(w).swap_bytes().to_ne_bytes()),
        4 => swap_words::<4>(data, |w| u32::from_ne_bytes(w).swap_bytes().to_ne_bytes()),
        8 => swap_words::<8>(data, |w| u64::from_ne_bytes(w).swap_bytes().to_ne_bytes()),
        16 => swap_words::<16>(data, |w| u128::from_ne_bytes(w).swap_bytes().to_ne_bytes()),
        _ => {}
    }
    Ok(())
}

#[inline(always)]
fn swap_words<const N: usize>(data: &mut [u8], f: impl Fn([u8; N]) -> [u8; N]) {
    for w in data.chunks_exact_mut(N) {
        if let Ok(a) = <[u8; N]>::try_from(&*w) {
            w.copy_from_slice(&f(a));
        }
    }
}
