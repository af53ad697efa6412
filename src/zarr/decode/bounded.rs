//! Decompression bounded by the size a chunk decodes to: no decoder here ever produces, or
//! allocates for, more than its bound, whatever the compressed bytes claim.
//!
//! zlib, zstd and libarchive decode into a caller's buffer; zarrs' own codecs do not (they
//! inflate into a growing `Vec` and leave the size to be checked afterwards, so a 1.5 KB
//! bz2 chunk grew to gigabytes before its size was looked at). Every compressor zarrbuf
//! reads goes through here instead (see `plugins/codecs/bounded.rs`): with the exact decoded size
//! known (the usual case: a fixed-size data type), the output is allocated once at that
//! size and the decoder writes into it; with only an upper bound, the output grows as the
//! decoder produces and the decode stops one byte past the bound.

use std::io::Read;
use zarrs::array::BytesRepresentation;

/// How many bytes a decode may produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Exactly this many (the chunk's decoded size).
    Exact(usize),
    /// At most this many (an upper bound: a codec's output that a later codec shrinks, or a
    /// variable-length chunk capped by the memory limit).
    AtMost(usize),
}

impl Bound {
    /// The bound zarrs' decoded representation gives a decode: exact for a fixed size, the
    /// upper bound (at most the memory this process may still take) for a bounded one, and
    /// that memory for an unbounded one.
    pub(crate) fn of(rep: &BytesRepresentation) -> Result<Bound, String> {
        let room = || {
            crate::memory_limit::decode_room()
                .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        Ok(match rep {
            BytesRepresentation::FixedSize(n) => {
                Bound::Exact(usize::try_from(*n).map_err(|_| {
                    format!("a chunk of {n} bytes does not fit this machine's address space")
                })?)
            }
            BytesRepresentation::BoundedSize(n) => {
                Bound::AtMost(usize::try_from(*n).unwrap_or(usize::MAX).min(room()))
            }
            BytesRepresentation::UnboundedSize => Bound::AtMost(room()),
        })
    }

    /// The most bytes the decode may produce.
    pub(crate) fn limit(self) -> usize {
        match self {
            Bound::Exact(n) | Bound::AtMost(n) => n,
        }
    }

    /// Checks a size the data declares (a header's) against the bound.
    pub(crate) fn check_declared(self, what: &str, declared: u64) -> Result<(), String> {
        match self {
            Bound::Exact(n) if declared != n as u64 => Err(format!(
                "{what} declares {declared} decoded bytes, the chunk holds {n}"
            )),
            Bound::AtMost(n) if declared > n as u64 => Err(format!(
                "{what} declares {declared} decoded bytes, more than the {n} the chunk may hold"
            )),
            _ => Ok(()),
        }
    }

    /// Checks the size a decode produced against the bound.
    fn check_produced(self, produced: usize) -> Result<(), String> {
        match self {
            Bound::Exact(n) if produced != n => {
                Err(format!("decodes to {produced} bytes, the chunk holds {n}"))
            }
            _ => Ok(()),
        }
    }

    fn too_many(self) -> String {
        match self {
            Bound::Exact(n) => {
                format!("decodes to more than the chunk's {n} bytes (stopped there)")
            }
            Bound::AtMost(n) => {
                format!("decodes to more than the {n} bytes the chunk may hold (stopped there)")
            }
        }
    }
}

/// Outputs up to this size are allocated whole for an [`Bound::AtMost`] decode; larger bounds
/// (a memory limit, for variable-length chunks) grow the output as the decoder produces.
const PREALLOCATE_MAX: usize = 64 << 20;

/// The compressors decoded here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compressor {
    /// zstd frames (one or more, with or without a declared content size).
    Zstd,
    /// One gzip member.
    Gzip,
    /// One zlib stream.
    Zlib,
    /// bzip2 streams.
    Bz2,
}

impl Compressor {
    /// The name used in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Compressor::Zstd => "zstd",
            Compressor::Gzip => "gzip",
            Compressor::Zlib => "zlib",
            Compressor::Bz2 => "bz2",
        }
    }
}

/// Decodes `encoded` with `compressor` into at most `bound` bytes (exactly, for
/// [`Bound::Exact`]); `Err` says what is wrong, before more than the bound is produced.
pub(crate) fn decode(
    compressor: Compressor,
    encoded: &[u8],
    bound: Bound,
) -> Result<Vec<u8>, String> {
    let name = compressor.name();
    let out = match compressor {
        Compressor::Zstd => decode_zstd(encoded, bound),
        Compressor::Gzip => read_remade(|| Ok(flate2::read::GzDecoder::new(encoded)), bound),
        Compressor::Zlib => read_remade(|| Ok(flate2::read::ZlibDecoder::new(encoded)), bound),
        Compressor::Bz2 => read_remade(|| Ok(bzip2::read::BzDecoder::new(encoded)), bound),
    };
    out.map_err(|why| format!("{name}: {why}"))
}

/// zstd: frames that declare their content size are checked against the bound before
/// anything is allocated; then the frames decode into an output of the bound's size (zstd
/// stops with "Destination buffer is too small" rather than write past it), or, for large
/// upper bounds, stream into a growing output.
fn decode_zstd(encoded: &[u8], bound: Bound) -> Result<Vec<u8>, String> {
    if let Ok(Some(declared)) = zstd::zstd_safe::get_frame_content_size(encoded) {
        // The first frame alone may not exceed the bound (later frames add to it).
        if declared > bound.limit() as u64 {
            return Err(format!(
                "the frame header declares {declared} decoded bytes, more than the {} the \
                 chunk holds",
                bound.limit()
            ));
        }
    }
    if let Bound::AtMost(n) = bound
        && n > PREALLOCATE_MAX
    {
        return read_remade(|| zstd::stream::read::Decoder::with_buffer(encoded), bound);
    }
    // zstd writes into the spare capacity: the output is not zeroed first.
    let mut out = Vec::with_capacity(bound.limit());
    let n = zstd::zstd_safe::decompress(&mut out, encoded).map_err(|code| {
        let name = zstd::zstd_safe::get_error_name(code);
        if name.contains("too small") {
            bound.too_many()
        } else {
            name.to_string()
        }
    })?;
    bound.check_produced(n)?;
    out.truncate(n);
    Ok(out)
}

/// [`read_bounded`] for a decoder that can be made again (`make`). Under an upper bound
/// larger than [`PREALLOCATE_MAX`] (a variable-length chunk), an output that outgrows
/// `PREALLOCATE_MAX` is counted by a second decode and decoded a third time into an
/// allocation of exactly its size: a growing output's last reallocation touches twice the
/// output (a 1 GiB string chunk peaked at 2.6 GB), while this peaks at the output once.
/// Outputs up to `PREALLOCATE_MAX` (nearly every chunk) decode once.
pub(crate) fn read_remade<D: Read>(
    make: impl Fn() -> std::io::Result<D>,
    bound: Bound,
) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| e.to_string();
    let limit = match bound {
        Bound::AtMost(n) if n > PREALLOCATE_MAX => n,
        _ => return read_bounded(make().map_err(io)?, bound),
    };
    let mut out = Vec::with_capacity(PREALLOCATE_MAX);
    let mut decoder = make().map_err(io)?;
    (&mut decoder)
        .take(PREALLOCATE_MAX as u64)
        .read_to_end(&mut out)
        .map_err(io)?;
    if out.len() < PREALLOCATE_MAX || at_end(&mut decoder)? {
        return Ok(out);
    }
    drop((out, decoder));
    let total = std::io::copy(
        &mut make().map_err(io)?.take(limit as u64 + 1),
        &mut std::io::sink(),
    )
    .map_err(io)?;
    if total > limit as u64 {
        return Err(bound.too_many());
    }
    // `total` is at most `limit`, a usize.
    let mut exact = vec![0u8; usize::try_from(total).map_err(|e| e.to_string())?];
    make().map_err(io)?.read_exact(&mut exact).map_err(io)?;
    Ok(exact)
}

/// Whether `decoder` has nothing more to give.
fn at_end(decoder: &mut impl Read) -> Result<bool, String> {
    let mut one = [0u8; 1];
    loop {
        match decoder.read(&mut one) {
            Ok(0) => return Ok(true),
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Reads `decoder` to its end into an output of at most the bound's size: an exact bound
/// allocates the output once and fills it; the decoder may not produce one byte more.
pub(crate) fn read_bounded(mut decoder: impl Read, bound: Bound) -> Result<Vec<u8>, String> {
    let limit = bound.limit();
    let mut out = match bound {
        Bound::Exact(n) => vec![0u8; n],
        Bound::AtMost(n) if n <= PREALLOCATE_MAX => Vec::with_capacity(n),
        Bound::AtMost(_) => Vec::new(),
    };
    let produced = match bound {
        Bound::Exact(n) => {
            let mut filled = 0;
            while filled < n {
                match decoder.read(&mut out[filled..]) {
                    Ok(0) => break,
                    Ok(k) => filled += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            filled
        }
        Bound::AtMost(_) => (&mut decoder)
            .take(limit as u64)
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?,
    };
    if produced == limit {
        // Anything more is over the bound: one byte tells.
        let mut one = [0u8; 1];
        loop {
            match decoder.read(&mut one) {
                Ok(0) => break,
                Ok(_) => return Err(bound.too_many()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    bound.check_produced(produced)?;
    out.truncate(produced);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn compress(c: Compressor, data: &[u8]) -> Vec<u8> {
        match c {
            Compressor::Zstd => zstd::bulk::compress(data, 1).unwrap(),
            Compressor::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Compressor::Zlib => {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Compressor::Bz2 => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
        }
    }

    const ALL: [Compressor; 4] = [
        Compressor::Zstd,
        Compressor::Gzip,
        Compressor::Zlib,
        Compressor::Bz2,
    ];

    #[test]
    fn large_outputs_under_an_upper_bound_decode_into_their_exact_size() {
        // zstd only: the C library is optimised in debug builds, the Rust inflaters are not.
        let mut data = vec![0u8; PREALLOCATE_MAX + 12_345];
        data[PREALLOCATE_MAX + 7] = 9;
        let enc = compress(Compressor::Zstd, &data);
        let out = decode(Compressor::Zstd, &enc, Bound::AtMost(PREALLOCATE_MAX * 4)).unwrap();
        assert_eq!(out, data);
        assert_eq!(out.capacity(), data.len());
        // Without a declared content size the count pass finds the output too large.
        let mut ctx = zstd::zstd_safe::CCtx::create();
        let _ = ctx.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false));
        let mut nosize = vec![0u8; zstd::zstd_safe::compress_bound(data.len())];
        let n = ctx.compress2(&mut nosize[..], &data).unwrap();
        nosize.truncate(n);
        let err = decode(
            Compressor::Zstd,
            &nosize,
            Bound::AtMost(PREALLOCATE_MAX + 100),
        )
        .unwrap_err();
        assert!(err.contains("more than"), "{err}");
    }

    #[test]
    fn exact_bounds_take_only_the_exact_size() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for c in ALL {
            let enc = compress(c, &data);
            assert_eq!(decode(c, &enc, Bound::Exact(data.len())).unwrap(), data);
            assert_eq!(
                decode(c, &enc, Bound::AtMost(data.len() + 7)).unwrap(),
                data
            );
            let more = decode(c, &enc, Bound::Exact(data.len() - 1)).unwrap_err();
            assert!(more.contains("more than"), "{c:?}: {more}");
            let less = decode(c, &enc, Bound::Exact(data.len() + 1)).unwrap_err();
            assert!(less.contains("decodes to 10000 bytes"), "{c:?}: {less}");
            assert!(decode(c, &enc, Bound::AtMost(data.len() - 1)).is_err());
        }
    }

    #[test]
    fn a_zstd_stream_without_a_content_size_stops_at_the_bound() {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(&vec![0u8; 1 << 20]).unwrap();
        let enc = e.finish().unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&enc),
            Ok(None)
        ));
        let err = decode(Compressor::Zstd, &enc, Bound::Exact(1000)).unwrap_err();
        assert!(err.contains("more than the chunk's 1000 bytes"), "{err}");
        let err = decode(Compressor::Zstd, &enc, Bound::AtMost(PREALLOCATE_MAX + 1));
        assert_eq!(err.unwrap().len(), 1 << 20);
        let err = decode(Compressor::Zstd, &enc, Bound::AtMost(4096)).unwrap_err();
        assert!(err.contains("more than the 4096"), "{err}");
    }

    #[test]
    fn a_declared_content_size_over_the_bound_is_refused_before_decoding() {
        let enc = zstd::bulk::compress(&vec![0u8; 1 << 20], 1).unwrap();
        let err = decode(Compressor::Zstd, &enc, Bound::Exact(64)).unwrap_err();
        assert!(err.contains("declares 1048576 decoded bytes"), "{err}");
    }
}
