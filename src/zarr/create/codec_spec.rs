//! The text form of a bytes-to-bytes codec chain, as `zarrbuf copy --codec` takes it.

use crate::errors::{Error, Result};
use std::sync::Arc;
use zarrs::array::BytesToBytesCodecTraits;
use zarrs::array::codec::{
    BloscCodec, BloscCompressor, BloscShuffleMode, Crc32cCodec, GzipCodec, ZstdCodec,
};

/// A chain of compressors and checksums for a destination array, parsed from text.
///
/// The text is `none`, or steps joined by `+`, applied in that order when encoding:
///
/// - `zstd[:LEVEL]` — zstd, level -7..=22 (default 3);
/// - `gzip[:LEVEL]` — gzip, level 0..=9 (default 5);
/// - `blosc[:CNAME[:CLEVEL[:SHUFFLE]]]` — blosc with `lz4` (default), `lz4hc`, `blosclz`,
///   `zstd`, `zlib` or `snappy`, level 0..=9 (default 5), `shuffle` (default), `bitshuffle`
///   or `noshuffle`;
/// - `crc32c` — a CRC-32C checksum appended to each chunk.
///
/// ```
/// use zarrbuf::CodecSpec;
/// let spec: CodecSpec = "zstd:1+crc32c".parse()?;
/// assert_eq!(spec.to_string(), "zstd:1+crc32c");
/// assert_eq!("none".parse::<CodecSpec>()?.to_string(), "none");
/// assert_eq!("blosc".parse::<CodecSpec>()?.to_string(), "blosc:lz4:5:shuffle");
/// assert!("zstd:99".parse::<CodecSpec>().is_err());
/// assert!("lzma".parse::<CodecSpec>().is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CodecSpec {
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Zstd(i32),
    Gzip(u32),
    Blosc {
        cname: &'static str,
        clevel: u8,
        shuffle: &'static str,
    },
    Crc32c,
}

const BLOSC_NAMES: [&str; 6] = ["lz4", "lz4hc", "blosclz", "zstd", "zlib", "snappy"];
const SHUFFLES: [&str; 3] = ["shuffle", "bitshuffle", "noshuffle"];

fn bad(text: &str, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "--codec {text:?}: {why}; write e.g. zstd:1, gzip:5, blosc:lz4:5:shuffle, crc32c, \
         zstd:3+crc32c or none"
    ))
}

impl std::str::FromStr for CodecSpec {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let t = text.trim().to_ascii_lowercase();
        if t == "none" {
            return Ok(CodecSpec::default());
        }
        if t.is_empty() {
            return Err(bad(text, "no codec given"));
        }
        let mut steps = Vec::new();
        for part in t.split('+') {
            let fields: Vec<&str> = part.trim().split(':').map(str::trim).collect();
            let level = |i: usize, default: i64, lo: i64, hi: i64| -> Result<i64> {
                match fields.get(i) {
                    None => Ok(default),
                    Some(s) => match s.parse::<i64>() {
                        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
                        _ => Err(bad(
                            text,
                            format!("{} level {s:?} is not an integer in {lo}..={hi}", fields[0]),
                        )),
                    },
                }
            };
            let max_fields = match fields[0] {
                "zstd" | "gzip" => 2,
                "blosc" => 4,
                _ => 1,
            };
            if fields.len() > max_fields {
                return Err(bad(text, format!("{part:?} has too many ':' fields")));
            }
            steps.push(match fields[0] {
                "zstd" => Step::Zstd(level(1, 3, -7, 22)? as i32),
                "gzip" => Step::Gzip(level(1, 5, 0, 9)? as u32),
                "blosc" => {
                    let cname = match fields.get(1) {
                        None => "lz4",
                        Some(c) => {
                            BLOSC_NAMES
                                .iter()
                                .copied()
                                .find(|n| n == c)
                                .ok_or_else(|| {
                                    bad(
                                        text,
                                        format!(
                                            "blosc compressor {c:?} is not one of {}",
                                            BLOSC_NAMES.join(", ")
                                        ),
                                    )
                                })?
                        }
                    };
                    let clevel = level(2, 5, 0, 9)? as u8;
                    let shuffle = match fields.get(3) {
                        None => "shuffle",
                        Some(s) => SHUFFLES.iter().copied().find(|n| n == s).ok_or_else(|| {
                            bad(
                                text,
                                format!(
                                    "blosc shuffle {s:?} is not one of {}",
                                    SHUFFLES.join(", ")
                                ),
                            )
                        })?,
                    };
                    Step::Blosc {
                        cname,
                        clevel,
                        shuffle,
                    }
                }
                "crc32c" => Step::Crc32c,
                "none" => return Err(bad(text, "none cannot be combined with other codecs")),
                other => {
                    return Err(bad(
                        text,
                        format!("unknown codec {other:?} (known: zstd, gzip, blosc, crc32c)"),
                    ));
                }
            });
        }
        Ok(CodecSpec { steps })
    }
}

impl std::fmt::Display for CodecSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.steps.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Zstd(l) => format!("zstd:{l}"),
                Step::Gzip(l) => format!("gzip:{l}"),
                Step::Blosc {
                    cname,
                    clevel,
                    shuffle,
                } => format!("blosc:{cname}:{clevel}:{shuffle}"),
                Step::Crc32c => "crc32c".into(),
            })
            .collect();
        f.write_str(&parts.join("+"))
    }
}

impl CodecSpec {
    /// zstd at `level` alone (as `"zstd:LEVEL"` parses, without the range check).
    pub(crate) fn zstd(level: i32) -> CodecSpec {
        CodecSpec {
            steps: vec![Step::Zstd(level)],
        }
    }

    /// Whether the chain is empty (`none`).
    ///
    /// ```
    /// assert!("none".parse::<zarrbuf::CodecSpec>()?.is_none());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn is_none(&self) -> bool {
        self.steps.is_empty()
    }

    /// The zarrs codecs, for elements of `element_size` bytes (blosc's shuffle unit).
    ///
    /// ```
    /// let codecs = "zstd:1+crc32c".parse::<zarrbuf::CodecSpec>()?.bytes_to_bytes_codecs(4)?;
    /// assert_eq!(codecs.len(), 2);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn bytes_to_bytes_codecs(
        &self,
        element_size: usize,
    ) -> Result<Vec<Arc<dyn BytesToBytesCodecTraits>>> {
        self.steps
            .iter()
            .map(|s| -> Result<Arc<dyn BytesToBytesCodecTraits>> {
                Ok(match s {
                    Step::Zstd(l) => Arc::new(ZstdCodec::new(*l, false)),
                    Step::Gzip(l) => Arc::new(
                        GzipCodec::new(*l).map_err(|e| bad(&self.to_string(), e.to_string()))?,
                    ),
                    Step::Blosc {
                        cname,
                        clevel,
                        shuffle,
                    } => {
                        let compressor = match *cname {
                            "lz4" => BloscCompressor::LZ4,
                            "lz4hc" => BloscCompressor::LZ4HC,
                            "blosclz" => BloscCompressor::BloscLZ,
                            "zstd" => BloscCompressor::Zstd,
                            "zlib" => BloscCompressor::Zlib,
                            _ => BloscCompressor::Snappy,
                        };
                        let mode = match *shuffle {
                            "shuffle" => BloscShuffleMode::Shuffle,
                            "bitshuffle" => BloscShuffleMode::BitShuffle,
                            _ => BloscShuffleMode::NoShuffle,
                        };
                        let level = (*clevel)
                            .try_into()
                            .map_err(|_| bad(&self.to_string(), "blosc level out of range"))?;
                        Arc::new(
                            BloscCodec::new(
                                compressor,
                                level,
                                None,
                                mode,
                                Some(element_size.max(1)),
                            )
                            .map_err(|e| bad(&self.to_string(), e.to_string()))?,
                        )
                    }
                    Step::Crc32c => Arc::new(Crc32cCodec::new()),
                })
            })
            .collect()
    }
}
