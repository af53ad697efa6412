//! Writes and copies: fill, set, copies into new memory or layouts, casts, byte order.

use super::NDBuffer;
use crate::buffer::{Buffer, BufferPrototype};
use crate::data_types::{ByteOrder, DataType, Element, Order};
use crate::device::{DeviceOps, Queue, Stream, ops_for, ops_for_pair};
use crate::device::{StridedCast, StridedCopy};
use crate::errors::{Error, Result};
use crate::place::Memory;
use std::ops::Range;

impl NDBuffer {
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
        ops.fill(
            &q,
            self.buffer.region()?,
            self.view(),
            &self.shape,
            &pattern,
        )?;
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

    pub(super) fn check_type<T: Element>(&self) -> Result<()> {
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
        self.copy_from_on(src, None)
    }

    /// [`copy_from`](Self::copy_from) on `stream` when it belongs to the device doing the
    /// copy (else on that device's default queue); waits for the copy.
    fn copy_from_on(&self, src: &NDBuffer, stream: Option<&Stream>) -> Result<()> {
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
        let q = match (stream, ops.memory()) {
            (Some(s), Memory::Cuda(n)) if s.device_ordinal() == n => Queue::Cuda(s.inner.clone()),
            _ => ops.default_queue(),
        };
        ops.strided_copy(
            &q,
            StridedCopy {
                src: src.buffer.written_region("a copy")?,
                src_view: src.view(),
                dst: self.buffer.region()?,
                dst_view: self.view(),
                shape: &self.shape,
                elem_size: self.dtype.size(),
                swap_unit: swap,
            },
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
        // Written whole by the copy below; dropped on failure.
        let local =
            Buffer::empty_unwritten(end - start, &BufferPrototype::for_memory(ops.memory()))?;
        let pair = ops_for_pair(span.memory(), local.memory())?;
        let q = pair.default_queue();
        pair.copy(&q, span.written_region("a copy")?, local.region()?)?;
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
    pub(crate) fn byte_span(&self) -> (usize, usize) {
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
    ///
    /// With a prototype that has a stream ([`BufferPrototype::with_stream`]), the copy runs on
    /// that stream: after the work enqueued on it before, and done before this returns.
    pub fn copy_to(&self, proto: &BufferPrototype, order: Order) -> Result<NDBuffer> {
        // Contiguous and written whole by the copy; a failed copy drops `out`.
        let out = NDBuffer::empty_unwritten(&self.shape, self.dtype, order, proto)?;
        out.copy_from_on(self, proto.stream())?;
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
        // Every element is written by the cast; a failed cast drops `out`.
        let out = NDBuffer::empty_unwritten(&self.shape, dtype, Order::C, &proto)?;
        if out.is_empty() {
            return Ok(out);
        }
        let ops = ops_for(self.memory())?;
        let q = ops.default_queue();
        ops.cast(
            &q,
            StridedCast {
                src: src.buffer.written_region("a cast")?,
                src_view: src.view(),
                src_kind: from,
                dst: out.buffer.region()?,
                dst_view: out.view(),
                dst_kind: to,
                shape: &self.shape,
            },
        )?;
        ops.synchronize(&q)?;
        Ok(out)
    }

    /// The same values stored in the other byte order (a copy, on the owning device).
    ///
    /// ```
    /// use zarrbuf::NDBuffer;
    /// use zarrbuf::dtype::ByteOrder;
    /// let a = NDBuffer::from_vec(vec![1u16], &[1])?;
    /// let b = a.to_byte_order(ByteOrder::Big)?;
    /// assert_eq!(b.buffer().to_vec()?, vec![0, 1]);
    /// assert_eq!(b.item::<u16>()?, 1);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_byte_order(&self, order: ByteOrder) -> Result<NDBuffer> {
        // Contiguous and written whole by the copy; a failed copy drops `out`.
        let mut out = NDBuffer::empty_unwritten(
            &self.shape,
            self.dtype,
            Order::C,
            &BufferPrototype::for_memory(self.memory()),
        )?;
        out.byte_order = order;
        out.copy_from(self)?;
        Ok(out)
    }
}
