//! Converting copy between scalar kinds (numpy `astype` semantics).

use crate::error::{Result, invalid};
use crate::float16::{f64_to_bf16_bits, f64_to_f16_bits};
use crate::layout::{Plan, Strided};
use crate::scalar::ScalarKind;
use half::{bf16, f16};

/// Converts every element of `shape` from `src_kind` at `src_view` to `dst_kind` at
/// `dst_view`. Both sides are little-endian (host order); byte swapping is a separate step.
///
/// Conversion rules (numpy `astype`, with the cases numpy leaves undefined pinned down):
///
/// * integer → integer: two's-complement wrap-around (`300i32 → u8` is 44);
/// * integer → float: round to nearest even (`f16`/`bf16` round through `f64`);
/// * float → float: round to nearest even; overflow gives ±infinity; NaN stays NaN
///   (its payload is not guaranteed);
/// * float → integer: truncation toward zero, **saturating** at the target's range, NaN → 0
///   (Rust `as` semantics);
/// * anything → bool: `x != 0` (NaN → true; complex: either part non-zero);
///   bool → anything: 0 or 1 (any non-zero source byte is `true`);
/// * complex → real: the real part, then as above; real → complex: imaginary part 0.
///
/// # Safety
///
/// `src` must be valid for reads of `src_len` bytes and `dst` for writes of `dst_len` bytes,
/// the two regions must not overlap, and nothing else may access the destination during the
/// call.
///
/// ```
/// use zarrbuf_codecs::{host, ScalarKind, Strided};
/// let src: Vec<u8> = [1.9f32, -2.7, 300.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let mut dst = [0u8; 3];
/// // SAFETY: both buffers are live and distinct.
/// unsafe {
///     host::cast(
///         src.as_ptr(), src.len(), Strided { offset: 0, strides: &[4] }, ScalarKind::F32,
///         dst.as_mut_ptr(), 3, Strided { offset: 0, strides: &[1] }, ScalarKind::I8,
///         &[3],
///     )?;
/// }
/// assert_eq!(dst, [1, (-2i8) as u8, 127]);
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub unsafe fn cast(
    src: *const u8,
    src_len: usize,
    src_view: Strided<'_>,
    src_kind: ScalarKind,
    dst: *mut u8,
    dst_len: usize,
    dst_view: Strided<'_>,
    dst_kind: ScalarKind,
    shape: &[usize],
) -> Result<()> {
    let Some(plan) = Plan::new(
        src_len,
        src_view,
        src_kind.size(),
        dst_len,
        dst_view,
        dst_kind.size(),
        shape,
    )?
    else {
        return Ok(());
    };
    if src.is_null() || dst.is_null() {
        return Err(invalid("null pointer for a non-empty region"));
    }
    // SAFETY: the plan's elements are in bounds of both regions (Plan::new) and the caller
    // guarantees valid, disjoint regions.
    unsafe { dispatch(&plan, src, src_kind, dst, dst_kind) };
    Ok(())
}

/// Safe form of [`cast`] on two distinct slices.
///
/// ```
/// use zarrbuf_codecs::{host, ScalarKind, Strided};
/// let src = [0u8, 7, 0];
/// let mut dst = [0u8; 6];
/// host::cast_slices(
///     &src, Strided { offset: 0, strides: &[1] }, ScalarKind::Bool,
///     &mut dst, Strided { offset: 0, strides: &[2] }, ScalarKind::F16,
///     &[3],
/// )?;
/// assert_eq!(dst, [0, 0, 0x00, 0x3c, 0, 0]); // 0.0, 1.0, 0.0
/// # Ok::<(), zarrbuf_codecs::CodecError>(())
/// ```
pub fn cast_slices(
    src: &[u8],
    src_view: Strided<'_>,
    src_kind: ScalarKind,
    dst: &mut [u8],
    dst_view: Strided<'_>,
    dst_kind: ScalarKind,
    shape: &[usize],
) -> Result<()> {
    // SAFETY: slices are valid for their lengths and cannot overlap.
    unsafe {
        cast(
            src.as_ptr(),
            src.len(),
            src_view,
            src_kind,
            dst.as_mut_ptr(),
            dst.len(),
            dst_view,
            dst_kind,
            shape,
        )
    }
}

/// A scalar that can be read from (little-endian, unaligned) bytes and converted.
trait Src: Copy {
    const SIZE: usize;
    /// # Safety
    /// `SIZE` bytes readable at `p`.
    unsafe fn read(p: *const u8) -> Self;
    fn convert<D: Dst>(self) -> D;
}

/// A scalar that can be built from the conversion intermediates and written.
trait Dst: Copy {
    const SIZE: usize;
    fn from_i64(x: i64) -> Self;
    fn from_u64(x: u64) -> Self;
    fn from_f64(x: f64) -> Self;
    /// Must equal `from_f64(x as f64)` (a faster path for `f32` sources).
    fn from_f32(x: f32) -> Self;
    fn from_complex(re: f64, im: f64) -> Self;
    /// # Safety
    /// `SIZE` bytes writable at `p`.
    unsafe fn write(self, p: *mut u8);
}

/// A one-byte boolean as stored (0 or non-zero).
#[derive(Clone, Copy)]
struct Bool(u8);
/// complex64.
#[derive(Clone, Copy)]
struct C64([f32; 2]);
/// complex128.
#[derive(Clone, Copy)]
struct C128([f64; 2]);

macro_rules! rw {
    ($t:ty) => {
        const SIZE: usize = std::mem::size_of::<$t>();
    };
}

macro_rules! read_write {
    ($t:ty) => {
        impl ReadWrite for $t {
            #[inline(always)]
            unsafe fn rd(p: *const u8) -> Self {
                // SAFETY: the caller guarantees size_of::<Self>() readable bytes; all bit
                // patterns are valid for these plain types.
                unsafe { (p as *const Self).read_unaligned() }
            }
            #[inline(always)]
            unsafe fn wr(self, p: *mut u8) {
                // SAFETY: the caller guarantees size_of::<Self>() writable bytes.
                unsafe { (p as *mut Self).write_unaligned(self) }
            }
        }
    };
}

/// Unaligned raw reads and writes of plain-old-data scalars.
trait ReadWrite: Copy {
    /// # Safety
    /// `size_of::<Self>()` bytes readable at `p`.
    unsafe fn rd(p: *const u8) -> Self;
    /// # Safety
    /// `size_of::<Self>()` bytes writable at `p`.
    unsafe fn wr(self, p: *mut u8);
}
read_write!(Bool);
read_write!(i8);
read_write!(i16);
read_write!(i32);
read_write!(i64);
read_write!(u8);
read_write!(u16);
read_write!(u32);
read_write!(u64);
read_write!(f16);
read_write!(bf16);
read_write!(f32);
read_write!(f64);
read_write!(C64);
read_write!(C128);

macro_rules! src_impl {
    ($t:ty, |$x:ident| $conv:expr) => {
        impl Src for $t {
            rw!($t);
            #[inline(always)]
            unsafe fn read(p: *const u8) -> Self {
                // SAFETY: forwarded caller guarantee.
                unsafe { <$t as ReadWrite>::rd(p) }
            }
            #[inline(always)]
            fn convert<D: Dst>(self) -> D {
                let $x = self;
                $conv
            }
        }
    };
}
src_impl!(Bool, |x| D::from_u64((x.0 != 0) as u64));
src_impl!(i8, |x| D::from_i64(x as i64));
src_impl!(i16, |x| D::from_i64(x as i64));
src_impl!(i32, |x| D::from_i64(x as i64));
src_impl!(i64, |x| D::from_i64(x));
src_impl!(u8, |x| D::from_u64(x as u64));
src_impl!(u16, |x| D::from_u64(x as u64));
src_impl!(u32, |x| D::from_u64(x as u64));
src_impl!(u64, |x| D::from_u64(x));
src_impl!(f16, |x| D::from_f64(x.to_f64()));
src_impl!(bf16, |x| D::from_f64(x.to_f64()));
src_impl!(f32, |x| D::from_f32(x));
src_impl!(f64, |x| D::from_f64(x));
src_impl!(C64, |x| D::from_complex(x.0[0] as f64, x.0[1] as f64));
src_impl!(C128, |x| D::from_complex(x.0[0], x.0[1]));

macro_rules! dst_impl {
    ($t:ty, i = |$i:ident| $fi:expr, u = |$u:ident| $fu:expr, f = |$f:ident| $ff:expr,
     s = |$s:ident| $fs:expr, c = |$re:ident, $im:ident| $fc:expr) => {
        impl Dst for $t {
            rw!($t);
            #[inline(always)]
            fn from_i64($i: i64) -> Self {
                $fi
            }
            #[inline(always)]
            fn from_u64($u: u64) -> Self {
                $fu
            }
            #[inline(always)]
            fn from_f64($f: f64) -> Self {
                $ff
            }
            #[inline(always)]
            fn from_f32($s: f32) -> Self {
                $fs
            }
            #[inline(always)]
            #[allow(unused_variables)]
            fn from_complex($re: f64, $im: f64) -> Self {
                $fc
            }
            #[inline(always)]
            unsafe fn write(self, p: *mut u8) {
                // SAFETY: forwarded caller guarantee.
                unsafe { <$t as ReadWrite>::wr(self, p) }
            }
        }
    };
}
macro_rules! dst_int {
    ($($t:ty),*) => {$(
        dst_impl!($t, i = |x| x as $t, u = |x| x as $t, f = |x| x as $t, s = |x| x as $t,
            c = |re, im| re as $t);
    )*};
}
dst_int!(i8, i16, i32, i64, u8, u16, u32, u64);
dst_impl!(
    Bool,
    i = |x| Bool((x != 0) as u8),
    u = |x| Bool((x != 0) as u8),
    f = |x| Bool((x != 0.0) as u8),
    s = |x| Bool((x != 0.0) as u8),
    c = |re, im| Bool((re != 0.0 || im != 0.0) as u8)
);
dst_impl!(
    f32,
    i = |x| x as f32,
    u = |x| x as f32,
    f = |x| x as f32,
    s = |x| x,
    c = |re, im| re as f32
);
dst_impl!(
    f64,
    i = |x| x as f64,
    u = |x| x as f64,
    f = |x| x,
    s = |x| x as f64,
    c = |re, im| re
);
dst_impl!(
    f16,
    i = |x| f16::from_bits(f64_to_f16_bits(x as f64)),
    u = |x| f16::from_bits(f64_to_f16_bits(x as f64)),
    f = |x| f16::from_bits(f64_to_f16_bits(x)),
    // half's f32 narrowing is correctly rounded (F16C where available)
    s = |x| f16::from_f32(x),
    c = |re, im| f16::from_bits(f64_to_f16_bits(re))
);
dst_impl!(
    bf16,
    i = |x| bf16::from_bits(f64_to_bf16_bits(x as f64)),
    u = |x| bf16::from_bits(f64_to_bf16_bits(x as f64)),
    f = |x| bf16::from_bits(f64_to_bf16_bits(x)),
    s = |x| bf16::from_f32(x),
    c = |re, im| bf16::from_bits(f64_to_bf16_bits(re))
);
dst_impl!(
    C64,
    i = |x| C64([x as f32, 0.0]),
    u = |x| C64([x as f32, 0.0]),
    f = |x| C64([x as f32, 0.0]),
    s = |x| C64([x, 0.0]),
    c = |re, im| C64([re as f32, im as f32])
);
dst_impl!(
    C128,
    i = |x| C128([x as f64, 0.0]),
    u = |x| C128([x as f64, 0.0]),
    f = |x| C128([x, 0.0]),
    s = |x| C128([x as f64, 0.0]),
    c = |re, im| C128([re, im])
);

/// Converts every element of a validated plan.
///
/// # Safety
///
/// Every element the plan addresses must be readable at `src` (as `S`) and writable at `dst`
/// (as `D`); the regions must be disjoint.
unsafe fn run<S: Src, D: Dst>(plan: &Plan, src: *const u8, dst: *mut u8) {
    let (n, sa, sb) = plan.inner();
    if sa == S::SIZE as isize && sb == D::SIZE as isize {
        plan.for_each_row(|so, dof| {
            for i in 0..n {
                // SAFETY: element i of this contiguous row is in bounds (Plan invariant).
                unsafe {
                    let v = S::read(src.add(so + i * S::SIZE));
                    v.convert::<D>().write(dst.add(dof + i * D::SIZE));
                }
            }
        });
    } else {
        plan.for_each_row(|so, dof| {
            for i in 0..n as isize {
                // SAFETY: element i of this row is in bounds (Plan invariant); offsets are
                // computed in isize since strides may be negative.
                unsafe {
                    let v = S::read(src.offset(so as isize + i * sa));
                    v.convert::<D>().write(dst.offset(dof as isize + i * sb));
                }
            }
        });
    }
}

macro_rules! dispatch_dst {
    ($S:ty, $plan:expr, $src:expr, $dst:expr, $dk:expr) => {
        // SAFETY: forwarded from `dispatch`'s caller; each arm's `D` is the type of `$dk`.
        unsafe {
            match $dk {
                ScalarKind::Bool => run::<$S, Bool>($plan, $src, $dst),
                ScalarKind::I8 => run::<$S, i8>($plan, $src, $dst),
                ScalarKind::I16 => run::<$S, i16>($plan, $src, $dst),
                ScalarKind::I32 => run::<$S, i32>($plan, $src, $dst),
                ScalarKind::I64 => run::<$S, i64>($plan, $src, $dst),
                ScalarKind::U8 => run::<$S, u8>($plan, $src, $dst),
                ScalarKind::U16 => run::<$S, u16>($plan, $src, $dst),
                ScalarKind::U32 => run::<$S, u32>($plan, $src, $dst),
                ScalarKind::U64 => run::<$S, u64>($plan, $src, $dst),
                ScalarKind::F16 => run::<$S, f16>($plan, $src, $dst),
                ScalarKind::BF16 => run::<$S, bf16>($plan, $src, $dst),
                ScalarKind::F32 => run::<$S, f32>($plan, $src, $dst),
                ScalarKind::F64 => run::<$S, f64>($plan, $src, $dst),
                ScalarKind::C64 => run::<$S, C64>($plan, $src, $dst),
                ScalarKind::C128 => run::<$S, C128>($plan, $src, $dst),
            }
        }
    };
}

/// Picks the monomorphised loop for a kind pair.
///
/// # Safety
///
/// As [`run`], with `S`/`D` the types of `sk`/`dk`.
unsafe fn dispatch(plan: &Plan, src: *const u8, sk: ScalarKind, dst: *mut u8, dk: ScalarKind) {
    match sk {
        ScalarKind::Bool => dispatch_dst!(Bool, plan, src, dst, dk),
        ScalarKind::I8 => dispatch_dst!(i8, plan, src, dst, dk),
        ScalarKind::I16 => dispatch_dst!(i16, plan, src, dst, dk),
        ScalarKind::I32 => dispatch_dst!(i32, plan, src, dst, dk),
        ScalarKind::I64 => dispatch_dst!(i64, plan, src, dst, dk),
        ScalarKind::U8 => dispatch_dst!(u8, plan, src, dst, dk),
        ScalarKind::U16 => dispatch_dst!(u16, plan, src, dst, dk),
        ScalarKind::U32 => dispatch_dst!(u32, plan, src, dst, dk),
        ScalarKind::U64 => dispatch_dst!(u64, plan, src, dst, dk),
        ScalarKind::F16 => dispatch_dst!(f16, plan, src, dst, dk),
        ScalarKind::BF16 => dispatch_dst!(bf16, plan, src, dst, dk),
        ScalarKind::F32 => dispatch_dst!(f32, plan, src, dst, dk),
        ScalarKind::F64 => dispatch_dst!(f64, plan, src, dst, dk),
        ScalarKind::C64 => dispatch_dst!(C64, plan, src, dst, dk),
        ScalarKind::C128 => dispatch_dst!(C128, plan, src, dst, dk),
    }
}
