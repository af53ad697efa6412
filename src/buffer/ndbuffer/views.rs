//! Views: new shapes, strides and types over the same buffer (no copies).

use super::{NDBuffer, checked_count};
use crate::data_types::{ByteOrder, DataType, Order};
use crate::errors::{Error, Result};
use std::ops::Range;

impl NDBuffer {
    /// A view of the half-open `subset` (one range per dimension).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec((0u8..12).collect(), &[3, 4])?;
    /// let v = a.get(&[1..3, 2..4])?;
    /// assert_eq!(v.to_vec::<u8>()?, vec![6, 7, 10, 11]);
    /// assert_eq!(v.buffer().storage_id(), a.buffer().storage_id());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn get(&self, subset: &[Range<usize>]) -> Result<NDBuffer> {
        if subset.len() != self.ndim() {
            return Err(Error::ShapeMismatch(format!(
                "subset has {} ranges for an array of {} dimensions",
                subset.len(),
                self.ndim()
            )));
        }
        let mut offset = self.offset;
        let mut shape = Vec::with_capacity(subset.len());
        for (k, r) in subset.iter().enumerate() {
            if r.start > r.end || r.end > self.shape[k] {
                return Err(Error::OutOfBounds(format!(
                    "range {}..{} on dimension {k} of length {} (shape {:?})",
                    r.start, r.end, self.shape[k], self.shape
                )));
            }
            if r.end > r.start {
                offset += r.start * self.strides[k] as usize;
            }
            shape.push(r.end - r.start);
        }
        if shape.contains(&0) {
            offset = self.offset;
        }
        Ok(self.with_layout(shape, self.strides.clone(), offset))
    }

    /// A 0-d view of the element at `index` (integer-tuple indexing).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1i64, 2, 3, 4], &[2, 2])?;
    /// assert_eq!(a.at(&[1, 0])?.item::<i64>()?, 3);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn at(&self, index: &[usize]) -> Result<NDBuffer> {
        let ranges: Vec<Range<usize>> = index.iter().map(|&i| i..i.saturating_add(1)).collect();
        let v = self.get(&ranges)?;
        Ok(v.with_layout(Vec::new(), Vec::new(), v.offset))
    }

    /// A view with the same elements in a new shape: a view when C-contiguous, otherwise a
    /// C-order copy. `ShapeMismatch` when the element counts differ.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec((0u8..6).collect(), &[2, 3])?;
    /// let r = a.reshape(&[3, 2])?;
    /// assert_eq!(r.buffer().storage_id(), a.buffer().storage_id());
    /// assert!(a.reshape(&[4, 2]).is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn reshape(&self, shape: &[usize]) -> Result<NDBuffer> {
        if checked_count(shape)? != self.len() {
            return Err(Error::ShapeMismatch(format!(
                "cannot reshape {} elements (shape {:?}) into shape {shape:?}",
                self.len(),
                self.shape
            )));
        }
        let base = if self.is_c_contiguous() && self.byte_order == ByteOrder::native() {
            self.clone()
        } else {
            self.copy()?
        };
        let strides = Order::C.strides(shape, self.dtype.size());
        Ok(base.with_layout(shape.to_vec(), strides, base.offset))
    }

    /// Removes the listed dimensions, which must have length 1 (all of them when `axes` is empty).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u8, 2], &[1, 2, 1])?;
    /// assert_eq!(a.squeeze(&[])?.shape(), &[2]);
    /// assert_eq!(a.squeeze(&[0])?.shape(), &[2, 1]);
    /// assert!(a.squeeze(&[1]).is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn squeeze(&self, axes: &[usize]) -> Result<NDBuffer> {
        for &ax in axes {
            if ax >= self.ndim() || self.shape[ax] != 1 {
                return Err(Error::InvalidArgument(format!(
                    "cannot squeeze axis {ax} of shape {:?}: only existing axes of length 1 can be removed",
                    self.shape
                )));
            }
        }
        let keep = |k: usize| {
            if axes.is_empty() {
                self.shape[k] != 1
            } else {
                !axes.contains(&k)
            }
        };
        let (shape, strides) = (0..self.ndim())
            .filter(|&k| keep(k))
            .map(|k| (self.shape[k], self.strides[k]))
            .unzip();
        Ok(self.with_layout(shape, strides, self.offset))
    }

    /// A view with the axes permuted (`axes[i]` is the old axis that becomes axis `i`).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![0u8; 24], &[2, 3, 4])?;
    /// assert_eq!(a.transpose(&[2, 0, 1])?.shape(), &[4, 2, 3]);
    /// assert!(a.transpose(&[0, 0, 1]).is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn transpose(&self, axes: &[usize]) -> Result<NDBuffer> {
        let mut seen = vec![false; self.ndim()];
        if axes.len() != self.ndim()
            || axes
                .iter()
                .any(|&a| a >= seen.len() || std::mem::replace(&mut seen[a], true))
        {
            return Err(Error::InvalidArgument(format!(
                "axes {axes:?} are not a permutation of 0..{}",
                self.ndim()
            )));
        }
        let shape = axes.iter().map(|&a| self.shape[a]).collect();
        let strides = axes.iter().map(|&a| self.strides[a]).collect();
        Ok(self.with_layout(shape, strides, self.offset))
    }

    /// Reinterprets the bytes as another data type of the same size (a view, parpy's `with_type`).
    ///
    /// ```
    /// use zarrbuf::{DataType, NDBuffer};
    /// let a = NDBuffer::from_vec(vec![1.0f32], &[1])?;
    /// assert_eq!(a.with_type(DataType::UInt32)?.item::<u32>()?, 0x3f80_0000);
    /// assert!(a.with_type(DataType::UInt8).is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn with_type(&self, dtype: DataType) -> Result<NDBuffer> {
        if dtype.size() != self.dtype.size() {
            return Err(Error::DataType(format!(
                "with_type needs equal element sizes: {} has {} bytes, {dtype} has {}; use astype to convert",
                self.dtype,
                self.dtype.size(),
                dtype.size()
            )));
        }
        let mut v = self.clone();
        v.dtype = dtype;
        Ok(v)
    }
}
