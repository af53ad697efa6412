//! Decoding only the needed prefix of a chunk: [`crate::options::ReadOptions::decode_needed_prefix`]
//! (on by default; small host reads use it).
//!
//! A chunk's decoded bytes are in C order, so the elements a small read needs from it all lie
//! before the last of them: the prefix up to that element is all that must be decoded (a
//! 1 × 64 × 64 patch of a 64³ chunk at depth `k` needs `(k + 1) / 64` of it). The rule: a
//! read returns only bytes the chunk's own structure vouches for; it need not decode what it
//! does not return. Three framings decode by prefix ([`needed_range`]'s end), blosc by
//! blocks:
//!
//! - **zstd.** A frame decodes from its start. It is first checked as far as it can be
//!   without decoding: [`zstd_frame_end`] walks every block header (magic, frame header, a
//!   declared content size equal to the chunk's, block types and sizes, every block inside
//!   the stored bytes), and the chunk must be exactly that one frame. Then zstd's streaming
//!   decoder is fed one block at a time (its own input hint) into the first `prefix` bytes of
//!   the chunk's buffer and stops as soon as they are written: it never writes past them,
//!   and its window is bounded by the declared content size, which equals the chunk's (a
//!   frame that does not declare its size is decoded whole).
//! - **blosc** (every compressor c-blosc has): its blocks are independent, so only those
//!   that hold the bytes from the read's first element in the chunk to its last
//!   ([`needed_range`]) are decoded (by c-blosc's `blosc_getitem`), after the whole frame's
//!   layout is checked ([`super::blosc_prefix`]): a 1 × 64 × 64 patch of a 64³ chunk needs
//!   the one or two blocks that hold its plane. The bytes right are then that range widened
//!   to whole elements; damage in the blocks before and after it goes unseen, as after a
//!   prefix.
//! - **gzip and zlib**, when checksums are not validated: the header is checked (and gzip's
//!   declared size, as for the device decoder), then flate2's streaming inflater runs until
//!   `prefix` bytes are written.
//!
//! Checksums: a checksum of the whole content (zstd's content checksum, gzip's CRC-32,
//! zlib's Adler-32, a crc32c codec's over the stored chunk) vouches only for the whole, so
//! a chunk that has one is decoded whole while checksums are validated — the default, so
//! gzip and zlib chunks decode whole by default (they always carry one), and zstd frames
//! decode by prefix only when written without a content checksum (zarr-python's and
//! numcodecs' default). A crc32c codec always decodes whole. blosc 1.x frames carry no
//! checksum.
//!
//! Anything else decodes whole with [`DeviceCodec::decode_into`], so that what is refused is
//! refused with exactly the whole decode's error: numcodecs' lz4 (one LZ4 block), a frame a walk or parse finds damaged, several zstd frames, trailing
//! bytes, and any error of a prefix decoder. What a prefix decode does not see is damage
//! inside the compressed contents of what comes after the prefix (zstd blocks, blosc blocks,
//! DEFLATE data), which a whole decode reports, as does `check`.

use super::blosc_prefix::blosc_range_into;
use crate::zarr::Unit;
use crate::zarr::framing::{DeviceCodec, Framing, zstd_frame_end};
use std::cell::Cell;
use std::ops::Range;
use zstd::zstd_safe::{DCtx, DParameter, InBuffer, OutBuffer, ResetDirective};

/// The bytes of `unit`'s decoded C-order chunk (elements of `elem` bytes) a read of its
/// region needs: from the region's first element to its last. The whole chunk for an empty
/// region.
pub(crate) fn needed_range(unit: &Unit, elem: usize) -> Range<usize> {
    let whole = unit.num_elements() * elem;
    let (mut first, mut last) = (0usize, 0usize);
    for ((r, &o), n) in unit.region.iter().zip(&unit.origin).zip(&unit.shape) {
        let (Some(start), Some(end)) = (r.start.checked_sub(o), r.end.checked_sub(1 + o)) else {
            return 0..whole;
        };
        if start > end {
            return 0..whole;
        }
        first = first * n.get() as usize + start as usize;
        last = last * n.get() as usize + end as usize;
    }
    let end = ((last + 1) * elem).min(whole);
    (first * elem).min(end)..end
}

/// Decodes the stored chunk `encoded` into `out` (exactly the chunk's decoded size) far
/// enough that its bytes `needed` are right, and returns the range of `out` that is (it
/// covers `needed`; bytes outside it are unspecified). Decodes only part of the chunk where
/// the module docs say it may — zstd, gzip and zlib the prefix up to `needed.end`, blosc the
/// blocks that hold `needed` —; otherwise, or when a partial decoder fails, decodes whole
/// with [`DeviceCodec::decode_into`] and returns its result.
pub(crate) fn decode_needed_into(
    codec: DeviceCodec,
    encoded: &[u8],
    out: &mut [u8],
    needed: Range<usize>,
    validate_checksums: bool,
) -> Result<Range<usize>, String> {
    let prefix = needed.end;
    if (needed.start > 0 || prefix < out.len()) && !codec.crc32c {
        let decoded = match codec.framing {
            Framing::Blosc(compressor) => blosc_range_into(compressor, encoded, out, needed),
            _ if prefix >= out.len() => None,
            Framing::Zstd => zstd_prefix(encoded, out, prefix, validate_checksums).map(|n| 0..n),
            Framing::Gzip | Framing::Zlib if !validate_checksums => {
                deflate_prefix(codec, encoded, out, prefix).map(|n| 0..n)
            }
            Framing::Gzip | Framing::Zlib | Framing::Lz4 => None,
        };
        if let Some(n) = decoded {
            return Ok(n);
        }
    }
    codec
        .decode_into(encoded, out, validate_checksums)
        .map(|n| 0..n)
}

/// [`decode_needed_into`] of the first `prefix` bytes: returns how many leading bytes of
/// `out` are right (at least `prefix`).
#[cfg(test)]
pub(crate) fn decode_prefix_into(
    codec: DeviceCodec,
    encoded: &[u8],
    out: &mut [u8],
    prefix: usize,
    validate_checksums: bool,
) -> Result<usize, String> {
    decode_needed_into(codec, encoded, out, 0..prefix, validate_checksums).map(|r| r.end)
}

/// The zstd prefix decode: `None` when the frame is not prefix-decodable (see the module
/// docs) or the streaming decoder fails.
fn zstd_prefix(
    encoded: &[u8],
    out: &mut [u8],
    prefix: usize,
    validate_checksums: bool,
) -> Option<usize> {
    if !zstd_prefix_decodable(encoded, out.len(), validate_checksums) {
        return None;
    }
    let prefix_out = out.get_mut(..prefix)?;
    stream_prefix(encoded, prefix_out).ok()?;
    Some(prefix)
}

/// Whether `encoded`, a zstd chunk of `expected` decoded bytes, may be decoded by prefix.
fn zstd_prefix_decodable(encoded: &[u8], expected: usize, validate_checksums: bool) -> bool {
    // One frame, its header and every block header intact, ending where the chunk ends.
    if zstd_frame_end(encoded, expected) != Ok(encoded.len()) {
        return false;
    }
    // The walk read the frame header descriptor (byte 4): RFC 8878 §3.1.1.1.1.
    let descriptor = encoded[4];
    let declares_size = descriptor >> 6 != 0 || descriptor & 0x20 != 0;
    let has_checksum = descriptor & 0x04 != 0;
    declares_size && !(has_checksum && validate_checksums)
}

/// The gzip or zlib prefix decode (checksums not validated, no crc32c): the header checks
/// the device decoder runs (gzip: magic, method, flags, fields, a trailer declaring the
/// chunk's size; zlib: method, header check, no dictionary), then flate2's streaming
/// inflater — which checks the header again, as a whole decode does — until `prefix` bytes
/// are written. `None` when a check or the inflater fails.
fn deflate_prefix(
    codec: DeviceCodec,
    encoded: &[u8],
    out: &mut [u8],
    prefix: usize,
) -> Option<usize> {
    use std::io::Read;
    codec.payload(encoded, out.len(), false).ok()??;
    let out = out.get_mut(..prefix)?;
    // `bufread` decoders read straight from the slice: no buffer of their own.
    let read = match codec.framing {
        Framing::Gzip => flate2::bufread::GzDecoder::new(encoded).read_exact(out),
        Framing::Zlib => flate2::bufread::ZlibDecoder::new(encoded).read_exact(out),
        _ => return None,
    };
    read.ok().map(|()| prefix)
}

thread_local! {
    /// This thread's streaming decoder, kept between chunks (creating one allocates its
    /// tables; its window buffer grows to the largest chunk it decoded).
    static DECODER: Cell<Option<DCtx<'static>>> = const { Cell::new(None) };
}

/// The largest window the streaming decoder accepts: zstd's own maximum, as the one-shot
/// decoder of a whole chunk has no limit of its own. What it allocates is bounded by the
/// frame's declared content size, checked to be the chunk's.
const WINDOW_LOG_MAX: u32 = if cfg!(target_pointer_width = "64") {
    31
} else {
    30
};

fn new_decoder() -> Result<DCtx<'static>, String> {
    let mut d = DCtx::try_create().ok_or("zstd could not create a decoder (out of memory)")?;
    d.set_parameter(DParameter::WindowLogMax(WINDOW_LOG_MAX))
        .map_err(zstd_error)?;
    Ok(d)
}

fn zstd_error(code: usize) -> String {
    zstd::zstd_safe::get_error_name(code).to_string()
}

/// Decodes the zstd frame `frame` until `out` is full, feeding the decoder the bytes it asks
/// for next (the rest of a header, then one block with the next block's header), so that no
/// block after the one that fills `out` is decoded.
fn stream_prefix(frame: &[u8], out: &mut [u8]) -> Result<(), String> {
    // Taken out while it decodes (nothing else on this thread can ask for it meanwhile),
    // and put back whatever the outcome: a reset makes it usable after an error.
    let mut decoder = match DECODER.with(|d| d.replace(None)) {
        Some(d) => d,
        None => new_decoder()?,
    };
    let result = decode_until_full(&mut decoder, frame, out);
    DECODER.with(|d| d.replace(Some(decoder)));
    result
}

fn decode_until_full(decoder: &mut DCtx<'_>, frame: &[u8], out: &mut [u8]) -> Result<(), String> {
    decoder
        .reset(ResetDirective::SessionOnly)
        .map_err(zstd_error)?;
    let want = out.len();
    let mut output = OutBuffer::around(out);
    let mut input = InBuffer {
        src: &frame[..0],
        pos: 0,
    };
    // The frame header's fixed part; the decoder then says how much it needs.
    let mut next = 5usize;
    loop {
        let before = (input.pos, output.pos());
        let end = input.pos.saturating_add(next.max(1)).min(frame.len());
        input.src = &frame[..end];
        next = decoder
            .decompress_stream(&mut output, &mut input)
            .map_err(zstd_error)?;
        if output.pos() == want {
            return Ok(());
        }
        if next == 0 {
            return Err(format!(
                "the zstd frame ended after {} of the {want} bytes needed",
                output.pos()
            ));
        }
        if (input.pos, output.pos()) == before && end == frame.len() {
            return Err("the zstd frame ends before the bytes needed".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    const SIZE: usize = 600_000;

    /// Over 128 KiB of bytes zstd entropy-codes (a small alphabet, no long repeats): a frame
    /// of several compressed blocks.
    fn data() -> Vec<u8> {
        let mut x = 0x2545_f491_u32;
        (0..SIZE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                b"abcdefgh"[(x % 8) as usize]
            })
            .collect()
    }

    fn zstd_codec() -> DeviceCodec {
        DeviceCodec {
            framing: Framing::Zstd,
            crc32c: false,
        }
    }

    /// The start and stored length of each block's contents (after its 3-byte header).
    fn blocks(frame: &[u8]) -> Vec<(usize, usize, u32)> {
        let d = frame[4];
        let single = d & 0x20 != 0;
        let fcs = match d >> 6 {
            0 => usize::from(single),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let mut at = 5 + usize::from(!single) + [0, 1, 2, 4][(d & 3) as usize] + fcs;
        let mut out = Vec::new();
        loop {
            let h = u32::from(frame[at])
                | u32::from(frame[at + 1]) << 8
                | u32::from(frame[at + 2]) << 16;
            let size = (h >> 3) as usize;
            let kind = (h >> 1) & 3;
            let stored = if kind == 1 { 1 } else { size };
            out.push((at + 3, stored, kind));
            at += 3 + stored;
            if h & 1 != 0 {
                return out;
            }
        }
    }

    /// `frame` with the contents of its last block overwritten (its header, so every size,
    /// intact): the whole decode fails, a prefix that ends before that block does not.
    fn garbled_last_block(frame: &[u8]) -> Vec<u8> {
        garbled_block(frame, blocks(frame).len() - 1)
    }

    fn garbled_block(frame: &[u8], i: usize) -> Vec<u8> {
        let mut bad = frame.to_vec();
        let (start, len, kind) = blocks(frame)[i];
        assert_eq!(kind, 2, "the test data's blocks are compressed ones");
        bad[start..start + len].fill(0xff);
        bad
    }

    fn decode(encoded: &[u8], prefix: usize, validate: bool) -> Result<(usize, Vec<u8>), String> {
        let mut out = vec![0u8; SIZE];
        let n = decode_prefix_into(zstd_codec(), encoded, &mut out, prefix, validate)?;
        Ok((n, out))
    }

    #[test]
    fn a_prefix_is_the_whole_decode_prefix_at_every_length() {
        let data = data();
        let frame = zstd::bulk::compress(&data, 1).unwrap();
        assert!(blocks(&frame).len() >= 5, "several blocks");
        for prefix in [1, 2, 4095, 128 << 10, (128 << 10) + 1, 300_001, SIZE - 1] {
            let (n, out) = decode(&frame, prefix, true).unwrap();
            assert_eq!(n, prefix);
            assert_eq!(out[..n], data[..n], "prefix {prefix}");
        }
        // The whole chunk is decoded whole.
        let (n, out) = decode(&frame, SIZE, true).unwrap();
        assert_eq!((n, out), (SIZE, data));
    }

    #[test]
    fn a_garbled_last_block_is_unseen_by_a_short_prefix_and_refused_by_a_long_one() {
        let data = data();
        let frame = zstd::bulk::compress(&data, 1).unwrap();
        let bad = garbled_last_block(&frame);
        let mut whole = vec![0u8; SIZE];
        assert!(zstd_codec().decode_into(&bad, &mut whole, true).is_err());
        let (n, out) = decode(&bad, 1000, true).unwrap();
        assert_eq!(n, 1000);
        assert_eq!(out[..n], data[..n]);
        // A prefix that ends where the first block's 128 KiB end: the second is not decoded.
        let bad_second = garbled_block(&frame, 1);
        assert!(
            zstd_codec()
                .decode_into(&bad_second, &mut whole, true)
                .is_err()
        );
        let (n, out) = decode(&bad_second, 128 << 10, true).unwrap();
        assert_eq!(out[..n], data[..128 << 10]);
        assert!(decode(&bad_second, (128 << 10) + 1, true).is_err());
        // A prefix ending in the last block needs it: the whole decode's error.
        let e = decode(&bad, SIZE - 1, true).unwrap_err();
        assert_eq!(
            e,
            zstd_codec()
                .decode_into(&bad, &mut whole, true)
                .unwrap_err()
        );
    }

    /// Damage the block walk sees is refused with the whole decode's own error, whatever
    /// the prefix.
    #[test]
    fn frames_the_walk_refuses_get_the_whole_decodes_error() {
        let data = data();
        let frame = zstd::bulk::compress(&data, 1).unwrap();
        let bad_last = garbled_last_block(&frame);
        let mut trailing = bad_last.clone();
        trailing.extend_from_slice(b"xyz");
        let other_size = zstd::bulk::compress(&data[..SIZE - 1], 1).unwrap();
        let mut too_big_block = bad_last.clone();
        let (first, _, _) = blocks(&frame)[0];
        let h = (u32::from(too_big_block[first - 3]) & 7) | (200_000 << 3);
        too_big_block[first - 3..first].copy_from_slice(&h.to_le_bytes()[..3]);
        for (what, bad) in [
            ("truncated", bad_last[..bad_last.len() - 1].to_vec()),
            ("trailing bytes", trailing),
            ("another content size", other_size),
            ("a block over the limit", too_big_block),
        ] {
            let mut whole = vec![0u8; SIZE];
            let expected = zstd_codec()
                .decode_into(&bad, &mut whole, true)
                .unwrap_err();
            assert_eq!(decode(&bad, 10, true).unwrap_err(), expected, "{what}");
        }
    }

    /// A content checksum covers the whole content: with checksums validated the chunk is
    /// decoded whole (a garbled last block is refused); without, a prefix is enough.
    #[test]
    fn a_frame_with_a_content_checksum_decodes_whole_when_checksums_are_validated() {
        let data = data();
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        c.include_checksum(true).unwrap();
        let frame = c.compress(&data).unwrap();
        assert_ne!(frame[4] & 0x04, 0, "the checksum flag");
        let bad = garbled_last_block(&frame);
        assert!(decode(&bad, 10, true).is_err());
        assert_eq!(decode(&bad, 10, false).unwrap().0, 10);
        assert_eq!(decode(&frame, 10, true).unwrap().0, SIZE);
    }

    /// A frame without a declared content size (its window not bounded by the chunk) and a
    /// chain with crc32c decode whole.
    #[test]
    fn frames_without_a_size_and_crc32c_chains_decode_whole() {
        let data = data();
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        e.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut e, &data).unwrap();
        let frame = e.finish().unwrap();
        assert_eq!(frame[4] >> 6, 0);
        assert!(decode(&garbled_last_block(&frame), 10, false).is_err());
        assert_eq!(decode(&frame, 10, false).unwrap(), (SIZE, data.clone()));

        let sized = zstd::bulk::compress(&data, 1).unwrap();
        let mut with_crc = garbled_last_block(&sized);
        with_crc.extend_from_slice(&crc32c::crc32c(&with_crc).to_le_bytes());
        let crc = DeviceCodec {
            framing: Framing::Zstd,
            crc32c: true,
        };
        let mut out = vec![0u8; SIZE];
        for validate in [true, false] {
            assert!(decode_prefix_into(crc, &with_crc, &mut out, 10, validate).is_err());
        }
    }

    fn deflate_codec(framing: Framing) -> DeviceCodec {
        DeviceCodec {
            framing,
            crc32c: false,
        }
    }

    /// `data` as a gzip member and as a zlib stream.
    fn deflated(data: &[u8]) -> [(Framing, Vec<u8>); 2] {
        use std::io::Write;
        let level = flate2::Compression::fast();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), level);
        gz.write_all(data).unwrap();
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), level);
        zl.write_all(data).unwrap();
        [
            (Framing::Gzip, gz.finish().unwrap()),
            (Framing::Zlib, zl.finish().unwrap()),
        ]
    }

    fn inflate(
        framing: Framing,
        encoded: &[u8],
        prefix: usize,
        validate: bool,
    ) -> Result<(usize, Vec<u8>), String> {
        let mut out = vec![0u8; SIZE];
        let n = decode_prefix_into(deflate_codec(framing), encoded, &mut out, prefix, validate)?;
        Ok((n, out))
    }

    fn inflate_whole(framing: Framing, encoded: &[u8]) -> Result<usize, String> {
        let mut out = vec![0u8; SIZE];
        deflate_codec(framing).decode_into(encoded, &mut out, false)
    }

    /// Without validated checksums a gzip or zlib chunk is inflated only up to the prefix,
    /// and the bytes are the whole decode's; with them (the default) it is decoded whole.
    #[test]
    fn gzip_and_zlib_prefixes_equal_the_whole_decode() {
        let data = data();
        for (framing, encoded) in deflated(&data) {
            for prefix in [0, 1, 1000, 65_536, 300_001, SIZE - 1, SIZE] {
                let (n, out) = inflate(framing, &encoded, prefix, false).unwrap();
                assert_eq!(n, prefix.max(usize::from(prefix == SIZE) * SIZE));
                assert_eq!(out[..n], data[..n], "{framing:?} prefix {prefix}");
                let (n, out) = inflate(framing, &encoded, prefix, true).unwrap();
                assert_eq!((n, &out), (SIZE, &data), "{framing:?}: decoded whole");
            }
        }
    }

    /// Damage after the prefix (compressed data near the end, the trailer's checksum) is
    /// not seen without validated checksums, and is with them; damage the prefix needs
    /// (its compressed data, the header, a stream cut short) is the whole decode's error.
    #[test]
    fn gzip_and_zlib_damage_is_refused_where_needed() {
        let data = data();
        for (framing, encoded) in deflated(&data) {
            let what = format!("{framing:?}");
            let mut late = encoded.clone();
            let at = encoded.len() - 20;
            late[at..at + 4].fill(0xff);
            let mut checksum = encoded.clone();
            *checksum.last_mut().unwrap() ^= 1;
            if framing == Framing::Gzip {
                // The CRC-32 comes before the size.
                let n = checksum.len();
                checksum[n - 1] ^= 1;
                checksum[n - 8] ^= 1;
            }
            for bad in [&late, &checksum] {
                let e = inflate_whole(framing, bad).unwrap_err();
                let (n, out) = inflate(framing, bad, 1000, false).unwrap();
                assert_eq!(out[..n], data[..n], "{what}");
                let p = inflate(framing, bad, 1000, true).map(|(n, _)| n);
                assert_eq!(p, Err(e), "{what}");
            }
            assert_eq!(
                inflate(framing, &late, SIZE - 1, false).map(|(n, _)| n),
                Err(inflate_whole(framing, &late).unwrap_err()),
                "{what}"
            );
            // The first DEFLATE block's header (a reserved block type), the header, and a
            // stream cut before the prefix's data ends.
            let mut early = encoded.clone();
            let body = if framing == Framing::Gzip { 10 } else { 2 };
            early[body..body + 30].fill(0xff);
            let mut header = encoded.clone();
            header[0] ^= 0x40;
            let cut = encoded[..100].to_vec();
            for bad in [early, header, cut] {
                let e = inflate_whole(framing, &bad).unwrap_err();
                let p = inflate(framing, &bad, 1000, false).map(|(n, _)| n);
                assert_eq!(p, Err(e), "{what}");
            }
        }
        // A crc32c chain decodes whole.
        let [(_, gz), _] = deflated(&data);
        let mut late = gz.clone();
        let at = gz.len() - 20;
        late[at..at + 4].fill(0xff);
        late.extend_from_slice(&crc32c::crc32c(&late).to_le_bytes());
        let crc = DeviceCodec {
            framing: Framing::Gzip,
            crc32c: true,
        };
        let mut out = vec![0u8; SIZE];
        assert!(decode_prefix_into(crc, &late, &mut out, 10, false).is_err());
    }

    #[test]
    fn the_needed_range_runs_from_the_regions_first_element_to_its_last() {
        let n = |v: u64| NonZeroU64::new(v).unwrap();
        let unit = |region: Vec<std::ops::Range<u64>>| Unit {
            indices: vec![1, 0, 0],
            origin: vec![64, 0, 0],
            shape: vec![n(64), n(64), n(64)],
            region,
        };
        // Plane 3 whole, then part of plane 0 from row 5, column 10 to row 9, column 19.
        assert_eq!(
            needed_range(&unit(vec![67..68, 0..64, 0..64]), 4),
            3 * 64 * 64 * 4..4 * 64 * 64 * 4
        );
        assert_eq!(
            needed_range(&unit(vec![64..65, 5..10, 10..20]), 2),
            (5 * 64 + 10) * 2..(9 * 64 + 20) * 2
        );
        assert_eq!(
            needed_range(&unit(vec![64..128, 0..64, 0..64]), 8),
            0..64 * 64 * 64 * 8
        );
        assert_eq!(
            needed_range(&unit(vec![64..64, 0..64, 0..64]), 1),
            0..64 * 64 * 64
        );
    }
}
