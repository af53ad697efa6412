//! zarr-python 3.4's `cast_value` codec (zarr-extensions `cast_value`), v3 name `cast_value`.
//!
//! Encoding converts every element to `data_type` by value, decoding converts back, both with
//! the configured `rounding` (`nearest-even` by default, `towards-zero`, `towards-positive`,
//! `towards-negative`, `nearest-away`) and `out_of_range` handling (null: an error; `clamp`:
//! the nearest representable value, ±infinity for floats; `wrap`: modular, integer targets
//! only). `scalar_map` (`{"encode": [[from, to], ...], "decode": [...]}`) maps chosen values
//! first (NaN matches NaN). As in `cast-value-rs`, which zarr-python uses: a float rounds to
//! the target's precision as if its exponent were unbounded, and a result beyond the target's
//! finite range is out of range; NaN and infinities have no integer value. Supported types:
//! int8..int64, uint8..uint64, float16, float32, float64.

use super::json_scalar::{int_range, parse};
use super::numpy_dtype::{Scalar, Value};
use super::{
    Config, array_codec_traits, bad_config, codec_traits, field, register_codec, wrong_type,
};
use serde_json::Value as Json;
use std::num::NonZeroU64;
use std::sync::Arc;
use zarrs::array::{ArrayBytes, DataType, FillValue};
use zarrs_codec::{ArrayToArrayCodecTraits, CodecError, CodecOptions};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

const NAME: &str = "cast_value";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    NearestEven,
    TowardsZero,
    TowardsPositive,
    TowardsNegative,
    NearestAway,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutOfRange {
    Error,
    Clamp,
    Wrap,
}

/// The cast_value codec.
#[derive(Clone, Debug)]
pub(crate) struct CastValueCodec {
    config: Config,
    target: Scalar,
    rounding: Rounding,
    out_of_range: OutOfRange,
    encode_map: Vec<(Json, Json)>,
    decode_map: Vec<(Json, Json)>,
}

zarrs_plugin::impl_extension_aliases!(CastValueCodec, v3: "cast_value");
register_codec!(CastValueCodec, ArrayToArray, v3);
codec_traits!(CastValueCodec);
array_codec_traits!(CastValueCodec);

fn scalar_named(name: &str) -> Option<Scalar> {
    Some(match name {
        "int8" => Scalar::I8,
        "int16" => Scalar::I16,
        "int32" => Scalar::I32,
        "int64" => Scalar::I64,
        "uint8" => Scalar::U8,
        "uint16" => Scalar::U16,
        "uint32" => Scalar::U32,
        "uint64" => Scalar::U64,
        "float16" => Scalar::F16,
        "float32" => Scalar::F32,
        "float64" => Scalar::F64,
        _ => return None,
    })
}

fn pairs(list: Option<&Json>, which: &str) -> Result<Vec<(Json, Json)>, PluginCreateError> {
    let Some(list) = list.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let bad = || {
        bad_config(
            NAME,
            format!("scalar_map.{which} must be a list of [from, to] pairs"),
        )
    };
    list.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|p| match p.as_array().map(Vec::as_slice) {
            Some([a, b]) => Ok((a.clone(), b.clone())),
            _ => Err(bad()),
        })
        .collect()
}

impl CastValueCodec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let target = match field(&config, "data_type") {
            Some(Json::String(s)) => scalar_named(s).ok_or_else(|| {
                bad_config(NAME, format!(
                    "casting to {s} is not supported; int8..int64, uint8..uint64, float16, float32 and float64 are"
                ))
            })?,
            Some(other) => return Err(bad_config(NAME, format!("data_type {other} is not supported"))),
            None => return Err(bad_config(NAME, "the configuration has no data_type")),
        };
        let rounding = match field(&config, "rounding").map(|v| v.as_str()) {
            None | Some(Some("nearest-even")) => Rounding::NearestEven,
            Some(Some("towards-zero")) => Rounding::TowardsZero,
            Some(Some("towards-positive")) => Rounding::TowardsPositive,
            Some(Some("towards-negative")) => Rounding::TowardsNegative,
            Some(Some("nearest-away")) => Rounding::NearestAway,
            Some(_) => {
                return Err(bad_config(
                    NAME,
                    "rounding is not one of nearest-even, towards-zero, towards-positive, towards-negative, nearest-away",
                ));
            }
        };
        let out_of_range = match field(&config, "out_of_range").map(|v| v.as_str()) {
            None => OutOfRange::Error,
            Some(Some("clamp")) => OutOfRange::Clamp,
            Some(Some("wrap")) if !target.is_float() => OutOfRange::Wrap,
            Some(Some("wrap")) => {
                return Err(bad_config(
                    NAME,
                    "out_of_range \"wrap\" needs an integer data_type",
                ));
            }
            Some(_) => {
                return Err(bad_config(
                    NAME,
                    "out_of_range is not null, \"clamp\" or \"wrap\"",
                ));
            }
        };
        let map = field(&config, "scalar_map");
        if map.is_some_and(|m| !m.is_object()) {
            return Err(bad_config(NAME, "scalar_map must be an object"));
        }
        let encode_map = pairs(map.and_then(|m| m.get("encode")), "encode")?;
        let decode_map = pairs(map.and_then(|m| m.get("decode")), "decode")?;
        Ok(CastValueCodec {
            config,
            target,
            rounding,
            out_of_range,
            encode_map,
            decode_map,
        })
    }

    fn source(&self, data_type: &DataType) -> Result<Scalar, CodecError> {
        Scalar::of(data_type)
            .filter(|s| *s != Scalar::Bool)
            .ok_or_else(|| wrong_type(NAME, "an integer or floating-point type", data_type))
    }

    /// Converts `bytes` of `from` into `to` with `map` applied first.
    fn run(
        &self,
        bytes: ArrayBytes<'_>,
        from: Scalar,
        to: Scalar,
        map: &[(Json, Json)],
    ) -> Result<ArrayBytes<'static>, CodecError> {
        let err = |m: String| CodecError::Other(format!("{NAME}: {m}"));
        let map: Vec<(Value, Value)> = map
            .iter()
            .map(|(a, b)| Ok((parse(a, from)?, parse(b, to)?)))
            .collect::<Result<_, String>>()
            .map_err(|e| err(format!("scalar_map: {e}")))?;
        let src = bytes.into_fixed()?;
        let mut out = vec![0u8; src.len() / from.size() * to.size()];
        for (s, o) in src
            .chunks_exact(from.size())
            .zip(out.chunks_exact_mut(to.size()))
        {
            let v = from.read(s);
            let mapped = map.iter().find(|(k, _)| same(*k, v)).map(|(_, t)| *t);
            let r = match mapped {
                Some(t) => t,
                None => cast(v, to, self.rounding, self.out_of_range).map_err(err)?,
            };
            to.write(r, o);
        }
        Ok(ArrayBytes::from(out))
    }
}

fn same(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Value::Int(x), Value::Int(y)) => x == y,
        _ => false,
    }
}

fn round(x: f64, mode: Rounding) -> f64 {
    match mode {
        Rounding::NearestEven => x.round_ties_even(),
        Rounding::TowardsZero => x.trunc(),
        Rounding::TowardsPositive => x.ceil(),
        Rounding::TowardsNegative => x.floor(),
        Rounding::NearestAway => x.round(),
    }
}

/// (precision in bits, smallest normal exponent, largest finite value) of a float type.
fn float_format(s: Scalar) -> (i32, i32, f64) {
    match s {
        Scalar::F16 => (11, -14, 65504.0),
        Scalar::F32 => (24, -126, f64::from(f32::MAX)),
        _ => (53, -1022, f64::MAX),
    }
}

/// `x` rounded to float type `to` with an unbounded exponent; `None` when beyond its range.
fn round_float(x: f64, to: Scalar, mode: Rounding) -> Option<f64> {
    if !x.is_finite() || x == 0.0 || to == Scalar::F64 {
        return Some(x);
    }
    let (p, emin, max) = float_format(to);
    let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
    let e = (biased - 1023).max(emin);
    let q = e - (p - 1);
    let r = round(x * 2f64.powi(-q), mode) * 2f64.powi(q);
    (r.abs() <= max).then_some(r)
}

/// Integer `i` rounded to float type `to`; `None` when beyond its range.
fn int_to_float(i: i128, to: Scalar, mode: Rounding) -> Option<f64> {
    let (p, _, max) = float_format(to);
    let m = i.unsigned_abs();
    if m == 0 {
        return Some(0.0);
    }
    let e = 127 - m.leading_zeros() as i32;
    let q = e - (p - 1);
    let r = if q <= 0 {
        m as f64
    } else {
        let (d, rem, half) = (m >> q, m & ((1u128 << q) - 1), 1u128 << (q - 1));
        let positive = i > 0;
        let up = match mode {
            Rounding::NearestEven => rem > half || (rem == half && d & 1 == 1),
            Rounding::NearestAway => rem >= half,
            Rounding::TowardsZero => false,
            Rounding::TowardsPositive => rem > 0 && positive,
            Rounding::TowardsNegative => rem > 0 && !positive,
        };
        ((d + u128::from(up)) << q) as f64
    };
    let r = if i < 0 { -r } else { r };
    (r.abs() <= max).then_some(r)
}

/// One element of any supported type cast to `to`.
fn cast(v: Value, to: Scalar, mode: Rounding, oor: OutOfRange) -> Result<Value, String> {
    if to.is_float() {
        let r = match v {
            Value::Float(x) => round_float(x, to, mode),
            Value::Int(i) => int_to_float(i, to, mode),
        };
        return match (r, oor) {
            (Some(r), _) => Ok(Value::Float(r)),
            (None, OutOfRange::Clamp) => {
                let neg =
                    matches!(v, Value::Float(x) if x < 0.0) || matches!(v, Value::Int(i) if i < 0);
                Ok(Value::Float(if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }))
            }
            (None, _) => Err(format!("{v:?} is outside the finite range of {to:?}")),
        };
    }
    let (lo, hi) = int_range(to);
    let (exact, wrapped) = match v {
        Value::Int(i) => (Some(i), i),
        Value::Float(x) if !x.is_finite() => {
            return Err(format!(
                "cannot cast {x} to {to:?} without a scalar_map entry"
            ));
        }
        Value::Float(x) => {
            let r = round(x, mode);
            let bits = 8 * to.size() as i32;
            let w = r.rem_euclid(2f64.powi(bits)) as i128;
            let exact = (r.abs() < 2f64.powi(126)).then_some(r as i128);
            (exact, w)
        }
    };
    match exact {
        Some(i) if (lo..=hi).contains(&i) => Ok(Value::Int(i)),
        _ => match oor {
            OutOfRange::Clamp => Ok(Value::Int(match v {
                Value::Int(i) if i < lo => lo,
                Value::Float(x) if x < 0.0 => lo,
                _ => hi,
            })),
            OutOfRange::Wrap => {
                let modulus = 1i128 << (8 * to.size());
                let w = wrapped.rem_euclid(modulus);
                Ok(Value::Int(if w > hi { w - modulus } else { w }))
            }
            OutOfRange::Error => Err(format!(
                "{v:?} is outside the range [{lo}, {hi}] of {to:?}; set out_of_range to \"clamp\" or \"wrap\""
            )),
        },
    }
}

impl ArrayToArrayCodecTraits for CastValueCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    // A missing chunk must read as the fill value, not as the decoded encoded fill.
    super::whole_chunk::whole_chunk_partial_decoders!();

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.source(decoded_data_type)?;
        Ok(self.target.zarrs())
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let from = self.source(data_type)?;
        self.run(bytes, from, self.target, &self.encode_map)
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        let to = self.source(data_type)?;
        let oor = if to.is_float() && self.out_of_range == OutOfRange::Wrap {
            OutOfRange::Error
        } else {
            self.out_of_range
        };
        let codec = CastValueCodec {
            out_of_range: oor,
            ..self.clone()
        };
        codec.run(bytes, self.target, to, &self.decode_map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64, to: Scalar, mode: Rounding) -> Option<f64> {
        round_float(x, to, mode)
    }

    #[test]
    fn matches_cast_value_rs() {
        // Each expectation is what cast_value_rs.cast_array returned for the same input.
        let i = |x: f64, m, o| cast(Value::Float(x), Scalar::I8, m, o);
        use OutOfRange::*;
        use Rounding::*;
        assert_eq!(i(2.5, NearestEven, Error), Ok(Value::Int(2)));
        assert_eq!(i(-2.5, NearestAway, Error), Ok(Value::Int(-3)));
        assert_eq!(i(-1.2, TowardsNegative, Error), Ok(Value::Int(-2)));
        assert_eq!(i(1.2, TowardsPositive, Error), Ok(Value::Int(2)));
        assert!(i(f64::NAN, NearestEven, Clamp).is_err());
        assert!(i(300.0, NearestEven, Error).is_err());
        assert_eq!(i(-300.4, NearestEven, Clamp), Ok(Value::Int(-128)));
        assert_eq!(i(300.0, NearestEven, Wrap), Ok(Value::Int(44)));
        assert_eq!(i(-300.4, NearestEven, Wrap), Ok(Value::Int(-44)));
        assert_eq!(
            cast(Value::Int(300), Scalar::U8, NearestEven, Clamp),
            Ok(Value::Int(255))
        );
        assert_eq!(f(1e300, Scalar::F32, NearestEven), None);
        assert_eq!(
            f(0.1, Scalar::F32, TowardsZero),
            Some(f64::from(f32::from_bits(1036831948)))
        );
        assert_eq!(
            f(0.1, Scalar::F32, TowardsPositive),
            Some(f64::from(f32::from_bits(1036831949)))
        );
        assert_eq!(f(3.4028235677973366e38, Scalar::F32, NearestEven), None);
        assert_eq!(
            f(3.4028235677973366e38, Scalar::F32, TowardsZero),
            Some(f64::from(f32::MAX))
        );
        assert_eq!(f(3.40282384e38, Scalar::F32, TowardsZero), None);
        assert_eq!(
            f(1e-46, Scalar::F32, TowardsPositive),
            Some(f64::from(f32::from_bits(1)))
        );
        assert_eq!(f(65520.0, Scalar::F16, NearestEven), None);
        assert_eq!(f(65519.0, Scalar::F16, NearestEven), Some(65504.0));
        let big = int_to_float(i128::from(i64::MAX), Scalar::F32, TowardsZero).unwrap();
        assert_eq!((big as f32).to_bits(), 1593835519);
        assert_eq!(
            cast(Value::Float(1e300), Scalar::F32, NearestEven, Clamp),
            Ok(Value::Float(f64::INFINITY))
        );
    }
}
