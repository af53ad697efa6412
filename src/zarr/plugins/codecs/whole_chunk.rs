//! The partial decoder of every filter here. zarrs' default array-to-array partial decoder
//! decodes only the requested elements, and a chunk that does not exist as the encoded fill
//! value decoded: wrong for filters that are not element-wise (`delta`, `packbits`), and for
//! lossy ones (`quantize`, `astype`, `cast_value`, ...) whose encoded fill does not decode
//! back to the fill value. This one reads a missing chunk as the fill value, as a whole-chunk
//! read does, and otherwise decodes the whole chunk and extracts the request.

use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::{ArrayBytes, ArraySubset, DataType, FillValue, Indexer};
use zarrs::storage::StorageError;
use zarrs_codec::{
    ArrayPartialDecoderTraits, ArrayToArrayCodecTraits, AsyncArrayPartialDecoderTraits, CodecError,
    CodecOptions,
};

/// The decoded chunk's representation and the codec's encoded shape.
#[derive(Clone, Debug)]
struct Shapes {
    decoded: Vec<NonZeroU64>,
    encoded: Vec<u64>,
    data_type: DataType,
    fill_value: FillValue,
}

impl Shapes {
    fn new(
        codec: &dyn ArrayToArrayCodecTraits,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<Self, CodecError> {
        Ok(Shapes {
            decoded: shape.to_vec(),
            encoded: codec
                .encoded_shape(shape)?
                .iter()
                .map(|n| n.get())
                .collect(),
            data_type: data_type.clone(),
            fill_value: fill_value.clone(),
        })
    }

    fn decoded_u64(&self) -> Vec<u64> {
        self.decoded.iter().map(|n| n.get()).collect()
    }

    /// The fill value for `indexer`: what a chunk that does not exist reads as.
    fn fill(&self, indexer: &dyn Indexer) -> Result<ArrayBytes<'static>, CodecError> {
        Ok(ArrayBytes::new_fill_value(
            &self.data_type,
            indexer.len(),
            &self.fill_value,
        )?)
    }

    /// Decodes the whole encoded chunk and extracts `indexer` from it.
    fn finish(
        &self,
        codec: &dyn ArrayToArrayCodecTraits,
        encoded: ArrayBytes<'_>,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'static>, CodecError> {
        let decoded = codec.decode(
            encoded,
            &self.decoded,
            &self.data_type,
            &self.fill_value,
            options,
        )?;
        Ok(decoded
            .extract_array_subset(indexer, &self.decoded_u64(), &self.data_type)?
            .into_owned())
    }
}

/// Sync partial decoder: whole chunk in, requested elements out.
pub(crate) struct WholeChunkDecoder {
    input: Arc<dyn ArrayPartialDecoderTraits>,
    codec: Arc<dyn ArrayToArrayCodecTraits>,
    shapes: Shapes,
}

impl WholeChunkDecoder {
    /// A decoder of `codec` over `input` for chunks of decoded `shape`.
    pub(crate) fn shared(
        codec: Arc<dyn ArrayToArrayCodecTraits>,
        input: Arc<dyn ArrayPartialDecoderTraits>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<Arc<dyn ArrayPartialDecoderTraits>, CodecError> {
        let shapes = Shapes::new(codec.as_ref(), shape, data_type, fill_value)?;
        Ok(Arc::new(WholeChunkDecoder {
            input,
            codec,
            shapes,
        }))
    }
}

impl ArrayPartialDecoderTraits for WholeChunkDecoder {
    fn data_type(&self) -> &DataType {
        &self.shapes.data_type
    }

    fn exists(&self) -> Result<bool, StorageError> {
        self.input.exists()
    }

    fn size_held(&self) -> usize {
        self.input.size_held()
    }

    fn partial_decode(
        &self,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'_>, CodecError> {
        // A missing chunk reads as the fill value; decoding the encoded fill would not give
        // it back for codecs that are not element-wise.
        if !self.input.exists()? {
            return self.shapes.fill(indexer);
        }
        let all = ArraySubset::new_with_shape(self.shapes.encoded.clone());
        let encoded = self.input.partial_decode(&all, options)?;
        self.shapes
            .finish(self.codec.as_ref(), encoded, indexer, options)
    }

    fn supports_partial_decode(&self) -> bool {
        false
    }
}

/// Async partial decoder: whole chunk in, requested elements out.
pub(crate) struct AsyncWholeChunkDecoder {
    input: Arc<dyn AsyncArrayPartialDecoderTraits>,
    codec: Arc<dyn ArrayToArrayCodecTraits>,
    shapes: Shapes,
}

impl AsyncWholeChunkDecoder {
    /// A decoder of `codec` over `input` for chunks of decoded `shape`.
    pub(crate) fn shared(
        codec: Arc<dyn ArrayToArrayCodecTraits>,
        input: Arc<dyn AsyncArrayPartialDecoderTraits>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
    ) -> Result<Arc<dyn AsyncArrayPartialDecoderTraits>, CodecError> {
        let shapes = Shapes::new(codec.as_ref(), shape, data_type, fill_value)?;
        Ok(Arc::new(AsyncWholeChunkDecoder {
            input,
            codec,
            shapes,
        }))
    }
}

#[async_trait::async_trait]
impl AsyncArrayPartialDecoderTraits for AsyncWholeChunkDecoder {
    fn data_type(&self) -> &DataType {
        &self.shapes.data_type
    }

    async fn exists(&self) -> Result<bool, StorageError> {
        self.input.exists().await
    }

    fn size_held(&self) -> usize {
        self.input.size_held()
    }

    async fn partial_decode<'a>(
        &'a self,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        if !self.input.exists().await? {
            return self.shapes.fill(indexer);
        }
        let all = ArraySubset::new_with_shape(self.shapes.encoded.clone());
        let encoded = self.input.partial_decode(&all, options).await?;
        self.shapes
            .finish(self.codec.as_ref(), encoded, indexer, options)
    }

    fn supports_partial_decode(&self) -> bool {
        false
    }
}

/// Overrides an array-to-array codec's partial decoders (sync and async) with the
/// whole-chunk ones; use inside `impl ArrayToArrayCodecTraits`.
macro_rules! whole_chunk_partial_decoders {
    () => {
        fn partial_decoder(
            self: std::sync::Arc<Self>,
            input_handle: std::sync::Arc<dyn zarrs_codec::ArrayPartialDecoderTraits>,
            shape: &[std::num::NonZeroU64],
            data_type: &zarrs::array::DataType,
            fill_value: &zarrs::array::FillValue,
            _options: &zarrs_codec::CodecOptions,
        ) -> Result<
            std::sync::Arc<dyn zarrs_codec::ArrayPartialDecoderTraits>,
            zarrs_codec::CodecError,
        > {
            $crate::zarr::plugins::codecs::whole_chunk::WholeChunkDecoder::shared(
                self,
                input_handle,
                shape,
                data_type,
                fill_value,
            )
        }

        fn async_partial_decoder<'life0, 'life1, 'life2, 'life3, 'async_trait>(
            self: std::sync::Arc<Self>,
            input_handle: std::sync::Arc<dyn zarrs_codec::AsyncArrayPartialDecoderTraits>,
            shape: &'life0 [std::num::NonZeroU64],
            data_type: &'life1 zarrs::array::DataType,
            fill_value: &'life2 zarrs::array::FillValue,
            _options: &'life3 zarrs_codec::CodecOptions,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<
                        Output = Result<
                            std::sync::Arc<dyn zarrs_codec::AsyncArrayPartialDecoderTraits>,
                            zarrs_codec::CodecError,
                        >,
                    > + Send
                    + 'async_trait,
            >,
        >
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            'life2: 'async_trait,
            'life3: 'async_trait,
            Self: 'async_trait,
        {
            let made = $crate::zarr::plugins::codecs::whole_chunk::AsyncWholeChunkDecoder::shared(
                self,
                input_handle,
                shape,
                data_type,
                fill_value,
            );
            Box::pin(async move { made })
        }
    };
}
pub(crate) use whole_chunk_partial_decoders;
