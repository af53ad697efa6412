//! Element arithmetic in a scalar type's own precision, as numpy computes it: integers wrap,
//! `float16` goes through `float32` and rounds back after every operation.

use super::numpy_dtype::Scalar;
use half::f16;

/// A numeric element type the filters compute in.
pub(crate) trait Arith: Copy + PartialEq {
    /// Bytes per element.
    const SIZE: usize;
    /// Reads one native-order element.
    fn load(b: &[u8]) -> Self;
    /// Writes one native-order element.
    fn store(self, b: &mut [u8]);
    /// `self + o` (wrapping for integers).
    fn add(self, o: Self) -> Self;
    /// `self - o` (wrapping for integers).
    fn sub(self, o: Self) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_ne_bytes(a)
            }
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
        }
    )*};
}
int_arith!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_ne_bytes(a)
            }
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
        }
    )*};
}
float_arith!(f16, f32, f64);

/// Runs `$body` with `$T` the Rust type of scalar `$s` (bool excluded: `$bool` runs instead).
macro_rules! with_numeric {
    ($s:expr, $T:ident => $body:expr, bool => $bool:expr) => {
        match $s {
            Scalar::I8 => {
                type $T = i8;
                $body
            }
            Scalar::I16 => {
                type $T = i16;
                $body
            }
            Scalar::I32 => {
                type $T = i32;
                $body
            }
            Scalar::I64 => {
                type $T = i64;
                $body
            }
            Scalar::U8 => {
                type $T = u8;
                $body
            }
            Scalar::U16 => {
                type $T = u16;
                $body
            }
            Scalar::U32 => {
                type $T = u32;
                $body
            }
            Scalar::U64 => {
                type $T = u64;
                $body
            }
            Scalar::F16 => {
                type $T = half::f16;
                $body
            }
            Scalar::F32 => {
                type $T = f32;
                $body
            }
            Scalar::F64 => {
                type $T = f64;
                $body
            }
            Scalar::Bool => $bool,
        }
    };
}

/// `out[0] = x[0]; out[i] = x[i] - x[i-1]` in `scalar`'s arithmetic (numpy `diff`), in place.
pub(crate) fn diff_in_place(bytes: &mut [u8], scalar: Scalar) -> Result<(), String> {
    fn go<T: Arith>(bytes: &mut [u8]) {
        let mut prev: Option<T> = None;
        for e in bytes.chunks_exact_mut(T::SIZE) {
            let x = T::load(e);
            if let Some(p) = prev {
                x.sub(p).store(e);
            }
            prev = Some(x);
        }
    }
    with_numeric!(scalar, T => { go::<T>(bytes); Ok(()) }, bool => Err("delta of booleans".into()))
}

/// Running sum in `scalar`'s arithmetic (numpy `cumsum` with an output of that type), in place.
pub(crate) fn cumsum_in_place(bytes: &mut [u8], scalar: Scalar) -> Result<(), String> {
    fn go<T: Arith>(bytes: &mut [u8]) {
        let mut acc: Option<T> = None;
        for e in bytes.chunks_exact_mut(T::SIZE) {
            let x = T::load(e);
            let s = match acc {
                None => x,
                Some(a) => a.add(x),
            };
            s.store(e);
            acc = Some(s);
        }
    }
    with_numeric!(scalar, T => { go::<T>(bytes); Ok(()) }, bool => Err("delta of booleans".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_and_cumsum_invert_each_other_and_wrap() {
        let v: Vec<u8> = [100i8, -100, 27, 127].iter().map(|&x| x as u8).collect();
        let mut d = v.clone();
        diff_in_place(&mut d, Scalar::I8).unwrap();
        assert_eq!(
            d.iter().map(|&x| x as i8).collect::<Vec<_>>(),
            vec![100, 56, 127, 100]
        );
        cumsum_in_place(&mut d, Scalar::I8).unwrap();
        assert_eq!(d, v);
        let h: Vec<u8> = [1.5f32, 0.25]
            .iter()
            .flat_map(|x| f16::from_f32(*x).to_ne_bytes())
            .collect();
        let mut hd = h.clone();
        diff_in_place(&mut hd, Scalar::F16).unwrap();
        cumsum_in_place(&mut hd, Scalar::F16).unwrap();
        assert_eq!(hd, h);
        assert!(diff_in_place(&mut [1u8], Scalar::Bool).is_err());
    }
}
