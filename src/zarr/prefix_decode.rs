//! Decoding only the needed prefix of a zstd chunk: the opt-in of
//! [`crate::options::ReadOptions::decode_needed_prefix`].
//!
//! A chunk's decoded bytes are in C order, so the elements a small read needs from it all lie
//! before the last of them, and a zstd frame decodes from its start: the prefix up to that
//! element is all that must be decoded (a 1 × 64 × 64 patch of a 64³ chunk at depth `k` needs
//! `(k + 1) / 64` of it). The frame is first checked as far as it can be without decoding:
//! [`zstd_frame_end`] walks every block header (magic, frame header, a declared content size
//! equal to the chunk's, block types and sizes, every block inside the stored bytes), and the
//! chunk must be exactly that one frame. Then zstd's streaming decoder is fed one block at a
//! time (its own input hint) into the first `prefix` bytes of the chunk's buffer and stops
//! as soon as they are written: it never writes past them, and its window is bounded by the
//! declared content size, which equals the chunk's (a frame that does not declare its size
//! is decoded whole).
//!
//! Anything else decodes whole with [`DeviceCodec::decode_into`], so that what is refused is
//! refused with exactly the whole decode's error: another compressor, a crc32c codec (its
//! checksum covers the whole chunk), a frame with a content checksum when checksums are
//! validated (it covers the whole content), a frame the walk finds damaged, several frames,
//! trailing bytes, and any error of the streaming decoder. What the prefix decode does not
//! see is damage inside the entropy-coded contents of the blocks after the prefix, which a
//! whole decode reports: the reason the option is off by default.

use super::Unit;
use super::framing::{DeviceCodec, Framing, zstd_frame_end};
use std::cell::Cell;
use zstd::zstd_safe::{DCtx, DParameter, InBuffer, OutBuffer, ResetDirective};

/// The bytes of `unit`'s decoded C-order chunk (elements of `elem` bytes) a read of its
/// region needs: everything up to the region's last element. The whole chunk for an empty
/// region.
pub(crate) fn needed_prefix(unit: &Unit, elem: usize) -> usize {
    let whole = unit.num_elements() * elem;
    let mut last = 0usize;
    for ((r, &o), n) in unit.region.iter().zip(&unit.origin).zip(&unit.shape) {
        let Some(end) = r.end.checked_sub(1 + o) else {
            return whole;
        };
        last = last * n.get() as usize + end as usize;
    }
    ((last + 1) * elem).min(whole)
}

/// Decodes the stored chunk `encoded` into `out` (exactly the chunk's decoded size) far
/// enough that its first `prefix` bytes are right, and returns how many leading bytes of
/// `out` are (at least `prefix`; bytes after them are unspecified). Decodes only the prefix
/// where the module docs say it may; otherwise, or when the streaming decoder fails,
/// decodes whole with [`DeviceCodec::decode_into`] and returns its result.
pub(crate) fn decode_prefix_into(
    codec: DeviceCodec,
    encoded: &[u8],
    out: &mut [u8],
    prefix: usize,
    validate_checksums: bool,
) -> Result<usize, String> {
    if prefix < out.len()
        && prefix_decodable(codec, encoded, out.len(), validate_checksums)
        && let Some(prefix_out) = out.get_mut(..prefix)
        && stream_prefix(encoded, prefix_out).is_ok()
    {
        return Ok(prefix);
    }
    codec.decode_into(encoded, out, validate_checksums)
}

/// Whether `encoded`, a chunk of `expected` decoded bytes under `codec`, may be decoded by
/// prefix (see the module docs).
fn prefix_decodable(
    codec: DeviceCodec,
    encoded: &[u8],
    expected: usize,
    validate_checksums: bool,
) -> bool {
    if codec.framing != Framing::Zstd || codec.crc32c {
        return false;
    }
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

    #[test]
    fn the_needed_prefix_ends_at_the_regions_last_element() {
        let n = |v: u64| NonZeroU64::new(v).unwrap();
        let unit = |region: Vec<std::ops::Range<u64>>| Unit {
            indices: vec![1, 0, 0],
            origin: vec![64, 0, 0],
            shape: vec![n(64), n(64), n(64)],
            region,
        };
        // Plane 3 whole, then part of plane 0 ending at row 9, column 19.
        assert_eq!(
            needed_prefix(&unit(vec![67..68, 0..64, 0..64]), 4),
            4 * 64 * 64 * 4
        );
        assert_eq!(
            needed_prefix(&unit(vec![64..65, 5..10, 10..20]), 2),
            (9 * 64 + 20) * 2
        );
        assert_eq!(
            needed_prefix(&unit(vec![64..128, 0..64, 0..64]), 8),
            64 * 64 * 64 * 8
        );
        assert_eq!(
            needed_prefix(&unit(vec![64..64, 0..64, 0..64]), 1),
            64 * 64 * 64
        );
    }
}
