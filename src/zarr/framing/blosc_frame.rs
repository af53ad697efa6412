//! Blosc frames taken apart on the CPU for the device decoder.
//!
//! A blosc chunk (format version 2, what c-blosc 1.x and numcodecs write) is a 16-byte
//! header, a table of block starts, then the blocks. Each block holds one compressed stream,
//! or — for blocks split by type size — one stream per byte of the element; a stream whose
//! length equals its decoded size is stored uncompressed. After decompression each block is
//! unshuffled (byte or bit shuffle, per the header's flags). The device decoder decompresses
//! every stream of a batch of chunks in one nvCOMP call, copies the stored ones, then undoes
//! the shuffle with a kernel (`zb_blosc_unshuffle`, whose host twin is
//! `zarrbuf_codecs::host::blosc_unshuffle`).
//!
//! [`parse`] checks everything c-blosc's decoder checks, and more, before any byte reaches
//! the device: nVIDIA documents corrupt input to nvCOMP as undefined behaviour. The layout
//! rules are c-blosc 1.21's (`blosc_run_decompression_with_context`, `blosc_d`).

use std::ops::Range;
use zarrbuf_codecs::host::Shuffle;

/// The size of a blosc header.
const HEADER: usize = 16;
/// Header flags (byte 2).
const FLAG_SHUFFLE: u8 = 0x01;
const FLAG_MEMCPYED: u8 = 0x02;
const FLAG_BITSHUFFLE: u8 = 0x04;
const FLAG_RESERVED: u8 = 0x08;
const FLAG_DONT_SPLIT: u8 = 0x10;
/// c-blosc 1.x splits blocks of up to this type size into one stream per byte...
const MAX_SPLITS: usize = 16;
/// ...when each stream would hold at least this many bytes.
const MIN_BUFFERSIZE: usize = 128;
/// The format version c-blosc 1.x writes and reads.
const VERSION_FORMAT: u8 = 2;

/// The compressor a blosc frame's streams are in (header flags, bits 5–7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BloscCompressor {
    BloscLz,
    /// LZ4 and LZ4HC: raw LZ4 blocks.
    Lz4,
    Snappy,
    /// zlib streams (RFC 1950).
    Zlib,
    /// zstd frames.
    Zstd,
}

impl BloscCompressor {
    /// The compressor of a codec configuration's `cname`.
    pub(crate) fn from_cname(cname: &str) -> Option<Self> {
        match cname {
            "blosclz" => Some(Self::BloscLz),
            "lz4" | "lz4hc" => Some(Self::Lz4),
            "snappy" => Some(Self::Snappy),
            "zlib" => Some(Self::Zlib),
            "zstd" => Some(Self::Zstd),
            _ => None,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::BloscLz),
            1 => Some(Self::Lz4),
            2 => Some(Self::Snappy),
            3 => Some(Self::Zlib),
            4 => Some(Self::Zstd),
            _ => None,
        }
    }
}

/// One stream of a frame: where its bytes are in the encoded chunk (for compressed streams,
/// the part the device decompresses: a zlib stream's raw DEFLATE body), and which bytes of
/// the still-shuffled decoded chunk it produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BloscStream {
    pub input: Range<usize>,
    pub output: Range<usize>,
    /// Stored uncompressed: copied, not decompressed.
    pub stored: bool,
}

/// A checked blosc frame, ready for the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BloscFrame {
    /// Decoded size.
    pub nbytes: usize,
    pub typesize: usize,
    pub blocksize: usize,
    /// The shuffle to undo after decompression (`None`: the streams are the chunk).
    pub shuffle: Option<Shuffle>,
    /// Every stream, in order; their outputs tile `0..nbytes`.
    pub streams: Vec<BloscStream>,
}

/// nvCOMP's alignment for the buffers of a batched decompression: 8 bytes for zstd, 4 for
/// LZ4 and DEFLATE (`nvcomp*RequiredDecompressionAlignment` in its headers), for inputs and
/// outputs alike.
pub(crate) const STREAM_ALIGN: usize = 8;

impl BloscFrame {
    /// The streams the device decompresses (the others are copied).
    pub(crate) fn compressed_streams(&self) -> usize {
        self.streams.iter().filter(|s| !s.stored).count()
    }

    /// Copies every stream's bytes from `encoded` (the chunk the frame was parsed from) into
    /// `out`, each at a multiple of [`STREAM_ALIGN`], and points the streams' `input` at their
    /// new places: in a frame they follow one another at any offset, and nVIDIA's decoders
    /// need aligned buffers. Returns the bytes of `out` used, or `None` when they do not fit or
    /// a compressed stream's output does not start at an aligned offset of the chunk (blocks
    /// whose size is no multiple of 8; such a chunk decodes on the CPU).
    pub(crate) fn pack_streams(&mut self, encoded: &[u8], out: &mut [u8]) -> Option<usize> {
        if self
            .streams
            .iter()
            .any(|s| !s.stored && !s.output.start.is_multiple_of(STREAM_ALIGN))
        {
            return None;
        }
        let mut at = 0usize;
        for s in &mut self.streams {
            let len = s.input.len();
            let dst = out.get_mut(at..at.checked_add(len)?)?;
            dst.copy_from_slice(encoded.get(s.input.clone())?);
            s.input = at..at + len;
            at = (at + len).next_multiple_of(STREAM_ALIGN);
        }
        Some(at.min(out.len()))
    }
}

/// What [`parse`] made of a chunk.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// A frame the device decodes.
    Device(BloscFrame),
    /// A well-formed frame the device does not take (another compressor than the read's, or
    /// a format from another blosc version): decoded on the CPU, whose decoder has the last
    /// word on it.
    Cpu,
}

/// Checks a compressed stream of `decoded` bytes and returns the part the device
/// decompresses (relative to the stream), or what is wrong with it.
pub(crate) type StreamCheck<'a> = dyn Fn(&[u8], usize) -> Result<Range<usize>, String> + 'a;

fn le32(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as usize
}

/// The fields of a blosc header that [`parse`] reads.
struct Header {
    flags: u8,
    typesize: usize,
    /// Decoded bytes.
    nbytes: usize,
    blocksize: usize,
    /// The frame's bytes, header included.
    cbytes: usize,
}

/// One block of a compressed frame: where its streams start, how many streams it splits
/// into, and the decoded bytes of each.
struct Block {
    index: usize,
    start: usize,
    nsplits: usize,
    neblock: usize,
}

/// Parses and checks `b`, one blosc frame that must decode to `expected` bytes, for a
/// device decoding streams of `compressor` (each compressed stream passing `check`).
/// `Err` says what is wrong with the chunk.
pub(crate) fn parse(
    b: &[u8],
    expected: usize,
    compressor: BloscCompressor,
    check: &StreamCheck<'_>,
) -> Result<Parsed, String> {
    if b.len() < HEADER {
        return Err(format!(
            "a {}-byte blosc frame is shorter than its {HEADER}-byte header",
            b.len()
        ));
    }
    let version = b[0];
    let h = Header {
        flags: b[2],
        typesize: b[3] as usize,
        nbytes: le32(b, 4),
        blocksize: le32(b, 8),
        cbytes: le32(b, 12),
    };
    let (flags, typesize, nbytes, blocksize, cbytes) =
        (h.flags, h.typesize, h.nbytes, h.blocksize, h.cbytes);
    if version != VERSION_FORMAT || flags & FLAG_RESERVED != 0 {
        // A format from another blosc version.
        return Ok(Parsed::Cpu);
    }
    if cbytes != b.len() {
        return Err(format!(
            "the blosc header declares {cbytes} compressed bytes, the chunk has {}",
            b.len()
        ));
    }
    if nbytes != expected {
        return Err(format!(
            "the blosc header declares {nbytes} decoded bytes, the chunk holds {expected}"
        ));
    }
    if typesize == 0 {
        return Err("the blosc header declares a type size of 0".into());
    }
    if flags & FLAG_MEMCPYED != 0 {
        return stored_frame(&h).map(Parsed::Device);
    }
    if nbytes == 0 {
        return Ok(Parsed::Device(BloscFrame {
            nbytes,
            typesize,
            blocksize,
            shuffle: None,
            streams: Vec::new(),
        }));
    }
    if blocksize == 0 || blocksize > nbytes {
        return Err(format!(
            "the blosc header declares blocks of {blocksize} bytes for {nbytes} decoded bytes"
        ));
    }
    match BloscCompressor::from_code(flags >> 5) {
        Some(c) if c == compressor => {}
        // Another compressor than the codec's.
        Some(_) => return Ok(Parsed::Cpu),
        None => return Err(format!("unknown blosc compressor code {}", flags >> 5)),
    }
    let streams = block_streams(b, &h, check)?;
    let shuffle = if flags & FLAG_SHUFFLE != 0 && typesize > 1 {
        Some(Shuffle::Byte)
    } else if flags & FLAG_BITSHUFFLE != 0 {
        Some(Shuffle::Bit)
    } else {
        None
    };
    Ok(Parsed::Device(BloscFrame {
        nbytes,
        typesize,
        blocksize,
        shuffle,
        streams,
    }))
}

/// A frame stored uncompressed (blosc's memcpyed flag): one stored stream after the header.
fn stored_frame(h: &Header) -> Result<BloscFrame, String> {
    let (nbytes, cbytes) = (h.nbytes, h.cbytes);
    if cbytes != HEADER + nbytes {
        return Err(format!(
            "a blosc frame stored uncompressed has {cbytes} bytes, not {} ({nbytes} and \
             the header)",
            HEADER + nbytes
        ));
    }
    Ok(BloscFrame {
        nbytes,
        typesize: h.typesize,
        blocksize: h.blocksize,
        shuffle: None,
        streams: vec![BloscStream {
            input: HEADER..HEADER + nbytes,
            output: 0..nbytes,
            stored: true,
        }],
    })
}

/// The streams of every block of a compressed frame, in order: each block starts where the
/// table of block starts says, after the previous block, and splits into one stream per
/// byte of the type (blosc's split) or stays one stream.
fn block_streams(
    b: &[u8],
    h: &Header,
    check: &StreamCheck<'_>,
) -> Result<Vec<BloscStream>, String> {
    let (typesize, nbytes, blocksize, cbytes) = (h.typesize, h.nbytes, h.blocksize, h.cbytes);
    let leftover = nbytes % blocksize;
    let nblocks = nbytes / blocksize + usize::from(leftover > 0);
    let starts_end = nblocks
        .checked_mul(4)
        .and_then(|n| n.checked_add(HEADER))
        .filter(|&end| end <= cbytes)
        .ok_or_else(|| {
            format!("the blosc frame's {nblocks} block starts do not fit its {cbytes} bytes")
        })?;
    let split_flag = h.flags & FLAG_DONT_SPLIT == 0;
    let mut streams = Vec::new();
    let mut previous_end = starts_end;
    for block in 0..nblocks {
        let last = block == nblocks - 1 && leftover > 0;
        let bsize = if last { leftover } else { blocksize };
        let nsplits = if split_flag
            && typesize <= MAX_SPLITS
            && bsize / typesize >= MIN_BUFFERSIZE
            && !last
        {
            typesize
        } else {
            1
        };
        if !bsize.is_multiple_of(nsplits) {
            return Err(format!(
                "blosc blocks of {bsize} bytes cannot split into {nsplits} streams (type size)"
            ));
        }
        let at = le32(b, HEADER + 4 * block);
        // Blocks follow one another: no stream may reuse another's bytes.
        if at < previous_end || at > cbytes {
            return Err(format!(
                "block {block} of the blosc frame starts at byte {at}, outside {previous_end}..{cbytes}"
            ));
        }
        let block = Block {
            index: block,
            start: at,
            nsplits,
            neblock: bsize / nsplits,
        };
        previous_end = split_streams(b, h, &block, check, &mut streams)?;
    }
    Ok(streams)
}

/// Appends the streams of `block` to `streams`, each checked (a compressed one by `check`);
/// returns where the block ends.
fn split_streams(
    b: &[u8],
    h: &Header,
    block: &Block,
    check: &StreamCheck<'_>,
    streams: &mut Vec<BloscStream>,
) -> Result<usize, String> {
    let (cbytes, neblock) = (h.cbytes, block.neblock);
    let (mut at, index) = (block.start, block.index);
    for split in 0..block.nsplits {
        if cbytes - at < 4 {
            return Err(format!(
                "the blosc frame ends inside the size of block {index}, stream {split}"
            ));
        }
        let csize = le32(b, at);
        at += 4;
        if csize == 0 || csize > cbytes - at {
            return Err(format!(
                "block {index}, stream {split} of the blosc frame declares {csize} bytes, \
                 {} remain",
                cbytes - at
            ));
        }
        let output = index * h.blocksize + split * neblock;
        let output = output..output + neblock;
        let stored = csize == neblock;
        let input = if stored {
            at..at + csize
        } else {
            let inner = check(&b[at..at + csize], neblock)
                .map_err(|why| format!("block {index}, stream {split}: {why}"))?;
            if inner.start > inner.end || inner.end > csize {
                return Err(format!(
                    "block {index}, stream {split}: a bad payload range"
                ));
            }
            at + inner.start..at + inner.end
        };
        streams.push(BloscStream {
            input,
            output,
            stored,
        });
        at += csize;
    }
    Ok(at)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::ffi::c_void;

    /// Compresses `data` with c-blosc itself (the library zarrs and numcodecs use).
    pub(crate) fn blosc_compress(
        data: &[u8],
        typesize: usize,
        shuffle: i32,
        cname: &str,
        blocksize: usize,
    ) -> Vec<u8> {
        let mut out = vec![0u8; data.len() + 16];
        let cname = std::ffi::CString::new(cname).unwrap();
        // SAFETY: the buffers are live and sized as c-blosc requires (dest = nbytes + 16).
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                5,
                shuffle,
                typesize,
                data.len(),
                data.as_ptr().cast::<c_void>(),
                out.as_mut_ptr().cast::<c_void>(),
                out.len(),
                cname.as_ptr(),
                blocksize,
                1,
            )
        };
        assert!(n > 0, "blosc_compress_ctx failed: {n}");
        out.truncate(n as usize);
        out
    }

    /// Decodes a parsed frame the way the device decoder does, on the CPU.
    fn decode(frame: &BloscFrame, b: &[u8], compressor: BloscCompressor) -> Vec<u8> {
        let mut shuffled = vec![0u8; frame.nbytes];
        for s in &frame.streams {
            let (input, out) = (&b[s.input.clone()], &mut shuffled[s.output.clone()]);
            if s.stored {
                out.copy_from_slice(input);
                continue;
            }
            let n = match compressor {
                BloscCompressor::Lz4 => lz4_flex::block::decompress_into(input, out).unwrap(),
                BloscCompressor::Zstd => zstd::zstd_safe::decompress(out, input).unwrap(),
                BloscCompressor::Zlib => {
                    let mut d = flate2::Decompress::new(false);
                    d.decompress(input, out, flate2::FlushDecompress::Finish)
                        .unwrap();
                    d.total_out() as usize
                }
                other => panic!("{other:?} is not a device compressor"),
            };
            assert_eq!(n, out.len());
        }
        match frame.shuffle {
            None => shuffled,
            Some(shuffle) => {
                let mut out = vec![0u8; frame.nbytes];
                zarrbuf_codecs::host::blosc_unshuffle(
                    &shuffled,
                    &mut out,
                    frame.nbytes,
                    shuffle,
                    frame.typesize,
                    frame.blocksize,
                )
                .unwrap();
                out
            }
        }
    }

    fn whole(b: &[u8], _decoded: usize) -> Result<Range<usize>, String> {
        Ok(0..b.len())
    }

    fn zlib_body(b: &[u8], _decoded: usize) -> Result<Range<usize>, String> {
        Ok(2..b.len() - 4)
    }

    fn sample(len: usize, seed: u64) -> Vec<u8> {
        // Compressible but not trivially: a slow ramp of floats with noise in the low bytes.
        let mut x = seed;
        (0..len / 4)
            .flat_map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((i as f32 * 0.01).sin() * 100.0 + (x % 7) as f32 * 1e-3).to_le_bytes()
            })
            .chain(std::iter::repeat_n(7u8, len % 4))
            .collect()
    }

    #[test]
    fn frames_written_by_c_blosc_decode_exactly_through_their_streams() {
        let mut cases = 0;
        for (cname, compressor) in [
            ("lz4", BloscCompressor::Lz4),
            ("lz4hc", BloscCompressor::Lz4),
            ("zstd", BloscCompressor::Zstd),
            ("zlib", BloscCompressor::Zlib),
        ] {
            for (typesize, shuffle) in [(4, 0), (4, 1), (4, 2), (8, 1), (2, 2), (1, 2), (3, 1)] {
                for (len, blocksize) in [(1 << 20, 0), (100_003, 0), (65_536, 4096), (1000, 0)] {
                    let data = sample(len, len as u64 + typesize as u64);
                    let b = blosc_compress(&data, typesize, shuffle, cname, blocksize);
                    let check: &StreamCheck<'_> = if compressor == BloscCompressor::Zlib {
                        &zlib_body
                    } else {
                        &whole
                    };
                    let frame = match parse(&b, len, compressor, check).unwrap() {
                        Parsed::Device(f) => f,
                        Parsed::Cpu => panic!("{cname}: left to the CPU"),
                    };
                    assert_eq!(
                        decode(&frame, &b, compressor),
                        data,
                        "{cname} typesize {typesize} shuffle {shuffle} len {len}"
                    );
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 112);
    }

    #[test]
    fn packed_streams_are_aligned_and_decode_the_same() {
        let data = sample(300_000, 5);
        for (cname, compressor) in [
            ("lz4", BloscCompressor::Lz4),
            ("zstd", BloscCompressor::Zstd),
        ] {
            let b = blosc_compress(&data, 4, 1, cname, 32_768);
            let Parsed::Device(mut frame) = parse(&b, data.len(), compressor, &whole).unwrap()
            else {
                panic!("not for the device")
            };
            let mut packed = vec![0u8; b.len() + STREAM_ALIGN * frame.streams.len()];
            let used = frame.pack_streams(&b, &mut packed).unwrap();
            assert!(used <= packed.len());
            for s in &frame.streams {
                assert_eq!(s.input.start % STREAM_ALIGN, 0);
            }
            assert_eq!(decode(&frame, &packed[..used], compressor), data);
            // Too little room: no packing.
            let Parsed::Device(mut again) = parse(&b, data.len(), compressor, &whole).unwrap()
            else {
                panic!("not for the device")
            };
            assert!(again.pack_streams(&b, &mut packed[..b.len() / 2]).is_none());
        }
    }

    #[test]
    fn incompressible_and_other_compressor_frames() {
        // Random bytes: c-blosc stores the chunk uncompressed (the memcpyed flag).
        let mut x = 1u64;
        let noise: Vec<u8> = (0..50_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        let b = blosc_compress(&noise, 4, 1, "lz4", 0);
        let Parsed::Device(frame) = parse(&b, noise.len(), BloscCompressor::Lz4, &whole).unwrap()
        else {
            panic!("not for the device")
        };
        assert_eq!(decode(&frame, &b, BloscCompressor::Lz4), noise);
        // A frame in another compressor than the read expects goes to the CPU.
        let data = sample(10_000, 3);
        let b = blosc_compress(&data, 4, 1, "blosclz", 0);
        assert!(matches!(
            parse(&b, data.len(), BloscCompressor::Lz4, &whole),
            Ok(Parsed::Cpu)
        ));
    }

    #[test]
    fn damaged_frames_are_refused_with_a_reason() {
        let data = sample(200_000, 9);
        let b = blosc_compress(&data, 4, 1, "lz4", 16_384);
        let parse_lz4 = |b: &[u8], n| parse(b, n, BloscCompressor::Lz4, &whole);
        assert!(parse_lz4(&b[..10], data.len()).is_err());
        assert!(parse_lz4(&b[..b.len() - 1], data.len()).is_err());
        assert!(parse_lz4(&b, data.len() + 4).is_err());
        let mut bad = b.clone();
        bad[HEADER..HEADER + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = parse_lz4(&bad, data.len()).unwrap_err();
        assert!(e.contains("block 0"), "{e}");
        let mut bad = b.clone();
        let first = le32(&b, HEADER);
        bad[first..first + 4].copy_from_slice(&(b.len() as u32).to_le_bytes());
        assert!(parse_lz4(&bad, data.len()).is_err());
        // Every truncation and every single damaged header or table byte: an error or a
        // frame whose streams stay inside the chunk and tile the decoded bytes.
        let nblocks = data.len().div_ceil(16_384);
        for cut in 0..b.len() {
            let _ = parse_lz4(&b[..cut], data.len());
        }
        for at in 0..HEADER + 4 * nblocks {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut bad = b.clone();
                bad[at] = v;
                if let Ok(Parsed::Device(f)) = parse_lz4(&bad, data.len()) {
                    let mut covered = 0;
                    for s in &f.streams {
                        assert!(s.input.end <= bad.len());
                        assert_eq!(s.output.start, covered);
                        covered = s.output.end;
                    }
                    assert_eq!(covered, f.nbytes);
                }
            }
        }
    }
}
