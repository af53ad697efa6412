//! The compression formats devices decode and encode in batches (nvCOMP's batched codecs,
//! and their host twins): plain values that the format layer (`zarr/`, which frames a zarr
//! codec's bytes around them) and the device layer (`device/`, which runs them) both name,
//! so that neither of the two imports the other.

/// A compression format devices decompress in batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    /// Zstandard frames (the `zstd` codec).
    Zstd,
    /// A raw DEFLATE stream (the body of the `gzip` and `zlib` codecs, framing removed).
    Deflate,
    /// One LZ4 block (the body of numcodecs' `lz4` codec, its 4-byte size header removed).
    Lz4,
}

impl Compression {
    /// The largest chunk nvCOMP decompresses in this format
    /// (`nvcomp{Zstd,Deflate,LZ4}DecompressionMaxAllowedChunkSize` in its headers: zstd
    /// 2 GiB − 1 bytes, DEFLATE and LZ4 4 GiB − 1); reads of larger chunks decode on the CPU.
    pub(crate) fn max_chunk_bytes(self) -> u64 {
        match self {
            Compression::Zstd => (1 << 31) - 1,
            Compression::Deflate | Compression::Lz4 => (1 << 32) - 1,
        }
    }

    /// nvCOMP's alignment for every buffer of a batched decompression in this format
    /// (`nvcomp*RequiredDecompressionAlignment` in its headers: zstd 8, LZ4 and DEFLATE 4).
    pub(crate) fn required_alignment(self) -> usize {
        match self {
            Compression::Zstd => 8,
            Compression::Deflate | Compression::Lz4 => 4,
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::Zstd => "zstd",
            Compression::Deflate => "deflate",
            Compression::Lz4 => "lz4",
        })
    }
}

/// A format devices compress in batches (nvCOMP 6's batched compressors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compressor {
    /// One zstd frame per chunk.
    Zstd,
    /// A raw DEFLATE stream (the body of a zlib stream).
    Deflate,
    /// One LZ4 block (the body of numcodecs' `lz4`).
    Lz4,
    /// A whole gzip member (RFC 1952), its CRC-32 computed on the device.
    Gzip,
}

impl std::fmt::Display for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compressor::Zstd => "zstd",
            Compressor::Deflate => "deflate",
            Compressor::Lz4 => "lz4",
            Compressor::Gzip => "gzip",
        })
    }
}

/// What one compression batch asks for: the format and the zarr codec's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CompressSettings {
    pub format: Compressor,
    /// The codec's level: zstd's level, gzip's or zlib's 0–9 (lz4 has none). nvCOMP's zstd
    /// compressor has no levels and ignores it; its DEFLATE and gzip compressors take the
    /// nearest of their algorithms ([`deflate_algorithm`]).
    pub level: i32,
}
