//! numcodecs' `Delta` filter: v2 id `delta`, v3 name `numcodecs.delta`.
//!
//! The chunk, flattened in memory order, is stored as its first element followed by the
//! differences of neighbours, computed in `dtype` (integers wrap) and cast to `astype`
//! (default: `dtype`). Decoding is the running sum, accumulated in `dtype`.

use super::arith::{cumsum_in_place, diff_in_place};
use super::chunk_filter::{ChunkFilter, chunk_filter_codec};
use super::numpy_dtype::{NumpyDtype, convert, swap_in_place};
use super::{
    Config, array_codec_traits, bad_config, codec_traits, dtype_field, field, register_codec,
    wrong_type,
};
use std::borrow::Cow;
use zarrs::array::DataType;
use zarrs_codec::CodecError;
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
}

impl ChunkFilter for DeltaCodec {
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

    fn encoded_type(&self) -> DataType {
        self.astype.scalar.zarrs()
    }

    fn encode_chunk(&self, chunk: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError> {
        let mut b = chunk.into_owned();
        diff_in_place(&mut b, self.dtype.scalar).map_err(CodecError::Other)?;
        let mut out = convert(&b, self.dtype.scalar, self.astype.scalar);
        if self.swap {
            swap_in_place(&mut out, self.astype.scalar.size());
        }
        Ok(out)
    }

    fn decode_chunk(&self, chunk: Cow<'_, [u8]>) -> Result<Vec<u8>, CodecError> {
        let mut b = chunk.into_owned();
        if self.swap {
            swap_in_place(&mut b, self.astype.scalar.size());
        }
        let mut out = convert(&b, self.astype.scalar, self.dtype.scalar);
        cumsum_in_place(&mut out, self.dtype.scalar).map_err(CodecError::Other)?;
        Ok(out)
    }
}
chunk_filter_codec!(DeltaCodec);

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;
    use zarrs::array::data_type;
    use zarrs::array::{ArrayBytes, FillValue};
    use zarrs_codec::{ArrayToArrayCodecTraits, CodecOptions};

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
