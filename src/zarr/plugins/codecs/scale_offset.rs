//! zarr-python 3.4's `scale_offset` codec (zarr-extensions `scale_offset`), v3 name
//! `scale_offset`.
//!
//! Encoding stores `(x - offset) * scale`, decoding `x / scale + offset`, in the array's own
//! data type: integer results that overflow and integer divisions that leave a remainder are
//! errors (the spec forbids silent wrapping or truncation); float arithmetic is in the
//! element's precision. `offset` (default 0) and `scale` (default 1, nonzero) are scalars of
//! the array's type.

use super::json_scalar::{int_range, parse};
use super::numpy_dtype::{Scalar, Value};
use super::{
    Config, array_codec_traits, bad_config, codec_traits, field, register_codec, wrong_type,
};
use half::f16;
use serde_json::Value as Json;
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs_codec::{ArrayToArrayCodecTraits, CodecError, CodecOptions};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The scale_offset codec.
#[derive(Clone, Debug)]
pub(crate) struct ScaleOffsetCodec {
    config: Config,
    offset: Json,
    scale: Json,
}

zarrs_plugin::impl_extension_aliases!(ScaleOffsetCodec, v3: "scale_offset");
register_codec!(ScaleOffsetCodec, ArrayToArray, v3);
codec_traits!(ScaleOffsetCodec);
array_codec_traits!(ScaleOffsetCodec);

const NAME: &str = "scale_offset";

impl ScaleOffsetCodec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        if let Some(k) = config.keys().find(|k| *k != "offset" && *k != "scale") {
            return Err(bad_config(
                NAME,
                format!("unknown configuration field {k:?}"),
            ));
        }
        let get = |k: &str, d: i64| field(&config, k).cloned().unwrap_or(Json::from(d));
        let (offset, scale) = (get("offset", 0), get("scale", 1));
        for v in [&offset, &scale] {
            if !matches!(v, Json::Number(_) | Json::String(_)) {
                return Err(bad_config(NAME, format!("{v} is not a number")));
            }
        }
        Ok(ScaleOffsetCodec {
            config,
            offset,
            scale,
        })
    }

    /// The element type and the offset and scale in it.
    fn params(&self, data_type: &DataType) -> Result<(Scalar, Value, Value), CodecError> {
        let scalar = super::Scalar::of(data_type)
            .filter(|s| *s != Scalar::Bool)
            .ok_or_else(|| wrong_type(NAME, "an integer or floating-point type", data_type))?;
        let bad = |e: String| CodecError::Other(format!("{NAME}: {e}"));
        let offset = parse(&self.offset, scalar).map_err(bad)?;
        let scale = parse(&self.scale, scalar).map_err(bad)?;
        if matches!(scale, Value::Int(0)) || matches!(scale, Value::Float(f) if f == 0.0) {
            return Err(CodecError::Other(format!("{NAME}: scale must be nonzero")));
        }
        Ok((scalar, offset, scale))
    }
}

/// `f` on two operands in the precision of float type `s` (float16 via float32).
fn float_op(s: Scalar, a: f64, b: f64, f: fn(f64, f64) -> f64, g: fn(f32, f32) -> f32) -> f64 {
    match s {
        Scalar::F64 => f(a, b),
        Scalar::F32 => f64::from(g(a as f32, b as f32)),
        _ => f16::from_f32(g(a as f32, b as f32)).to_f64(),
    }
}

fn apply(
    bytes: ArrayBytes<'_>,
    scalar: Scalar,
    op: impl Fn(Value) -> Result<Value, String>,
) -> Result<ArrayBytes<'static>, CodecError> {
    let mut b = bytes.into_fixed()?.into_owned();
    for e in b.chunks_exact_mut(scalar.size()) {
        let v = op(scalar.read(e)).map_err(|m| CodecError::Other(format!("{NAME}: {m}")))?;
        scalar.write(v, e);
    }
    Ok(ArrayBytes::from(b))
}

fn in_range(scalar: Scalar, v: Option<i128>, what: &str) -> Result<Value, String> {
    let (lo, hi) = int_range(scalar);
    match v {
        Some(v) if (lo..=hi).contains(&v) => Ok(Value::Int(v)),
        _ => Err(format!("{what} is outside the range of {scalar:?}")),
    }
}

impl ArrayToArrayCodecTraits for ScaleOffsetCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    // A missing chunk must read as the fill value, not as the decoded encoded fill.
    super::whole_chunk::whole_chunk_partial_decoders!();

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.params(decoded_data_type)?;
        Ok(decoded_data_type.clone())
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let (s, offset, scale) = self.params(data_type)?;
        apply(bytes, s, |x| match (x, offset, scale) {
            (Value::Int(x), Value::Int(o), Value::Int(k)) => in_range(
                s,
                x.checked_sub(o).and_then(|d| d.checked_mul(k)),
                &format!("({x} - {o}) * {k}"),
            ),
            (Value::Float(x), Value::Float(o), Value::Float(k)) => Ok(Value::Float(float_op(
                s,
                float_op(s, x, o, |a, b| a - b, |a, b| a - b),
                k,
                |a, b| a * b,
                |a, b| a * b,
            ))),
            _ => Err("mixed integer and float operands".into()),
        })
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let (s, offset, scale) = self.params(data_type)?;
        apply(bytes, s, |x| match (x, offset, scale) {
            (Value::Int(x), Value::Int(o), Value::Int(k)) => {
                if x % k != 0 {
                    return Err(format!(
                        "{x} / {k} leaves a remainder: the stored value is not exactly representable in {s:?}"
                    ));
                }
                in_range(s, (x / k).checked_add(o), &format!("{x} / {k} + {o}"))
            }
            (Value::Float(x), Value::Float(o), Value::Float(k)) => Ok(Value::Float(float_op(
                s,
                float_op(s, x, k, |a, b| a / b, |a, b| a / b),
                o,
                |a, b| a + b,
                |a, b| a + b,
            ))),
            _ => Err("mixed integer and float operands".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrs::array::data_type;

    fn codec(json: serde_json::Value) -> ScaleOffsetCodec {
        ScaleOffsetCodec::new(json.as_object().unwrap().clone(), ZarrVersion::V3).unwrap()
    }

    #[test]
    fn integers_are_exact_or_an_error() {
        let c = codec(serde_json::json!({"offset": 3, "scale": 3}));
        let shape = [NonZeroU64::new(3).unwrap()];
        let (dt, fill, opts) = (
            data_type::int8(),
            FillValue::from(0i8),
            CodecOptions::default(),
        );
        let enc = c
            .encode(
                ArrayBytes::from(vec![3u8, 4, 45]),
                &shape,
                &dt,
                &fill,
                &opts,
            )
            .unwrap();
        assert_eq!(
            enc.clone().into_fixed().unwrap().into_owned(),
            vec![0, 3, 126]
        );
        let dec = c.decode(enc, &shape, &dt, &fill, &opts).unwrap();
        assert_eq!(dec.into_fixed().unwrap().into_owned(), vec![3, 4, 45]);
        let over = c.encode(
            ArrayBytes::from(vec![100u8, 0, 0]),
            &shape,
            &dt,
            &fill,
            &opts,
        );
        assert!(over.unwrap_err().to_string().contains("outside the range"));
        let rem = c.decode(ArrayBytes::from(vec![1u8, 0, 0]), &shape, &dt, &fill, &opts);
        assert!(rem.unwrap_err().to_string().contains("remainder"));
    }

    #[test]
    fn floats_compute_in_their_own_precision() {
        let c = codec(serde_json::json!({"offset": 0.5, "scale": "0x41200000"}));
        let shape = [NonZeroU64::new(1).unwrap()];
        let (dt, fill, opts) = (
            data_type::float32(),
            FillValue::from(0f32),
            CodecOptions::default(),
        );
        let x = 0.1f32;
        let enc = c
            .encode(
                ArrayBytes::from(x.to_ne_bytes().to_vec()),
                &shape,
                &dt,
                &fill,
                &opts,
            )
            .unwrap();
        let want = (x - 0.5f32) * 10f32;
        assert_eq!(
            enc.into_fixed().unwrap().into_owned(),
            want.to_ne_bytes().to_vec()
        );
    }
}
