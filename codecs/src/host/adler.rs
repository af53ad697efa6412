//! Adler-32 (RFC 1950, zlib's checksum) computed in independent pieces and combined: the host
//! twin of the `zb_adler32_pieces` kernel, and the combination both use.

use crate::error::{Result, invalid};

/// Adler-32's modulus.
const MOD: u64 = 65521;

/// Number of `piece`-byte pieces (the last possibly shorter) of `nbytes` bytes.
///
/// ```
/// assert_eq!(zarrbuf_codecs::host::adler32_piece_count(10, 4), 3);
/// assert_eq!(zarrbuf_codecs::host::adler32_piece_count(0, 4), 0);
/// ```
pub fn adler32_piece_count(nbytes: usize, piece: usize) -> usize {
    nbytes.div_ceil(piece.max(1))
}

/// Checks the arguments of an Adler-32 pieces run: a non-zero piece size, `nbytes` within
/// the source, room for two words per piece in the output.
pub(crate) fn check_adler32(
    src_len: usize,
    nbytes: usize,
    piece: usize,
    out_words: usize,
) -> Result<()> {
    if piece == 0 {
        return Err(invalid("an Adler-32 piece of 0 bytes"));
    }
    if nbytes > src_len {
        return Err(invalid(format!(
            "an Adler-32 over {nbytes} bytes of a {src_len}-byte source"
        )));
    }
    let need = 2 * adler32_piece_count(nbytes, piece);
    if out_words < need {
        return Err(invalid(format!(
            "{} Adler-32 pieces need {need} output words, {out_words} were given",
            need / 2
        )));
    }
    Ok(())
}

/// The Adler-32 sums of each `piece`-byte piece of `src[..nbytes]` (the last possibly
/// shorter), each started from `a = 0, b = 0`: `out[2 p]` is piece `p`'s `a`, `out[2 p + 1]`
/// its `b`, both reduced mod 65521. [`adler32_combine`] turns them into the checksum.
///
/// ```
/// use zarrbuf_codecs::host::{adler32_combine, adler32_pieces};
/// let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
/// let mut sums = vec![0u32; 2 * 3];
/// adler32_pieces(&data, data.len(), 4096, &mut sums)?;
/// // The same checksum as from one piece over everything.
/// let mut whole = [0u32; 2];
/// adler32_pieces(&data, data.len(), data.len(), &mut whole)?;
/// assert_eq!(
///     adler32_combine(&sums, data.len(), 4096),
///     adler32_combine(&whole, data.len(), data.len())
/// );
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn adler32_pieces(src: &[u8], nbytes: usize, piece: usize, out: &mut [u32]) -> Result<()> {
    check_adler32(src.len(), nbytes, piece, out.len())?;
    for (p, bytes) in src[..nbytes].chunks(piece).enumerate() {
        let (mut a, mut b) = (0u64, 0u64);
        for (k, &x) in bytes.iter().enumerate() {
            a += u64::from(x);
            b += a;
            if k & 0xffff == 0xffff {
                a %= MOD;
                b %= MOD;
            }
        }
        out[2 * p] = (a % MOD) as u32;
        out[2 * p + 1] = (b % MOD) as u32;
    }
    Ok(())
}

/// The Adler-32 of `nbytes` bytes from their pieces' sums ([`adler32_pieces`], the same
/// `piece`): from `A = 1, B = 0`, each piece of `n` bytes with sums `(a, b)` gives
/// `B += n·A + b`, `A += a` (mod 65521). `sums` must hold two words per piece.
///
/// ```
/// use zarrbuf_codecs::host::{adler32_combine, adler32_pieces};
/// let mut sums = [0u32; 4];
/// adler32_pieces(b"Wikipedia", 9, 5, &mut sums)?;
/// assert_eq!(adler32_combine(&sums, 9, 5), 0x11e6_0398); // RFC 1950's example
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn adler32_combine(sums: &[u32], nbytes: usize, piece: usize) -> u32 {
    let (mut a, mut b) = (1u64, 0u64);
    let piece = piece.max(1);
    for (p, pair) in sums
        .chunks_exact(2)
        .take(adler32_piece_count(nbytes, piece))
        .enumerate()
    {
        let n = (nbytes - p * piece).min(piece) as u64 % MOD;
        b = (b + n * a + u64::from(pair[1])) % MOD;
        a = (a + u64::from(pair[0])) % MOD;
    }
    ((b << 16) | a) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adler-32 byte by byte, as RFC 1950 defines it.
    fn reference(data: &[u8]) -> u32 {
        let (mut a, mut b) = (1u32, 0u32);
        for &x in data {
            a = (a + u32::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        (b << 16) | a
    }

    #[test]
    fn pieces_combine_to_the_whole_checksum() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for nbytes in [0usize, 1, 4095, 4096, 4097, 70_000, 300_000] {
            for piece in [1usize, 7, 4096, 65536, 1 << 20] {
                let mut sums = vec![0u32; 2 * adler32_piece_count(nbytes, piece)];
                adler32_pieces(&data, nbytes, piece, &mut sums).unwrap();
                assert_eq!(
                    adler32_combine(&sums, nbytes, piece),
                    reference(&data[..nbytes]),
                    "{nbytes} bytes in pieces of {piece}"
                );
            }
        }
        // Bytes of 255 over a long piece: the periodic reductions keep the sums exact.
        let ones = vec![255u8; 1 << 20];
        let mut sums = vec![0u32; 2];
        adler32_pieces(&ones, ones.len(), 1 << 20, &mut sums).unwrap();
        assert_eq!(
            adler32_combine(&sums, ones.len(), 1 << 20),
            reference(&ones)
        );
    }

    #[test]
    fn bad_arguments_are_refused() {
        let mut out = [0u32; 2];
        assert!(adler32_pieces(&[1, 2, 3], 3, 0, &mut out).is_err());
        assert!(adler32_pieces(&[1, 2, 3], 4, 4, &mut out).is_err());
        assert!(adler32_pieces(&[1, 2, 3], 3, 1, &mut out).is_err());
    }
}
