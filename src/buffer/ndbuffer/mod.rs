//! [`NDBuffer`]: a typed, strided n-d view over a [`Buffer`].

mod compare;
mod construct;
mod copies;
mod host_export;
mod views;

pub use host_export::{HostArrayView, HostArrayViewMut};

use super::Buffer;
use crate::data_types::{ByteOrder, DataType, Order};
use crate::errors::{Error, Result};
use crate::place::Memory;
use std::ops::Range;
use zarrbuf_codecs::Strided;

/// A typed, strided n-d array in any memory: a [`Buffer`] plus data type, shape, byte strides,
/// byte offset and byte order.
///
/// # Invariants
/// 1. `shape.len() == strides.len()` (the number of dimensions; 0 for a scalar).
/// 2. Strides are in bytes and non-negative.
/// 3. If no dimension is 0, the element at index `i` starts at byte
///    `offset + Σ i[k]·strides[k]` of `buffer`, and every element's `dtype.size()` bytes lie
///    inside `buffer` (`offset + Σ (shape[k]-1)·strides[k] + size ≤ buffer.len()`).
/// 4. Elements are stored in `byte_order`; operations producing new arrays use native order.
///
/// Views (`get`, `transpose`, `reshape` of contiguous data, `squeeze`, `with_type`) share the
/// buffer and see each other's writes; operations on device memory run on the device.
///
/// ```
/// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
/// let a = NDBuffer::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
/// let t = a.transpose(&[1, 0])?;            // a view
/// assert_eq!(t.shape(), &[3, 2]);
/// assert_eq!(t.to_ndarray::<i32>()?[[2, 1]], 6);
/// let row = a.get(&[1..2, 0..3])?;         // a view of the second row
/// assert_eq!(row.to_vec::<i32>()?, vec![4, 5, 6]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct NDBuffer {
    buffer: Buffer,
    dtype: DataType,
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    byte_order: ByteOrder,
}

/// This NDBuffer seen as a window of a C-contiguous parent array (what zarrs decodes into).
pub(crate) struct CWindow {
    /// Bytes of the buffer holding the parent (relative to the buffer handle).
    pub byte_start: usize,
    pub byte_end: usize,
    /// Shape of the parent in elements.
    pub parent_shape: Vec<u64>,
    /// Where this array sits in the parent.
    pub window: zarrs::array::ArraySubset,
}

fn checked_count(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .ok_or_else(|| {
            Error::InvalidSize(format!(
                "shape {shape:?} has more elements than fit in memory"
            ))
        })
}

/// Bytes needed for `shape` elements of `dtype`.
fn byte_len(shape: &[usize], dtype: DataType) -> Result<usize> {
    checked_count(shape)?
        .checked_mul(dtype.size())
        .ok_or_else(|| {
            Error::InvalidSize(format!(
                "shape {shape:?} of {dtype} overflows the address space"
            ))
        })
}

impl NDBuffer {
    /// The underlying buffer (all of it, not only the viewed elements).
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The element data type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Byte strides, one per dimension.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Byte offset of element `[0, 0, ...]` in the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The byte order of the stored elements.
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of element data (`len() * dtype.size()`).
    pub fn nbytes(&self) -> usize {
        self.len() * self.dtype.size()
    }

    /// Where the memory lives.
    pub fn memory(&self) -> Memory {
        self.buffer.memory()
    }

    /// Waits for zarrbuf's work in flight on this array's memory and for its device's queued
    /// work (see [`Buffer::sync`]); a no-op for host memory.
    ///
    /// ```
    /// zarrbuf::NDBuffer::from_vec(vec![1u8], &[1])?.sync()?;
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        self.buffer.sync()
    }

    /// Row-major contiguous (size-1 dimensions ignored).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![0u8; 6], &[2, 3])?;
    /// assert!(a.is_c_contiguous() && !a.is_f_contiguous());
    /// assert!(a.transpose(&[1, 0])?.is_f_contiguous());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn is_c_contiguous(&self) -> bool {
        self.is_contiguous_in(Order::C)
    }

    /// Column-major contiguous (size-1 dimensions ignored).
    pub fn is_f_contiguous(&self) -> bool {
        self.is_contiguous_in(Order::F)
    }

    /// Contiguous in C or F order.
    pub fn is_contiguous(&self) -> bool {
        self.is_c_contiguous() || self.is_f_contiguous()
    }

    fn is_contiguous_in(&self, order: Order) -> bool {
        if self.is_empty() {
            return true;
        }
        let want = order.strides(&self.shape, self.dtype.size());
        self.shape
            .iter()
            .zip(self.strides.iter().zip(&want))
            .all(|(&n, (s, w))| n == 1 || s == w)
    }

    /// Expresses the array as a window of a C-contiguous parent inside the buffer, when its
    /// strides allow (C-contiguous arrays and C-order sub-views of them).
    pub(crate) fn c_window(&self) -> Option<CWindow> {
        let e = self.dtype.size();
        let d = self.ndim();
        if d == 0 {
            return Some(CWindow {
                byte_start: self.offset,
                byte_end: self.offset + e,
                parent_shape: Vec::new(),
                window: zarrs::array::ArraySubset::new_with_ranges(&[]),
            });
        }
        let s: Vec<usize> = self.strides.iter().map(|&s| s as usize).collect();
        // A zero stride (a broadcast axis) is no window of a C-order parent.
        if s[d - 1] != e || s.contains(&0) {
            return None;
        }
        let mut parent = vec![0usize; d];
        for k in 0..d - 1 {
            if s[k + 1] == 0 || !s[k].is_multiple_of(s[k + 1]) {
                return None;
            }
            parent[k + 1] = s[k] / s[k + 1];
        }
        // Decompose the offset into the window origin, dropping whole leading rows.
        let lead = self.offset / s[0];
        let mut rem = self.offset % s[0];
        let mut origin = vec![0usize; d];
        for k in 1..d {
            origin[k] = rem / s[k];
            rem %= s[k];
            if origin[k] + self.shape[k] > parent[k] {
                return None;
            }
        }
        if rem != 0 {
            return None;
        }
        parent[0] = self.shape[0];
        let byte_start = lead * s[0];
        let byte_end = byte_start + parent[0] * s[0];
        if byte_end > self.buffer.len() {
            return None;
        }
        let window: Vec<Range<u64>> = origin
            .iter()
            .zip(&self.shape)
            .map(|(&o, &n)| o as u64..(o + n) as u64)
            .collect();
        Some(CWindow {
            byte_start,
            byte_end,
            parent_shape: parent.iter().map(|&p| p as u64).collect(),
            window: zarrs::array::ArraySubset::new_with_ranges(&window),
        })
    }

    fn view(&self) -> Strided<'_> {
        Strided {
            offset: self.offset,
            strides: &self.strides,
        }
    }

    fn with_layout(&self, shape: Vec<usize>, strides: Vec<isize>, offset: usize) -> NDBuffer {
        NDBuffer {
            buffer: self.buffer.clone(),
            dtype: self.dtype,
            shape,
            strides,
            offset,
            byte_order: self.byte_order,
        }
    }
}
