//! What numcodecs' whole-chunk filters (delta, quantize, astype, categorize) share: each
//! turns a whole chunk of the array's elements into a chunk of stored elements of another
//! type and back, after checking that it is configured for the array's data type.
//! [`ChunkFilter`] is what differs between them; [`chunk_filter_codec!`] writes the rest,
//! the zarrs array-to-array codec around it.

use std::borrow::Cow;
use zarrs::array::DataType;
use zarrs_codec::CodecError;

/// One whole-chunk filter: its data type check and its two conversions.
pub(super) trait ChunkFilter {
    /// Fails, naming both types, unless the filter is configured for `data_type` (the
    /// array's).
    fn check(&self, data_type: &DataType) -> Result<(), CodecError>;

    /// The data type of the stored elements.
    fn encoded_type(&self) -> DataType;

    /// A whole chunk of the array's elements, in memory order, as it is stored.
    fn encode_chunk(&self, chunk: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError>;

    /// A stored chunk back as the array's elements.
    fn decode_chunk(&self, chunk: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError>;
}

/// `ArrayToArrayCodecTraits` for a type that implements [`ChunkFilter`]: every entry checks
/// the data type first, and partial reads decode the whole chunk (the filters are not
/// element-wise, like delta, or a missing chunk must read as the fill value rather than as
/// the decoded encoded fill value).
macro_rules! chunk_filter_codec {
    ($codec:ty) => {
        impl zarrs_codec::ArrayToArrayCodecTraits for $codec {
            fn into_dyn(
                self: std::sync::Arc<Self>,
            ) -> std::sync::Arc<dyn zarrs_codec::ArrayToArrayCodecTraits> {
                self
            }

            super::whole_chunk::whole_chunk_partial_decoders!();

            fn encoded_data_type(
                &self,
                decoded_data_type: &zarrs::array::DataType,
            ) -> Result<zarrs::array::DataType, zarrs_codec::CodecError> {
                super::chunk_filter::ChunkFilter::check(self, decoded_data_type)?;
                Ok(super::chunk_filter::ChunkFilter::encoded_type(self))
            }

            fn encode<'a>(
                &self,
                bytes: zarrs::array::ArrayBytes<'a>,
                _shape: &[std::num::NonZeroU64],
                data_type: &zarrs::array::DataType,
                _fill_value: &zarrs::array::FillValue,
                _options: &zarrs_codec::CodecOptions,
            ) -> Result<zarrs::array::ArrayBytes<'a>, zarrs_codec::CodecError> {
                super::chunk_filter::ChunkFilter::check(self, data_type)?;
                let chunk = bytes.into_fixed()?;
                Ok(zarrs::array::ArrayBytes::from(
                    super::chunk_filter::ChunkFilter::encode_chunk(self, chunk)?,
                ))
            }

            fn decode<'a>(
                &self,
                bytes: zarrs::array::ArrayBytes<'a>,
                _shape: &[std::num::NonZeroU64],
                data_type: &zarrs::array::DataType,
                _fill_value: &zarrs::array::FillValue,
                _options: &zarrs_codec::CodecOptions,
            ) -> Result<zarrs::array::ArrayBytes<'a>, zarrs_codec::CodecError> {
                super::chunk_filter::ChunkFilter::check(self, data_type)?;
                let chunk = bytes.into_fixed()?;
                Ok(zarrs::array::ArrayBytes::from(
                    super::chunk_filter::ChunkFilter::decode_chunk(self, chunk)?,
                ))
            }
        }
    };
}
pub(super) use chunk_filter_codec;
