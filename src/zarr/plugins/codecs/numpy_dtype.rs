//! numpy scalar type strings as numcodecs' filters spell them (`"<i4"`, `"|u1"`, `">f8"`,
//! `"f4"`), the zarrs data type each one is, and element conversions with numpy's `astype`
//! semantics (integers wrap, floats round to nearest, float to integer truncates).

use half::f16;
use zarrs::array::DataType;
use zarrs::array::data_type;

/// A numeric or boolean scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

/// One element's value, wide enough for every [`Scalar`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    Int(i128),
    Float(f64),
}

/// A parsed numpy type string: the scalar type and whether it was spelled big-endian.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NumpyDtype {
    pub scalar: Scalar,
    pub big_endian: bool,
}

impl NumpyDtype {
    /// Parses `"<i4"`, `">f8"`, `"|u1"`, `"=i2"`, `"i4"`, `"bool"`, `"float32"`, ...
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "data type {text:?} is not a numpy numeric type string such as \"<i4\", \"|u1\" or \">f8\""
            )
        };
        let named = match text {
            "bool" => Some(Scalar::Bool),
            "int8" => Some(Scalar::I8),
            "int16" => Some(Scalar::I16),
            "int32" => Some(Scalar::I32),
            "int64" => Some(Scalar::I64),
            "uint8" => Some(Scalar::U8),
            "uint16" => Some(Scalar::U16),
            "uint32" => Some(Scalar::U32),
            "uint64" => Some(Scalar::U64),
            "float16" => Some(Scalar::F16),
            "float32" => Some(Scalar::F32),
            "float64" => Some(Scalar::F64),
            _ => None,
        };
        if let Some(scalar) = named {
            return Ok(NumpyDtype {
                scalar,
                big_endian: false,
            });
        }
        let (big_endian, code) = match text.as_bytes().first() {
            Some(b'<' | b'|' | b'=') => (false, &text[1..]),
            Some(b'>') => (true, &text[1..]),
            Some(_) => (false, text),
            None => return Err(bad()),
        };
        let scalar = match code {
            "b1" | "?" => Scalar::Bool,
            "i1" => Scalar::I8,
            "i2" => Scalar::I16,
            "i4" => Scalar::I32,
            "i8" => Scalar::I64,
            "u1" => Scalar::U8,
            "u2" => Scalar::U16,
            "u4" => Scalar::U32,
            "u8" => Scalar::U64,
            "f2" => Scalar::F16,
            "f4" => Scalar::F32,
            "f8" => Scalar::F64,
            _ => return Err(bad()),
        };
        Ok(NumpyDtype {
            scalar,
            big_endian: big_endian && scalar.size() > 1,
        })
    }
}

impl Scalar {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// True for the float types.
    pub(crate) fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::F32 | Scalar::F64)
    }

    /// The zarrs data type.
    pub(crate) fn zarrs(self) -> DataType {
        match self {
            Scalar::Bool => data_type::bool(),
            Scalar::I8 => data_type::int8(),
            Scalar::I16 => data_type::int16(),
            Scalar::I32 => data_type::int32(),
            Scalar::I64 => data_type::int64(),
            Scalar::U8 => data_type::uint8(),
            Scalar::U16 => data_type::uint16(),
            Scalar::U32 => data_type::uint32(),
            Scalar::U64 => data_type::uint64(),
            Scalar::F16 => data_type::float16(),
            Scalar::F32 => data_type::float32(),
            Scalar::F64 => data_type::float64(),
        }
    }

    /// The scalar type of a zarrs data type, `None` for anything else.
    pub(crate) fn of(data_type: &DataType) -> Option<Scalar> {
        [
            Scalar::Bool,
            Scalar::I8,
            Scalar::I16,
            Scalar::I32,
            Scalar::I64,
            Scalar::U8,
            Scalar::U16,
            Scalar::U32,
            Scalar::U64,
            Scalar::F16,
            Scalar::F32,
            Scalar::F64,
        ]
        .into_iter()
        .find(|s| s.zarrs() == *data_type)
    }

    /// Reads one native-order element.
    pub(crate) fn read(self, b: &[u8]) -> Value {
        fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&b[..N]);
            a
        }
        match self {
            Scalar::Bool => Value::Int(i128::from(b[0] != 0)),
            Scalar::I8 => Value::Int(i128::from(b[0] as i8)),
            Scalar::I16 => Value::Int(i128::from(i16::from_ne_bytes(arr(b)))),
            Scalar::I32 => Value::Int(i128::from(i32::from_ne_bytes(arr(b)))),
            Scalar::I64 => Value::Int(i128::from(i64::from_ne_bytes(arr(b)))),
            Scalar::U8 => Value::Int(i128::from(b[0])),
            Scalar::U16 => Value::Int(i128::from(u16::from_ne_bytes(arr(b)))),
            Scalar::U32 => Value::Int(i128::from(u32::from_ne_bytes(arr(b)))),
            Scalar::U64 => Value::Int(i128::from(u64::from_ne_bytes(arr(b)))),
            Scalar::F16 => Value::Float(f16::from_ne_bytes(arr(b)).to_f64()),
            Scalar::F32 => Value::Float(f64::from(f32::from_ne_bytes(arr(b)))),
            Scalar::F64 => Value::Float(f64::from_ne_bytes(arr(b))),
        }
    }

    /// Writes one native-order element converted the way numpy's `astype` does: integers
    /// wrap to the target width, floats round to the nearest representable value, floats to
    /// integers truncate toward zero (NaN and out-of-range values, undefined in C, become
    /// the saturated value), anything nonzero becomes `true`.
    pub(crate) fn write(self, v: Value, out: &mut [u8]) {
        let int = |v: Value| -> i128 {
            match v {
                Value::Int(i) => i,
                Value::Float(f) => f as i128,
            }
        };
        let float = |v: Value| -> f64 {
            match v {
                Value::Int(i) => i as f64,
                Value::Float(f) => f,
            }
        };
        match self {
            Scalar::Bool => {
                out[0] = u8::from(match v {
                    Value::Int(i) => i != 0,
                    Value::Float(f) => f != 0.0,
                })
            }
            Scalar::I8 => out[..1].copy_from_slice(&(int(v) as i8).to_ne_bytes()),
            Scalar::I16 => out[..2].copy_from_slice(&(int(v) as i16).to_ne_bytes()),
            Scalar::I32 => out[..4].copy_from_slice(&(int(v) as i32).to_ne_bytes()),
            Scalar::I64 => out[..8].copy_from_slice(&(int(v) as i64).to_ne_bytes()),
            Scalar::U8 => out[..1].copy_from_slice(&(int(v) as u8).to_ne_bytes()),
            Scalar::U16 => out[..2].copy_from_slice(&(int(v) as u16).to_ne_bytes()),
            Scalar::U32 => out[..4].copy_from_slice(&(int(v) as u32).to_ne_bytes()),
            Scalar::U64 => out[..8].copy_from_slice(&(int(v) as u64).to_ne_bytes()),
            Scalar::F16 => out[..2].copy_from_slice(&f16::from_f64(float(v)).to_ne_bytes()),
            Scalar::F32 => out[..4].copy_from_slice(&(float(v) as f32).to_ne_bytes()),
            Scalar::F64 => out[..8].copy_from_slice(&float(v).to_ne_bytes()),
        }
    }
}

/// Converts native-order elements of type `from` to `to` (numpy `astype`).
pub(crate) fn convert(bytes: &[u8], from: Scalar, to: Scalar) -> Vec<u8> {
    if from == to {
        return bytes.to_vec();
    }
    let n = bytes.len() / from.size();
    let mut out = vec![0u8; n * to.size()];
    for (src, dst) in bytes
        .chunks_exact(from.size())
        .zip(out.chunks_exact_mut(to.size()))
    {
        to.write(from.read(src), dst);
    }
    out
}

/// Reverses the byte order of every `size`-byte element in place.
pub(crate) fn swap_in_place(bytes: &mut [u8], size: usize) {
    if size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_strings_parse_like_numpy() {
        assert_eq!(NumpyDtype::parse("<i4").unwrap().scalar, Scalar::I32);
        assert!(NumpyDtype::parse(">f8").unwrap().big_endian);
        assert!(!NumpyDtype::parse(">u1").unwrap().big_endian);
        assert_eq!(NumpyDtype::parse("f2").unwrap().scalar, Scalar::F16);
        assert_eq!(NumpyDtype::parse("|b1").unwrap().scalar, Scalar::Bool);
        assert!(NumpyDtype::parse("<U4").unwrap_err().contains("\"<U4\""));
        assert!(NumpyDtype::parse("").is_err());
    }

    #[test]
    fn conversions_follow_numpy_astype() {
        let v: Vec<u8> = [300i32, -1, 65537]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let u8s = convert(&v, Scalar::I32, Scalar::U8);
        assert_eq!(u8s, vec![44, 255, 1]);
        let f: Vec<u8> = [1.5f64, -2.7]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let i = convert(&f, Scalar::F64, Scalar::I16);
        assert_eq!(
            i,
            [1i16, -2]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        let h = convert(&f, Scalar::F64, Scalar::F16);
        assert_eq!(f16::from_ne_bytes([h[0], h[1]]).to_f64(), 1.5);
    }
}
