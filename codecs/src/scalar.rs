//! Element types understood by [`cast`](crate::host::cast).

/// The element types a cast converts between (numpy / zarr scalar types).
///
/// `Bool` is one byte, 0 or 1 (any non-zero byte reads as `true`); `C64` and `C128` are
/// complex numbers made of two `f32` / `f64` parts, real part first. All kinds are stored in
/// little-endian byte order.
///
/// ```
/// use zarrbuf_codecs::ScalarKind;
/// assert_eq!(ScalarKind::C64.size(), 8);
/// assert_eq!(ScalarKind::BF16.size(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `bool`, one byte.
    Bool,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16.
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
    /// `complex64`: two `f32`.
    C64,
    /// `complex128`: two `f64`.
    C128,
}

impl ScalarKind {
    /// Every kind, in declaration order.
    ///
    /// ```
    /// assert_eq!(zarrbuf_codecs::ScalarKind::ALL.len(), 15);
    /// ```
    pub const ALL: [ScalarKind; 15] = [
        ScalarKind::Bool,
        ScalarKind::I8,
        ScalarKind::I16,
        ScalarKind::I32,
        ScalarKind::I64,
        ScalarKind::U8,
        ScalarKind::U16,
        ScalarKind::U32,
        ScalarKind::U64,
        ScalarKind::F16,
        ScalarKind::BF16,
        ScalarKind::F32,
        ScalarKind::F64,
        ScalarKind::C64,
        ScalarKind::C128,
    ];

    /// Size of one element in bytes.
    ///
    /// ```
    /// use zarrbuf_codecs::ScalarKind;
    /// assert_eq!(ScalarKind::Bool.size(), 1);
    /// assert_eq!(ScalarKind::C128.size(), 16);
    /// ```
    pub fn size(self) -> usize {
        match self {
            ScalarKind::Bool | ScalarKind::I8 | ScalarKind::U8 => 1,
            ScalarKind::I16 | ScalarKind::U16 | ScalarKind::F16 | ScalarKind::BF16 => 2,
            ScalarKind::I32 | ScalarKind::U32 | ScalarKind::F32 => 4,
            ScalarKind::I64 | ScalarKind::U64 | ScalarKind::F64 | ScalarKind::C64 => 8,
            ScalarKind::C128 => 16,
        }
    }

    /// Whether the kind is a floating-point or complex kind (NaN is possible).
    ///
    /// ```
    /// use zarrbuf_codecs::ScalarKind;
    /// assert!(ScalarKind::BF16.is_float());
    /// assert!(!ScalarKind::U8.is_float());
    /// ```
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarKind::F16
                | ScalarKind::BF16
                | ScalarKind::F32
                | ScalarKind::F64
                | ScalarKind::C64
                | ScalarKind::C128
        )
    }

    /// The code the CUDA cast kernel uses for this kind (its position in [`ScalarKind::ALL`]).
    pub(crate) fn code(self) -> u32 {
        self as u32
    }
}
