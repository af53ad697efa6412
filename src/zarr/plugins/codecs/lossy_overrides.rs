//! zarrs' own lossy filters — `fixedscaleoffset` (v2 id and v3 `numcodecs.fixedscaleoffset`)
//! and `bitround` (v3 `bitround`, `numcodecs.bitround`; the v2 id is zarrbuf's plugin, which
//! wraps it the same way) — with the whole-chunk partial decoder of [`super::whole_chunk`].
//!
//! zarrs reads part of a chunk that does not exist by decoding the encoded fill value, which
//! for a lossy filter is not the fill value (`fixedscaleoffset` with fill 1000.05 reads
//! 1000.0), while a whole-chunk read and zarr-python give the fill value. zarrs' compile-time
//! plugins cannot be replaced, so these wrappers go into zarrs' run-time codec registry,
//! which it consults first; [`register`] does that once per process (every zarrbuf `open`
//! calls it).

use std::num::NonZeroU64;
use std::sync::{Arc, Once};
use zarrs::array::codec::{
    BitroundCodec, BitroundCodecConfiguration, FixedScaleOffsetCodec,
    FixedScaleOffsetCodecConfiguration,
};
use zarrs::array::{ArrayBytes, ChunkShape, DataType, FillValue};
use zarrs_codec::{
    ArrayCodecTraits, ArrayToArrayCodecTraits, Codec, CodecError, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, RecommendedConcurrency,
};
use zarrs_metadata::v2::MetadataV2;
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// A zarrs array-to-array codec with the whole-chunk partial decoder.
#[derive(Debug)]
struct WholeChunk {
    inner: Arc<dyn ArrayToArrayCodecTraits>,
}

super::wrapper_codec_traits!(WholeChunk, as_any: inner);

impl ArrayCodecTraits for WholeChunk {
    fn recommended_concurrency(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(shape, data_type)
    }
}

impl ArrayToArrayCodecTraits for WholeChunk {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    super::whole_chunk::whole_chunk_partial_decoders!();

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.inner.encoded_data_type(decoded_data_type)
    }

    fn encoded_fill_value(
        &self,
        decoded_data_type: &DataType,
        decoded_fill_value: &FillValue,
    ) -> Result<FillValue, CodecError> {
        self.inner
            .encoded_fill_value(decoded_data_type, decoded_fill_value)
    }

    fn encoded_shape(&self, decoded_shape: &[NonZeroU64]) -> Result<ChunkShape, CodecError> {
        self.inner.encoded_shape(decoded_shape)
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.inner
            .encode(bytes, shape, data_type, fill_value, options)
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.inner
            .decode(bytes, shape, data_type, fill_value, options)
    }
}

/// `inner` with the whole-chunk partial decoder.
pub(crate) fn whole_chunk(inner: Arc<dyn ArrayToArrayCodecTraits>) -> Codec {
    Codec::ArrayToArray(Arc::new(WholeChunk { inner }))
}

fn fixedscaleoffset(
    c: Result<FixedScaleOffsetCodecConfiguration, Arc<serde_json::Error>>,
) -> Result<Codec, PluginCreateError> {
    Ok(whole_chunk(Arc::new(
        FixedScaleOffsetCodec::new_with_configuration(&c?)?,
    )))
}

fn bitround(
    c: Result<BitroundCodecConfiguration, Arc<serde_json::Error>>,
) -> Result<Codec, PluginCreateError> {
    Ok(whole_chunk(Arc::new(
        BitroundCodec::new_with_configuration(&c?)?,
    )))
}

/// Puts the wrapped codecs, and the bounded decoders of [`super::bounded`] and
/// [`super::bounded_pcodec`], into zarrs'
/// run-time registry (once per process). Arrays opened afterwards, by zarrbuf or by zarrs
/// directly, use them.
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        super::bounded::register();
        super::bounded_pcodec::register();
        super::super::dtypes::register_size_guard();
        // The handles unregister on request only; the plugins live for the process. v3
        // chains name the codecs; v2 arrays build their chains from v2 ids.
        let _ = zarrs_codec::register_codec_v3(CodecRuntimePluginV3::new(
            |name| name == "numcodecs.fixedscaleoffset",
            |m: &MetadataV3| fixedscaleoffset(m.to_typed_configuration()),
        ));
        let _ = zarrs_codec::register_codec_v3(CodecRuntimePluginV3::new(
            |name| matches!(name, "bitround" | "numcodecs.bitround"),
            |m: &MetadataV3| bitround(m.to_typed_configuration()),
        ));
        let _ = zarrs_codec::register_codec_v2(CodecRuntimePluginV2::new(
            |id| id == "fixedscaleoffset",
            |m: &MetadataV2| fixedscaleoffset(m.to_typed_configuration()),
        ));
    });
}
