//! Data types (with their zarr names), byte order and memory order.

use crate::errors::{Error, Result};
use half::{bf16, f16};
use num_complex::Complex;
use zarrbuf_codecs::ScalarKind;

/// A fixed-size zarr data type.
///
/// Names follow zarr v3 (`"float32"`, `"complex64"`, `"r16"` for 16 raw bits); numpy's
/// time and string types, which zarr-python writes, use numpy's names (`"datetime64[10s]"`,
/// `"timedelta64[ns]"`, `"S5"` for 5 NUL-padded bytes, `"U4"` for 4 UTF-32 characters).
/// Structured records (zarr-python's `struct`, v2 structured dtypes) are read as
/// [`DataType::RawBits`] of the record size.
///
/// ```
/// use zarrbuf::DataType;
/// use zarrbuf::dtype::TimeUnit;
/// let t: DataType = "float32".parse().unwrap();
/// assert_eq!(t.size(), 4);
/// assert_eq!(t.to_string(), "float32");
/// assert_eq!(DataType::RawBits(2).to_string(), "r16");
/// let d: DataType = "datetime64[10s]".parse().unwrap();
/// assert_eq!(d, DataType::DateTime64(TimeUnit::Second, 10));
/// assert_eq!(d.npy_descr(), "<M8[10s]");
/// assert_eq!(DataType::FixedUtf32(4).size(), 16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// `bool`, one byte, 0 or 1.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint8`.
    UInt8,
    /// `uint16`.
    UInt16,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// `float16` (IEEE half).
    Float16,
    /// `bfloat16`.
    BFloat16,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `complex64` (two float32).
    Complex64,
    /// `complex128` (two float64).
    Complex128,
    /// `rN`: raw bits, the number of bytes given (also numpy `V{n}` and structured records).
    RawBits(usize),
    /// numpy `datetime64` counting `scale` × `unit` since the epoch: an `int64`, `NaT` is
    /// `i64::MIN` (zarr `numpy.datetime64`, v2 `<M8[unit]`). For the counts as `i64`, view
    /// the buffer with `with_type(DataType::Int64)`.
    DateTime64(TimeUnit, u32),
    /// numpy `timedelta64` of `scale` × `unit`: an `int64`, `NaT` is `i64::MIN` (zarr
    /// `numpy.timedelta64`, v2 `<m8[unit]`).
    TimeDelta64(TimeUnit, u32),
    /// numpy `S{n}`: `n` bytes, shorter values NUL-padded (zarr `null_terminated_bytes`).
    FixedBytes(usize),
    /// numpy `U{n}`: `n` UTF-32 code units, NUL-padded (zarr `fixed_length_utf32`).
    FixedUtf32(usize),
}

/// The unit of numpy's `datetime64` and `timedelta64`.
///
/// ```
/// assert_eq!(zarrbuf::dtype::TimeUnit::Microsecond.abbreviation(), "us");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// No unit (numpy's generic `datetime64`).
    Generic,
    /// `Y`.
    Year,
    /// `M`.
    Month,
    /// `W`.
    Week,
    /// `D`.
    Day,
    /// `h`.
    Hour,
    /// `m`.
    Minute,
    /// `s`.
    Second,
    /// `ms`.
    Millisecond,
    /// `us`.
    Microsecond,
    /// `ns`.
    Nanosecond,
    /// `ps`.
    Picosecond,
    /// `fs`.
    Femtosecond,
    /// `as`.
    Attosecond,
}

impl TimeUnit {
    const ALL: [TimeUnit; 14] = [
        TimeUnit::Generic,
        TimeUnit::Year,
        TimeUnit::Month,
        TimeUnit::Week,
        TimeUnit::Day,
        TimeUnit::Hour,
        TimeUnit::Minute,
        TimeUnit::Second,
        TimeUnit::Millisecond,
        TimeUnit::Microsecond,
        TimeUnit::Nanosecond,
        TimeUnit::Picosecond,
        TimeUnit::Femtosecond,
        TimeUnit::Attosecond,
    ];

    /// numpy's abbreviation (`""` for the generic unit).
    pub fn abbreviation(self) -> &'static str {
        match self {
            TimeUnit::Generic => "",
            TimeUnit::Year => "Y",
            TimeUnit::Month => "M",
            TimeUnit::Week => "W",
            TimeUnit::Day => "D",
            TimeUnit::Hour => "h",
            TimeUnit::Minute => "m",
            TimeUnit::Second => "s",
            TimeUnit::Millisecond => "ms",
            TimeUnit::Microsecond => "us",
            TimeUnit::Nanosecond => "ns",
            TimeUnit::Picosecond => "ps",
            TimeUnit::Femtosecond => "fs",
            TimeUnit::Attosecond => "as",
        }
    }

    /// The unit of an abbreviation (`"us"` and `"μs"` alike; `""` or `"generic"`: generic).
    ///
    /// ```
    /// assert_eq!(zarrbuf::dtype::TimeUnit::from_abbreviation("ns"), Some(zarrbuf::dtype::TimeUnit::Nanosecond));
    /// ```
    pub fn from_abbreviation(text: &str) -> Option<TimeUnit> {
        match text {
            "generic" => Some(TimeUnit::Generic),
            "μs" => Some(TimeUnit::Microsecond),
            t => TimeUnit::ALL.into_iter().find(|u| u.abbreviation() == t),
        }
    }
}

/// `[10s]`, `[ns]`, or nothing for the generic unit with scale 1.
fn time_suffix(unit: TimeUnit, scale: u32) -> String {
    match (unit, scale) {
        (TimeUnit::Generic, 1) => String::new(),
        (TimeUnit::Generic, n) => format!("[{n}]"),
        (u, 1) => format!("[{}]", u.abbreviation()),
        (u, n) => format!("[{n}{}]", u.abbreviation()),
    }
}

/// Parses `[10s]`, `[ns]` or `` (generic) after a time type's name.
fn parse_time_suffix(text: &str) -> Option<(TimeUnit, u32)> {
    if text.is_empty() {
        return Some((TimeUnit::Generic, 1));
    }
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    let digits = inner.chars().take_while(char::is_ascii_digit).count();
    let scale = if digits == 0 {
        1
    } else {
        inner[..digits].parse().ok()?
    };
    (scale > 0).then_some(())?;
    Some((TimeUnit::from_abbreviation(&inner[digits..])?, scale))
}

impl DataType {
    /// Every named data type (raw bits excluded).
    pub const ALL: [DataType; 15] = [
        DataType::Bool,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float16,
        DataType::BFloat16,
        DataType::Float32,
        DataType::Float64,
        DataType::Complex64,
        DataType::Complex128,
    ];

    /// Size of one element in bytes. A `FixedUtf32` length whose byte size would not fit a
    /// `usize` gives `usize::MAX` (no buffer can hold one element, so every size check and
    /// allocation built on it fails cleanly instead of wrapping).
    ///
    /// ```
    /// assert_eq!(zarrbuf::DataType::Complex128.size(), 16);
    /// assert_eq!(zarrbuf::DataType::FixedUtf32(usize::MAX / 2).size(), usize::MAX);
    /// ```
    pub fn size(self) -> usize {
        match self {
            DataType::Bool | DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 | DataType::Float16 | DataType::BFloat16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::UInt64 | DataType::Float64 | DataType::Complex64 => 8,
            DataType::Complex128 => 16,
            DataType::RawBits(n) | DataType::FixedBytes(n) => n,
            DataType::DateTime64(..) | DataType::TimeDelta64(..) => 8,
            DataType::FixedUtf32(n) => n.saturating_mul(4),
        }
    }

    /// The size of the units that change order with endianness: the element size, except
    /// complex (each part swaps on its own), UTF-32 strings (4-byte code units) and single
    /// bytes / raw bits / byte strings (never swapped).
    ///
    /// ```
    /// assert_eq!(zarrbuf::DataType::Complex64.swap_unit(), 4);
    /// assert_eq!(zarrbuf::DataType::UInt8.swap_unit(), 1);
    /// ```
    pub fn swap_unit(self) -> usize {
        match self {
            DataType::Complex64 => 4,
            DataType::Complex128 => 8,
            DataType::RawBits(_) | DataType::FixedBytes(_) => 1,
            DataType::FixedUtf32(_) => 4,
            other => other.size(),
        }
    }

    /// True for float16, bfloat16, float32, float64 and both complex types.
    ///
    /// ```
    /// assert!(zarrbuf::DataType::Float16.is_float());
    /// ```
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Float16
                | DataType::BFloat16
                | DataType::Float32
                | DataType::Float64
                | DataType::Complex64
                | DataType::Complex128
        )
    }

    /// Formats one element given as native-order bytes (`1.5`, `NaN`, `(1+2j)`, `true`,
    /// `0x0a0b`, `b"ab"`, `"ab"`, `17[10s]`, `NaT`).
    ///
    /// ```
    /// use zarrbuf::DataType;
    /// assert_eq!(DataType::Float32.format_value(&f32::NAN.to_ne_bytes()), "NaN");
    /// assert_eq!(DataType::Int16.format_value(&(-7i16).to_ne_bytes()), "-7");
    /// assert_eq!(DataType::Bool.format_value(&[1]), "true");
    /// ```
    pub fn format_value(self, b: &[u8]) -> String {
        if b.len() != self.size() {
            return format!("<{} bytes>", b.len());
        }
        fn float(v: f64) -> String {
            if v.is_nan() {
                "NaN".into()
            } else if v.is_infinite() {
                if v > 0.0 {
                    "Infinity".into()
                } else {
                    "-Infinity".into()
                }
            } else {
                format!("{v:?}")
            }
        }
        let a = |n: usize| -> [u8; 8] {
            let mut out = [0u8; 8];
            out[..n].copy_from_slice(&b[..n]);
            out
        };
        match self {
            DataType::Bool => (b[0] != 0).to_string(),
            DataType::Int8 => (b[0] as i8).to_string(),
            DataType::UInt8 => b[0].to_string(),
            DataType::Int16 => i16::from_ne_bytes([b[0], b[1]]).to_string(),
            DataType::UInt16 => u16::from_ne_bytes([b[0], b[1]]).to_string(),
            DataType::Int32 => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]).to_string(),
            DataType::UInt32 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]).to_string(),
            DataType::Int64 => i64::from_ne_bytes(a(8)).to_string(),
            DataType::UInt64 => u64::from_ne_bytes(a(8)).to_string(),
            DataType::Float16 => float(f16::from_ne_bytes([b[0], b[1]]).to_f64()),
            DataType::BFloat16 => float(bf16::from_ne_bytes([b[0], b[1]]).to_f64()),
            DataType::Float32 => float(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64),
            DataType::Float64 => float(f64::from_ne_bytes(a(8))),
            DataType::Complex64 => format!(
                "({}{}{}j)",
                float(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64),
                if f32::from_ne_bytes([b[4], b[5], b[6], b[7]]).is_sign_negative() {
                    ""
                } else {
                    "+"
                },
                float(f32::from_ne_bytes([b[4], b[5], b[6], b[7]]) as f64)
            ),
            DataType::Complex128 => {
                let im = f64::from_ne_bytes(b[8..16].try_into().expect("8 bytes"));
                format!(
                    "({}{}{}j)",
                    float(f64::from_ne_bytes(a(8))),
                    if im.is_sign_negative() { "" } else { "+" },
                    float(im)
                )
            }
            DataType::RawBits(_) => format!(
                "0x{}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            ),
            DataType::DateTime64(unit, scale) | DataType::TimeDelta64(unit, scale) => {
                match i64::from_ne_bytes(a(8)) {
                    i64::MIN => "NaT".into(),
                    v => format!("{v}{}", time_suffix(unit, scale)),
                }
            }
            DataType::FixedBytes(_) => {
                let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
                format!("b\"{}\"", b[..end].escape_ascii())
            }
            DataType::FixedUtf32(_) => {
                let text: String = b
                    .chunks_exact(4)
                    .map(|u| u32::from_ne_bytes([u[0], u[1], u[2], u[3]]))
                    .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect();
                format!("{:?}", text.trim_end_matches('\0'))
            }
        }
    }

    /// The scalar kind the kernels use for conversions (times as `int64`); `None` for raw bits
    /// and strings.
    pub(crate) fn scalar_kind(self) -> Option<ScalarKind> {
        Some(match self {
            DataType::Bool => ScalarKind::Bool,
            DataType::Int8 => ScalarKind::I8,
            DataType::Int16 => ScalarKind::I16,
            DataType::Int32 => ScalarKind::I32,
            DataType::Int64 => ScalarKind::I64,
            DataType::UInt8 => ScalarKind::U8,
            DataType::UInt16 => ScalarKind::U16,
            DataType::UInt32 => ScalarKind::U32,
            DataType::UInt64 => ScalarKind::U64,
            DataType::Float16 => ScalarKind::F16,
            DataType::BFloat16 => ScalarKind::BF16,
            DataType::Float32 => ScalarKind::F32,
            DataType::Float64 => ScalarKind::F64,
            DataType::Complex64 => ScalarKind::C64,
            DataType::Complex128 => ScalarKind::C128,
            DataType::DateTime64(..) | DataType::TimeDelta64(..) => ScalarKind::I64,
            DataType::RawBits(_) | DataType::FixedBytes(_) | DataType::FixedUtf32(_) => {
                return None;
            }
        })
    }

    /// The numpy `.npy` descriptor in little-endian (`<f4`, `|b1`, `<c8`, `|V2`, `<M8[s]`,
    /// `|S5`, `<U4`).
    ///
    /// ```
    /// assert_eq!(zarrbuf::DataType::Bool.npy_descr(), "|b1");
    /// assert_eq!(zarrbuf::DataType::Float32.npy_descr(), "<f4");
    /// ```
    pub fn npy_descr(self) -> String {
        match self {
            DataType::Bool => "|b1".into(),
            DataType::Int8 => "|i1".into(),
            DataType::UInt8 => "|u1".into(),
            DataType::Int16 => "<i2".into(),
            DataType::Int32 => "<i4".into(),
            DataType::Int64 => "<i8".into(),
            DataType::UInt16 => "<u2".into(),
            DataType::UInt32 => "<u4".into(),
            DataType::UInt64 => "<u8".into(),
            DataType::Float16 => "<f2".into(),
            // numpy has no bfloat16; ml_dtypes reads it back from raw 2-byte voids.
            DataType::BFloat16 => "|V2".into(),
            DataType::Float32 => "<f4".into(),
            DataType::Float64 => "<f8".into(),
            DataType::Complex64 => "<c8".into(),
            DataType::Complex128 => "<c16".into(),
            DataType::RawBits(n) => format!("|V{n}"),
            DataType::DateTime64(u, k) => format!("<M8{}", time_suffix(u, k)),
            DataType::TimeDelta64(u, k) => format!("<m8{}", time_suffix(u, k)),
            DataType::FixedBytes(n) => format!("|S{n}"),
            DataType::FixedUtf32(n) => format!("<U{n}"),
        }
    }

    /// The data type of a numpy type code without its byte-order character (`"f4"`, `"b1"`,
    /// `"M8[ns]"`, `"S5"`, `"U4"`, `"V3"`), as `.npy` headers and zarr v2 spell them.
    ///
    /// ```
    /// use zarrbuf::DataType;
    /// use zarrbuf::dtype::TimeUnit;
    /// assert_eq!(DataType::from_numpy_code("c8"), Some(DataType::Complex64));
    /// assert_eq!(DataType::from_numpy_code("m8[ms]"), Some(DataType::TimeDelta64(TimeUnit::Millisecond, 1)));
    /// assert_eq!(DataType::from_numpy_code("O"), None);
    /// // numpy's own limit: an element of at most i32::MAX bytes.
    /// assert_eq!(DataType::from_numpy_code("U536870911"), Some(DataType::FixedUtf32(536870911)));
    /// assert_eq!(DataType::from_numpy_code("U536870912"), None);
    /// ```
    pub fn from_numpy_code(code: &str) -> Option<DataType> {
        // numpy refuses itemsizes past i32::MAX bytes ("data type too large"); so do we, which
        // also keeps every element size far from overflowing.
        const MAX_ITEMSIZE: usize = i32::MAX as usize;
        let sized = |rest: &str| {
            rest.parse::<usize>()
                .ok()
                .filter(|&n| n > 0 && n <= MAX_ITEMSIZE)
        };
        Some(match code {
            "b1" | "?" => DataType::Bool,
            "i1" => DataType::Int8,
            "i2" => DataType::Int16,
            "i4" => DataType::Int32,
            "i8" => DataType::Int64,
            "u1" => DataType::UInt8,
            "u2" => DataType::UInt16,
            "u4" => DataType::UInt32,
            "u8" => DataType::UInt64,
            "f2" => DataType::Float16,
            "f4" => DataType::Float32,
            "f8" => DataType::Float64,
            "c8" => DataType::Complex64,
            "c16" => DataType::Complex128,
            c => {
                if let Some(rest) = c.strip_prefix("M8") {
                    let (u, k) = parse_time_suffix(rest)?;
                    DataType::DateTime64(u, k)
                } else if let Some(rest) = c.strip_prefix("m8") {
                    let (u, k) = parse_time_suffix(rest)?;
                    DataType::TimeDelta64(u, k)
                } else if let Some(rest) = c.strip_prefix('V') {
                    DataType::RawBits(sized(rest)?)
                } else if let Some(rest) = c.strip_prefix('S') {
                    DataType::FixedBytes(sized(rest)?)
                } else if let Some(rest) = c.strip_prefix('U') {
                    DataType::FixedUtf32(sized(rest).filter(|&n| n <= MAX_ITEMSIZE / 4)?)
                } else {
                    return None;
                }
            }
        })
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            DataType::Bool => "bool",
            DataType::Int8 => "int8",
            DataType::Int16 => "int16",
            DataType::Int32 => "int32",
            DataType::Int64 => "int64",
            DataType::UInt8 => "uint8",
            DataType::UInt16 => "uint16",
            DataType::UInt32 => "uint32",
            DataType::UInt64 => "uint64",
            DataType::Float16 => "float16",
            DataType::BFloat16 => "bfloat16",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
            DataType::Complex64 => "complex64",
            DataType::Complex128 => "complex128",
            DataType::RawBits(n) => return write!(f, "r{}", n * 8),
            DataType::DateTime64(u, k) => return write!(f, "datetime64{}", time_suffix(*u, *k)),
            DataType::TimeDelta64(u, k) => return write!(f, "timedelta64{}", time_suffix(*u, *k)),
            DataType::FixedBytes(n) => return write!(f, "S{n}"),
            DataType::FixedUtf32(n) => return write!(f, "U{n}"),
        };
        f.write_str(name)
    }
}

impl std::str::FromStr for DataType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if let Some(t) = DataType::ALL.iter().find(|t| t.to_string() == s) {
            return Ok(*t);
        }
        if let Some(bits) = s.strip_prefix('r').and_then(|b| b.parse::<usize>().ok())
            && bits > 0
            && bits % 8 == 0
        {
            return Ok(DataType::RawBits(bits / 8));
        }
        let numpy = s.strip_prefix("numpy.").unwrap_or(s);
        let time = numpy
            .strip_prefix("datetime64")
            .map(|r| ("M8", r))
            .or_else(|| numpy.strip_prefix("timedelta64").map(|r| ("m8", r)));
        let code = match time {
            Some((code, rest)) => format!("{code}{rest}"),
            None if s.starts_with(['S', 'U']) => s.to_string(),
            None => String::new(),
        };
        if let Some(t) = DataType::from_numpy_code(&code) {
            return Ok(t);
        }
        Err(Error::DataType(format!(
            "unknown data type {s:?}; expected one of bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128, rN (N a multiple of 8), datetime64[unit], timedelta64[unit], S<n> or U<n>"
        )))
    }
}

/// The byte order of the elements in memory.
///
/// ```
/// assert_eq!(zarrbuf::dtype::ByteOrder::native(), zarrbuf::dtype::ByteOrder::Little);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    /// The byte order of this machine.
    pub fn native() -> Self {
        if cfg!(target_endian = "little") {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }
}

/// The memory order of a new n-d buffer: C (last axis fastest) or Fortran (first axis fastest).
///
/// ```
/// let s = zarrbuf::Order::F.strides(&[2, 3], 4);
/// assert_eq!(s, vec![4, 8]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// Row-major.
    #[default]
    C,
    /// Column-major.
    F,
}

impl Order {
    /// Contiguous byte strides for `shape` with elements of `elem_size` bytes.
    pub fn strides(self, shape: &[usize], elem_size: usize) -> Vec<isize> {
        let mut strides = vec![0isize; shape.len()];
        let mut step = elem_size as isize;
        // Saturating: a shape too large for memory gets impossible strides instead of a
        // panic; every allocation checks its byte length on its own.
        let mut set = |i: usize| {
            strides[i] = step;
            step = step.saturating_mul(isize::try_from(shape[i].max(1)).unwrap_or(isize::MAX));
        };
        match self {
            Order::C => (0..shape.len()).rev().for_each(&mut set),
            Order::F => (0..shape.len()).for_each(&mut set),
        }
        strides
    }
}

/// A Rust type that is the in-memory form of one zarr data type (native byte order).
///
/// ```
/// use zarrbuf::{DataType, Element};
/// assert_eq!(<f32 as Element>::DTYPE, DataType::Float32);
/// ```
pub trait Element: Copy + Send + Sync + 'static + private::Sealed {
    /// The zarr data type this Rust type represents.
    const DTYPE: DataType;
    /// The element's bytes in native order.
    fn to_ne_bytes_vec(self) -> Vec<u8> {
        let size = std::mem::size_of::<Self>();
        // SAFETY: every Element is a plain-old-data type without padding (sealed list below).
        let bytes = unsafe { std::slice::from_raw_parts(&self as *const Self as *const u8, size) };
        bytes.to_vec()
    }
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:expr),* $(,)?) => {$(
        impl private::Sealed for $t {}
        impl Element for $t { const DTYPE: DataType = $d; }
    )*};
}

element!(
    bool => DataType::Bool,
    i8 => DataType::Int8,
    i16 => DataType::Int16,
    i32 => DataType::Int32,
    i64 => DataType::Int64,
    u8 => DataType::UInt8,
    u16 => DataType::UInt16,
    u32 => DataType::UInt32,
    u64 => DataType::UInt64,
    f16 => DataType::Float16,
    bf16 => DataType::BFloat16,
    f32 => DataType::Float32,
    f64 => DataType::Float64,
    Complex<f32> => DataType::Complex64,
    Complex<f64> => DataType::Complex128,
);

/// What the elements of a variable-length array (a [`crate::VarLenBuffer`]) are: UTF-8 strings or
/// arbitrary bytes.
///
/// ```
/// use zarrbuf::{VarLenBuffer, VarLenKind};
/// let s = VarLenBuffer::from_strings(vec![2], ["a", "b"])?;
/// assert_eq!(s.kind(), VarLenKind::Utf8);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VarLenKind {
    /// UTF-8 strings (zarr v3 `string`, v2 `|O` with `vlen-utf8`; Arrow `large_utf8`).
    Utf8,
    /// Byte strings (zarr v3 `variable_length_bytes`, v2 `|O` with `vlen-bytes`; Arrow
    /// `large_binary`).
    Bytes,
}

impl std::fmt::Display for VarLenKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarLenKind::Utf8 => "UTF-8 strings",
            VarLenKind::Bytes => "byte strings",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_types_round_trip_through_names_and_descriptors() {
        let mut types = vec![
            DataType::FixedBytes(5),
            DataType::FixedUtf32(3),
            DataType::RawBits(7),
        ];
        for unit in TimeUnit::ALL {
            for scale in [1, 25] {
                types.push(DataType::DateTime64(unit, scale));
                types.push(DataType::TimeDelta64(unit, scale));
            }
        }
        for t in types {
            assert_eq!(t.to_string().parse::<DataType>().unwrap(), t, "{t}");
            let descr = t.npy_descr();
            assert_eq!(DataType::from_numpy_code(&descr[1..]), Some(t), "{descr}");
        }
        assert_eq!(
            "numpy.timedelta64[ms]".parse::<DataType>().unwrap(),
            DataType::TimeDelta64(TimeUnit::Millisecond, 1)
        );
        assert!("datetime64[0s]".parse::<DataType>().is_err());
        assert!("datetime64[parsec]".parse::<DataType>().is_err());
        assert!("S0".parse::<DataType>().is_err());
        assert_eq!(
            DataType::from_numpy_code("M8[μs]"),
            Some(DataType::DateTime64(TimeUnit::Microsecond, 1))
        );
    }

    #[test]
    fn numpy_types_have_their_sizes_swap_units_and_formats() {
        let d = DataType::DateTime64(TimeUnit::Second, 10);
        assert_eq!((d.size(), d.swap_unit()), (8, 8));
        assert_eq!(d.format_value(&17i64.to_ne_bytes()), "17[10s]");
        assert_eq!(d.format_value(&i64::MIN.to_ne_bytes()), "NaT");
        let u = DataType::FixedUtf32(3);
        assert_eq!((u.size(), u.swap_unit()), (12, 4));
        let text: Vec<u8> = ['é', 'x', '\0']
            .iter()
            .flat_map(|c| (*c as u32).to_ne_bytes())
            .collect();
        assert_eq!(u.format_value(&text), "\"éx\"");
        let b = DataType::FixedBytes(4);
        assert_eq!((b.size(), b.swap_unit()), (4, 1));
        assert_eq!(b.format_value(b"a\x01\0\0"), "b\"a\\x01\"");
        assert_eq!(d.scalar_kind(), Some(ScalarKind::I64));
        assert_eq!(u.scalar_kind(), None);
    }
}
