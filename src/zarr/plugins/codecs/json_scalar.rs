//! Scalars in codec configurations as zarr v3 JSON spells them for a numeric data type:
//! numbers, and for floats `"NaN"`, `"Infinity"`, `"-Infinity"` or a `"0x..."` bit pattern.

use super::numpy_dtype::{Scalar, Value};
use half::f16;
use serde_json::Value as Json;

/// The value of `json` as an element of `scalar`, or why it is not one.
pub(crate) fn parse(json: &Json, scalar: Scalar) -> Result<Value, String> {
    let not = || format!("{json} is not a {scalar:?} value");
    if scalar.is_float() {
        let v = match json {
            Json::Number(n) => n.as_f64().ok_or_else(not)?,
            Json::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                hex => {
                    let digits = hex.strip_prefix("0x").ok_or_else(not)?;
                    let bits = u64::from_str_radix(digits, 16).map_err(|_| not())?;
                    match scalar {
                        Scalar::F16 => {
                            f16::from_bits(u16::try_from(bits).map_err(|_| not())?).to_f64()
                        }
                        Scalar::F32 => {
                            f64::from(f32::from_bits(u32::try_from(bits).map_err(|_| not())?))
                        }
                        _ => f64::from_bits(bits),
                    }
                }
            },
            _ => return Err(not()),
        };
        // Round to the type's precision, as the element itself would hold it.
        let mut b = [0u8; 8];
        scalar.write(Value::Float(v), &mut b);
        return Ok(scalar.read(&b));
    }
    let i = match json {
        Json::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .ok_or_else(not)?,
        _ => return Err(not()),
    };
    let (lo, hi) = int_range(scalar);
    if i < lo || i > hi {
        return Err(format!("{i} is outside the range of {scalar:?}"));
    }
    Ok(Value::Int(i))
}

/// The smallest and largest value of an integer (or bool) scalar type.
pub(crate) fn int_range(scalar: Scalar) -> (i128, i128) {
    match scalar {
        Scalar::Bool => (0, 1),
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::U16 => (0, u16::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spells_like_zarr() {
        assert_eq!(parse(&json!(3), Scalar::U8), Ok(Value::Int(3)));
        assert!(parse(&json!(300), Scalar::U8).is_err());
        assert!(parse(&json!(1.5), Scalar::I32).is_err());
        assert_eq!(
            parse(&json!(0.1), Scalar::F32),
            Ok(Value::Float(f64::from(0.1f32)))
        );
        assert!(matches!(parse(&json!("NaN"), Scalar::F64), Ok(Value::Float(f)) if f.is_nan()));
        assert_eq!(parse(&json!("0x3c00"), Scalar::F16), Ok(Value::Float(1.0)));
        assert!(parse(&json!("x"), Scalar::F32).is_err());
    }
}
