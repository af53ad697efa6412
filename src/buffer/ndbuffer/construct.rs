//! Making NDBuffers: over existing buffers, in new memory, or from Rust data.

use super::{NDBuffer, byte_len, checked_count};
use crate::buffer::{Buffer, BufferPrototype};
use crate::data_types::{ByteOrder, DataType, Element, Order};
use crate::errors::{Error, Result};
use zarrbuf_codecs::Strided;

impl NDBuffer {
    /// Builds an NDBuffer over `buffer`, checking the invariants.
    ///
    /// ```
    /// use zarrbuf::{Buffer, DataType, NDBuffer};
    /// use zarrbuf::dtype::ByteOrder;
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

    /// A new NDBuffer (zarr-python's `NDBuffer.empty`). Its bytes are zero, never another
    /// allocation's (see [`Buffer::empty`]).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
    /// let a = NDBuffer::empty(&[4, 5], DataType::Int16, Order::F, &BufferPrototype::cpu())?;
    /// assert_eq!(a.nbytes(), 40);
    /// assert_eq!(a.to_vec::<i16>()?, vec![0; 20]);
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

    /// A new NDBuffer whose bytes may be a recycled block's: only for zarrbuf's own writers,
    /// which write every element before the array reaches safe code (see
    /// `Buffer::empty_unwritten`).
    pub(crate) fn empty_unwritten(
        shape: &[usize],
        dtype: DataType,
        order: Order,
        proto: &BufferPrototype,
    ) -> Result<Self> {
        let bytes = byte_len(shape, dtype)?;
        Self::from_buffer(Buffer::empty_unwritten(bytes, proto)?, dtype, shape, order)
    }

    /// A new NDBuffer shaped like `like` (shape, data type, C or F order as `like` is laid
    /// out, C otherwise; native byte order), made by `proto` (parpy's `empty_like`). Its bytes
    /// are zero, as for [`empty`](Self::empty).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, NDBuffer};
    /// let a = NDBuffer::from_vec(vec![1.5f64; 6], &[2, 3])?.transpose(&[1, 0])?;
    /// let b = NDBuffer::empty_like(&a, &BufferPrototype::cpu())?;
    /// assert_eq!((b.shape(), b.dtype()), (a.shape(), a.dtype()));
    /// assert!(b.is_f_contiguous());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn empty_like(like: &NDBuffer, proto: &BufferPrototype) -> Result<Self> {
        let order = if !like.is_c_contiguous() && like.is_f_contiguous() {
            Order::F
        } else {
            Order::C
        };
        Self::empty(like.shape(), like.dtype(), order, proto)
    }

    /// An NDBuffer with no memory behind it yet: its buffer is [`Buffer::lazy`], allocated
    /// by the first operation that writes it (reading a zarr array into it, `fill`,
    /// `copy_from`, `as_ndarray_mut`, `ensure_allocated`); reads before that are
    /// `NotAllocated` errors. `order` says how its elements will be laid out.
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
    /// let mut a = NDBuffer::lazy(&[2, 3], DataType::Int32, Order::C, &BufferPrototype::cpu())?;
    /// assert!(!a.is_allocated());
    /// a.fill(&5i32.to_ne_bytes())?;
    /// assert!(a.is_allocated());
    /// assert_eq!(a.to_vec::<i32>()?, vec![5; 6]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn lazy(
        shape: &[usize],
        dtype: DataType,
        order: Order,
        proto: &BufferPrototype,
    ) -> Result<Self> {
        let bytes = byte_len(shape, dtype)?;
        Self::from_buffer(Buffer::lazy(bytes, proto), dtype, shape, order)
    }

    /// True when memory is behind this array (see [`Buffer::is_allocated`]).
    pub fn is_allocated(&self) -> bool {
        self.buffer.is_allocated()
    }

    /// Allocates the memory of a [lazy](Self::lazy) array now, zeroed (see
    /// [`Buffer::ensure_allocated`]).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
    /// let a = NDBuffer::lazy(&[4], DataType::UInt8, Order::C, &BufferPrototype::cpu())?;
    /// a.ensure_allocated()?;
    /// assert_eq!(a.to_vec::<u8>()?, vec![0; 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn ensure_allocated(&self) -> Result<()> {
        self.buffer.ensure_allocated()
    }

    /// A new NDBuffer of zeros shaped like `like` (see [`empty_like`](Self::empty_like)).
    ///
    /// ```
    /// use zarrbuf::{BufferPrototype, NDBuffer};
    /// let a = NDBuffer::from_vec(vec![7u16; 4], &[4])?;
    /// let z = NDBuffer::zeros_like(&a, &BufferPrototype::cpu())?;
    /// assert_eq!(z.to_vec::<u16>()?, vec![0; 4]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn zeros_like(like: &NDBuffer, proto: &BufferPrototype) -> Result<Self> {
        // `empty` is zeroed already; spelled out for readers who know numpy's pair.
        Self::empty_like(like, proto)
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
    /// zeroed when `None` (zarr-python's `NDBuffer.create`).
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
        if !array.is_standard_layout() {
            return Self::from_vec(array.iter().copied().collect(), &shape);
        }
        // A standard-layout array may still sit inside a longer allocation (a row slice of an
        // owned array keeps the whole Vec): view its elements where they are, without a copy.
        let count = checked_count(&shape)?;
        let (vec, offset) = array.into_raw_vec_and_offset();
        let start = if count == 0 { 0 } else { offset.unwrap_or(0) };
        if start == 0 && vec.len() == count {
            return Self::from_vec(vec, &shape);
        }
        if start.checked_add(count).is_none_or(|end| end > vec.len()) {
            return Err(Error::ShapeMismatch(format!(
                "{} elements from offset {start} cannot hold shape {shape:?}",
                vec.len()
            )));
        }
        let size = T::DTYPE.size();
        let strides = Order::C.strides(&shape, size);
        let buffer = Buffer::from_typed_vec(vec);
        Self::from_parts(
            buffer,
            T::DTYPE,
            &shape,
            &strides,
            start * size,
            ByteOrder::native(),
        )
    }
}
