//! The framing of compressed chunks that a device decoder takes: which codec chains qualify,
//! and the checks run on the CPU before a chunk is uploaded.
//!
//! nVIDIA documents corrupt input to nvCOMP as undefined behaviour, so every chunk bound for
//! the device is checked here first, with what can be checked without decoding it: the zstd
//! frame header (magic, descriptor, declared content size), the gzip header and trailer
//! (method, flags, declared size), the zlib header, and a trailing crc32c over the whole
//! encoded chunk. After decoding, the pipeline checks each chunk's status and decoded size.

pub(super) mod blosc_frame;
mod write;

pub(crate) use blosc_frame::{BloscFrame, STREAM_ALIGN};
pub(crate) use write::WriteCodec;

use crate::compression_formats::Compression;
use blosc_frame::{BloscCompressor, Parsed};
use std::ops::Range;
use std::sync::Arc;
use zarrs::array::{CodecChain, CodecMetadataOptions};
use zarrs::plugin::ExtensionName;

/// A chunk's outer compression, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// One zstd frame.
    Zstd,
    /// A gzip member (RFC 1952): header, raw DEFLATE, CRC-32 and size trailer.
    Gzip,
    /// A zlib stream (RFC 1950): two header bytes, raw DEFLATE, Adler-32.
    Zlib,
    /// numcodecs' `lz4`: the decoded size as a 4-byte little-endian integer, then one LZ4
    /// block.
    Lz4,
    /// A blosc frame whose streams are in this compressor (the codec's `cname`).
    Blosc(BloscCompressor),
}

/// What the device decoder does with one checked chunk.
#[derive(Debug)]
pub(crate) enum DevicePayload {
    /// Upload this range of the stored chunk; it decompresses, whole, to the chunk.
    Whole(Range<usize>),
    /// Upload the frame (this range of the stored chunk); the device decodes its streams.
    Blosc(Range<usize>, BloscFrame),
    /// A valid chunk the device does not take: decode it on the CPU.
    Cpu,
}

/// The bytes-to-bytes codecs of a chain the device decoder handles: one compressor,
/// optionally followed by a `crc32c` checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceCodec {
    pub framing: Framing,
    pub crc32c: bool,
}

impl DeviceCodec {
    /// The device-decodable part of `chain`'s bytes-to-bytes codecs, or `None`.
    pub(crate) fn of(chain: &Arc<CodecChain>) -> Option<Self> {
        let names: Vec<String> = chain
            .bytes_to_bytes_codecs()
            .iter()
            .map(|c| c.name_v3().map(|n| n.into_owned()).unwrap_or_default())
            .collect();
        // blosc's streams are in the compressor its configuration names.
        let blosc = || {
            let codec = chain.bytes_to_bytes_codecs().first()?;
            let config = codec.configuration_v3(&CodecMetadataOptions::default())?;
            BloscCompressor::from_cname(config.get("cname")?.as_str()?)
        };
        let framing = |n: &str| match n.trim_start_matches("numcodecs.") {
            "zstd" => Some(Framing::Zstd),
            "gzip" => Some(Framing::Gzip),
            "zlib" => Some(Framing::Zlib),
            "lz4" => Some(Framing::Lz4),
            "blosc" => blosc().map(Framing::Blosc),
            _ => None,
        };
        match names.as_slice() {
            [one] => framing(one).map(|framing| DeviceCodec {
                framing,
                crc32c: false,
            }),
            [one, crc] if crc == "crc32c" => framing(one).map(|framing| DeviceCodec {
                framing,
                crc32c: true,
            }),
            _ => None,
        }
    }

    /// What the device decoder runs on the payload; `None` for blosc frames of a compressor
    /// nvCOMP lacks (blosclz, snappy), which decode on the CPU.
    pub(crate) fn compression(&self) -> Option<Compression> {
        match self.framing {
            Framing::Zstd | Framing::Blosc(BloscCompressor::Zstd) => Some(Compression::Zstd),
            Framing::Gzip | Framing::Zlib | Framing::Blosc(BloscCompressor::Zlib) => {
                Some(Compression::Deflate)
            }
            Framing::Lz4 | Framing::Blosc(BloscCompressor::Lz4) => Some(Compression::Lz4),
            Framing::Blosc(BloscCompressor::BloscLz | BloscCompressor::Snappy) => None,
        }
    }

    /// Checks `encoded` (one stored chunk that decodes to `expected` bytes) and says what the
    /// device decoder does with it; `Err` says what is wrong with the chunk.
    pub(crate) fn device_payload(
        &self,
        encoded: &[u8],
        expected: usize,
        validate_checksums: bool,
    ) -> Result<DevicePayload, String> {
        let Framing::Blosc(compressor) = self.framing else {
            return Ok(self
                .payload(encoded, expected, validate_checksums)?
                .map_or(DevicePayload::Cpu, DevicePayload::Whole));
        };
        let body = self.checked_body(encoded, validate_checksums)?;
        let check = |stream: &[u8], decoded: usize| match compressor {
            BloscCompressor::Lz4 => lz4_block_check(stream, decoded).map(|()| 0..stream.len()),
            BloscCompressor::Zstd => zstd_payload(stream, decoded),
            BloscCompressor::Zlib => zlib_payload(stream),
            BloscCompressor::BloscLz | BloscCompressor::Snappy => Err(format!(
                "{compressor:?} streams do not decode on the device"
            )),
        };
        // The crc32c trailer, if any, follows the frame: the frame starts at byte 0.
        match blosc_frame::parse(&encoded[body.clone()], expected, compressor, &check)? {
            Parsed::Device(frame) => Ok(DevicePayload::Blosc(body, frame)),
            Parsed::Cpu => Ok(DevicePayload::Cpu),
        }
    }

    /// Checks `encoded` (one stored chunk that decodes to `expected` bytes) and returns the
    /// range of it the device decoder takes, or `None` for a valid-looking chunk that only the
    /// CPU decodes (several zstd frames); `Err` says what is wrong with the chunk.
    pub(crate) fn payload(
        &self,
        encoded: &[u8],
        expected: usize,
        validate_checksums: bool,
    ) -> Result<Option<Range<usize>>, String> {
        let body = self.checked_body(encoded, validate_checksums)?;
        let inner = match self.framing {
            Framing::Zstd => match zstd_frame(&encoded[body.clone()], expected)? {
                ZstdFrame::Whole(range) => range,
                ZstdFrame::MoreFrames => return Ok(None),
            },
            Framing::Gzip => gzip_payload(&encoded[body.clone()], expected)?,
            Framing::Zlib => zlib_payload(&encoded[body.clone()])?,
            Framing::Lz4 => lz4_payload(&encoded[body.clone()], expected)?,
            Framing::Blosc(_) => {
                return Err(
                    "a blosc frame is not one stream (internal error: please report)".into(),
                );
            }
        };
        Ok(Some(body.start + inner.start..body.start + inner.end))
    }
}

impl DeviceCodec {
    /// The compressed part of `encoded`: all of it, or all but a crc32c trailer, which is
    /// verified when `validate_checksums`.
    fn checked_body(
        &self,
        encoded: &[u8],
        validate_checksums: bool,
    ) -> Result<Range<usize>, String> {
        let mut body = 0..encoded.len();
        if self.crc32c {
            if encoded.len() < 4 {
                return Err("shorter than its crc32c checksum".into());
            }
            body.end -= 4;
            if validate_checksums {
                let stored = u32::from_le_bytes(encoded[body.end..].try_into().expect("4 bytes"));
                let actual = crc32c::crc32c(&encoded[body.clone()]);
                if stored != actual {
                    return Err(format!(
                        "crc32c checksum mismatch: stored {stored:08x}, computed {actual:08x}"
                    ));
                }
            }
        }
        Ok(body)
    }

    /// Decodes one stored chunk straight into `out` (exactly the chunk's decoded size) on
    /// the CPU — no intermediate allocation — with every check the codecs define: the
    /// crc32c trailer (when `validate_checksums`), zstd's own content checksum, gzip's CRC-32
    /// and size, zlib's Adler-32. Returns the decoded size.
    pub(crate) fn decode_into(
        &self,
        encoded: &[u8],
        out: &mut [u8],
        validate_checksums: bool,
    ) -> Result<usize, String> {
        use std::io::Read;
        let body = match (self.crc32c, self.framing) {
            (false, _) => 0..encoded.len(),
            // The lz4 block is checked by its decoder here: the walk of `payload` is for
            // blocks bound for nvCOMP, and would be a second pass over every CPU chunk.
            (true, Framing::Lz4) => self.checked_body(encoded, validate_checksums)?,
            // zstd's and blosc's own decoders check the frames (several zstd frames too).
            (true, Framing::Zstd | Framing::Blosc(_)) => {
                self.checked_body(encoded, validate_checksums)?
            }
            // gzip and zlib are decoded whole, with their own checks.
            (true, Framing::Gzip | Framing::Zlib) => {
                self.payload(encoded, out.len(), validate_checksums)?;
                0..encoded.len() - 4
            }
        };
        let body = &encoded[body];
        let want = out.len();
        let complete = |n: usize, trailing: bool| {
            if trailing {
                Err(format!(
                    "decodes to more than the chunk's {want} bytes (stopped there)"
                ))
            } else if n != want {
                Err(format!("decodes to {n} bytes, the chunk holds {want}"))
            } else {
                Ok(n)
            }
        };
        match self.framing {
            Framing::Zstd => {
                let n =
                    crate::zarr::decode::zstd_context::decompress(out, body).map_err(|code| {
                        let name = zstd::zstd_safe::get_error_name(code);
                        if name.contains("too small") {
                            format!("decodes to more than the chunk's {want} bytes (stopped there)")
                        } else {
                            name.to_string()
                        }
                    })?;
                complete(n, false)
            }
            Framing::Gzip => {
                let mut d = flate2::read::GzDecoder::new(body);
                d.read_exact(out).map_err(|e| format!("gzip: {e}"))?;
                let trailing = d.read(&mut [0u8; 1]).map_err(|e| format!("gzip: {e}"))? > 0;
                complete(want, trailing)
            }
            Framing::Zlib => {
                let mut d = flate2::read::ZlibDecoder::new(body);
                d.read_exact(out).map_err(|e| format!("zlib: {e}"))?;
                let trailing = d.read(&mut [0u8; 1]).map_err(|e| format!("zlib: {e}"))? > 0;
                complete(want, trailing)
            }
            Framing::Lz4 => {
                let block = &body[lz4_header(body, want)?];
                let n = lz4_flex::block::decompress_into(block, out)
                    .map_err(|e| format!("lz4: {e}"))?;
                complete(n, false)
            }
            Framing::Blosc(_) => complete(blosc_decode_into(body, out)?, false),
        }
    }
}

/// The decoded size a valid blosc frame's header declares; `Err` for a frame c-blosc does
/// not accept (bad header, or a declared length other than the frame's).
pub(crate) fn blosc_nbytes(frame: &[u8]) -> Result<usize, String> {
    use std::ffi::c_void;
    let mut nbytes = 0usize;
    // SAFETY: c-blosc reads the 16-byte header of `frame` after checking that `frame.len()`
    // (passed as the buffer's length) holds it, and writes one `usize`.
    let valid = unsafe {
        blosc_src::blosc_cbuffer_validate(frame.as_ptr().cast::<c_void>(), frame.len(), &mut nbytes)
    } == 0;
    if !valid {
        return Err(
            "not a valid blosc frame (bad header, or its declared length is not the chunk's)"
                .into(),
        );
    }
    Ok(nbytes)
}

/// Decodes one blosc frame into `out` (exactly its decoded size) with c-blosc, the library
/// zarrs and numcodecs decode with, single-threaded (chunks are decoded in parallel).
pub(crate) fn blosc_decode_into(frame: &[u8], out: &mut [u8]) -> Result<usize, String> {
    use std::ffi::c_void;
    let nbytes = blosc_nbytes(frame)?;
    if nbytes != out.len() {
        return Err(format!(
            "the blosc header declares {nbytes} decoded bytes, the chunk holds {}",
            out.len()
        ));
    }
    if out.is_empty() {
        return Ok(0);
    }
    // SAFETY: the frame's declared compressed length equals `frame.len()` (validated above),
    // and c-blosc 1.21 checks every block start and stream length against that length before
    // reading; it writes at most `out.len()` (destsize) bytes into `out`.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            frame.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            out.len(),
            1,
        )
    };
    usize::try_from(n).map_err(|_| format!("c-blosc could not decode the frame (error {n})"))
}

/// numcodecs' lz4 bound for the device: the size header of [`lz4_header`], then a block
/// that passes [`lz4_block_check`]. Returns the block's range.
fn lz4_payload(b: &[u8], expected: usize) -> Result<Range<usize>, String> {
    let block = lz4_header(b, expected)?;
    lz4_block_check(&b[block.clone()], expected)?;
    Ok(block)
}

/// numcodecs' lz4: a 4-byte little-endian decoded size equal to the chunk's size, then a
/// non-empty LZ4 block. Returns the block's range.
fn lz4_header(b: &[u8], expected: usize) -> Result<Range<usize>, String> {
    if b.len() < 5 {
        return Err(format!(
            "a {}-byte numcodecs lz4 chunk is too short for its size header and a block",
            b.len()
        ));
    }
    let declared = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
    if declared as usize != expected {
        return Err(format!(
            "the lz4 size header declares {declared} decoded bytes, the chunk holds {expected}"
        ));
    }
    Ok(4..b.len())
}

/// Walks an LZ4 block's sequences without decoding them: every length stays inside the
/// block, every match refers to bytes already produced, and the block produces exactly
/// `expected` bytes. nvCOMP's LZ4 decoder trusts its input (a damaged block was seen to
/// report more output than its buffer holds), so nothing that fails this reaches it. The
/// walk reads each token and length byte once and skips the literals: far cheaper than
/// decoding.
fn lz4_block_check(block: &[u8], expected: usize) -> Result<(), String> {
    let bad = |what: String| Err(format!("the lz4 block is damaged: {what}"));
    let (mut at, mut produced) = (0usize, 0usize);
    // A length nibble of 15 continues in bytes of 255 and one final byte.
    let extend = |at: &mut usize, mut n: usize| -> Result<usize, String> {
        if n == 15 {
            loop {
                let Some(&x) = block.get(*at) else {
                    return Err("a length runs past the end of the block".into());
                };
                *at += 1;
                n = n
                    .checked_add(x as usize)
                    .ok_or("a length overflows".to_string())?;
                if x != 255 {
                    break;
                }
            }
        }
        Ok(n)
    };
    loop {
        let Some(&token) = block.get(at) else {
            return bad("the block ends before its last sequence".into());
        };
        at += 1;
        let literals = match extend(&mut at, (token >> 4) as usize) {
            Ok(n) => n,
            Err(e) => return bad(e),
        };
        if literals > block.len() - at {
            return bad(format!("{literals} literals run past the end of the block"));
        }
        at += literals;
        produced = match produced.checked_add(literals) {
            Some(p) if p <= expected => p,
            _ => {
                return bad(format!(
                    "it decodes to more than the chunk's {expected} bytes"
                ));
            }
        };
        if at == block.len() {
            break;
        }
        if block.len() - at < 2 {
            return bad("a match offset is cut off".into());
        }
        let offset = u16::from_le_bytes([block[at], block[at + 1]]) as usize;
        at += 2;
        if offset == 0 || offset > produced {
            return bad(format!(
                "a match refers {offset} bytes back, {produced} bytes were produced"
            ));
        }
        let matched = match extend(&mut at, (token & 0x0f) as usize) {
            Ok(n) => n + 4,
            Err(e) => return bad(e),
        };
        produced = match produced.checked_add(matched) {
            Some(p) if p <= expected => p,
            _ => {
                return bad(format!(
                    "it decodes to more than the chunk's {expected} bytes"
                ));
            }
        };
    }
    if produced != expected {
        return bad(format!(
            "it decodes to {produced} bytes, the chunk holds {expected}"
        ));
    }
    Ok(())
}

/// A stored zstd chunk as the device decoder sees it.
enum ZstdFrame {
    /// One frame, exactly this range: upload it.
    Whole(Range<usize>),
    /// A checked first frame followed by another (zstd allows concatenated frames; nvCOMP
    /// takes one): the CPU decodes the chunk.
    MoreFrames,
}

/// The largest block a zstd frame may hold (RFC 8878, `Block_Maximum_Size`).
const ZSTD_MAX_BLOCK: usize = 128 << 10;
const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// One zstd stream that must be exactly one frame (a blosc stream): see [`zstd_frame_end`].
fn zstd_payload(b: &[u8], expected: usize) -> Result<Range<usize>, String> {
    let end = zstd_frame_end(b, expected)?;
    if end != b.len() {
        return Err(format!(
            "{} bytes follow the {end}-byte zstd frame",
            b.len() - end
        ));
    }
    Ok(0..end)
}

/// A stored zstd chunk: its first frame checked by [`zstd_frame_end`], then either the end
/// of the chunk or another frame (which sends the chunk to the CPU).
fn zstd_frame(b: &[u8], expected: usize) -> Result<ZstdFrame, String> {
    let end = zstd_frame_end(b, expected)?;
    if end == b.len() {
        return Ok(ZstdFrame::Whole(0..end));
    }
    let next = b[end..]
        .get(..4)
        .map(|m| u32::from_le_bytes(m.try_into().expect("4 bytes")));
    // A zstd frame or a skippable frame (magic 0x184D2A5?) may follow.
    match next {
        Some(m) if m == ZSTD_MAGIC || m & 0xFFFF_FFF0 == 0x184D_2A50 => Ok(ZstdFrame::MoreFrames),
        _ => Err(format!(
            "{} bytes after the {end}-byte zstd frame are not another frame",
            b.len() - end
        )),
    }
}

/// Checks the zstd frame at the start of `b` without decoding it and returns where it ends:
/// magic, a valid frame header, a declared content size (when present) equal to the chunk's
/// size, and every block header in turn (type, size within the format's limit, contents
/// inside `b`), then the content checksum if the header announces one. nvCOMP trusts its
/// input: a frame cut short reads past its buffer on the device (seen on an H100 as
/// `CUDA_ERROR_ILLEGAL_ADDRESS`, which ends the context), so the walk must reach the frame's
/// end here first.
pub(crate) fn zstd_frame_end(b: &[u8], expected: usize) -> Result<usize, String> {
    if b.len() < 6 {
        return Err(format!("a {}-byte zstd frame is too short", b.len()));
    }
    let magic = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
    if magic != ZSTD_MAGIC {
        return Err(format!("not a zstd frame (magic {magic:08x})"));
    }
    let fhd = b[4];
    if fhd & 0x08 != 0 {
        return Err("the zstd frame header sets its reserved bit".into());
    }
    let fcs_flag = fhd >> 6;
    let single_segment = fhd & 0x20 != 0;
    let has_checksum = fhd & 0x04 != 0;
    let dict_id_bytes = [0usize, 1, 2, 4][(fhd & 0x03) as usize];
    let window_bytes = usize::from(!single_segment);
    let fcs_bytes = match fcs_flag {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let header = 5 + window_bytes + dict_id_bytes + fcs_bytes;
    if b.len() < header + 3 {
        return Err(format!(
            "a {}-byte zstd frame ends inside its {header}-byte header",
            b.len()
        ));
    }
    if dict_id_bytes != 0
        && b[5 + window_bytes..5 + window_bytes + dict_id_bytes]
            .iter()
            .any(|&x| x != 0)
    {
        return Err("the zstd frame needs a dictionary".into());
    }
    if fcs_bytes > 0 {
        let at = 5 + window_bytes + dict_id_bytes;
        let mut v = [0u8; 8];
        v[..fcs_bytes].copy_from_slice(&b[at..at + fcs_bytes]);
        let mut size = u64::from_le_bytes(v);
        if fcs_bytes == 2 {
            size += 256;
        }
        if size != expected as u64 {
            return Err(format!(
                "the zstd frame declares {size} decoded bytes, the chunk holds {expected}"
            ));
        }
    }
    zstd_blocks_end(b, header, has_checksum, expected)
}

/// Walks the blocks of a zstd frame whose header ends at `at` (RFC 8878 §3.1.1.2) and
/// returns where the frame ends, its 4-byte checksum included when `has_checksum`.
fn zstd_blocks_end(
    b: &[u8],
    mut at: usize,
    has_checksum: bool,
    expected: usize,
) -> Result<usize, String> {
    let cut = |what: String| {
        Err(format!(
            "{what} runs past the end of the {}-byte zstd frame: the chunk is cut short or \
             damaged",
            b.len()
        ))
    };
    // Bytes that raw and RLE blocks decode to: a bound the frame must respect.
    let mut plain = 0usize;
    loop {
        let Some(h) = b.get(at..at + 3) else {
            return cut(format!("the block header at byte {at}"));
        };
        let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        at += 3;
        let last = h & 1 != 0;
        let size = (h >> 3) as usize;
        if size > ZSTD_MAX_BLOCK {
            return Err(format!(
                "a zstd block at byte {} declares {size} bytes, over the format's {ZSTD_MAX_BLOCK}",
                at - 3
            ));
        }
        let stored = match (h >> 1) & 3 {
            0 => {
                plain += size;
                size
            }
            1 => {
                plain += size;
                1
            }
            2 => size,
            _ => {
                return Err(format!(
                    "a zstd block at byte {} has the reserved type",
                    at - 3
                ));
            }
        };
        if plain > expected {
            return Err(format!(
                "the zstd frame's blocks decode to more than the chunk's {expected} bytes"
            ));
        }
        if b.len() - at < stored {
            return cut(format!("a {stored}-byte block at byte {at}"));
        }
        at += stored;
        if last {
            break;
        }
    }
    if has_checksum {
        if b.len() - at < 4 {
            return cut(format!("the content checksum at byte {at}"));
        }
        at += 4;
    }
    Ok(at)
}

/// A gzip member: magic, DEFLATE method, optional fields skipped, and a trailer whose size
/// (mod 2^32) is the chunk's size. Returns the raw DEFLATE range.
fn gzip_payload(b: &[u8], expected: usize) -> Result<Range<usize>, String> {
    if b.len() < 18 {
        return Err(format!("a {}-byte gzip member is too short", b.len()));
    }
    if b[0] != 0x1f || b[1] != 0x8b {
        return Err("not a gzip member (bad magic)".into());
    }
    if b[2] != 8 {
        return Err(format!("gzip compression method {} is not DEFLATE", b[2]));
    }
    let flags = b[3];
    if flags & 0xe0 != 0 {
        return Err("the gzip header sets reserved flags".into());
    }
    let mut at = 10usize;
    let end = b.len() - 8;
    if flags & 0x04 != 0 {
        if at + 2 > end {
            return Err("the gzip extra field is cut off".into());
        }
        let xlen = u16::from_le_bytes([b[at], b[at + 1]]) as usize;
        at += 2 + xlen;
    }
    for flag in [0x08u8, 0x10] {
        if flags & flag != 0 {
            let zero = b
                .get(at..end)
                .and_then(|rest| rest.iter().position(|&x| x == 0))
                .ok_or("a gzip name or comment field is not terminated")?;
            at += zero + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2;
    }
    if at >= end {
        return Err("the gzip header leaves no compressed data".into());
    }
    let isize = u32::from_le_bytes(b[end + 4..].try_into().expect("4 bytes"));
    if isize != expected as u32 {
        return Err(format!(
            "the gzip trailer declares {isize} decoded bytes (mod 2^32), the chunk holds {expected}"
        ));
    }
    Ok(at..end)
}

/// A zlib stream: DEFLATE method, a header check that holds, no preset dictionary.
/// Returns the raw DEFLATE range (the Adler-32 trailer is not part of it).
fn zlib_payload(b: &[u8]) -> Result<Range<usize>, String> {
    if b.len() < 7 {
        return Err(format!("a {}-byte zlib stream is too short", b.len()));
    }
    let (cmf, flg) = (b[0], b[1]);
    if cmf & 0x0f != 8 || cmf >> 4 > 7 {
        return Err(format!("zlib header {cmf:02x}{flg:02x} is not DEFLATE"));
    }
    if (u16::from(cmf) * 256 + u16::from(flg)) % 31 != 0 {
        return Err("the zlib header check fails".into());
    }
    if flg & 0x20 != 0 {
        return Err("the zlib stream needs a preset dictionary".into());
    }
    Ok(2..b.len() - 4)
}

#[cfg(test)]
mod tests;
