//! Undoing blosc's shuffle filters over one decoded chunk: the host twin of the
//! `zb_blosc_unshuffle` kernel.
//!
//! A blosc (version 1 format) frame shuffles each block of `blocksize` bytes on its own; the
//! last block of a chunk may be shorter. Within a block of `bsize` bytes holding
//! `n = bsize / typesize` whole elements:
//!
//! * **byte shuffle** stores byte `j` of every element together: shuffled byte `j * n + i` is
//!   byte `j` of element `i`. The `bsize % typesize` bytes after the last whole element are
//!   stored as they are. With `typesize == 1` there is nothing to shuffle.
//! * **bit shuffle** stores bit `k` of byte `j` of every element together, 8 elements per
//!   byte: element `i`'s bit is bit `i % 8` of shuffled byte `(8 j + k) * n / 8 + i / 8`. Only
//!   blocks whose element count is a multiple of 8 are bit-shuffled (blosc copies the others
//!   unchanged), and only when the block holds at least one element; the bytes after the
//!   last whole element are stored as they are.
//!
//! These are c-blosc 1.x's rules (`blosc_d`, `blosc_internal_bitunshuffle`); zarrbuf's tests
//! check this function against c-blosc's own decoder.

use crate::error::{CodecError, Result};

/// Which of blosc's shuffle filters a frame applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shuffle {
    /// Byte shuffle (`BLOSC_SHUFFLE`).
    Byte,
    /// Bit shuffle (`BLOSC_BITSHUFFLE`).
    Bit,
}

impl Shuffle {
    /// The kernel's code for this filter.
    pub(crate) fn code(self) -> u32 {
        match self {
            Shuffle::Byte => 0,
            Shuffle::Bit => 1,
        }
    }
}

/// Checks the arguments shared by the host and CUDA versions.
pub(crate) fn check_unshuffle(
    src_len: usize,
    dst_len: usize,
    nbytes: usize,
    typesize: usize,
    blocksize: usize,
) -> Result<()> {
    if typesize == 0 || typesize > 255 {
        return Err(CodecError::InvalidLayout(format!(
            "blosc type size {typesize} is outside 1..=255"
        )));
    }
    if blocksize == 0 && nbytes > 0 {
        return Err(CodecError::InvalidLayout(
            "a blosc block size of 0 for a non-empty chunk".into(),
        ));
    }
    if src_len < nbytes || dst_len < nbytes {
        return Err(CodecError::InvalidLayout(format!(
            "unshuffling {nbytes} bytes needs that many on both sides; source {src_len}, \
             destination {dst_len}"
        )));
    }
    Ok(())
}

/// Undoes `shuffle` over the first `nbytes` of `src` into `dst`, block by block (blocks of
/// `blocksize` bytes, the last one possibly shorter), for elements of `typesize` bytes.
///
/// ```
/// use zarrbuf_codecs::host::{blosc_unshuffle, Shuffle};
/// // two u16 elements 0x0201 and 0x0403, byte-shuffled: low bytes first, then high bytes
/// let shuffled = [1u8, 3, 2, 4];
/// let mut out = [0u8; 4];
/// blosc_unshuffle(&shuffled, &mut out, 4, Shuffle::Byte, 2, 4)?;
/// assert_eq!(out, [1, 2, 3, 4]);
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn blosc_unshuffle(
    src: &[u8],
    dst: &mut [u8],
    nbytes: usize,
    shuffle: Shuffle,
    typesize: usize,
    blocksize: usize,
) -> Result<()> {
    check_unshuffle(src.len(), dst.len(), nbytes, typesize, blocksize)?;
    let mut start = 0;
    while start < nbytes {
        let bsize = blocksize.min(nbytes - start);
        let (s, d) = (&src[start..start + bsize], &mut dst[start..start + bsize]);
        match shuffle {
            Shuffle::Byte => byte_unshuffle_block(s, d, typesize),
            Shuffle::Bit => bit_unshuffle_block(s, d, typesize),
        }
        start += bsize;
    }
    Ok(())
}

fn byte_unshuffle_block(src: &[u8], dst: &mut [u8], typesize: usize) {
    let n = src.len() / typesize;
    let whole = n * typesize;
    match typesize {
        0 | 1 => dst[..whole].copy_from_slice(&src[..whole]),
        // The common element sizes gather a whole element from the planes at once, which
        // the compiler turns into wide loads and stores (the strided byte loop below runs
        // at a fraction of the rate).
        2 => gather_elements::<2>(&src[..whole], &mut dst[..whole]),
        4 => gather_elements::<4>(&src[..whole], &mut dst[..whole]),
        8 => gather_elements::<8>(&src[..whole], &mut dst[..whole]),
        _ => {
            for (j, plane) in src[..whole].chunks_exact(n.max(1)).enumerate() {
                for (i, &b) in plane.iter().enumerate() {
                    dst[i * typesize + j] = b;
                }
            }
        }
    }
    dst[whole..].copy_from_slice(&src[whole..]);
}

/// Byte `j` of element `i` of `dst` is byte `i` of plane `j` of `src` (`T` planes of
/// `dst.len() / T` bytes each); `src` and `dst` have the same length, a multiple of `T`.
fn gather_elements<const T: usize>(src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / T;
    let planes: [&[u8]; T] = std::array::from_fn(|j| &src[j * n..(j + 1) * n]);
    for (i, element) in dst.chunks_exact_mut(T).enumerate() {
        for (byte, plane) in element.iter_mut().zip(&planes) {
            *byte = plane[i];
        }
    }
}

fn bit_unshuffle_block(src: &[u8], dst: &mut [u8], typesize: usize) {
    let n = src.len() / typesize;
    if n == 0 || !n.is_multiple_of(8) {
        dst.copy_from_slice(src);
        return;
    }
    let whole = n * typesize;
    let row = n / 8;
    for (e, element) in dst[..whole].chunks_exact_mut(typesize).enumerate() {
        let (byte, bit) = (e / 8, e % 8);
        for (j, out) in element.iter_mut().enumerate() {
            let mut acc = 0u8;
            for k in 0..8 {
                acc |= ((src[(8 * j + k) * row + byte] >> bit) & 1) << k;
            }
            *out = acc;
        }
    }
    dst[whole..].copy_from_slice(&src[whole..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forward byte shuffle of one block, written from the definition.
    fn byte_shuffle_block(src: &[u8], typesize: usize) -> Vec<u8> {
        let n = src.len() / typesize;
        let mut out = src.to_vec();
        if typesize > 1 {
            for i in 0..n {
                for j in 0..typesize {
                    out[j * n + i] = src[i * typesize + j];
                }
            }
        }
        out
    }

    /// The forward bit shuffle of one block, written from the definition.
    fn bit_shuffle_block(src: &[u8], typesize: usize) -> Vec<u8> {
        let n = src.len() / typesize;
        let mut out = src.to_vec();
        if n == 0 || !n.is_multiple_of(8) {
            return out;
        }
        let row = n / 8;
        out[..n * typesize].fill(0);
        for e in 0..n {
            for j in 0..typesize {
                for k in 0..8 {
                    let bit = (src[e * typesize + j] >> k) & 1;
                    out[(8 * j + k) * row + e / 8] |= bit << (e % 8);
                }
            }
        }
        out
    }

    #[test]
    fn unshuffle_inverts_both_shuffles_on_every_block_shape() {
        let mut seed = 0x9e37_79b9_u64;
        for typesize in [1usize, 2, 3, 4, 8, 16, 17] {
            for blocksize in [1usize, 7, 64, 96, 1000] {
                for nbytes in [0usize, 1, 63, 64, 65, 1000, 2049] {
                    let data: Vec<u8> = (0..nbytes)
                        .map(|_| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            seed as u8
                        })
                        .collect();
                    for shuffle in [Shuffle::Byte, Shuffle::Bit] {
                        let mut shuffled = Vec::with_capacity(nbytes);
                        for block in data.chunks(blocksize) {
                            shuffled.extend(match shuffle {
                                Shuffle::Byte => byte_shuffle_block(block, typesize),
                                Shuffle::Bit => bit_shuffle_block(block, typesize),
                            });
                        }
                        let mut out = vec![0u8; nbytes];
                        blosc_unshuffle(&shuffled, &mut out, nbytes, shuffle, typesize, blocksize)
                            .unwrap();
                        assert_eq!(
                            out, data,
                            "{shuffle:?} typesize {typesize} block {blocksize} nbytes {nbytes}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut out = [0u8; 4];
        assert!(blosc_unshuffle(&[0; 4], &mut out, 4, Shuffle::Byte, 0, 4).is_err());
        assert!(blosc_unshuffle(&[0; 4], &mut out, 4, Shuffle::Byte, 256, 4).is_err());
        assert!(blosc_unshuffle(&[0; 4], &mut out, 4, Shuffle::Bit, 2, 0).is_err());
        assert!(blosc_unshuffle(&[0; 3], &mut out, 4, Shuffle::Bit, 2, 4).is_err());
        assert!(blosc_unshuffle(&[0; 8], &mut out, 8, Shuffle::Bit, 2, 4).is_err());
    }
}
