//! Batched compression on a device: what a device is asked to compress, the limits nvCOMP
//! sets on it, and the host twin of the GPU compressor.
//!
//! A compression batch uses the same [`super::BatchDesc`] as a decompression batch: input
//! pointers and sizes (the uncompressed chunks), output pointers and capacities (buffers of
//! [`super::DeviceOps::max_compressed_size`] bytes), and per chunk the compressed size and
//! a status. On the host device the same batch is compressed with the CPU compressors (the
//! zstd crate, flate2's raw DEFLATE, lz4_flex) into the same layout, so the write pipeline's
//! batching, result checks and error paths run in CI as they do on a GPU. The bytes that come
//! back are the bare compressed stream; the zarr codec's framing is added on the CPU
//! (`crate::zarr::WriteCodec`).

use super::batch::Compression;

/// What one compression batch asks for: the format and the zarr codec's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CompressSettings {
    pub format: Compression,
    /// The codec's level: zstd's level, gzip's or zlib's 0–9 (lz4 has none). nvCOMP's zstd
    /// compressor has no levels and ignores it; its DEFLATE compressor takes the nearest of
    /// its algorithms ([`deflate_algorithm`]).
    pub level: i32,
}

/// The largest chunk nvCOMP 6 compresses in `format` (from its headers:
/// `nvcomp{Zstd,Deflate,LZ4}CompressionMaxAllowedChunkSize`). The host twin keeps the same
/// limits so that a write plans alike on both.
pub(crate) fn max_chunk_bytes(format: Compression) -> usize {
    match format {
        Compression::Zstd => (1 << 31) - 1,
        Compression::Deflate => 1 << 31,
        Compression::Lz4 => 1 << 24,
    }
}

/// nvCOMP's DEFLATE algorithm for a zlib level: 1 (fast, its default) for levels up to 3,
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
pub(crate) fn host_max_compressed_size(format: Compression, len: usize) -> usize {
    match format {
        Compression::Zstd => zstd::zstd_safe::compress_bound(len),
        Compression::Lz4 => lz4_flex::block::get_maximum_output_size(len),
        Compression::Deflate => len + (len >> 12) + (len >> 14) + (len >> 25) + 64,
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
        Compression::Zstd => {
            zstd::zstd_safe::compress(&mut *out, input, settings.level).map_err(|code| {
                if zstd::zstd_safe::get_error_name(code).contains("Destination buffer") {
                    OUTPUT_TOO_SMALL
                } else {
                    CANNOT_COMPRESS
                }
            })
        }
        Compression::Deflate => {
            let level = flate2::Compression::new(settings.level.clamp(0, 9) as u32);
            let mut c = flate2::Compress::new(level, false);
            match c.compress(input, out, flate2::FlushCompress::Finish) {
                Ok(flate2::Status::StreamEnd) => Ok(c.total_out() as usize),
                Ok(_) => Err(OUTPUT_TOO_SMALL),
                Err(_) => Err(CANNOT_COMPRESS),
            }
        }
        Compression::Lz4 => lz4_flex::block::compress_into(input, out).map_err(|e| match e {
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
    use crate::device::batch::decode_on_host;

    fn data() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i / 7).to_le_bytes())
            .collect()
    }

    #[test]
    fn every_format_round_trips_through_the_host_twins() {
        let input = data();
        for format in [Compression::Zstd, Compression::Deflate, Compression::Lz4] {
            let settings = CompressSettings { format, level: 3 };
            let mut out = vec![0u8; host_max_compressed_size(format, input.len())];
            let n = compress_on_host(settings, &input, &mut out).unwrap();
            assert!(n < input.len() / 2, "{format} did not compress");
            let mut back = vec![0u8; input.len()];
            let m = decode_on_host(format, &out[..n], &mut back).unwrap();
            assert_eq!((m, &back), (input.len(), &input), "{format}");
        }
    }

    #[test]
    fn incompressible_chunks_fit_the_bound_and_small_outputs_are_reported() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for format in [Compression::Zstd, Compression::Deflate, Compression::Lz4] {
            let settings = CompressSettings { format, level: 9 };
            let mut out = vec![0u8; host_max_compressed_size(format, noise.len())];
            let n = compress_on_host(settings, &noise, &mut out).unwrap();
            assert!(n >= noise.len(), "{format}: noise compressed to {n}");
            let mut back = vec![0u8; noise.len()];
            decode_on_host(format, &out[..n], &mut back).unwrap();
            assert_eq!(back, noise, "{format}");
            let mut small = vec![0u8; noise.len() / 2];
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
