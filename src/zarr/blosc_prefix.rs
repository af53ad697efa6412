//! Decoding only the blocks of a blosc frame that a read's prefix needs (see
//! [`super::prefix_decode`]).
//!
//! The blocks of a blosc frame are independent: each is compressed on its own (in one
//! stream, or one per byte of the element), then unshuffled on its own. A prefix of the
//! decoded chunk is therefore decoded by the blocks whose decoded bytes start before its
//! end, and the others are never touched. The frame is first checked whole by
//! [`blosc_frame::parse`], the parse that guards the device decoder (header sizes, version,
//! compressor, every block start and every stream's size inside the frame, more than c-blosc
//! checks), so what is not decoded is at least well-framed; then the needed blocks' streams
//! are decompressed on the host by safe Rust decoders (lz4_flex for LZ4, zstd for zstd,
//! copies for stored streams and memcpyed frames), each to exactly its declared size, and
//! unshuffled with the host twin of the device kernel, `zarrbuf_codecs::host::blosc_unshuffle`
//! (c-blosc 1.x's rules, tested against c-blosc).
//!
//! [`blosc_prefix_into`] answers `None` for anything else — other compressors (blosclz,
//! snappy, zlib), a frame the parse refuses or leaves to the CPU, a stream that does not
//! decode to its size, an LZ4 stream c-blosc's LZ4 decoder could refuse — and the caller
//! then decodes the chunk whole with c-blosc, so that a refusal is exactly the whole
//! decode's.

use super::blosc_frame::{self, BloscCompressor, BloscFrame, BloscStream, Parsed};
use zarrbuf_codecs::host::blosc_unshuffle;

/// Decodes the blocks of the blosc frame `frame` (streams in `compressor`) that the first
/// `prefix` bytes of its decoded chunk need into `out` (exactly the chunk's decoded size),
/// and returns how many leading bytes of `out` are right (at least `prefix`: the end of the
/// last block decoded). `None`: not decodable by blocks here; decode the chunk whole.
pub(crate) fn blosc_prefix_into(
    compressor: BloscCompressor,
    frame: &[u8],
    out: &mut [u8],
    prefix: usize,
) -> Option<usize> {
    if !matches!(compressor, BloscCompressor::Lz4 | BloscCompressor::Zstd) {
        return None;
    }
    // Every stream as it is stored: the decoders below check its contents.
    let whole = |stream: &[u8], _decoded: usize| Ok(0..stream.len());
    let Ok(Parsed::Device(parsed)) = blosc_frame::parse(frame, out.len(), compressor, &whole)
    else {
        return None;
    };
    let mut decoder = Streams::new(compressor, frame)?;
    let Some(shuffle) = parsed.shuffle else {
        // The streams are the chunk: decode those that start before the prefix ends.
        let mut end = 0;
        for s in parsed
            .streams
            .iter()
            .take_while(|s| s.output.start < prefix)
        {
            end = decoder.stream_into(s, out, prefix)?;
        }
        return (end >= prefix).then_some(end);
    };
    // Block by block: a block's streams into `scratch`, then unshuffled into place.
    let BloscFrame {
        nbytes,
        typesize,
        blocksize,
        ref streams,
        ..
    } = parsed;
    let mut scratch = vec![0u8; blocksize.min(nbytes)];
    let mut next = streams.iter().peekable();
    let mut start = 0;
    while start < prefix {
        let bsize = blocksize.min(nbytes.checked_sub(start)?);
        let block_end = start + bsize;
        let shuffled = scratch.get_mut(..bsize)?;
        while let Some(s) = next.next_if(|s| s.output.start < block_end) {
            let local = BloscStream {
                input: s.input.clone(),
                output: s.output.start.checked_sub(start)?..s.output.end.checked_sub(start)?,
                stored: s.stored,
            };
            decoder.stream_into(&local, shuffled, bsize)?;
        }
        let dst = out.get_mut(start..block_end)?;
        blosc_unshuffle(shuffled, dst, bsize, shuffle, typesize, bsize).ok()?;
        start = block_end;
    }
    (start >= prefix).then_some(start)
}

/// Decompresses the streams of one frame.
struct Streams<'a> {
    compressor: BloscCompressor,
    frame: &'a [u8],
    /// One zstd context for all the frame's streams (created when the frame has some).
    zstd: Option<zstd::zstd_safe::DCtx<'static>>,
}

impl<'a> Streams<'a> {
    fn new(compressor: BloscCompressor, frame: &'a [u8]) -> Option<Self> {
        let zstd = match compressor {
            BloscCompressor::Zstd => Some(zstd::zstd_safe::DCtx::try_create()?),
            _ => None,
        };
        Some(Streams {
            compressor,
            frame,
            zstd,
        })
    }

    /// Decodes stream `s` into `out[s.output]`, returning where its output ends; a stored
    /// stream is copied only up to `limit` (then the return is `limit`). `None` when the
    /// stream does not decode to exactly its size.
    fn stream_into(&mut self, s: &BloscStream, out: &mut [u8], limit: usize) -> Option<usize> {
        let input = self.frame.get(s.input.clone())?;
        if s.stored {
            let end = s.output.end.min(limit.max(s.output.start));
            let n = end - s.output.start;
            out.get_mut(s.output.start..end)?
                .copy_from_slice(input.get(..n)?);
            return Some(end);
        }
        let dst = out.get_mut(s.output.clone())?;
        let n = match (self.compressor, self.zstd.as_mut()) {
            (BloscCompressor::Lz4, _) => {
                if !lz4_as_c_blosc_reads(input, dst.len()) {
                    return None;
                }
                lz4_flex::block::decompress_into(input, dst).ok()?
            }
            (BloscCompressor::Zstd, Some(d)) => d.decompress(dst, input).ok()?,
            _ => return None,
        };
        (n == dst.len()).then_some(s.output.end)
    }
}

/// Whether the LZ4 block `block` keeps the end rules that c-blosc's LZ4 decoder
/// (`LZ4_decompress_safe`) enforces and lz4_flex does not, and produces `expected` bytes:
/// only the last sequence may have literals that end within 12 bytes of the output's end
/// (MFLIMIT) or 8 of the input's (offset, token and 5 literals), the last sequence is literals
/// that end the input exactly, and no match ends within the last 5 bytes (LASTLITERALS) or
/// refers before the start. Every LZ4 encoder writes such blocks; a block that breaks them
/// is decoded whole, by c-blosc, which refuses it.
fn lz4_as_c_blosc_reads(block: &[u8], expected: usize) -> bool {
    let (mut at, mut produced) = (0usize, 0usize);
    // A length nibble of 15 continues in bytes of 255 and one final byte.
    let length = |at: &mut usize, n: usize| -> Option<usize> {
        let mut n = n;
        if n == 15 {
            loop {
                let x = *block.get(*at)?;
                *at += 1;
                n = n.checked_add(usize::from(x))?;
                if x != 255 {
                    break;
                }
            }
        }
        Some(n)
    };
    loop {
        let Some(&token) = block.get(at) else {
            return false;
        };
        at += 1;
        let Some(literals) = length(&mut at, usize::from(token >> 4)) else {
            return false;
        };
        let (Some(lit_end), Some(out_end)) =
            (at.checked_add(literals), produced.checked_add(literals))
        else {
            return false;
        };
        if lit_end == block.len() {
            return out_end == expected;
        }
        if lit_end > block.len().saturating_sub(8) || out_end > expected.saturating_sub(12) {
            return false;
        }
        (at, produced) = (lit_end, out_end);
        let offset = usize::from(u16::from_le_bytes([block[at], block[at + 1]]));
        at += 2;
        if offset == 0 || offset > produced {
            return false;
        }
        let Some(matched) = length(&mut at, usize::from(token & 0x0f)) else {
            return false;
        };
        match produced.checked_add(matched).and_then(|p| p.checked_add(4)) {
            Some(p) if p <= expected.saturating_sub(5) => produced = p,
            _ => return false,
        }
    }
}

#[cfg(test)]
#[path = "blosc_prefix_tests.rs"]
mod tests;
