//! Batched compression on a device: what a device is asked to compress, the limits nvCOMP
//! sets on it, and the host twin of the GPU compressor.
//!
//! A compression batch uses the same [`super::BatchDesc`] as a decompression batch: input
//! pointers and sizes (the uncompressed chunks), output pointers and capacities (buffers of
//! [`super::DeviceOps::max_compressed_size`] bytes), and per chunk the compressed size and
//! a status. On the host device the same batch is compressed with the CPU compressors (the
//! zstd crate, flate2's raw DEFLATE and gzip, lz4_flex) into the same layout, so the write
//! pipeline's batching, result checks and error paths run in CI as they do on a GPU. The bytes
//! that come back are a zstd frame, a raw DEFLATE stream, an LZ4 block or a whole gzip member;
//! the rest of the zarr codec's framing is added on the CPU (`crate::zarr::WriteCodec`).

use crate::compression_formats::{CompressSettings, Compressor};

/// The largest chunk nvCOMP 6 compresses in `format`: the limits its headers give for the
/// chunks passed to `nvcompBatched*CompressAsync` (zstd "16 MB", taken as 16·10⁶ bytes;
/// DEFLATE 65536 bytes; LZ4 16777216 bytes), which are stricter than the
/// `*CompressionMaxAllowedChunkSize` constants beside them, and gzip's
/// `nvcompGzipCompressionMaxAllowedChunkSize`. Larger chunks are compressed on the CPU. The
/// host twin keeps the same limits so that a write plans alike on both.
pub(crate) fn max_chunk_bytes(format: Compressor) -> usize {
    match format {
        Compressor::Zstd => 16_000_000,
        Compressor::Deflate => 65_536,
        Compressor::Lz4 => 1 << 24,
        Compressor::Gzip => usize::try_from(0x7FFF_FFFFu64 << 15).unwrap_or(usize::MAX),
    }
}

/// nvCOMP's DEFLATE (and gzip) algorithm for a zlib level: 1 (fast, its default) for levels up to 3,
/// 2 (beats zlib level 1) up to 6, 4 (beats zlib level 6) above.
pub(crate) fn deflate_algorithm(level: i32) -> i32 {
    match level {
        ..=3 => 1,
        4..=6 => 2,
        _ => 4,
    }
}

/// The status the host twin reports for a chunk it could not compress
/// (nvCOMP's `nvcompErrorCannotCompress`).
pub(crate) const CANNOT_COMPRESS: i32 = 19;
/// The status for an output buffer too small for the compressed chunk
/// (nvCOMP's `nvcompErrorOutputBufferTooSmall`).
pub(crate) const OUTPUT_TOO_SMALL: i32 = 15;
/// The status for a chunk over [`max_chunk_bytes`] (nvCOMP's `nvcompErrorChunkSizeTooLarge`).
pub(crate) const CHUNK_TOO_LARGE: i32 = 18;

/// The output capacity the host twin needs for a chunk of `len` bytes: the CPU
/// compressors' own bounds (zstd's `ZSTD_compressBound`, lz4_flex's maximum output size, and
/// for raw DEFLATE zlib's `deflateBound` shape, which covers stored blocks).
pub(crate) fn host_max_compressed_size(format: Compressor, len: usize) -> usize {
    let deflate = len + (len >> 12) + (len >> 14) + (len >> 25) + 64;
    match format {
        Compressor::Zstd => zstd::zstd_safe::compress_bound(len),
        Compressor::Lz4 => lz4_flex::block::get_maximum_output_size(len),
        Compressor::Deflate => deflate,
        // Header and trailer.
        Compressor::Gzip => deflate + 18,
    }
}

/// A raw DEFLATE stream of `input` at `level` into `out`; its size, or a status.
fn deflate_into(level: i32, input: &[u8], out: &mut [u8]) -> std::result::Result<usize, i32> {
    let level = flate2::Compression::new(level.clamp(0, 9) as u32);
    let mut c = flate2::Compress::new(level, false);
    match c.compress(input, out, flate2::FlushCompress::Finish) {
        Ok(flate2::Status::StreamEnd) => Ok(c.total_out() as usize),
        Ok(_) => Err(OUTPUT_TOO_SMALL),
        Err(_) => Err(CANNOT_COMPRESS),
    }
}

/// Compresses one chunk on the CPU into `out`; returns the compressed size, or the nvCOMP
/// status code the GPU compressor would report.
pub(crate) fn compress_on_host(
    settings: CompressSettings,
    input: &[u8],
    out: &mut [u8],
) -> std::result::Result<usize, i32> {
    if input.len() > max_chunk_bytes(settings.format) {
        return Err(CHUNK_TOO_LARGE);
    }
    match settings.format {
        Compressor::Zstd => {
            zstd::zstd_safe::compress(&mut *out, input, settings.level).map_err(|code| {
                if zstd::zstd_safe::get_error_name(code).contains("Destination buffer") {
                    OUTPUT_TOO_SMALL
                } else {
                    CANNOT_COMPRESS
                }
            })
        }
        Compressor::Deflate => deflate_into(settings.level, input, out),
        Compressor::Gzip => {
            // RFC 1952: magic, DEFLATE, no flags, no time stamp, no extra flags, OS unknown;
            // the DEFLATE stream; CRC-32 and size (mod 2^32), little-endian.
            const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
            if out.len() < HEADER.len() + 8 {
                return Err(OUTPUT_TOO_SMALL);
            }
            out[..10].copy_from_slice(&HEADER);
            let body_room = out.len() - 8;
            let n = deflate_into(settings.level, input, &mut out[10..body_room])?;
            let end = 10 + n;
            out[end..end + 4].copy_from_slice(&crc32fast::hash(input).to_le_bytes());
            out[end + 4..end + 8].copy_from_slice(&(input.len() as u32).to_le_bytes());
            Ok(end + 8)
        }
        Compressor::Lz4 => lz4_flex::block::compress_into(input, out).map_err(|e| match e {
            lz4_flex::block::CompressError::OutputTooSmall => OUTPUT_TOO_SMALL,
            _ => CANNOT_COMPRESS,
        }),
    }
}

/// Describes a host twin compression status the way nvCOMP would.
pub(crate) fn describe_host_compress_status(status: i32) -> String {
    match status {
        CANNOT_COMPRESS => "cannot compress (host compressor)".into(),
        OUTPUT_TOO_SMALL => "output buffer too small (host compressor)".into(),
        CHUNK_TOO_LARGE => "chunk size too large (host compressor)".into(),
        other => format!("status {other} (host compressor)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression_formats::Compression;
    use crate::device::batch::decode_on_host;
    use std::io::Read;

    const ALL: [Compressor; 4] = [
        Compressor::Zstd,
        Compressor::Deflate,
        Compressor::Lz4,
        Compressor::Gzip,
    ];

    /// Decodes one chunk of `len` bytes compressed in `format` with the CPU decoders.
    fn decode(format: Compressor, compressed: &[u8], len: usize) -> Vec<u8> {
        let mut back = vec![0u8; len];
        let n = match format {
            Compressor::Zstd => decode_on_host(Compression::Zstd, compressed, &mut back),
            Compressor::Deflate => decode_on_host(Compression::Deflate, compressed, &mut back),
            Compressor::Lz4 => decode_on_host(Compression::Lz4, compressed, &mut back),
            Compressor::Gzip => {
                let mut v = Vec::new();
                flate2::read::GzDecoder::new(compressed)
                    .read_to_end(&mut v)
                    .unwrap();
                back = v;
                Ok(back.len())
            }
        }
        .unwrap();
        assert_eq!(n, len, "{format}");
        back
    }

    fn data() -> Vec<u8> {
        (0..16_000u32).flat_map(|i| (i / 7).to_le_bytes()).collect()
    }

    #[test]
    fn every_format_round_trips_through_the_host_twins() {
        let input = data();
        for format in ALL {
            let settings = CompressSettings { format, level: 3 };
            let mut out = vec![0u8; host_max_compressed_size(format, input.len())];
            let n = compress_on_host(settings, &input, &mut out).unwrap();
            assert!(n < input.len() / 2, "{format} did not compress");
            assert_eq!(decode(format, &out[..n], input.len()), input, "{format}");
        }
    }

    #[test]
    fn incompressible_chunks_fit_the_bound_and_small_outputs_are_reported() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let noise: Vec<u8> = (0..60_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for format in ALL {
            let settings = CompressSettings { format, level: 9 };
            let mut out = vec![0u8; host_max_compressed_size(format, noise.len())];
            let n = compress_on_host(settings, &noise, &mut out).unwrap();
            assert!(n >= noise.len(), "{format}: noise compressed to {n}");
            assert_eq!(decode(format, &out[..n], noise.len()), noise, "{format}");
            let mut small = vec![0u8; noise.len() / 2];
            // Chunks over the device's limit are refused as nvCOMP refuses them.
            let big = vec![0u8; max_chunk_bytes(format).min(1 << 26) + 1];
            if big.len() > max_chunk_bytes(format) {
                assert_eq!(
                    compress_on_host(settings, &big, &mut small),
                    Err(CHUNK_TOO_LARGE),
                    "{format}"
                );
            }
            assert_eq!(
                compress_on_host(settings, &noise, &mut small),
                Err(OUTPUT_TOO_SMALL),
                "{format}"
            );
        }
    }

    #[test]
    fn levels_map_onto_nvcomp_deflate_algorithms() {
        assert_eq!(deflate_algorithm(1), 1);
        assert_eq!(deflate_algorithm(5), 2);
        assert_eq!(deflate_algorithm(9), 4);
        assert_eq!(deflate_algorithm(-1), 1);
    }
}
