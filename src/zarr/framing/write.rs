//! The write side of device compression: which codec chains a device compresses, and the
//! framing the CPU puts around the bare compressed stream that comes back from it.
//!
//! The device (nvCOMP on CUDA, its host twin otherwise) produces a zstd frame, a whole gzip
//! member, a raw DEFLATE stream or one LZ4 block per chunk. The stored chunk is that in its
//! codec's framing:
//! - `zstd`: the frame as it is;
//! - `gzip`: the member as it is (nvCOMP 6 compresses gzip itself, CRC-32 included: its
//!   DEFLATE compressor takes chunks of at most 64 KiB, its gzip compressor any size);
//! - numcodecs `lz4`: the decoded size as a 4-byte little-endian integer, then the block;
//! - `zlib` (RFC 1950): two header bytes, the DEFLATE stream, Adler-32 of the uncompressed
//!   chunk, big-endian;
//!
//! then, when the chain ends with `crc32c`, the CRC-32C of those framed bytes, little-endian.
//! zlib's Adler-32 is summed on the device too, in pieces the CPU combines (the write
//! pipeline passes the result in): no chunk crosses back uncompressed.

use super::{DeviceCodec, Framing};
use crate::compression_formats::{CompressSettings, Compressor};
use std::sync::Arc;
use zarrs::array::{CodecChain, CodecMetadataOptions};

/// The compressor of a chain a device compresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteFraming {
    /// One zstd frame.
    Zstd,
    /// A gzip member.
    Gzip,
    /// A zlib stream.
    Zlib,
    /// numcodecs' `lz4`: a 4-byte size header, then one LZ4 block.
    Lz4,
}

impl WriteFraming {
    /// The decode side's name for the same framing.
    fn framing(self) -> Framing {
        match self {
            WriteFraming::Zstd => Framing::Zstd,
            WriteFraming::Gzip => Framing::Gzip,
            WriteFraming::Zlib => Framing::Zlib,
            WriteFraming::Lz4 => Framing::Lz4,
        }
    }
}

/// The bytes-to-bytes codecs of a chain a device compresses: one compressor (`zstd`,
/// `gzip`, `zlib`, numcodecs `lz4`), optionally followed by `crc32c`, and the compressor's
/// level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteCodec {
    pub framing: WriteFraming,
    pub crc32c: bool,
    /// zstd's level, gzip's or zlib's level (lz4: 0).
    pub level: i32,
}

impl WriteCodec {
    /// The device-compressible part of `chain`'s bytes-to-bytes codecs, or why the chain
    /// is compressed on the CPU. The chains are those the device decoder reads
    /// ([`DeviceCodec::of`]), except zstd with `checksum: true`: nvCOMP writes no zstd
    /// content checksums.
    pub(crate) fn of(chain: &Arc<CodecChain>) -> std::result::Result<Self, String> {
        let only = "the device compresses only one zstd, gzip, zlib or lz4 codec (optionally followed by crc32c)";
        let Some(DeviceCodec { framing, crc32c }) = DeviceCodec::of(chain) else {
            return Err(only.into());
        };
        let framing = match framing {
            Framing::Zstd => WriteFraming::Zstd,
            Framing::Gzip => WriteFraming::Gzip,
            Framing::Zlib => WriteFraming::Zlib,
            Framing::Lz4 => WriteFraming::Lz4,
            // The device decodes blosc frames; it does not write them.
            _ => return Err(only.into()),
        };
        let config = chain
            .bytes_to_bytes_codecs()
            .first()
            .and_then(|c| c.configuration_v3(&CodecMetadataOptions::default()));
        let field = |name: &str| config.as_ref().and_then(|c| c.get(name).cloned());
        if framing == WriteFraming::Zstd
            && field("checksum").and_then(|v| v.as_bool()) == Some(true)
        {
            return Err("the device writes no zstd content checksums (checksum: true)".into());
        }
        let level = match framing {
            WriteFraming::Lz4 => 0,
            _ => field("level")
                .and_then(|v| v.as_i64())
                .map(|l| l.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
                .unwrap_or(match framing {
                    WriteFraming::Zstd => 0,
                    _ => 6,
                }),
        };
        Ok(WriteCodec {
            framing,
            crc32c,
            level,
        })
    }

    /// What the device compresses each chunk with.
    pub(crate) fn settings(&self) -> CompressSettings {
        CompressSettings {
            format: match self.framing {
                WriteFraming::Zstd => Compressor::Zstd,
                WriteFraming::Gzip => Compressor::Gzip,
                WriteFraming::Zlib => Compressor::Deflate,
                WriteFraming::Lz4 => Compressor::Lz4,
            },
            level: self.level,
        }
    }

    /// Whether framing needs the Adler-32 of the uncompressed chunk (zlib).
    pub(crate) fn needs_adler32(&self) -> bool {
        self.framing == WriteFraming::Zlib
    }

    /// The stored chunk: `compressed` (the device's output for a chunk of
    /// `uncompressed_len` bytes) in the codec's framing; `adler32` is the uncompressed
    /// chunk's Adler-32 where [`Self::needs_adler32`], else ignored. `Err` says what is
    /// missing or does not fit.
    pub(crate) fn frame(
        &self,
        compressed: &[u8],
        uncompressed_len: usize,
        adler32: Option<u32>,
    ) -> std::result::Result<Vec<u8>, String> {
        let adler32 = match (self.needs_adler32(), adler32) {
            (true, None) => {
                return Err(format!(
                    "{} framing needs the Adler-32 of the {uncompressed_len}-byte chunk",
                    self.name()
                ));
            }
            (_, a) => a.unwrap_or(0),
        };
        let mut out = Vec::with_capacity(compressed.len() + 22);
        match self.framing {
            WriteFraming::Zstd | WriteFraming::Gzip => out.extend_from_slice(compressed),
            WriteFraming::Lz4 => {
                let size = u32::try_from(uncompressed_len).map_err(|_| {
                    format!("an lz4 chunk of {uncompressed_len} bytes does not fit numcodecs' 4-byte size header")
                })?;
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(compressed);
            }
            WriteFraming::Zlib => {
                // CMF 0x78 (DEFLATE, 32 KiB window); FLG with FLEVEL from the level and the
                // check bits that make CMF·256 + FLG a multiple of 31.
                let flevel: u8 = match self.level {
                    ..=1 => 0,
                    2..=5 => 1,
                    6 => 2,
                    _ => 3,
                };
                let cmf = 0x78u8;
                let flg_base = flevel << 6;
                let check = 31 - ((u16::from(cmf) * 256 + u16::from(flg_base)) % 31);
                let flg = flg_base | (check % 31) as u8;
                out.extend_from_slice(&[cmf, flg]);
                out.extend_from_slice(compressed);
                out.extend_from_slice(&adler32.to_be_bytes());
            }
        }
        if self.crc32c {
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Ok(out)
    }

    /// Whether a chunk of `len` bytes that compressed to `compressed` bytes may hold one
    /// repeated value (and so be the fill value). Such chunks compress far below this bound
    /// with every compressor that finds repeats (zstd: a few dozen bytes, lz4 and DEFLATE
    /// about `len / 255`); a compressor that compresses them less only means such a chunk is
    /// stored instead of erased.
    pub(crate) fn may_be_uniform(compressed: usize, len: usize) -> bool {
        compressed <= len / 64 + 64
    }

    /// Decodes a chunk framed by [`Self::frame`] into `out` (exactly the chunk's size) with
    /// the CPU decoders and every check the codecs define; returns the decoded size.
    pub(crate) fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Result<usize, String> {
        DeviceCodec {
            framing: self.framing.framing(),
            crc32c: self.crc32c,
        }
        .decode_into(encoded, out, true)
    }

    fn name(&self) -> &'static str {
        match self.framing {
            WriteFraming::Zstd => "zstd",
            WriteFraming::Gzip => "gzip",
            WriteFraming::Zlib => "zlib",
            WriteFraming::Lz4 => "lz4",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression_formats::CompressSettings;
    use std::io::Read;

    /// The Adler-32 the device computes (in pieces, combined on the host).
    fn adler(input: &[u8]) -> u32 {
        use zarrbuf_codecs::host::{adler32_combine, adler32_piece_count, adler32_pieces};
        let mut sums = vec![0u32; 2 * adler32_piece_count(input.len(), 4096)];
        adler32_pieces(input, input.len(), 4096, &mut sums).unwrap();
        let a = adler32_combine(&sums, input.len(), 4096);
        assert_eq!(a, adler2::adler32_slice(input));
        a
    }

    fn data() -> Vec<u8> {
        (0..50_000u32).flat_map(|i| (i / 5).to_le_bytes()).collect()
    }

    /// The host twin's bare stream for `codec`.
    fn bare(codec: &WriteCodec, input: &[u8]) -> Vec<u8> {
        let CompressSettings { format, level } = codec.settings();
        let mut c = match format {
            Compressor::Zstd => zstd::bulk::compress(input, level).unwrap(),
            Compressor::Lz4 => lz4_flex::block::compress(input),
            Compressor::Gzip => {
                let mut e =
                    flate2::read::GzEncoder::new(input, flate2::Compression::new(level as u32));
                let mut v = Vec::new();
                e.read_to_end(&mut v).unwrap();
                v
            }
            Compressor::Deflate => {
                let mut e = flate2::read::DeflateEncoder::new(
                    input,
                    flate2::Compression::new(level as u32),
                );
                let mut v = Vec::new();
                e.read_to_end(&mut v).unwrap();
                v
            }
        };
        c.shrink_to_fit();
        c
    }

    #[test]
    fn framed_chunks_decode_with_the_codecs_own_checks() {
        let input = data();
        for framing in [
            WriteFraming::Zstd,
            WriteFraming::Gzip,
            WriteFraming::Zlib,
            WriteFraming::Lz4,
        ] {
            for level in [1, 6, 9] {
                for crc32c in [false, true] {
                    let codec = WriteCodec {
                        framing,
                        crc32c,
                        level,
                    };
                    let framed = codec
                        .frame(&bare(&codec, &input), input.len(), Some(adler(&input)))
                        .unwrap();
                    let mut out = vec![0u8; input.len()];
                    let n = codec
                        .decode_into(&framed, &mut out)
                        .unwrap_or_else(|e| panic!("{framing:?} {level} {crc32c}: {e}"));
                    assert_eq!((n, &out), (input.len(), &input), "{framing:?}");
                }
            }
        }
    }

    #[test]
    fn chunks_of_one_value_compress_below_the_uniform_bound() {
        for len in [1000usize, 65536, 1 << 20] {
            let input = vec![7u8; len];
            for framing in [
                WriteFraming::Zstd,
                WriteFraming::Gzip,
                WriteFraming::Zlib,
                WriteFraming::Lz4,
            ] {
                let codec = WriteCodec {
                    framing,
                    crc32c: false,
                    level: 1,
                };
                let n = bare(&codec, &input).len();
                assert!(WriteCodec::may_be_uniform(n, len), "{framing:?} {len}: {n}");
            }
        }
        assert!(!WriteCodec::may_be_uniform(1 << 15, 1 << 20));
    }

    #[test]
    fn gzip_and_zlib_read_back_with_flate2() {
        let input = data();
        for framing in [WriteFraming::Gzip, WriteFraming::Zlib] {
            let codec = WriteCodec {
                framing,
                crc32c: false,
                level: 5,
            };
            let framed = codec
                .frame(&bare(&codec, &input), input.len(), Some(adler(&input)))
                .unwrap();
            let mut back = Vec::new();
            match framing {
                WriteFraming::Gzip => flate2::read::GzDecoder::new(&framed[..])
                    .read_to_end(&mut back)
                    .unwrap(),
                _ => flate2::read::ZlibDecoder::new(&framed[..])
                    .read_to_end(&mut back)
                    .unwrap(),
            };
            assert_eq!(back, input, "{framing:?}");
        }
    }

    #[test]
    fn zlib_framing_refuses_a_missing_adler32() {
        let codec = WriteCodec {
            framing: WriteFraming::Zlib,
            crc32c: false,
            level: 1,
        };
        let e = codec.frame(&[1, 2, 3], 100, None).unwrap_err();
        assert!(e.contains("Adler-32"), "{e}");
        // A wrong Adler-32 is caught by the reader: the checksum the device sums matters.
        let input = data();
        let framed = codec
            .frame(&bare(&codec, &input), input.len(), Some(adler(&input) ^ 1))
            .unwrap();
        let mut out = vec![0u8; input.len()];
        assert!(codec.decode_into(&framed, &mut out).is_err());
        let zstd = WriteCodec {
            framing: WriteFraming::Zstd,
            crc32c: true,
            level: 1,
        };
        assert_eq!(zstd.frame(&[1, 2, 3], 100, None).unwrap().len(), 7);
    }
}
