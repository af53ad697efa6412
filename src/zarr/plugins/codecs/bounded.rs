//! zarrs' decompressing codecs — `zstd`, `gzip`, `zlib`, `bz2`, `blosc`, `gdeflate`, under
//! their v2 ids and v3 names (`numcodecs.` ones included) — with a decoder bounded by the
//! chunk's decoded size.
//!
//! zarrs' own decoders inflate into a growing buffer and leave the size to be checked
//! afterwards, so a small damaged or hostile chunk could take gigabytes before it was found
//! out; zarrs' route for small reads also returned the bytes of a chunk that decoded to the
//! wrong size when only part of it was asked for. The wrappers here take zarrs' codec for
//! everything but decoding, and decode with [`crate::zarr::decode::bounded`] (or, for blosc
//! and gdeflate, check the decoded size their header declares first): the decoded
//! representation zarrs passes says how many bytes the chunk decodes to (exactly, for a
//! fixed-size data type; an upper bound where a later codec changes the size) and nothing
//! else is produced; a variable-length chunk is bounded by the memory this process may
//! still take. Partial decoding decodes the whole chunk, so that a subset of a damaged chunk
//! is an error too. They go into zarrs' run-time codec registry, which it consults before
//! its compile-time plugins, with the overrides of [`super::lossy_overrides`].

use crate::zarr::decode::bounded::{self as bounded_decode, Bound, Compressor};
use crate::zarr::framing::{blosc_decode_into, blosc_nbytes};
use std::borrow::Cow;
use std::sync::Arc;
use zarrs::array::{ArrayBytesRaw, BytesRepresentation};
use zarrs_codec::{
    BytesToBytesCodecTraits, Codec, CodecError, CodecOptions, CodecPluginV2, CodecPluginV3,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecSpecificOptions, RecommendedConcurrency,
};
use zarrs_metadata::v2::MetadataV2;
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// How a wrapped codec decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A stream decoder of [`bounded_decode`].
    Stream(Compressor),
    /// A blosc frame: its header's decoded size is checked, then c-blosc decodes into an
    /// output of that size.
    Blosc,
    /// zarrs' gdeflate: its header's decoded size and page count are checked first.
    GDeflate,
}

/// The kind of the codec named `name` (a v3 name or a v2 id), if it is wrapped.
fn kind_of(name: &str) -> Option<Kind> {
    Some(match name.trim_start_matches("numcodecs.") {
        "zstd" => Kind::Stream(Compressor::Zstd),
        "gzip" => Kind::Stream(Compressor::Gzip),
        "zlib" => Kind::Stream(Compressor::Zlib),
        "bz2" => Kind::Stream(Compressor::Bz2),
        "blosc" => Kind::Blosc,
        "zarrs.gdeflate" => Kind::GDeflate,
        _ => return None,
    })
}

/// A zarrs bytes-to-bytes codec with a bounded decoder.
#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn BytesToBytesCodecTraits>,
    kind: Kind,
}

// `as_any` is the wrapper's own type: nothing downcasts compressors, and it tells a wrapped
// codec from one zarrs built outside its registry (`is_unbounded_blosc`).
super::wrapper_codec_traits!(Bounded, as_any: self);

impl Bounded {
    fn decode_bounded(
        &self,
        encoded: &[u8],
        rep: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<Vec<u8>, CodecError> {
        let bound = Bound::of(rep).map_err(CodecError::Other)?;
        match self.kind {
            Kind::Stream(c) => bounded_decode::decode(c, encoded, bound).map_err(CodecError::Other),
            Kind::Blosc => {
                blosc(encoded, bound).map_err(|e| CodecError::Other(format!("blosc: {e}")))
            }
            Kind::GDeflate => {
                gdeflate_header(encoded, bound)
                    .map_err(|e| CodecError::Other(format!("gdeflate: {e}")))?;
                let out = self
                    .inner
                    .decode(Cow::Borrowed(encoded), rep, options)?
                    .into_owned();
                if let Bound::Exact(n) = bound
                    && out.len() != n
                {
                    return Err(CodecError::Other(format!(
                        "gdeflate: decodes to {} bytes, the chunk holds {n}",
                        out.len()
                    )));
                }
                Ok(out)
            }
        }
    }
}

/// Decodes a blosc frame after checking the size its header declares against `bound`.
fn blosc(frame: &[u8], bound: Bound) -> Result<Vec<u8>, String> {
    let nbytes = blosc_nbytes(frame)?;
    bound.check_declared("the blosc header", nbytes as u64)?;
    let mut out = vec![0u8; nbytes];
    let n = blosc_decode_into(frame, &mut out)?;
    if n != nbytes {
        return Err(format!(
            "decodes to {n} bytes, its header declares {nbytes}"
        ));
    }
    Ok(out)
}

/// zarrs' gdeflate header: the decoded size (u64 LE), the page count (u64 LE), then one
/// u64 per page; checked so that zarrs allocates neither more than `bound` nor an index
/// past the chunk's end.
fn gdeflate_header(encoded: &[u8], bound: Bound) -> Result<(), String> {
    let word = |at: usize| {
        encoded
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let (Some(decoded), Some(pages)) = (word(0), word(8)) else {
        return Err(format!(
            "a {}-byte chunk is too short for its 16-byte header",
            encoded.len()
        ));
    };
    bound.check_declared("the header", decoded)?;
    if pages.saturating_mul(8).saturating_add(16) > encoded.len() as u64 {
        return Err(format!(
            "the header lists {pages} pages, more than a {}-byte chunk holds",
            encoded.len()
        ));
    }
    Ok(())
}

impl BytesToBytesCodecTraits for Bounded {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn with_codec_specific_options(
        self: Arc<Self>,
        opts: &CodecSpecificOptions,
    ) -> Arc<dyn BytesToBytesCodecTraits> {
        Arc::new(Bounded {
            inner: self.inner.clone().with_codec_specific_options(opts),
            kind: self.kind,
        })
    }

    fn recommended_concurrency(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(decoded_representation)
    }

    fn encoded_representation(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        self.inner.encoded_representation(decoded_representation)
    }

    fn encode<'a>(
        &self,
        decoded_value: ArrayBytesRaw<'a>,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner.encode(decoded_value, options)
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.decode_bounded(&encoded_value, decoded_representation, options)
            .map(Cow::Owned)
    }
}

/// Whether `codec` is zarrs' blosc codec unwrapped: zarrs builds a v2 array's blosc
/// compressor itself, outside its registry, so [`register`] cannot bound it.
pub(crate) fn is_unbounded_blosc(codec: &dyn BytesToBytesCodecTraits) -> bool {
    codec.as_any().is::<zarrs::array::codec::BloscCodec>()
}

/// What the bounded blosc decoder checks before decoding, for a codec zarrs built outside
/// its registry ([`is_unbounded_blosc`]): the size the frame's header declares against the
/// size `rep` says it decodes to. Other codecs pass.
pub(crate) fn precheck(
    codec: &dyn BytesToBytesCodecTraits,
    encoded: &[u8],
    rep: &BytesRepresentation,
) -> Result<(), String> {
    if !is_unbounded_blosc(codec) {
        return Ok(());
    }
    let bound = Bound::of(rep)?;
    let nbytes = blosc_nbytes(encoded).map_err(|e| format!("blosc: {e}"))?;
    bound
        .check_declared("the blosc header", nbytes as u64)
        .map_err(|e| format!("blosc: {e}"))
}

/// Whether `chain` holds a codec zarrs would decode unbounded ([`is_unbounded_blosc`]);
/// such chunks are decoded by zarrbuf's own decoders (the staged pipeline) instead.
pub(crate) fn has_unbounded_codec(chain: &zarrs::array::CodecChain) -> bool {
    chain
        .bytes_to_bytes_codecs()
        .iter()
        .any(|c| is_unbounded_blosc(c.as_ref()))
}

/// [`precheck`] of a stored chunk of decoded `shape` under `chain`'s outermost
/// bytes-to-bytes codec (the one that decodes the stored bytes).
pub(crate) fn precheck_chunk(
    chain: &zarrs::array::CodecChain,
    shape: &[std::num::NonZeroU64],
    data_type: &zarrs::array::DataType,
    fill_value: &zarrs::array::FillValue,
    encoded: &[u8],
) -> Result<(), String> {
    let b2b = chain.bytes_to_bytes_codecs();
    let Some(last) = b2b.last() else {
        return Ok(());
    };
    // The representation the outermost codec decodes to: the chain's encoding without it.
    let (mut s, mut d, mut f) = (shape.to_vec(), data_type.clone(), fill_value.clone());
    for c in chain.array_to_array_codecs() {
        (s, d, f) = c
            .encoded_representation(&s, &d, &f)
            .map_err(|e| e.to_string())?;
    }
    let mut rep = chain
        .array_to_bytes_codec()
        .encoded_representation(&s, &d, &f)
        .map_err(|e| e.to_string())?;
    for c in &b2b[..b2b.len() - 1] {
        rep = c.encoded_representation(&rep);
    }
    precheck(last.as_ref(), encoded, &rep)
}

/// Wraps `codec` when it is a bytes-to-bytes codec of `kind`.
fn wrap(codec: Codec, kind: Kind) -> Codec {
    match codec {
        Codec::BytesToBytes(inner) => Codec::BytesToBytes(Arc::new(Bounded { inner, kind })),
        other => other,
    }
}

/// The codec zarrs' compile-time plugins make of v3 metadata, wrapped.
fn create_v3(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
    let name = metadata.name();
    let kind = kind_of(name).ok_or_else(|| PluginCreateError::Other(name.to_string()))?;
    for plugin in inventory::iter::<CodecPluginV3> {
        if plugin.match_name(name) {
            return plugin.create(metadata).map(|c| wrap(c, kind));
        }
    }
    Err(PluginCreateError::Other(format!(
        "no codec plugin for {name}"
    )))
}

/// The codec zarrs' compile-time plugins make of v2 metadata, wrapped.
fn create_v2(metadata: &MetadataV2) -> Result<Codec, PluginCreateError> {
    let id = metadata.id();
    let kind = kind_of(id).ok_or_else(|| PluginCreateError::Other(id.to_string()))?;
    for plugin in inventory::iter::<CodecPluginV2> {
        if plugin.match_name(id) {
            return plugin.create(metadata).map(|c| wrap(c, kind));
        }
    }
    Err(PluginCreateError::Other(format!(
        "no codec plugin for {id}"
    )))
}

/// Puts the bounded codecs into zarrs' run-time registry (called once per process by
/// [`super::lossy_overrides::register`]).
pub(crate) fn register() {
    // v3 names (zarrs' and numcodecs'); v2 arrays build their chains from v2 ids.
    let _ = zarrs_codec::register_codec_v3(CodecRuntimePluginV3::new(
        |name| {
            matches!(
                name,
                "zstd"
                    | "numcodecs.zstd"
                    | "gzip"
                    | "numcodecs.gzip"
                    | "numcodecs.zlib"
                    | "numcodecs.bz2"
                    | "blosc"
                    | "numcodecs.blosc"
                    | "zarrs.gdeflate"
            )
        },
        create_v3,
    ));
    let _ = zarrs_codec::register_codec_v2(CodecRuntimePluginV2::new(
        |id| matches!(id, "zstd" | "gzip" | "zlib" | "bz2" | "blosc"),
        create_v2,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_name_has_a_kind() {
        for name in [
            "zstd",
            "numcodecs.zstd",
            "gzip",
            "numcodecs.gzip",
            "numcodecs.zlib",
            "zlib",
            "numcodecs.bz2",
            "bz2",
            "blosc",
            "numcodecs.blosc",
            "zarrs.gdeflate",
        ] {
            assert!(kind_of(name).is_some(), "{name}");
        }
        assert_eq!(kind_of("crc32c"), None);
    }
}
