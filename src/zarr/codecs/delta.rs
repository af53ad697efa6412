//! numcodecs' `Delta` filter: v2 id `delta`, v3 name `numcodecs.delta`.
//!
//! The chunk, flattened in memory order, is stored as its first element followed by the
//! differences of neighbours, computed in `dtype` (integers wrap) and cast to `astype`
//! (default: `dtype`). Decoding is the running sum, accumulated in `dtype`.

use super::arith::{cumsum_in_place, diff_in_place};
use super::numpy_dtype::{NumpyDtype, convert, swap_in_place};
use super::{
    Config, array_codec_traits, bad_config, codec_traits, dtype_field, field, register_codec,
    wrong_type,
};
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs_codec::{ArrayToArrayCodecTraits, CodecError, CodecOptions};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs Delta codec.
#[derive(Clone, Debug)]
pub(crate) struct DeltaCodec {
    config: Config,
    dtype: NumpyDtype,
    astype: NumpyDtype,
    /// v2 only: the stored bytes are in `astype`'s byte order, which the `bytes` step (in
    /// `dtype`'s order) does not know; swap here when the two differ.
    swap: bool,
}

zarrs_plugin::impl_extension_aliases!(DeltaCodec, v3: "numcodecs.delta", [], v2: "delta", []);
register_codec!(DeltaCodec, ArrayToArray, v2 + v3);
codec_traits!(DeltaCodec);
array_codec_traits!(DeltaCodec);

impl DeltaCodec {
    fn new(config: Config, version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let dtype = dtype_field("delta", &config, "dtype")?;
        let astype = match field(&config, "astype") {
            None => dtype.clone(),
            Some(_) => dtype_field("delta", &config, "astype")?,
        };
        if dtype.scalar == super::Scalar::Bool || astype.scalar == super::Scalar::Bool {
            return Err(bad_config("delta", "booleans have no differences"));
        }
        let swap = version == ZarrVersion::V2
            && astype.scalar.size() > 1
            && dtype.big_endian != astype.big_endian;
        Ok(DeltaCodec {
            config,
            dtype,
            astype,
            swap,
        })
    }

    fn check(&self, data_type: &DataType) -> Result<(), CodecError> {
        if *data_type != self.dtype.scalar.zarrs() {
            return Err(wrong_type(
                "numcodecs.delta",
                &format!("{:?}", self.dtype.scalar),
                data_type,
            ));
        }
        Ok(())
    }
}

impl ArrayToArrayCodecTraits for DeltaCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    // Not element-wise: a partial read needs the whole chunk.
    super::whole_chunk::whole_chunk_partial_decoders!();

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.check(decoded_data_type)?;
        Ok(self.astype.scalar.zarrs())
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
        let mut b = bytes.into_fixed()?.into_owned();
        diff_in_place(&mut b, self.dtype.scalar).map_err(CodecError::Other)?;
        let mut out = convert(&b, self.dtype.scalar, self.astype.scalar);
        if self.swap {
            swap_in_place(&mut out, self.astype.scalar.size());
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
            swap_in_place(&mut b, self.astype.scalar.size());
        }
        let mut out = convert(&b, self.astype.scalar, self.dtype.scalar);
        cumsum_in_place(&mut out, self.dtype.scalar).map_err(CodecError::Other)?;
        Ok(ArrayBytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrs::array::data_type;

    #[test]
    fn matches_numcodecs_with_a_narrower_astype() {
        let config = serde_json::json!({"dtype": "<i4", "astype": "<i2"});
        let c = DeltaCodec::new(config.as_object().unwrap().clone(), ZarrVersion::V2).unwrap();
        let x: Vec<u8> = [10i32, 13, 9, 70009]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let shape = [NonZeroU64::new(4).unwrap()];
        let (dt, fill, opts) = (
            data_type::int32(),
            FillValue::from(0i32),
            CodecOptions::default(),
        );
        let enc = c
            .encode(ArrayBytes::from(x.clone()), &shape, &dt, &fill, &opts)
            .unwrap();
        // numcodecs.Delta("<i4", astype="<i2").encode([10, 13, 9, 70009]) == [10, 3, -4, 4464]
        let want: Vec<u8> = [10i16, 3, -4, 4464]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(enc.clone().into_fixed().unwrap().into_owned(), want);
        let wrong = c.encode(
            ArrayBytes::from(x),
            &shape,
            &data_type::int16(),
            &fill,
            &opts,
        );
        assert!(wrong.unwrap_err().to_string().contains("configured for"));
        let dec = c.decode(enc, &shape, &dt, &fill, &opts).unwrap();
        let back: Vec<u8> = [10i32, 13, 9, 4473]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(dec.into_fixed().unwrap().into_owned(), back);
    }
}
