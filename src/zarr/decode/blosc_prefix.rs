//! Decoding only the blocks of a blosc frame that a read needs (see [`super::prefix`]).
//!
//! The blocks of a blosc frame are independent: each is compressed on its own (in one
//! stream, or one per byte of the element), then unshuffled on its own. The bytes a read
//! needs from the decoded chunk — from its first element to its last — are therefore
//! decoded by the blocks that hold them, and the others, before and after, are never
//! touched. The frame is first checked whole by
//! [`blosc_frame::parse`], the parse that guards the device decoder (header sizes, version,
//! compressor, every block start and every stream's size inside the frame, more than c-blosc
//! checks), so what is not decoded is at least well-framed; then c-blosc itself — the
//! library the whole decode uses — decodes the needed elements with `blosc_getitem`, which
//! decompresses and unshuffles only the blocks that hold them. (Safe Rust decoders per
//! stream plus a scalar unshuffle ran at a quarter of c-blosc's rate per byte: slower than
//! decoding the whole chunk for an average patch.)
//!
//! [`blosc_range_into`] answers `None` for anything else — a frame the parse refuses or
//! leaves to the CPU, a range that reaches into bytes after the last whole element, any
//! error of c-blosc — and the caller then decodes the chunk whole with c-blosc, so that a
//! refusal is exactly the whole decode's.

use crate::zarr::framing::blosc_frame::{self, BloscCompressor, Parsed};
use crate::zarr::framing::blosc_nbytes;
use std::ops::Range;

/// Decodes the blocks of the blosc frame `frame` (streams in `compressor`) that hold the
/// bytes `needed` of its decoded chunk into their place in `out` (exactly the chunk's decoded
/// size), and returns the range of `out` that is right: `needed` widened to whole elements of
/// the frame's type size (c-blosc hands out whole elements). Blocks before and after it are
/// not decoded and nothing outside it is written. `None`: not decodable by blocks here;
/// decode the chunk whole.
pub(crate) fn blosc_range_into(
    compressor: BloscCompressor,
    frame: &[u8],
    out: &mut [u8],
    needed: Range<usize>,
) -> Option<Range<usize>> {
    // The header as c-blosc reads it: its declared compressed length is the frame's, its
    // decoded length the chunk's.
    if blosc_nbytes(frame).ok()? != out.len() {
        return None;
    }
    // Every block start and stream inside the frame (the decoders check the contents).
    let whole = |stream: &[u8], _decoded: usize| Ok(0..stream.len());
    let Ok(Parsed::Device(parsed)) = blosc_frame::parse(frame, out.len(), compressor, &whole)
    else {
        return None;
    };
    let typesize = parsed.typesize.max(1);
    let end_item = needed.end.div_ceil(typesize);
    let first_item = (needed.start / typesize).min(end_item);
    let (start, end) = (
        first_item.checked_mul(typesize)?,
        end_item.checked_mul(typesize)?,
    );
    if end > out.len() {
        return None;
    }
    let first = std::ffi::c_int::try_from(first_item).ok()?;
    let items = std::ffi::c_int::try_from(end_item - first_item).ok()?;
    let dest = out.get_mut(start..end)?;
    // SAFETY: c-blosc's `blosc_getitem` reads the frame's header, block starts and the
    // streams of the blocks holding items `first..first + items`; `blosc_cbuffer_validate`
    // (in `blosc_nbytes`) checked that the header's compressed length is `frame.len()`, and
    // the parse above that every block start and stream lies inside the frame, so it reads
    // within `frame`. It writes `items * typesize` bytes at `dest`, which is exactly that
    // long; it allocates its own scratch and keeps no state between calls (thread-safe).
    let written = unsafe {
        blosc_src::blosc_getitem(
            frame.as_ptr().cast::<std::ffi::c_void>(),
            first,
            items,
            dest.as_mut_ptr().cast::<std::ffi::c_void>(),
        )
    };
    (usize::try_from(written).ok()? == end - start).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::decode::prefix::{decode_needed_into, decode_prefix_into};
    use crate::zarr::framing::blosc_frame::BloscFrame;
    use crate::zarr::framing::blosc_frame::tests::blosc_compress;
    use crate::zarr::framing::{DeviceCodec, Framing, blosc_decode_into};

    const BLOCK: usize = 16 << 10;
    /// Several blocks and a short last one.
    const LEN: usize = 16 * BLOCK + 12;

    /// A slow wave of small whole floats with noise: compressible, not trivially (LZ4 finds
    /// repeats with and without a shuffle).
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out: Vec<u8> = (0..len / 4)
            .flat_map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (((i / 3) as f32 * 0.01).sin() * 100.0 + (x % 3) as f32)
                    .round()
                    .to_le_bytes()
            })
            .collect();
        out.resize(len, 7);
        out
    }

    fn compressor(cname: &str) -> BloscCompressor {
        BloscCompressor::from_cname(cname).unwrap()
    }

    /// The decoded chunk, by c-blosc (the whole decode).
    fn whole(frame: &[u8], len: usize) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; len];
        blosc_decode_into(frame, &mut out)?;
        Ok(out)
    }

    fn codec(cname: &str, crc32c: bool) -> DeviceCodec {
        DeviceCodec {
            framing: Framing::Blosc(compressor(cname)),
            crc32c,
        }
    }

    /// The prefix decode through the reads' entry point (falling back to the whole decode).
    fn read_prefix(
        cname: &str,
        frame: &[u8],
        len: usize,
        prefix: usize,
    ) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; len];
        let n = decode_prefix_into(codec(cname, false), frame, &mut out, prefix, true)?;
        assert!(n >= prefix);
        out.truncate(n);
        Ok(out)
    }

    /// The streams of `frame` (lz4 or zstd), as parsed.
    fn parsed(frame: &[u8], len: usize, cname: &str) -> BloscFrame {
        let all = |s: &[u8], _: usize| Ok(0..s.len());
        match blosc_frame::parse(frame, len, compressor(cname), &all).unwrap() {
            Parsed::Device(f) => f,
            Parsed::Cpu => panic!("left to the CPU"),
        }
    }

    /// Prefixes around the block boundaries of blocks of `bs` bytes (c-blosc may enlarge the
    /// block size asked for).
    fn prefixes(typesize: usize, bs: usize) -> Vec<usize> {
        let mut p = vec![0, 1, typesize, bs - 1, bs, bs + 1, 2 * bs + 5, LEN / 2];
        p.retain(|&p| p < LEN);
        p.extend([LEN - 13, LEN - 12, LEN - 1, LEN]);
        p
    }

    #[test]
    fn every_prefix_equals_the_whole_decode() {
        let mut split = false;
        for cname in ["lz4", "lz4hc", "zstd"] {
            for (typesize, shuffle) in [(4, 0), (4, 1), (4, 2), (8, 0), (8, 1), (8, 2), (1, 2)] {
                let data = sample(LEN, typesize as u64);
                let frame = blosc_compress(&data, typesize, shuffle, cname, BLOCK);
                let what = format!("{cname} typesize {typesize} shuffle {shuffle}");
                assert_eq!(whole(&frame, LEN).unwrap(), data, "{what}");
                let f = parsed(&frame, LEN, cname);
                let bs = f.blocksize;
                assert!(LEN.div_ceil(bs) >= 3, "{what}: several blocks");
                split |= f.streams.len() > LEN.div_ceil(bs);
                for prefix in prefixes(typesize, bs) {
                    let mut out = vec![0xa5u8; LEN];
                    let elements = prefix.div_ceil(typesize) * typesize;
                    let Some(n) = blosc_range_into(compressor(cname), &frame, &mut out, 0..prefix)
                        .map(|r| r.end)
                    else {
                        // Only a prefix into the bytes after the last whole element is left to
                        // the whole decode (c-blosc hands out whole elements).
                        assert!(
                            elements > LEN,
                            "{what}: prefix {prefix} not decoded by blocks"
                        );
                        assert!(read_prefix(cname, &frame, LEN, prefix).unwrap() == data);
                        continue;
                    };
                    assert_eq!(n, elements, "{what}: prefix {prefix}");
                    assert!(out[..n] == data[..n], "{what}: prefix {prefix}");
                    // Nothing after the needed elements is written.
                    assert!(out[n..].iter().all(|&b| b == 0xa5));
                    assert!(
                        read_prefix(cname, &frame, LEN, prefix).unwrap() == data[..n.max(prefix)]
                    );
                }
            }
        }
        assert!(split, "some frame splits its blocks into streams");
    }

    /// Ranges that start and end around the block boundaries: the bytes decoded are the
    /// whole decode's, widened to whole elements, and nothing outside them is written.
    #[test]
    fn every_range_equals_the_whole_decode() {
        for cname in ["lz4", "zstd"] {
            for (typesize, shuffle) in [(4, 1), (8, 2), (4, 0), (1, 2)] {
                let data = sample(LEN, typesize as u64 + 20);
                let frame = blosc_compress(&data, typesize, shuffle, cname, BLOCK);
                let bs = parsed(&frame, LEN, cname).blocksize;
                let what = format!("{cname} typesize {typesize} shuffle {shuffle}");
                // c-blosc may enlarge the block size asked for (up to the whole chunk).
                let edges = [0, 1, typesize, bs - 1, bs, bs + 3, 2 * bs + 5, LEN - 13];
                for &start in edges.iter().filter(|&&e| e <= LEN) {
                    for end in [start, start + 1, start + 16, bs, 2 * bs + 1, LEN - 12, LEN] {
                        if end < start || end > LEN {
                            continue;
                        }
                        let mut out = vec![0xa5u8; LEN];
                        let got = blosc_range_into(compressor(cname), &frame, &mut out, start..end);
                        if end.div_ceil(typesize) * typesize > LEN {
                            // Into the bytes after the last whole element: the whole decode's.
                            assert_eq!(got, None, "{what}: {start}..{end}");
                            continue;
                        }
                        let r = got.unwrap_or_else(|| panic!("{what}: {start}..{end} not decoded"));
                        assert_eq!(r.start, start / typesize * typesize, "{what}");
                        assert_eq!(r.end, end.div_ceil(typesize) * typesize, "{what}");
                        assert!(out[r.clone()] == data[r.clone()], "{what}: {start}..{end}");
                        assert!(out[..r.start].iter().all(|&b| b == 0xa5), "{what}");
                        assert!(out[r.end..].iter().all(|&b| b == 0xa5), "{what}");
                    }
                }
            }
        }
    }

    /// Damage in blocks before and after the needed range goes unseen; damage in a block the
    /// range needs is refused with the whole decode's error (reads' entry point).
    #[test]
    fn damage_outside_a_range_is_unseen_and_inside_refused() {
        for cname in ["lz4", "zstd"] {
            let data = sample(LEN, 12);
            let frame = blosc_compress(&data, 4, 1, cname, BLOCK);
            let bs = parsed(&frame, LEN, cname).blocksize;
            let bad = garbled_block(&garbled_block(&frame, LEN, cname, 0), LEN, cname, 2);
            let whole_error = whole(&bad, LEN).unwrap_err();
            // Block 1 only: read exactly.
            let needed = bs + 8..2 * bs - 8;
            let mut out = vec![0u8; LEN];
            let r = decode_needed_into(codec(cname, false), &bad, &mut out, needed.clone(), true)
                .unwrap();
            assert_eq!(r, needed);
            assert!(out[r.clone()] == data[r], "{cname}");
            // Reaching into block 0 or block 2: the whole decode's error.
            for needed in [bs - 4..bs + 8, 2 * bs - 8..2 * bs + 4] {
                let mut out = vec![0u8; LEN];
                let e = decode_needed_into(codec(cname, false), &bad, &mut out, needed, true)
                    .unwrap_err();
                assert_eq!(e, whole_error, "{cname}");
            }
        }
    }

    /// Blocks split by type size (blosc's split, one stream per byte of the element) are
    /// decoded stream by stream and unshuffled.
    #[test]
    fn split_blocks_decode_exactly() {
        let data = sample(LEN, 3);
        for cname in ["lz4", "zstd"] {
            for (typesize, shuffle) in [(4, 1), (8, 2), (2, 1)] {
                let frame = blosc_compress(&data, typesize, shuffle, cname, BLOCK);
                let f = parsed(&frame, LEN, cname);
                if f.streams.len() == LEN.div_ceil(f.blocksize) {
                    continue;
                }
                for prefix in [1, f.blocksize + 1, LEN - LEN % typesize] {
                    let mut out = vec![0u8; LEN];
                    let n = blosc_range_into(compressor(cname), &frame, &mut out, 0..prefix)
                        .map(|r| r.end)
                        .unwrap();
                    assert!(out[..n] == data[..n], "{cname} {typesize}");
                }
            }
        }
    }

    /// Random bytes: c-blosc stores the chunk uncompressed (the memcpyed flag), and a prefix
    /// copies only the prefix.
    #[test]
    fn frames_stored_uncompressed_copy_only_the_prefix() {
        let mut x = 1u64;
        let noise: Vec<u8> = (0..LEN)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        for shuffle in [0, 1, 2] {
            let frame = blosc_compress(&noise, 4, shuffle, "lz4", BLOCK);
            assert_ne!(frame[2] & 0x02, 0, "memcpyed");
            for prefix in [0, 1, 1000, LEN - 1, LEN] {
                let mut out = vec![0u8; LEN];
                let n = blosc_range_into(BloscCompressor::Lz4, &frame, &mut out, 0..prefix)
                    .map(|r| r.end)
                    .unwrap();
                assert_eq!(n, prefix.div_ceil(4) * 4);
                assert!(out[..n] == noise[..n]);
            }
        }
    }

    /// The stored bytes of the compressed streams of block `b` of `frame`.
    fn compressed(frame: &[u8], len: usize, cname: &str, b: usize) -> Vec<std::ops::Range<usize>> {
        let f = parsed(frame, len, cname);
        let block = b * f.blocksize..(b + 1) * f.blocksize;
        let inputs: Vec<_> = f
            .streams
            .iter()
            .filter(|s| !s.stored && block.contains(&s.output.start))
            .map(|s| s.input.clone())
            .collect();
        assert!(!inputs.is_empty(), "block {b} has compressed streams");
        inputs
    }

    /// `frame` with the compressed streams of block `b` overwritten with 0xff.
    fn garbled_block(frame: &[u8], len: usize, cname: &str, b: usize) -> Vec<u8> {
        let mut bad = frame.to_vec();
        for r in compressed(frame, len, cname, b) {
            bad[r].fill(0xff);
        }
        bad
    }

    /// Damage in a block the prefix needs is refused with the whole decode's error; damage
    /// only in later blocks is not read (and the whole decode still reports it).
    #[test]
    fn damage_is_refused_where_needed_and_unseen_after() {
        for cname in ["lz4", "zstd"] {
            for (typesize, shuffle) in [(4, 1), (8, 2), (4, 0)] {
                let data = sample(LEN, 11);
                let frame = blosc_compress(&data, typesize, shuffle, cname, BLOCK);
                let bs = parsed(&frame, LEN, cname).blocksize;
                let bad = garbled_block(&frame, LEN, cname, 1);
                let what = format!("{cname} {typesize} {shuffle}");
                let whole_error = whole(&bad, LEN).unwrap_err();
                // Block 0 only.
                for prefix in [1, bs / 2, bs] {
                    let got = read_prefix(cname, &bad, LEN, prefix).unwrap();
                    assert!(got[..prefix] == data[..prefix], "{what} {prefix}");
                }
                // Block 1 is needed: the whole decode's error.
                for prefix in [bs + 1, LEN - 1] {
                    let e = read_prefix(cname, &bad, LEN, prefix).unwrap_err();
                    assert_eq!(e, whole_error, "{what} {prefix}");
                }
                // Cut short, or a byte more: the parse refuses, whatever the prefix.
                let mut longer = frame.clone();
                longer.push(0);
                for bad in [&frame[..frame.len() - 1], &longer[..], &frame[..20]] {
                    let whole_error = whole(bad, LEN).unwrap_err();
                    assert_eq!(read_prefix(cname, bad, LEN, 1).unwrap_err(), whole_error);
                }
            }
        }
    }

    /// Every single-byte change inside the first block's stored streams: where c-blosc decodes
    /// the chunk, a prefix in that block reads the same bytes; where it refuses, so does the
    /// prefix decode (c-blosc decodes both).
    #[test]
    fn a_damaged_needed_block_reads_as_c_blosc_reads_it() {
        for cname in ["lz4", "zstd"] {
            let data = sample(4 * BLOCK, 5);
            let frame = blosc_compress(&data, 4, 1, cname, BLOCK);
            let (mut refused, mut read) = (0, 0);
            let positions = compressed(&frame, data.len(), cname, 0)
                .into_iter()
                .flatten();
            for at in positions.step_by(5) {
                for x in [0x01u8, 0x80, 0xff] {
                    let mut bad = frame.clone();
                    bad[at] ^= x;
                    let w = whole(&bad, data.len());
                    let p = read_prefix(cname, &bad, data.len(), 100);
                    match (&w, &p) {
                        (Ok(w), Ok(p)) => {
                            assert!(w[..p.len()] == p[..], "{cname}: byte {at} ^ {x:#x}");
                            read += 1;
                        }
                        (Err(we), Err(pe)) => {
                            assert_eq!(we, pe);
                            refused += 1;
                        }
                        _ => panic!(
                            "{cname}: byte {at} ^ {x:#x}: whole {:?}, prefix {:?}",
                            w.as_ref().err(),
                            p.as_ref().err()
                        ),
                    }
                }
            }
            assert!(
                refused > 0 && read > 0,
                "{cname}: {refused} refused, {read} read"
            );
        }
    }

    /// The other compressors decode by blocks too (c-blosc has them all); a frame in another
    /// compressor than the codec names and crc32c chains are decoded whole.
    #[test]
    fn other_compressors_and_crc32c() {
        let data = sample(LEN, 9);
        for cname in ["blosclz", "snappy", "zlib"] {
            let frame = blosc_compress(&data, 4, 1, cname, BLOCK);
            let mut out = vec![0u8; LEN];
            assert_eq!(
                blosc_range_into(compressor(cname), &frame, &mut out, 0..10).map(|r| r.end),
                Some(12),
                "{cname}"
            );
            assert_eq!(out[..12], data[..12], "{cname}");
            assert_eq!(read_prefix(cname, &frame, LEN, 10).unwrap(), data[..12]);
        }
        // A frame in another compressor than the codec names (left to c-blosc).
        let frame = blosc_compress(&data, 4, 1, "zstd", BLOCK);
        let mut out = vec![0u8; LEN];
        assert_eq!(
            blosc_range_into(BloscCompressor::Lz4, &frame, &mut out, 0..10).map(|r| r.end),
            None
        );
        assert_eq!(read_prefix("lz4", &frame, LEN, 10).unwrap(), data);
        // crc32c: its checksum covers the whole chunk.
        let frame = blosc_compress(&data, 4, 1, "lz4", BLOCK);
        let mut bad = garbled_block(&frame, LEN, "lz4", 1);
        bad.extend_from_slice(&crc32c::crc32c(&bad).to_le_bytes());
        for validate in [true, false] {
            let mut out = vec![0u8; LEN];
            assert!(decode_prefix_into(codec("lz4", true), &bad, &mut out, 10, validate).is_err());
        }
    }
}
