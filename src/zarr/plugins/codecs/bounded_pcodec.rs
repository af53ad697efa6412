//! zarrs' `pcodec` array-to-bytes codec (v2 id `pcodec`, v3 names `numcodecs.pcodec` and
//! `pcodec`) with a decoder bounded by the chunk's element count.
//!
//! zarrs decodes pcodec with `pco::standalone::simple_decompress`, which grows its output
//! across the file's pco chunks, each of whose headers may claim up to 2^24 numbers: a few
//! hundred hostile bytes could take gigabytes before the size was checked. The wrapper here
//! takes zarrs' codec for everything but decoding, and decodes with
//! `pco::standalone::simple_decompress_into` into a destination of exactly the chunk's
//! element count: a file holding more numbers, or fewer, is an error naming both sizes and
//! nothing past the chunk's size is ever produced. Partial decoding (zarrs' default for an
//! array-to-bytes codec) decodes the whole chunk through it. It goes into zarrs' run-time
//! codec registry with the bounded compressors of [`super::bounded`].

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::codec::{
    PcodecCodec, PcodecCodecConfiguration, PcodecDataTypeExt, PcodecElementType,
};
use zarrs::array::{ArrayBytes, ArrayBytesRaw, BytesRepresentation, DataType, FillValue};
use zarrs_codec::{
    ArrayCodecTraits, ArrayToBytesCodecTraits, Codec, CodecError, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecSpecificOptions, RecommendedConcurrency,
};
use zarrs_metadata::v2::MetadataV2;
use zarrs_metadata::v3::MetadataV3;
use zarrs_plugin::PluginCreateError;

/// zarrs' pcodec codec with a bounded decoder.
#[derive(Debug)]
struct BoundedPcodec {
    inner: Arc<PcodecCodec>,
}

super::wrapper_codec_traits!(BoundedPcodec, as_any: self);

impl ArrayCodecTraits for BoundedPcodec {
    fn recommended_concurrency(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(shape, data_type)
    }
}

/// Decodes the pco file `src` into exactly `n` numbers, or says how its size differs.
fn decode_exact<T: pco::data_types::Number>(src: &[u8], n: usize) -> Result<Vec<T>, String> {
    let mut dst = vec![T::default(); n];
    let progress =
        pco::standalone::simple_decompress_into(src, &mut dst).map_err(|e| e.to_string())?;
    let size = std::mem::size_of::<T>();
    if !progress.finished {
        return Err(format!(
            "decodes to more than the chunk's {n} numbers ({} decoded bytes, stopped there)",
            n * size
        ));
    }
    if progress.n_processed != n {
        return Err(format!(
            "decodes to {} bytes, the chunk holds {}",
            progress.n_processed * size,
            n * size
        ));
    }
    Ok(dst)
}

/// The numbers a chunk of `shape` and `data_type` holds in pco's terms (a complex element is
/// two).
fn numbers_in(shape: &[NonZeroU64], per_element: usize) -> Result<usize, CodecError> {
    shape
        .iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(d.get()))
        .and_then(|e| e.checked_mul(per_element as u64))
        .and_then(|e| usize::try_from(e).ok())
        .ok_or_else(|| {
            CodecError::Other(format!(
                "pcodec: a chunk of shape {shape:?} holds more numbers than this machine addresses"
            ))
        })
}

/// Decodes `bytes`, a pco file, into a chunk of `shape` and `data_type`: exactly its numbers.
fn decode_chunk(
    bytes: &[u8],
    shape: &[NonZeroU64],
    data_type: &DataType,
) -> Result<Vec<u8>, CodecError> {
    let pcodec = data_type.codec_pcodec()?;
    let n = numbers_in(shape, pcodec.pcodec_elements_per_element())?;
    macro_rules! exact {
        ($t:ty) => {
            decode_exact::<$t>(bytes, n).map(zarrs::array::transmute_to_bytes_vec::<$t>)
        };
    }
    match pcodec.pcodec_element_type() {
        PcodecElementType::U16 => exact!(u16),
        PcodecElementType::U32 => exact!(u32),
        PcodecElementType::U64 => exact!(u64),
        PcodecElementType::I16 => exact!(i16),
        PcodecElementType::I32 => exact!(i32),
        PcodecElementType::I64 => exact!(i64),
        PcodecElementType::F16 => exact!(half::f16),
        PcodecElementType::F32 => exact!(f32),
        PcodecElementType::F64 => exact!(f64),
    }
    .map_err(|e| CodecError::Other(format!("pcodec: {e}")))
}

impl ArrayToBytesCodecTraits for BoundedPcodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToBytesCodecTraits> {
        self
    }

    fn with_codec_specific_options(
        self: Arc<Self>,
        _opts: &CodecSpecificOptions,
    ) -> Arc<dyn ArrayToBytesCodecTraits> {
        // pcodec has no codec-specific options: zarrs' codec returns itself.
        self
    }

    fn encoded_representation(
        &self,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<BytesRepresentation, CodecError> {
        self.inner
            .encoded_representation(shape, data_type, fill_value)
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner
            .encode(bytes, shape, data_type, fill_value, options)
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytesRaw<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        decode_chunk(&bytes, shape, data_type).map(|b| ArrayBytes::from(Cow::Owned(b)))
    }
}

/// zarrs' pcodec codec of `configuration`, wrapped.
fn create(
    configuration: Result<PcodecCodecConfiguration, impl Into<PluginCreateError>>,
) -> Result<Codec, PluginCreateError> {
    let configuration = configuration.map_err(Into::into)?;
    let inner = Arc::new(PcodecCodec::new_with_configuration(&configuration)?);
    Ok(Codec::ArrayToBytes(Arc::new(BoundedPcodec { inner })))
}

/// Puts the bounded pcodec into zarrs' run-time registry (called once per process by
/// [`super::lossy_overrides::register`]).
pub(crate) fn register() {
    let _ = zarrs_codec::register_codec_v3(CodecRuntimePluginV3::new(
        |name| {
            matches!(
                name,
                "numcodecs.pcodec" | "pcodec" | "https://codec.zarrs.dev/array_to_bytes/pcodec"
            )
        },
        |m: &MetadataV3| create(m.to_typed_configuration()),
    ));
    let _ = zarrs_codec::register_codec_v2(CodecRuntimePluginV2::new(
        |id| id == "pcodec",
        |m: &MetadataV2| create(m.to_typed_configuration()),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(n: u64) -> Vec<NonZeroU64> {
        vec![NonZeroU64::new(n).unwrap()]
    }

    #[test]
    fn a_file_of_the_chunks_size_decodes_exactly() {
        let data: Vec<f32> = (0..300).map(|i| i as f32 * 0.5).collect();
        let file = pco::standalone::simple_compress(&data, &pco::ChunkConfig::default()).unwrap();
        let out = decode_chunk(&file, &shape(300), &zarrs::array::data_type::float32()).unwrap();
        assert_eq!(out, zarrs::array::transmute_to_bytes_vec(data));
    }

    #[test]
    fn more_or_fewer_numbers_than_the_chunk_holds_are_errors_naming_the_size() {
        let data = vec![3u16; 1000];
        let file = pco::standalone::simple_compress(&data, &pco::ChunkConfig::default()).unwrap();
        let dt = zarrs::array::data_type::uint16();
        let more = decode_chunk(&file, &shape(256), &dt)
            .unwrap_err()
            .to_string();
        assert!(
            more.contains("decodes to more than the chunk's 256 numbers (512 decoded bytes"),
            "{more}"
        );
        let fewer = decode_chunk(&file, &shape(1001), &dt)
            .unwrap_err()
            .to_string();
        assert!(
            fewer.contains("decodes to 2000 bytes, the chunk holds 2002"),
            "{fewer}"
        );
        // One number more than the file, in a chunk whose size is a batch multiple.
        let exact = decode_chunk(&file, &shape(1000), &dt).unwrap();
        assert_eq!(exact.len(), 2000);
    }
}
