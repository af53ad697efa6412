//! numcodecs' `Quantize` filter: v2 id `quantize`, v3 name `numcodecs.quantize`.
//!
//! Lossy: encoding keeps `digits` decimal digits by rounding to a power-of-two grid
//! (`round(x * 2^bits) / 2^bits`, ties to even, in `dtype`'s precision) and casts to `astype`
//! (default `dtype`); decoding only casts back. Reading returns exactly what zarr-python
//! returns.

use super::chunk_filter::{ChunkFilter, chunk_filter_codec};
use super::numpy_dtype::{NumpyDtype, Scalar, convert, swap_in_place};
use super::{
    Config, array_codec_traits, bad_config, codec_traits, dtype_field, field, int_field,
    register_codec, wrong_type,
};
use half::f16;
use std::borrow::Cow;
use zarrs::array::DataType;
use zarrs_codec::CodecError;
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs Quantize codec.
#[derive(Clone, Debug)]
pub(crate) struct QuantizeCodec {
    config: Config,
    dtype: NumpyDtype,
    astype: NumpyDtype,
    scale: f64,
    swap: bool,
}

zarrs_plugin::impl_extension_aliases!(QuantizeCodec, v3: "numcodecs.quantize", [], v2: "quantize", []);
register_codec!(QuantizeCodec, ArrayToArray, v2 + v3);
codec_traits!(QuantizeCodec);
array_codec_traits!(QuantizeCodec);

/// numcodecs' grid: `2^ceil(log2(10^-e))` with `e` = log10(10^-digits) rounded away from 0.
fn grid_scale(digits: i64) -> f64 {
    let precision = 10f64.powf(-(digits as f64));
    let exp = precision.log10();
    let exp = if exp < 0.0 { exp.floor() } else { exp.ceil() };
    let bits = 10f64.powf(-exp).log2().ceil();
    2f64.powf(bits)
}

impl QuantizeCodec {
    fn new(config: Config, version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let digits = int_field("quantize", &config, "digits", i64::MIN)?;
        if digits == i64::MIN {
            return Err(bad_config("quantize", "the configuration has no digits"));
        }
        let dtype = dtype_field("quantize", &config, "dtype")?;
        let astype = match field(&config, "astype") {
            None => dtype.clone(),
            Some(_) => dtype_field("quantize", &config, "astype")?,
        };
        if !dtype.scalar.is_float() || !astype.scalar.is_float() {
            return Err(bad_config(
                "quantize",
                "only floating point data types are supported",
            ));
        }
        let swap = version == ZarrVersion::V2
            && astype.scalar.size() > 1
            && dtype.big_endian != astype.big_endian;
        Ok(QuantizeCodec {
            config,
            dtype,
            astype,
            scale: grid_scale(digits),
            swap,
        })
    }

    /// Rounds every element to the grid in place, in the element type's own precision.
    fn round(&self, b: &mut [u8]) {
        let s = self.scale;
        match self.dtype.scalar {
            Scalar::F64 => {
                for e in b.chunks_exact_mut(8) {
                    let x = f64::from_ne_bytes(e.try_into().expect("8 bytes"));
                    e.copy_from_slice(&((s * x).round_ties_even() / s).to_ne_bytes());
                }
            }
            Scalar::F32 => {
                let s = s as f32;
                for e in b.chunks_exact_mut(4) {
                    let x = f32::from_ne_bytes(e.try_into().expect("4 bytes"));
                    e.copy_from_slice(&((s * x).round_ties_even() / s).to_ne_bytes());
                }
            }
            _ => {
                // float16 arithmetic: each step in float32, rounded back to float16.
                let h = |v: f32| f16::from_f32(v).to_f32();
                let s = h(s as f32);
                for e in b.chunks_exact_mut(2) {
                    let x = f16::from_ne_bytes([e[0], e[1]]).to_f32();
                    let r = h(h(h(s * x).round_ties_even()) / s);
                    e.copy_from_slice(&f16::from_f32(r).to_ne_bytes());
                }
            }
        }
    }
}

impl ChunkFilter for QuantizeCodec {
    fn check(&self, data_type: &DataType) -> Result<(), CodecError> {
        if *data_type != self.dtype.scalar.zarrs() {
            return Err(wrong_type(
                "numcodecs.quantize",
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
        self.round(&mut b);
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
        Ok(convert(&b, self.astype.scalar, self.dtype.scalar))
    }
}
chunk_filter_codec!(QuantizeCodec);

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;
    use zarrs::array::data_type;
    use zarrs::array::{ArrayBytes, FillValue};
    use zarrs_codec::{ArrayToArrayCodecTraits, CodecOptions};

    #[test]
    fn rounds_like_numcodecs() {
        assert_eq!(grid_scale(2), 128.0);
        assert_eq!(grid_scale(0), 1.0);
        let config = serde_json::json!({"digits": 2, "dtype": "<f8"});
        let c = QuantizeCodec::new(config.as_object().unwrap().clone(), ZarrVersion::V3).unwrap();
        let x: Vec<u8> = [1.2345f64, -0.5, 3.0 / 256.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let shape = [NonZeroU64::new(3).unwrap()];
        let (dt, fill, opts) = (
            data_type::float64(),
            FillValue::from(0f64),
            CodecOptions::default(),
        );
        let enc = c
            .encode(ArrayBytes::from(x), &shape, &dt, &fill, &opts)
            .unwrap();
        let got: Vec<f64> = enc
            .into_fixed()
            .unwrap()
            .chunks_exact(8)
            .map(|e| f64::from_ne_bytes(e.try_into().unwrap()))
            .collect();
        // numcodecs.Quantize(2, "<f8").encode([1.2345, -0.5, 3/256]) == [1.234375, -0.5, 0.015625]
        assert_eq!(got, vec![1.234375, -0.5, 0.015625]);
    }
}
