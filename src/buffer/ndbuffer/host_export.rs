//! Host export: ndarray views, owned ndarrays, Vecs and scalars.

use super::NDBuffer;
use crate::buffer::{Buffer, BufferPrototype};
use crate::data_types::{ByteOrder, DataType, Element};
use crate::errors::{Error, Result};
use crate::memory::{ReadGuard, WriteGuard};

/// A host ndarray view that keeps the buffer borrowed (no writes elsewhere) while it lives.
///
/// It derefs to [`ndarray::ArrayRef`] (`sum`, indexing, `iter`, `as_slice`, `view`, …), and
/// everything borrowed from it borrows the guard: nothing obtained through the view can
/// outlive it, so no write through another handle can change bytes a live reference sees.
///
/// ```
/// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
/// let a = NDBuffer::zeros(&[4], DataType::Float32, Order::C, &BufferPrototype::cpu())?;
/// {
///     let v = a.as_ndarray::<f32>()?;
///     assert_eq!(v.as_slice(), Some(&[0.0f32; 4][..]));
///     // While the view lives, writes through any handle fail with Error::Busy.
///     assert!(matches!(a.clone().fill_with(7.0f32), Err(zarrbuf::Error::Busy(_))));
/// }
/// a.clone().fill_with(7.0f32)?; // the view is gone: writing works again
/// # Ok::<(), zarrbuf::Error>(())
/// ```
///
/// A slice cannot escape the view (this does not compile):
///
/// ```compile_fail
/// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
/// let a = NDBuffer::zeros(&[4], DataType::Float32, Order::C, &BufferPrototype::cpu())?;
/// let s: &[f32] = { let v = a.as_ndarray::<f32>()?; v.to_slice().unwrap() };
/// a.clone().fill_with(7.0f32)?;
/// assert_eq!(s, &[0.0; 4]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
///
/// Nor can a copy of the inner `ArrayView` (this does not compile either):
///
/// ```compile_fail
/// use zarrbuf::{BufferPrototype, DataType, NDBuffer, Order};
/// let a = NDBuffer::zeros(&[4], DataType::Float32, Order::C, &BufferPrototype::cpu())?;
/// let escaped = { let v = a.as_ndarray::<f32>()?; (*v).clone() };
/// a.clone().fill_with(7.0f32)?;
/// assert_eq!(escaped[0], 0.0);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct HostArrayView<'a, T> {
    // Field order matters: the view is dropped before the guard that makes it valid.
    view: ndarray::ArrayViewD<'a, T>,
    _guard: ReadGuard<'a>,
}

impl<T> std::ops::Deref for HostArrayView<'_, T> {
    type Target = ndarray::ArrayRef<T, ndarray::IxDyn>;
    fn deref(&self) -> &Self::Target {
        // Reborrowed for the lifetime of `&self`, not of the NDBuffer: whatever is borrowed
        // from the result borrows this guard.
        &self.view
    }
}

/// A mutable host ndarray view: the buffer is borrowed exclusively (every other read or
/// write through any handle fails with `Error::Busy`) while it lives.
///
/// ```
/// let mut a = zarrbuf::NDBuffer::from_vec(vec![1i32, 2, 3, 4], &[2, 2])?;
/// let other = a.clone(); // another handle on the same memory
/// {
///     let mut v = a.as_ndarray_mut::<i32>()?;
///     v[[1, 0]] = 30;
///     v.map_inplace(|x| *x *= 2);
///     assert!(matches!(other.as_ndarray::<i32>(), Err(zarrbuf::Error::Busy(_))));
/// }
/// assert_eq!(a.to_vec::<i32>()?, vec![2, 4, 60, 8]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
///
/// Nothing borrowed from it outlives it (this does not compile):
///
/// ```compile_fail
/// let mut a = zarrbuf::NDBuffer::from_vec(vec![1i32, 2], &[2])?;
/// let s: &mut [i32] = { let mut v = a.as_ndarray_mut::<i32>()?; v.as_slice_mut().unwrap() };
/// s[0] = 5;
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub struct HostArrayViewMut<'a, T> {
    // Field order matters: the view is dropped before the guard that makes it valid.
    view: ndarray::ArrayViewMutD<'a, T>,
    _guard: WriteGuard<'a>,
}

impl<T> std::ops::Deref for HostArrayViewMut<'_, T> {
    type Target = ndarray::ArrayRef<T, ndarray::IxDyn>;
    fn deref(&self) -> &Self::Target {
        &self.view
    }
}

impl<T> std::ops::DerefMut for HostArrayViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.view
    }
}

impl NDBuffer {
    /// The checks shared by the host views; returns the strides in elements.
    fn host_view_strides<T: Element>(&self, what: &str) -> Result<Vec<usize>> {
        self.check_type::<T>()?;
        if !self.buffer.is_host_accessible() {
            return Err(Error::NotHostAccessible(format!(
                "{what} on an array in {}",
                self.memory()
            )));
        }
        if self.byte_order != ByteOrder::native() && self.dtype.swap_unit() > 1 {
            return Err(Error::InvalidArgument(
                "the array is stored in non-native byte order; convert it with to_byte_order(ByteOrder::native())".into(),
            ));
        }
        let size = self.dtype.size();
        if self
            .strides
            .iter()
            .any(|&s| !(s as usize).is_multiple_of(size))
        {
            return Err(Error::InvalidArgument(format!(
                "strides {:?} are not multiples of the element size {size}; copy the array first",
                self.strides
            )));
        }
        Ok(self.strides.iter().map(|&s| s as usize / size).collect())
    }

    /// A mutable host ndarray view of the elements, without copying (the rules of
    /// [`as_ndarray`](Self::as_ndarray), plus: no two elements may share memory).
    ///
    /// ```
    /// let mut a = zarrbuf::NDBuffer::from_vec(vec![0u8; 6], &[2, 3])?;
    /// a.as_ndarray_mut::<u8>()?.fill(7);
    /// assert_eq!(a.to_vec::<u8>()?, vec![7; 6]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn as_ndarray_mut<T: Element>(&mut self) -> Result<HostArrayViewMut<'_, T>> {
        let elem_strides = self.host_view_strides::<T>("as_ndarray_mut")?;
        let (guard, view) =
            self.buffer
                .storage_view_mut::<T>(self.offset, &self.shape, &elem_strides)?;
        Ok(HostArrayViewMut {
            view,
            _guard: guard,
        })
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
        let elem_strides = self.host_view_strides::<T>("as_ndarray")?;
        // For bool, the bytes are checked under a read guard that is held until the bool view
        // has its own, so no write can slip in between the check and the view.
        let bool_check = if self.dtype == DataType::Bool {
            let (guard, bytes) =
                self.buffer
                    .storage_view::<u8>(self.offset, &self.shape, &elem_strides)?;
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(Error::DataType(format!(
                    "a bool element holds the byte {b}, which is neither 0 nor 1"
                )));
            }
            Some(guard)
        } else {
            None
        };
        let (guard, view) =
            self.buffer
                .storage_view::<T>(self.offset, &self.shape, &elem_strides)?;
        drop(bool_check);
        Ok(HostArrayView {
            view,
            _guard: guard,
        })
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
            // An element's alignment is its swap unit (a complex number's part size).
            && self.buffer.host_ptr().is_some_and(|p| {
                (p as usize).wrapping_add(self.offset).is_multiple_of(self.dtype.swap_unit())
            })
        {
            return Ok(self.clone());
        }
        if self.is_c_contiguous() && !self.buffer.is_host_accessible() {
            // One plain copy of the bytes to the host, then fix the byte order there.
            let (start, end) = self.byte_span();
            // Into zarrbuf's own (64-byte aligned) host memory: a Vec<u8> promises no
            // alignment, and the elements are viewed as their type below. Written whole by
            // the copy; dropped if it fails.
            let mut bytes = Buffer::empty_unwritten(end - start, &BufferPrototype::cpu())?;
            bytes.copy_from(&self.buffer.try_slice(start..end)?)?;
            let host = NDBuffer::from_parts(
                bytes,
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
}
