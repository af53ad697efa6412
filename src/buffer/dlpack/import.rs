//! Import: a producer's DLPack tensor wrapped as an NDBuffer without copying; the
//! producer's deleter runs when the last view is dropped.

use super::abi::*;
use super::dtypes::dtype_from_dlpack;
use crate::buffer::{Buffer, NDBuffer};
use crate::data_types::{ByteOrder, DataType};
use crate::errors::{Error, Result};
use std::ffi::c_void;

impl NDBuffer {
    /// Wraps a DLPack 1.x tensor without copying; the producer's deleter runs when the last
    /// view of the result is dropped (or right away when this fails). Host (`kDLCPU`), pinned
    /// (`kDLCUDAHost`, seen as host memory) and CUDA (`kDLCUDA`) tensors are accepted;
    /// read-only host tensors become read-only buffers.
    ///
    /// # Errors
    /// `Unsupported` for other devices, a major version other than 1, negative strides or
    /// read-only device memory; `DataType` for types zarrbuf lacks; `InvalidArgument` for
    /// negative extents or a null data pointer with elements.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1.5f64, 2.5], &[2])?;
    /// let b = zarrbuf::NDBuffer::from_dlpack(a.to_dlpack()?)?;
    /// assert_eq!(b.buffer().device_addr(), a.buffer().device_addr());
    /// assert_eq!(b.to_vec::<f64>()?, vec![1.5, 2.5]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_dlpack(tensor: DlpackVersioned) -> Result<NDBuffer> {
        let v = tensor.managed().version;
        if v.major != DLPACK_MAJOR_VERSION {
            return Err(Error::Unsupported(format!(
                "DLPack {}.{} tensor; zarrbuf reads DLPack 1.x",
                v.major, v.minor
            )));
        }
        let access = if tensor.flags() & DLPACK_FLAG_BITMASK_READ_ONLY != 0 {
            Access::ReadOnly
        } else {
            Access::Writable
        };
        let layout = ImportLayout::of(tensor.dl_tensor(), tensor.shape(), tensor.strides())?;
        import(tensor, layout, access)
    }

    /// Wraps a legacy DLPack tensor without copying, as [`from_dlpack`](Self::from_dlpack).
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![7u8; 6], &[2, 3])?;
    /// let b = zarrbuf::NDBuffer::from_dlpack_legacy(a.to_dlpack_legacy()?)?;
    /// assert_eq!(b.shape(), &[2, 3]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_dlpack_legacy(tensor: DlpackLegacy) -> Result<NDBuffer> {
        let layout = ImportLayout::of(tensor.dl_tensor(), tensor.shape(), tensor.strides())?;
        // Legacy tensors have no flags: the consumer may write them.
        import(tensor, layout, Access::Writable)
    }
}

/// What the producer lets zarrbuf do with an imported tensor's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Read it only (DLPack's `READ_ONLY` flag): a host tensor becomes read-only bytes.
    ReadOnly,
    /// Read and write it.
    Writable,
}

/// What an imported tensor looks like in zarrbuf's terms.
struct ImportLayout {
    data: *mut c_void,
    device: DLDevice,
    dtype: DataType,
    shape: Vec<usize>,
    byte_strides: Vec<isize>,
    byte_offset: usize,
    /// Bytes from `data` to one past the last element (`byte_offset` when there are none).
    extent: usize,
}

impl ImportLayout {
    fn of(t: &DLTensor, shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let dtype = dtype_from_dlpack(t.dtype)?;
        let size = dtype.size();
        if t.ndim < 0 {
            return Err(Error::InvalidArgument(format!(
                "DLPack tensor with ndim {}",
                t.ndim
            )));
        }
        let shape: Vec<usize> = shape
            .iter()
            .map(|&n| usize::try_from(n))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                Error::InvalidArgument(format!("DLPack tensor with negative extents {shape:?}"))
            })?;
        let elem_strides: Vec<i64> = match strides {
            Some(s) => s.to_vec(),
            None => {
                // Compact row-major.
                let mut s = vec![1i64; shape.len()];
                for k in (0..shape.len().saturating_sub(1)).rev() {
                    s[k] = s[k + 1].saturating_mul(shape[k + 1].max(1) as i64);
                }
                s
            }
        };
        let overflow = || {
            Error::InvalidSize(format!(
                "DLPack tensor of shape {shape:?}, strides {elem_strides:?} spans more bytes \
                 than fit in memory"
            ))
        };
        let empty = shape.contains(&0);
        let mut byte_strides = Vec::with_capacity(shape.len());
        let mut last = 0usize;
        for (&n, &s) in shape.iter().zip(&elem_strides) {
            if s < 0 && n > 1 {
                return Err(Error::Unsupported(format!(
                    "DLPack tensor with negative strides {elem_strides:?}; zarrbuf arrays step \
                     forward only (copy it with the producer first)"
                )));
            }
            let s = s.max(0) as usize;
            let bs = s.checked_mul(size).ok_or_else(overflow)?;
            byte_strides.push(isize::try_from(bs).map_err(|_| overflow())?);
            if !empty {
                last = (n - 1)
                    .checked_mul(bs)
                    .and_then(|x| x.checked_add(last))
                    .ok_or_else(overflow)?;
            }
        }
        let byte_offset = usize::try_from(t.byte_offset).map_err(|_| overflow())?;
        let extent = if empty {
            byte_offset
        } else {
            last.checked_add(size)
                .and_then(|x| x.checked_add(byte_offset))
                .ok_or_else(overflow)?
        };
        if t.data.is_null() && extent > byte_offset {
            return Err(Error::InvalidArgument(
                "DLPack tensor with elements but a null data pointer".into(),
            ));
        }
        Ok(ImportLayout {
            data: t.data,
            device: t.device,
            dtype,
            shape,
            byte_strides,
            byte_offset,
            extent,
        })
    }
}

/// Host memory of an imported read-only tensor, as `bytes::Bytes` wants it.
struct ReadOnlyHost<T> {
    ptr: *const u8,
    len: usize,
    _tensor: T,
}

// SAFETY: the pointer is only read, and the tensor handle that keeps it alive is Send.
unsafe impl<T: Send> Send for ReadOnlyHost<T> {}

impl<T> AsRef<[u8]> for ReadOnlyHost<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the tensor (owned by self) keeps `[ptr, ptr+len)` alive and readable; a
        // zero length never dereferences the pointer (dangling but non-null, see import).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

fn import<T: Send + Sync + 'static>(
    tensor: T,
    l: ImportLayout,
    access: Access,
) -> Result<NDBuffer> {
    let buffer = if l.extent == 0 {
        // Nothing to view: the producer's memory is not needed.
        drop(tensor);
        Buffer::from_vec(Vec::new())
    } else {
        match l.device.device_type {
            DLDeviceType::CPU | DLDeviceType::CUDA_HOST if access == Access::ReadOnly => {
                Buffer::from_bytes(bytes::Bytes::from_owner(ReadOnlyHost {
                    ptr: l.data.cast::<u8>(),
                    len: l.extent,
                    _tensor: tensor,
                }))
            }
            DLDeviceType::CPU | DLDeviceType::CUDA_HOST => {
                // SAFETY: the producer keeps `[data, data+extent)` — every element and the
                // offset before them — alive until its deleter runs, which the owner (the
                // tensor handle) calls when the last view is dropped; the tensor is writable
                // (no READ_ONLY flag), and the DLPack hand-off gives its use to us.
                unsafe { Buffer::from_host_owner(l.data.cast(), l.extent, Box::new(tensor)) }
            }
            DLDeviceType::CUDA if access == Access::ReadOnly => {
                return Err(Error::Unsupported(
                    "a read-only DLPack tensor in device memory: zarrbuf cannot keep device \
                     memory read-only; copy it with the producer first"
                        .into(),
                ));
            }
            DLDeviceType::CUDA => {
                let ordinal = usize::try_from(l.device.device_id).map_err(|_| {
                    Error::InvalidArgument(format!(
                        "DLPack CUDA tensor on device {}",
                        l.device.device_id
                    ))
                })?;
                // SAFETY: a kDLCUDA tensor's `[data, data+extent)` is memory of that device,
                // alive until the producer's deleter runs, which the owner calls.
                unsafe {
                    Buffer::from_device_ptr(
                        l.data as usize as u64,
                        l.extent,
                        ordinal,
                        Box::new(tensor),
                    )
                }
            }
            DLDeviceType(other) => {
                return Err(Error::Unsupported(format!(
                    "DLPack device type {other}; zarrbuf imports kDLCPU (1), kDLCUDA (2) and \
                     kDLCUDAHost (3) memory"
                )));
            }
        }
    };
    NDBuffer::from_parts(
        buffer,
        l.dtype,
        &l.shape,
        &l.byte_strides,
        l.byte_offset,
        ByteOrder::native(),
    )
}
