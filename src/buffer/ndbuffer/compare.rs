//! Comparison: element-wise equality with NaN and signed-zero rules per data type.

use super::NDBuffer;
use crate::data_types::DataType;
use crate::errors::{Error, Result};
use std::sync::Arc;

impl NDBuffer {
    /// True when every element equals `value` (one element's bytes, native order), with zarr
    /// semantics: floats compare by value except that −0.0 differs from 0.0 (so a chunk of
    /// −0.0 is not mistaken for a 0.0 fill value), and NaN equals NaN when `equal_nan`.
    /// Device arrays are copied to the host to compare.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![f32::NAN, f32::NAN], &[2])?;
    /// assert!(a.all_equal(&f32::NAN.to_ne_bytes(), true)?);
    /// assert!(!a.all_equal(&f32::NAN.to_ne_bytes(), false)?);
    /// let z = zarrbuf::NDBuffer::from_vec(vec![-0.0f32], &[1])?;
    /// assert!(!z.all_equal(&0.0f32.to_ne_bytes(), true)?);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn all_equal(&self, value: &[u8], equal_nan: bool) -> Result<bool> {
        if value.len() != self.dtype.size() {
            return Err(Error::DataType(format!(
                "comparison value has {} bytes but {} elements have {}",
                value.len(),
                self.dtype,
                self.dtype.size()
            )));
        }
        let bytes = self.to_native_bytes()?;
        let eq = element_equality(self.dtype, equal_nan);
        Ok(bytes.chunks_exact(value.len()).all(|e| eq(e, value)))
    }

    /// True when both arrays have the same shape and data type and all elements are equal
    /// under the rules of [`all_equal`](Self::all_equal).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u8, 2], &[2])?;
    /// assert!(a.array_equal(&a.copy()?, false)?);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn array_equal(&self, other: &NDBuffer, equal_nan: bool) -> Result<bool> {
        if self.shape != other.shape || self.dtype != other.dtype {
            return Ok(false);
        }
        let (a, b) = (self.to_native_bytes()?, other.to_native_bytes()?);
        let eq = element_equality(self.dtype, equal_nan);
        let size = self.dtype.size();
        Ok(a.chunks_exact(size)
            .zip(b.chunks_exact(size))
            .all(|(x, y)| eq(x, y)))
    }
}

/// Element comparison for one data type: bytes for integers, value + sign for floats.
/// Compares two elements given as native-order bytes.
type ElementEq = Arc<dyn Fn(&[u8], &[u8]) -> bool>;

fn element_equality(dtype: DataType, equal_nan: bool) -> ElementEq {
    fn float_eq(a: f64, b: f64, nan: bool) -> bool {
        if a.is_nan() || b.is_nan() {
            return nan && a.is_nan() && b.is_nan();
        }
        a == b && a.is_sign_negative() == b.is_sign_negative()
    }
    fn f32_at(b: &[u8]) -> f64 {
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64
    }
    fn f64_at(b: &[u8]) -> f64 {
        f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    match dtype {
        DataType::Float16 => Arc::new(move |a, b| {
            float_eq(
                half::f16::from_ne_bytes([a[0], a[1]]).to_f64(),
                half::f16::from_ne_bytes([b[0], b[1]]).to_f64(),
                equal_nan,
            )
        }),
        DataType::BFloat16 => Arc::new(move |a, b| {
            float_eq(
                half::bf16::from_ne_bytes([a[0], a[1]]).to_f64(),
                half::bf16::from_ne_bytes([b[0], b[1]]).to_f64(),
                equal_nan,
            )
        }),
        DataType::Float32 => Arc::new(move |a, b| float_eq(f32_at(a), f32_at(b), equal_nan)),
        DataType::Float64 => Arc::new(move |a, b| float_eq(f64_at(a), f64_at(b), equal_nan)),
        DataType::Complex64 => Arc::new(move |a, b| {
            float_eq(f32_at(&a[..4]), f32_at(&b[..4]), equal_nan)
                && float_eq(f32_at(&a[4..]), f32_at(&b[4..]), equal_nan)
        }),
        DataType::Complex128 => Arc::new(move |a, b| {
            float_eq(f64_at(&a[..8]), f64_at(&b[..8]), equal_nan)
                && float_eq(f64_at(&a[8..]), f64_at(&b[8..]), equal_nan)
        }),
        _ => Arc::new(|a, b| a == b),
    }
}
