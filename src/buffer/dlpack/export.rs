//! Export: an NDBuffer handed out as a DLPack tensor without copying, owning a clone of the
//! NDBuffer until the consumer calls its deleter.

use super::abi::*;
use super::dtypes::dlpack_dtype;
use crate::buffer::NDBuffer;
use crate::data_types::ByteOrder;
use crate::errors::{Error, Result};
use crate::place::Memory;
use std::ffi::c_void;

/// What an exported tensor owns: the managed struct first (its address is the tensor's), then
/// the NDBuffer clone that keeps the memory alive and the shape and strides arrays.
#[repr(C)]
struct Export<M> {
    managed: M,
    _owner: NDBuffer,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// The deleter of tensors exported by [`NDBuffer::to_dlpack`].
///
/// # Safety
/// `p` must be a tensor made by `to_dlpack` and not yet deleted.
unsafe extern "C" fn delete_versioned(p: *mut DLManagedTensorVersioned) {
    if !p.is_null() {
        // SAFETY: `p` is the first field of a boxed `Export` (repr(C)) made by `export`.
        drop(unsafe { Box::from_raw(p.cast::<Export<DLManagedTensorVersioned>>()) });
    }
}

/// The deleter of tensors exported by [`NDBuffer::to_dlpack_legacy`].
///
/// # Safety
/// `p` must be a tensor made by `to_dlpack_legacy` and not yet deleted.
unsafe extern "C" fn delete_legacy(p: *mut DLManagedTensor) {
    if !p.is_null() {
        // SAFETY: `p` is the first field of a boxed `Export` (repr(C)) made by `export`.
        drop(unsafe { Box::from_raw(p.cast::<Export<DLManagedTensor>>()) });
    }
}

/// The parts of an export that do not depend on the ABI.
struct Described {
    tensor: DLTensor,
    read_only: bool,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

impl NDBuffer {
    /// The DLPack device of this array's memory: `kDLCPU` for host memory, `kDLCUDAHost` for
    /// pinned memory (device id 0, as for host memory), `kDLCUDA` with the ordinal for device
    /// memory.
    ///
    /// ```
    /// use zarrbuf::dlpack::DLDeviceType;
    /// let a = zarrbuf::NDBuffer::from_vec(vec![0u8; 4], &[4])?;
    /// assert_eq!(a.dlpack_device().device_type, DLDeviceType::CPU);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn dlpack_device(&self) -> DLDevice {
        match self.memory() {
            Memory::Host => DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            Memory::Pinned(_) => DLDevice {
                device_type: DLDeviceType::CUDA_HOST,
                device_id: 0,
            },
            Memory::Cuda(n) => DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: n as i32,
            },
        }
    }

    fn describe_for_dlpack(&self) -> Result<Described> {
        let dtype = dlpack_dtype(self.dtype())?;
        let size = self.dtype().size();
        if self.byte_order() != ByteOrder::native() && self.dtype().swap_unit() > 1 {
            return Err(Error::Unsupported(format!(
                "DLPack tensors are in native byte order but this {} array is {:?}-endian; \
                 convert it first (astype into a native-order array), which copies",
                self.dtype(),
                self.byte_order()
            )));
        }
        let ndim = i32::try_from(self.ndim()).map_err(|_| {
            Error::InvalidArgument(format!("{} dimensions do not fit DLPack", self.ndim()))
        })?;
        let mut strides = Vec::with_capacity(self.ndim());
        for (k, &s) in self.strides().iter().enumerate() {
            if s % size as isize != 0 {
                return Err(Error::Unsupported(format!(
                    "DLPack strides count elements, but dimension {k} of this {} array steps \
                     {s} bytes, not a multiple of the {size}-byte element; copy it into a \
                     contiguous array first",
                    self.dtype()
                )));
            }
            strides.push((s / size as isize) as i64);
        }
        let shape: Vec<i64> = self.shape().iter().map(|&n| n as i64).collect();
        // Another framework would read bytes nobody wrote: a lazy buffer must be written first.
        self.buffer().written_region("a DLPack export")?;
        // zarrbuf's work in flight on the memory (asynchronous copies, the stream-ordered
        // allocation, kernels) is done before anyone else touches it.
        self.buffer().sync()?;
        let buffer = self.buffer();
        let data = match self.memory() {
            Memory::Host | Memory::Pinned(_) => buffer.host_ptr().map(|p| p.cast::<c_void>()),
            Memory::Cuda(_) => buffer.device_addr().map(|a| a as usize as *mut c_void),
        }
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} has no address to hand out (internal error: please report)",
                self.memory()
            ))
        })?;
        // Memory zarrbuf must not let others write (immutable `bytes::Bytes`) is read-only.
        let read_only = matches!(
            buffer.region()?.storage().write(),
            Err(Error::InvalidArgument(_))
        );
        Ok(Described {
            tensor: DLTensor {
                data,
                device: self.dlpack_device(),
                ndim,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: self.offset() as u64,
            },
            read_only,
            shape,
            strides,
        })
    }

    /// Exports this array as a DLPack 1.x tensor without copying. The tensor owns a clone of
    /// the NDBuffer until its deleter runs, so the memory outlives every other handle if need
    /// be. zarrbuf's work in flight on the memory is finished first ([`Buffer::sync`]), so the
    /// consumer may use the memory on any stream. Memory zarrbuf holds read-only (wrapped
    /// `bytes::Bytes`) carries `DLPACK_FLAG_BITMASK_READ_ONLY`.
    ///
    /// The consumer writes and reads the memory behind zarrbuf's borrow checks: don't read
    /// through another handle while it writes.
    ///
    /// # Errors
    /// `DataType` for types without a DLPack code, `Unsupported` for a non-native byte order
    /// or byte strides that are not whole elements, CUDA errors from the sync.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1i16, 2, 3, 4, 5, 6], &[2, 3])?;
    /// let t = a.get(&[0..2, 1..3])?.to_dlpack()?;
    /// assert_eq!((t.shape(), t.strides()), (&[2i64, 2][..], Some(&[3i64, 1][..])));
    /// assert_eq!(t.dl_tensor().byte_offset, 2);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_dlpack(&self) -> Result<DlpackVersioned> {
        let d = self.describe_for_dlpack()?;
        let managed = DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: if d.read_only {
                DLPACK_FLAG_BITMASK_READ_ONLY
            } else {
                0
            },
            dl_tensor: d.tensor,
        };
        let mut export = Box::new(Export {
            managed,
            _owner: self.clone(),
            shape: d.shape,
            strides: d.strides,
        });
        export.managed.dl_tensor.shape = export.shape.as_mut_ptr();
        export.managed.dl_tensor.strides = export.strides.as_mut_ptr();
        let raw = Box::into_raw(export);
        // SAFETY: `raw` is a live Box; the context points at the whole export.
        unsafe { (*raw).managed.manager_ctx = raw.cast() };
        // SAFETY: a fresh, fully initialised tensor owned by nobody else; the shape and
        // strides Vecs live inside it until the deleter drops the Box.
        unsafe { DlpackVersioned::from_raw(raw.cast()) }
    }

    /// Exports this array as a legacy DLPack tensor (`DLManagedTensor`, for consumers older
    /// than DLPack 1.0), otherwise as [`to_dlpack`](Self::to_dlpack).
    ///
    /// # Errors
    /// As `to_dlpack`, and `Unsupported` for read-only memory: the legacy ABI cannot say so.
    ///
    /// ```
    /// let a = zarrbuf::NDBuffer::from_vec(vec![1u64, 2], &[2])?;
    /// let t = a.to_dlpack_legacy()?;
    /// assert_eq!(zarrbuf::NDBuffer::from_dlpack_legacy(t)?.to_vec::<u64>()?, vec![1, 2]);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_dlpack_legacy(&self) -> Result<DlpackLegacy> {
        let d = self.describe_for_dlpack()?;
        if d.read_only {
            return Err(Error::Unsupported(
                "this array's memory is read-only (wrapped bytes::Bytes) and the legacy DLPack \
                 ABI cannot mark it so; use the versioned export (to_dlpack) or copy it first"
                    .into(),
            ));
        }
        let managed = DLManagedTensor {
            dl_tensor: d.tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        };
        let mut export = Box::new(Export {
            managed,
            _owner: self.clone(),
            shape: d.shape,
            strides: d.strides,
        });
        export.managed.dl_tensor.shape = export.shape.as_mut_ptr();
        export.managed.dl_tensor.strides = export.strides.as_mut_ptr();
        let raw = Box::into_raw(export);
        // SAFETY: `raw` is a live Box; the context points at the whole export.
        unsafe { (*raw).managed.manager_ctx = raw.cast() };
        // SAFETY: as in to_dlpack.
        unsafe { DlpackLegacy::from_raw(raw.cast()) }
    }
}
