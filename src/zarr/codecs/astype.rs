//! numcodecs' `AsType` filter: v2 id `astype`, v3 name `numcodecs.astype`.
//!
//! Elements of `decode_dtype` (the array's type) are stored converted to `encode_dtype`
//! (numpy `astype`: integers wrap, floats round to nearest, floats to integers truncate).

use super::numpy_dtype::{NumpyDtype, convert, swap_in_place};
use super::{Config, array_codec_traits, codec_traits, dtype_field, register_codec, wrong_type};
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs_codec::{ArrayToArrayCodecTraits, CodecError, CodecOptions};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs AsType codec.
#[derive(Clone, Debug)]
pub(crate) struct AsTypeCodec {
    config: Config,
    encode_dtype: NumpyDtype,
    decode_dtype: NumpyDtype,
    swap: bool,
}

zarrs_plugin::impl_extension_aliases!(AsTypeCodec, v3: "numcodecs.astype", [], v2: "astype", []);
register_codec!(AsTypeCodec, ArrayToArray, v2 + v3);
codec_traits!(AsTypeCodec);
array_codec_traits!(AsTypeCodec);

impl AsTypeCodec {
    fn new(config: Config, version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let encode_dtype = dtype_field("astype", &config, "encode_dtype")?;
        let decode_dtype = dtype_field("astype", &config, "decode_dtype")?;
        let swap = version == ZarrVersion::V2
            && encode_dtype.scalar.size() > 1
            && encode_dtype.big_endian != decode_dtype.big_endian;
        Ok(AsTypeCodec {
            config,
            encode_dtype,
            decode_dtype,
            swap,
        })
    }

    fn check(&self, data_type: &DataType) -> Result<(), CodecError> {
        if *data_type != self.decode_dtype.scalar.zarrs() {
            let want = format!("{:?}", self.decode_dtype.scalar);
            return Err(wrong_type("numcodecs.astype", &want, data_type));
        }
        Ok(())
    }
}

impl ArrayToArrayCodecTraits for AsTypeCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    // A missing chunk must read as the fill value, not as the decoded encoded fill.
    super::whole_chunk::whole_chunk_partial_decoders!();

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.check(decoded_data_type)?;
        Ok(self.encode_dtype.scalar.zarrs())
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.check(data_type)?;
        let b = bytes.into_fixed()?;
        let mut out = convert(&b, self.decode_dtype.scalar, self.encode_dtype.scalar);
        if self.swap {
            swap_in_place(&mut out, self.encode_dtype.scalar.size());
        }
        Ok(ArrayBytes::from(out))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.check(data_type)?;
        let mut b = bytes.into_fixed()?.into_owned();
        if self.swap {
            swap_in_place(&mut b, self.encode_dtype.scalar.size());
        }
        Ok(ArrayBytes::from(convert(
            &b,
            self.encode_dtype.scalar,
            self.decode_dtype.scalar,
        )))
    }
}
