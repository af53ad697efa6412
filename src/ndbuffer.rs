//! [`NDBuffer`]: a typed, strided n-d view over a [`Buffer`].

use crate::buffer::Buffer;
use crate::device::{DeviceOps, ops_for, ops_for_pair};
use crate::dtype::{ByteOrder, DataType, Element, Order};
use crate::error::{Error, Result};
use crate::memory::{Memory, ReadGuard};
use crate::prototype::BufferPrototype;
use std::ops::Range;
use std::sync::Arc;
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

/// A host ndarray view that keeps the buffer borrowed (no writes elsewhere) while it lives.
pub struct HostArrayView<'a, T> {
    _guard: ReadGuard<'a>,
    view: ndarray::ArrayViewD<'a, T>,
}

impl<'a, T> std::ops::Deref for HostArrayView<'a, T> {
    type Target = ndarray::ArrayViewD<'a, T>;
    fn deref(&self) -> &Self::Target {
        &self.view
    }
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
    /// Builds an NDBuffer over `buffer`, checking the invariants.
    ///
    /// ```
    /// use zarrbuf::{Buffer, ByteOrder, DataType, NDBuffer};
    /// let b = Buffer::from_vec(vec![0u8; 24]);
    /// let a = NDBuffer::from_parts(b, DataType::Float32, &[2, 3], &[12, 4], 0, ByteOrder::Little)?;
    /// assert!(a.is_c_contiguous());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_parts(
        buffer: Buffer,
        dtype: DataType,
        shape: &[usize],
        strides: &[isize],
        offset: usize,
        byte_order: ByteOrder,
    ) -> Result<Self> {
        if shape.len() != strides.len() {
            return Err(Error::ShapeMismatch(format!(
                "{} dimensions in shape {shape:?} but {} strides {strides:?}",
                shape.len(),
                strides.len()
            )));
        }
        if dtype.size() == 0 {
            return Err(Error::DataType(format!("{dtype} has zero-sized elements")));
        }
        if strides.iter().any(|&s| s < 0) {
            return Err(Error::InvalidArgument(format!(
                "negative strides {strides:?} are not supported"
            )));
        }
        checked_count(shape)?;
        zarrbuf_codecs::check_extent(
            buffer.len(),
            Strided { offset, strides },
            shape,
            dtype.size(),
        )
        .map_err(|e| Error::OutOfBounds(format!("{e} (buffer of {} bytes)", buffer.len())))?;
        Ok(NDBuffer {
            buffer,
            dtype,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
            byte_order,
        })
    }

    /// A contiguous NDBuffer over all of `buffer` in `order`, native byte order.
    ///
    /// ```
    /// use zarrbuf::{Buffer, DataType, NDBuffer, Order};
    /// let a = NDBuffer::from_buffer(Buffer::from_vec(vec![0u8; 8]), DataType::UInt16, &[2, 2], Order::F)?;
    /// assert!(a.is_f_contiguous());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_buffer(
        buffer: Buffer,
        dtype: DataType,
        shape: &[usize],
        order: Order,
    ) -> Result<Self> {
        let need = byte_len(shape, dtype)?;
        if need != buffer.len() {
            return Err(Error::ShapeMismatch(format!(
                "shape {shape:?} of {dtype} needs {need} bytes but the buffer has {}",
                buffer.len()
            )));
        }
        let strides = order.strides(shape, dtype.size());
        Self::from_parts(buffer, dtype, shape, &strides, 0, ByteOrder::native())
    }

    /// A new NDBuffer, uninitialised (zarr-python's `NDBuffer.empty`).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
    /// let a = NDBuffer::empty(&[4, 5], DataType::Int16, Order::F, &BufferPrototype::cpu())?;
    /// assert_eq!(a.nbytes(), 40);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn empty(
        shape: &[usize],
        dtype: DataType,
        order: Order,
        proto: &BufferPrototype,
    ) -> Result<Self> {
        let bytes = byte_len(shape, dtype)?;
        Self::from_buffer(Buffer::empty(bytes, proto)?, dtype, shape, order)
    }

    /// A new NDBuffer of zeros.
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
    /// let a = NDBuffer::zeros(&[3], DataType::Float64, Order::C, &BufferPrototype::cpu())?;
    /// assert_eq!(a.to_vec::<f64>()?, vec![0.0; 3]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn zeros(
        shape: &[usize],
        dtype: DataType,
        order: Order,
        proto: &BufferPrototype,
    ) -> Result<Self> {
        let bytes = byte_len(shape, dtype)?;
        Self::from_buffer(Buffer::zeros(bytes, proto)?, dtype, shape, order)
    }

    /// A new NDBuffer filled with `fill_value` (one element's bytes, native order), or
    /// uninitialised when `None` (zarr-python's `NDBuffer.create`).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
    /// let a = NDBuffer::create(&[2, 2], DataType::Float32, Order::C, Some(&1.5f32.to_ne_bytes()), &BufferPrototype::cpu())?;
    /// assert_eq!(a.to_vec::<f32>()?, vec![1.5; 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn create(
        shape: &[usize],
        dtype: DataType,
        order: Order,
        fill_value: Option<&[u8]>,
        proto: &BufferPrototype,
    ) -> Result<Self> {
        let mut a = Self::empty(shape, dtype, order, proto)?;
        if let Some(v) = fill_value {
            a.fill(v)?;
        }
        Ok(a)
    }

    /// Takes a Vec as a C-order array of `shape` without copying.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u8, 2, 3, 4], &[2, 2])?;
    /// assert_eq!(a.dtype(), zarrbuf::DataType::UInt8);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Self> {
        if checked_count(shape)? != data.len() {
            return Err(Error::ShapeMismatch(format!(
                "{} elements given for shape {shape:?}",
                data.len()
            )));
        }
        Self::from_buffer(Buffer::from_typed_vec(data), T::DTYPE, shape, Order::C)
    }

    /// Takes an ndarray: no copy for an owned array in standard (C) layout, a copy otherwise.
    ///
    /// ```
    /// let arr = ndarray::Array2::<f32>::ones((2, 3));
    /// let a = zarrbuf::NDBuffer::from_ndarray(arr)?;
    /// assert_eq!(a.shape(), &[2, 3]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_ndarray<T: Element, D: ndarray::Dimension>(
        array: ndarray::Array<T, D>,
    ) -> Result<Self> {
        let shape = array.shape().to_vec();
        let data = if array.is_standard_layout() {
            let (vec, offset) = array.into_raw_vec_and_offset();
            match offset {
                Some(0) | None => vec,
                Some(off) => vec[off..].to_vec(),
            }
        } else {
            array.iter().copied().collect()
        };
        Self::from_vec(data, &shape)
    }

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
        if s[d - 1] != e {
            return None;
        }
        let mut parent = vec![0usize; d];
        for k in 0..d - 1 {
            if s[k + 1] == 0 || s[k] % s[k + 1] != 0 {
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

    /// Writes `value` (one element's bytes, native order) into every element, on the device
    /// that owns the memory.
    ///
    /// ```
    /// let mut a = zarrbuf::NDBuffer::from_vec(vec![0u16; 3], &[3])?;
    /// a.fill(&7u16.to_ne_bytes())?;
    /// assert_eq!(a.to_vec::<u16>()?, vec![7; 3]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn fill(&mut self, value: &[u8]) -> Result<()> {
        if value.len() != self.dtype.size() {
            return Err(Error::DataType(format!(
                "fill value has {} bytes but {} elements have {}",
                value.len(),
                self.dtype,
                self.dtype.size()
            )));
        }
        let mut pattern = value.to_vec();
        if self.byte_order != ByteOrder::native() {
            zarrbuf_codecs::host::byte_swap(&mut pattern, self.dtype.swap_unit())?;
        }
        let ops = ops_for(self.memory())?;
        let q = ops.default_queue();
        ops.fill(&q, &self.buffer, self.view(), &self.shape, &pattern)?;
        ops.synchronize(&q)
    }

    /// [`fill`](Self::fill) with a typed value.
    ///
    /// ```
    /// let mut a = zarrbuf::NDBuffer::from_vec(vec![0f32; 2], &[2])?;
    /// a.fill_with(2.5f32)?;
    /// assert_eq!(a.to_vec::<f32>()?, vec![2.5, 2.5]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn fill_with<T: Element>(&mut self, value: T) -> Result<()> {
        self.check_type::<T>()?;
        self.fill(&value.to_ne_bytes_vec())
    }

    fn check_type<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::DataType(format!(
                "the array holds {} but {} ({}) was asked for",
                self.dtype,
                T::DTYPE,
                std::any::type_name::<T>()
            )));
        }
        Ok(())
    }

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

    /// Copies `src` (same shape and data type, any memory, any byte order) into `subset` of
    /// this array, on the device that owns this array's memory.
    ///
    /// ```
    /// let mut a = zarrbuf::NDBuffer::from_vec(vec![0u8; 6], &[2, 3])?;
    /// let src = zarrbuf::NDBuffer::from_vec(vec![9u8, 8], &[1, 2])?;
    /// a.set(&[1..2, 1..3], &src)?;
    /// assert_eq!(a.to_vec::<u8>()?, vec![0, 0, 0, 0, 9, 8]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn set(&mut self, subset: &[Range<usize>], src: &NDBuffer) -> Result<()> {
        let target = self.get(subset)?;
        target.copy_from(src)
    }

    /// Copies `src` (same shape and data type) into all of this view.
    pub(crate) fn copy_from(&self, src: &NDBuffer) -> Result<()> {
        if src.shape != self.shape {
            return Err(Error::ShapeMismatch(format!(
                "cannot copy an array of shape {:?} into one of shape {:?}",
                src.shape, self.shape
            )));
        }
        if src.dtype != self.dtype {
            return Err(Error::DataType(format!(
                "cannot copy {} into {} without a conversion; use astype first",
                src.dtype, self.dtype
            )));
        }
        if self.is_empty() {
            return Ok(());
        }
        let swap = if src.byte_order == self.byte_order {
            0
        } else {
            self.dtype.swap_unit()
        };
        let ops = ops_for(self.memory())?;
        let src = src.reachable_from(ops.as_ref(), self)?;
        let q = ops.default_queue();
        ops.strided_copy(
            &q,
            &src.buffer,
            src.view(),
            &self.buffer,
            self.view(),
            &self.shape,
            self.dtype.size(),
            swap,
        )?;
        ops.synchronize(&q)
    }

    /// `self`, or a copy of it that the kernels of `ops` can read and that does not overlap `dst`.
    fn reachable_from(&self, ops: &dyn DeviceOps, dst: &NDBuffer) -> Result<NDBuffer> {
        let same_storage = self.buffer.storage_id() == dst.buffer.storage_id();
        let reachable = match (ops.memory(), self.memory()) {
            (Memory::Host, m) => m.is_host_accessible(),
            (Memory::Cuda(n), Memory::Cuda(m)) => n == m,
            (Memory::Cuda(n), Memory::Pinned(m)) => n == m,
            _ => false,
        };
        if reachable && !same_storage {
            return Ok(self.clone());
        }
        // Move the bytes that hold the elements into the kernels' memory in one copy.
        let (start, end) = self.byte_span();
        let span = self.buffer.try_slice(start..end)?;
        let local = Buffer::empty(end - start, &BufferPrototype::for_memory(ops.memory()))?;
        let pair = ops_for_pair(span.memory(), local.memory())?;
        let q = pair.default_queue();
        pair.copy(&q, &span, &local)?;
        pair.synchronize(&q)?;
        NDBuffer::from_parts(
            local,
            self.dtype,
            &self.shape,
            &self.strides,
            self.offset - start,
            self.byte_order,
        )
    }

    /// The byte range of the buffer covering every element.
    fn byte_span(&self) -> (usize, usize) {
        if self.is_empty() {
            return (self.offset, self.offset);
        }
        let last: usize = self
            .shape
            .iter()
            .zip(&self.strides)
            .map(|(&n, &s)| (n - 1) * s as usize)
            .sum();
        (self.offset, self.offset + last + self.dtype.size())
    }

    /// A C-contiguous copy in the same memory and native byte order.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u8, 2, 3, 4], &[2, 2])?;
    /// let t = a.transpose(&[1, 0])?.copy()?;
    /// assert!(t.is_c_contiguous());
    /// assert_eq!(t.to_vec::<u8>()?, vec![1, 3, 2, 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn copy(&self) -> Result<NDBuffer> {
        self.copy_to(&BufferPrototype::for_memory(self.memory()), Order::C)
    }

    /// A contiguous copy in `order` and native byte order, made by `proto`.
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, NDBuffer, Order};
    /// let a = NDBuffer::from_vec(vec![1u8, 2, 3, 4], &[2, 2])?;
    /// let f = a.copy_to(&BufferPrototype::cpu(), Order::F)?;
    /// assert!(f.is_f_contiguous());
    /// assert_eq!(f.to_vec::<u8>()?, vec![1, 2, 3, 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn copy_to(&self, proto: &BufferPrototype, order: Order) -> Result<NDBuffer> {
        let out = NDBuffer::empty(&self.shape, self.dtype, order, proto)?;
        out.copy_from(self)?;
        Ok(out)
    }

    /// This array in host memory: itself when already host-accessible, else a copy.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u8], &[1])?;
    /// assert_eq!(a.to_host()?.buffer().storage_id(), a.buffer().storage_id());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_host(&self) -> Result<NDBuffer> {
        self.to_prototype(&BufferPrototype::cpu())
    }

    /// Zero-copy promotion: itself when its memory satisfies `proto`, else a C-order copy.
    pub fn to_prototype(&self, proto: &BufferPrototype) -> Result<NDBuffer> {
        if proto.is_satisfied_by(self.memory()) {
            Ok(self.clone())
        } else {
            self.copy_to(proto, Order::C)
        }
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

    /// A converting copy to `dtype` (numpy `astype`), C order, same memory, native byte order.
    ///
    /// ```
    /// use zarrbuf::{DataType, NDBuffer};
    /// let a = NDBuffer::from_vec(vec![1.7f32, -2.2], &[2])?;
    /// assert_eq!(a.astype(DataType::Int32)?.to_vec::<i32>()?, vec![1, -2]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn astype(&self, dtype: DataType) -> Result<NDBuffer> {
        let (Some(from), Some(to)) = (self.dtype.scalar_kind(), dtype.scalar_kind()) else {
            return Err(Error::Unsupported(format!(
                "conversion from {} to {dtype}: raw bits have no numeric value; use with_type to reinterpret",
                self.dtype
            )));
        };
        let src = if self.byte_order == ByteOrder::native() {
            self.clone()
        } else {
            self.copy()?
        };
        let proto = BufferPrototype::for_memory(self.memory());
        let out = NDBuffer::empty(&self.shape, dtype, Order::C, &proto)?;
        if out.is_empty() {
            return Ok(out);
        }
        let ops = ops_for(self.memory())?;
        let q = ops.default_queue();
        ops.cast(
            &q,
            &src.buffer,
            src.view(),
            from,
            &out.buffer,
            out.view(),
            to,
            &self.shape,
        )?;
        ops.synchronize(&q)?;
        Ok(out)
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

    /// The same values stored in the other byte order (a copy, on the owning device).
    ///
    /// ```
    /// use zarrbuf::{ByteOrder, NDBuffer};
    /// let a = NDBuffer::from_vec(vec![1u16], &[1])?;
    /// let b = a.to_byte_order(ByteOrder::Big)?;
    /// assert_eq!(b.buffer().to_vec()?, vec![0, 1]);
    /// assert_eq!(b.item::<u16>()?, 1);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_byte_order(&self, order: ByteOrder) -> Result<NDBuffer> {
        let mut out = NDBuffer::empty(
            &self.shape,
            self.dtype,
            Order::C,
            &BufferPrototype::for_memory(self.memory()),
        )?;
        out.byte_order = order;
        out.copy_from(self)?;
        Ok(out)
    }

    /// The single element's value. `ShapeMismatch` unless the array has exactly one element.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![4.0f64], &[1, 1])?;
    /// assert_eq!(a.item::<f64>()?, 4.0);
    /// assert!(zarrbuf::NDBuffer::from_vec(vec![1u8, 2], &[2])?.item::<u8>().is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn item<T: Element>(&self) -> Result<T> {
        self.check_type::<T>()?;
        if self.len() != 1 {
            return Err(Error::ShapeMismatch(format!(
                "item/as_scalar needs exactly one element, the array has shape {:?}",
                self.shape
            )));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The single element's bytes (native order). `ShapeMismatch` unless exactly one element
    /// (zarr-python's `as_scalar`).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![7u8], &[])?;
    /// assert_eq!(a.as_scalar()?, vec![7]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn as_scalar(&self) -> Result<Vec<u8>> {
        if self.len() != 1 {
            return Err(Error::ShapeMismatch(format!(
                "as_scalar needs exactly one element, the array has shape {:?}",
                self.shape
            )));
        }
        self.to_native_bytes()
    }

    /// A host ndarray view of the elements, without copying. `NotHostAccessible` for device
    /// memory, `DataType` when `T` is not the data type, `InvalidArgument` for non-native
    /// byte order or misaligned data.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1i32, 2, 3, 4], &[2, 2])?;
    /// let v = a.as_ndarray::<i32>()?;
    /// assert_eq!(v[[1, 1]], 4);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn as_ndarray<T: Element>(&self) -> Result<HostArrayView<'_, T>> {
        self.check_type::<T>()?;
        if !self.buffer.is_host_accessible() {
            return Err(Error::NotHostAccessible(format!(
                "as_ndarray on an array in {}",
                self.memory()
            )));
        }
        if self.byte_order != ByteOrder::native() && self.dtype.swap_unit() > 1 {
            return Err(Error::InvalidArgument(
                "the array is stored in non-native byte order; convert it with to_byte_order(ByteOrder::native())".into(),
            ));
        }
        let size = self.dtype.size();
        if self.strides.iter().any(|&s| s as usize % size != 0) {
            return Err(Error::InvalidArgument(format!(
                "strides {:?} are not multiples of the element size {size}; copy the array first",
                self.strides
            )));
        }
        if self.dtype == DataType::Bool {
            self.check_bool_bytes()?;
        }
        let elem_strides: Vec<usize> = self.strides.iter().map(|&s| s as usize / size).collect();
        let (guard, view) =
            self.buffer
                .storage_view::<T>(self.offset, &self.shape, &elem_strides)?;
        Ok(HostArrayView {
            _guard: guard,
            view,
        })
    }

    fn check_bool_bytes(&self) -> Result<()> {
        let bytes = self.to_native_bytes()?;
        if let Some(b) = bytes.iter().find(|&&b| b > 1) {
            return Err(Error::DataType(format!(
                "a bool element holds the byte {b}, which is neither 0 nor 1"
            )));
        }
        Ok(())
    }

    /// A host copy as an owned ndarray (from any memory and layout).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u8, 2, 3, 4], &[2, 2])?;
    /// let arr = a.transpose(&[1, 0])?.to_ndarray::<u8>()?;
    /// assert_eq!(arr[[0, 1]], 3);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_ndarray<T: Element>(&self) -> Result<ndarray::ArrayD<T>> {
        let data = self.to_vec::<T>()?;
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&self.shape), data)
            .map_err(|e| Error::ShapeMismatch(e.to_string()))
    }

    /// A host copy of the elements in C order.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u16, 2], &[2])?;
    /// assert_eq!(a.to_vec::<u16>()?, vec![1, 2]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_type::<T>()?;
        if self.dtype == DataType::Bool {
            self.check_bool_bytes()?;
        }
        let host = self.to_contiguous_host()?;
        let view = host.as_ndarray::<T>()?;
        let out = view.iter().copied().collect();
        Ok(out)
    }

    /// The elements' bytes in C order and native byte order, copied to the host.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u16, 2], &[2])?;
    /// assert_eq!(a.to_native_bytes()?, vec![1, 0, 2, 0]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_native_bytes(&self) -> Result<Vec<u8>> {
        let host = self.to_contiguous_host()?;
        let (start, end) = host.byte_span();
        host.buffer.try_slice(start..end)?.to_vec()
    }

    /// Self if it already is C-contiguous, native and host-accessible; else such a copy.
    fn to_contiguous_host(&self) -> Result<NDBuffer> {
        if self.is_c_contiguous()
            && self.byte_order == ByteOrder::native()
            && self.buffer.is_host_accessible()
        {
            return Ok(self.clone());
        }
        if self.is_c_contiguous() {
            // One plain copy of the bytes to the host, then fix the byte order there.
            let (start, end) = self.byte_span();
            let bytes = self.buffer.try_slice(start..end)?.to_vec()?;
            let host = NDBuffer::from_parts(
                Buffer::from_vec(bytes),
                self.dtype,
                &self.shape,
                &self.strides,
                0,
                self.byte_order,
            )?;
            return if self.byte_order == ByteOrder::native() {
                Ok(host)
            } else {
                host.copy()
            };
        }
        // Gather on the owning device first, so only the elements cross to the host.
        self.copy()?.to_contiguous_host()
    }

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
