//! DLPack: zero-copy hand-off of [`NDBuffer`]s to and from other libraries (PyTorch, CuPy,
//! JAX, NumPy, ...), in the versioned DLPack 1.x ABI ([`DLManagedTensorVersioned`]) and the
//! legacy one ([`DLManagedTensor`]).
//!
//! The `repr(C)` structs below follow `dlpack.h` v1.0. They are written here rather than taken
//! from the `dlpark` crate: its device support comes through its `cudarc` feature, which
//! switches on cudarc features that clash with the CUDA version this crate pins. Raw pointers,
//! shapes and strides are all that zarrbuf needs.
//!
//! - Export: [`NDBuffer::to_dlpack`] / [`NDBuffer::to_dlpack_legacy`] hand out host
//!   (`kDLCPU`), pinned (`kDLCUDAHost`) or CUDA (`kDLCUDA`) memory without copying; the
//!   tensor owns a clone of the NDBuffer until its deleter runs. zarrbuf's work in flight on
//!   the memory is finished first ([`crate::Buffer::sync`]), so a consumer on any stream sees
//!   the final bytes.
//! - Import: [`NDBuffer::from_dlpack`] / [`NDBuffer::from_dlpack_legacy`] wrap the producer's
//!   memory without copying; the producer's deleter runs when the last zarrbuf view is dropped.
//!
//! Data types without a DLPack code (raw bits, byte and UTF-32 strings, datetimes), lanes
//! other than 1 and NDBuffers in non-native byte order are errors, never silent copies.
//!
//! ```
//! use zarrbuf::NDBuffer;
//! let a = NDBuffer::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
//! let t = a.transpose(&[1, 0])?.to_dlpack()?;          // no copy: strides [1, 3] elements
//! assert_eq!(t.shape(), &[3, 2]);
//! assert_eq!(t.strides(), Some(&[1i64, 3][..]));
//! let back = NDBuffer::from_dlpack(t)?;                  // no copy either
//! assert_eq!(back.to_vec::<f32>()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
//! assert_eq!(back.buffer().host_ptr(), a.buffer().host_ptr());   // the same memory
//! # Ok::<(), zarrbuf::Error>(())
//! ```

use super::{Buffer, NDBuffer};
use crate::dtype::{ByteOrder, DataType};
use crate::error::{Error, Result};
use crate::place::Memory;
use std::ffi::c_void;
use std::ptr::NonNull;

/// The DLPack major version this module implements.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version this module implements.
pub const DLPACK_MINOR_VERSION: u32 = 0;
/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the memory.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a copy for this tensor.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (1 for the ABI in this module).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLDeviceType`, kept as its `int32` value so that any value a producer writes is valid.
///
/// ```
/// assert_eq!(zarrbuf::dlpack::DLDeviceType::CUDA.0, 2);
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// `kDLCPU`: host memory.
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`: CUDA device memory.
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost`: page-locked host memory (`cudaMallocHost`).
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLCUDAManaged`: CUDA unified (managed) memory.
    pub const CUDA_MANAGED: Self = Self(13);
}

/// `DLDevice`: where a tensor's memory is.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// The kind of memory.
    pub device_type: DLDeviceType,
    /// The device ordinal (0 for host memory).
    pub device_id: i32,
}

/// `DLDataTypeCode` values (the `code` of [`DLDataType`]).
pub mod type_code {
    /// `kDLInt`.
    pub const INT: u8 = 0;
    /// `kDLUInt`.
    pub const UINT: u8 = 1;
    /// `kDLFloat`.
    pub const FLOAT: u8 = 2;
    /// `kDLOpaqueHandle`.
    pub const OPAQUE_HANDLE: u8 = 3;
    /// `kDLBfloat`.
    pub const BFLOAT: u8 = 4;
    /// `kDLComplex`.
    pub const COMPLEX: u8 = 5;
    /// `kDLBool`.
    pub const BOOL: u8 = 6;
}

/// `DLDataType`: type code, bits per lane, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// One of [`type_code`].
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for scalars; zarrbuf supports only 1).
    pub lanes: u16,
}

/// `DLTensor`: the plain (non-owning) description of a tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// Base address (host or device); the first element is at `data + byte_offset`.
    pub data: *mut c_void,
    /// Where the memory is.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy (pre-1.0) owning tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by its consumer.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`: the DLPack 1.x owning tensor, with version and flags.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The ABI version the producer wrote.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by its consumer.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// The two managed-tensor ABIs, for code shared between them.
trait Managed {
    const KIND: &'static str;
    fn tensor(&self) -> &DLTensor;
    fn flags(&self) -> u64;
    /// # Safety
    /// `ptr` must be a live managed tensor that nobody else will delete.
    unsafe fn delete(ptr: *mut Self);
}

impl Managed for DLManagedTensorVersioned {
    const KIND: &'static str = "DLManagedTensorVersioned";
    fn tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        self.flags
    }
    unsafe fn delete(ptr: *mut Self) {
        // SAFETY: the caller owns the live tensor; its deleter is the producer's.
        unsafe {
            if let Some(d) = (*ptr).deleter {
                d(ptr)
            }
        }
    }
}

impl Managed for DLManagedTensor {
    const KIND: &'static str = "DLManagedTensor";
    fn tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn flags(&self) -> u64 {
        0
    }
    unsafe fn delete(ptr: *mut Self) {
        // SAFETY: the caller owns the live tensor; its deleter is the producer's.
        unsafe {
            if let Some(d) = (*ptr).deleter {
                d(ptr)
            }
        }
    }
}

macro_rules! owning_handle {
    ($name:ident, $raw:ty, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Dropping the handle calls the tensor's deleter; [`into_raw`](Self::into_raw) hands
        /// the ownership on instead (to a Python capsule, another library).
        pub struct $name(NonNull<$raw>);

        // SAFETY: a managed tensor is an owned value; DLPack requires its deleter to be
        // callable from any thread (Python producers take the GIL inside their deleters), and
        // the handle only reads the immutable description through `&self`.
        unsafe impl Send for $name {}
        // SAFETY: see Send; `&self` methods only read the tensor's description.
        unsafe impl Sync for $name {}

        impl $name {
            /// Takes ownership of a managed tensor.
            ///
            /// # Safety
            /// `ptr` must point to a live managed tensor whose description (shape, strides,
            /// data, device) stays valid until its deleter runs, and nobody else may call
            /// that deleter. Its `ndim` shape entries and (when not null) strides must be
            /// readable.
            ///
            /// # Errors
            /// `InvalidArgument` when `ptr` is null (nothing is taken).
            pub unsafe fn from_raw(ptr: *mut $raw) -> Result<Self> {
                NonNull::new(ptr).map(Self).ok_or_else(|| {
                    Error::InvalidArgument(format!("a null {} pointer", <$raw>::KIND))
                })
            }

            /// Gives up ownership: the caller must make sure the deleter runs once.
            pub fn into_raw(self) -> *mut $raw {
                let p = self.0.as_ptr();
                std::mem::forget(self);
                p
            }

            /// The managed tensor (still owned by this handle).
            pub fn as_raw(&self) -> *mut $raw {
                self.0.as_ptr()
            }

            fn managed(&self) -> &$raw {
                // SAFETY: from_raw's contract: the tensor lives until this handle deletes it.
                unsafe { self.0.as_ref() }
            }

            /// The plain tensor description.
            pub fn dl_tensor(&self) -> &DLTensor {
                self.managed().tensor()
            }

            /// Where the memory is.
            pub fn device(&self) -> DLDevice {
                self.dl_tensor().device
            }

            /// The element type.
            pub fn dtype(&self) -> DLDataType {
                self.dl_tensor().dtype
            }

            /// The `DLPACK_FLAG_BITMASK_*` flags (always 0 for the legacy ABI).
            pub fn flags(&self) -> u64 {
                self.managed().flags()
            }

            /// The extents.
            pub fn shape(&self) -> &[i64] {
                let t = self.dl_tensor();
                // SAFETY: from_raw's contract: `ndim` shape entries are readable while the
                // tensor lives; a non-positive ndim reads nothing.
                unsafe { raw_slice(t.shape, t.ndim) }
            }

            /// The strides in elements, `None` when the producer gave none (compact row-major).
            pub fn strides(&self) -> Option<&[i64]> {
                let t = self.dl_tensor();
                // SAFETY: as for shape, when the pointer is not null.
                (!t.strides.is_null()).then(|| unsafe { raw_slice(t.strides, t.ndim) })
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: this handle owns the tensor and deletes it once.
                unsafe { <$raw as Managed>::delete(self.0.as_ptr()) }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("device", &self.device())
                    .field("dtype", &self.dtype())
                    .field("shape", &self.shape())
                    .field("strides", &self.strides())
                    .field("byte_offset", &self.dl_tensor().byte_offset)
                    .field("flags", &self.flags())
                    .finish()
            }
        }
    };
}

owning_handle!(
    DlpackVersioned,
    DLManagedTensorVersioned,
    "An owned DLPack 1.x tensor (`DLManagedTensorVersioned`)."
);
owning_handle!(
    DlpackLegacy,
    DLManagedTensor,
    "An owned legacy DLPack tensor (`DLManagedTensor`)."
);

/// `n` values at `p` (nothing for `n <= 0`).
///
/// # Safety
/// For `n > 0`, `p` must point to `n` readable, initialised `i64`s that outlive `'a`.
unsafe fn raw_slice<'a>(p: *const i64, n: i32) -> &'a [i64] {
    if n <= 0 || p.is_null() {
        return &[];
    }
    // SAFETY: forwarded to the caller.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
}

/// The DLPack type of a zarrbuf data type.
///
/// # Errors
/// `DataType` for raw bits, byte and UTF-32 strings, datetime64 and timedelta64: DLPack has no
/// code for them (view datetimes as `int64` with [`NDBuffer::with_type`] first).
///
/// ```
/// use zarrbuf::{DataType, dlpack::{DLDataType, dlpack_dtype, type_code}};
/// assert_eq!(dlpack_dtype(DataType::Complex64)?, DLDataType { code: type_code::COMPLEX, bits: 64, lanes: 1 });
/// assert!(dlpack_dtype(DataType::RawBits(3)).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn dlpack_dtype(dtype: DataType) -> Result<DLDataType> {
    use type_code::*;
    let code = match dtype {
        DataType::Bool => BOOL,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => INT,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => UINT,
        DataType::Float16 | DataType::Float32 | DataType::Float64 => FLOAT,
        DataType::BFloat16 => BFLOAT,
        DataType::Complex64 | DataType::Complex128 => COMPLEX,
        other => {
            return Err(Error::DataType(format!(
                "{other} has no DLPack data type (DLPack knows bool, signed and unsigned \
                 integers, float16/32/64, bfloat16 and complex64/128); view the elements as \
                 another type of the same size with NDBuffer::with_type to export them"
            )));
        }
    };
    Ok(DLDataType {
        code,
        bits: (dtype.size() * 8) as u8,
        lanes: 1,
    })
}

/// The zarrbuf data type of a DLPack type.
///
/// # Errors
/// `DataType` for lanes other than 1 and for codes and widths zarrbuf has no type for.
///
/// ```
/// use zarrbuf::{DataType, dlpack::{DLDataType, dtype_from_dlpack, type_code}};
/// let t = DLDataType { code: type_code::BFLOAT, bits: 16, lanes: 1 };
/// assert_eq!(dtype_from_dlpack(t)?, DataType::BFloat16);
/// assert!(dtype_from_dlpack(DLDataType { lanes: 4, ..t }).is_err());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
pub fn dtype_from_dlpack(t: DLDataType) -> Result<DataType> {
    use type_code::*;
    if t.lanes != 1 {
        return Err(Error::DataType(format!(
            "DLPack vector type with {} lanes; zarrbuf reads scalar types (1 lane) only",
            t.lanes
        )));
    }
    Ok(match (t.code, t.bits) {
        (BOOL, 8) => DataType::Bool,
        (INT, 8) => DataType::Int8,
        (INT, 16) => DataType::Int16,
        (INT, 32) => DataType::Int32,
        (INT, 64) => DataType::Int64,
        (UINT, 8) => DataType::UInt8,
        (UINT, 16) => DataType::UInt16,
        (UINT, 32) => DataType::UInt32,
        (UINT, 64) => DataType::UInt64,
        (FLOAT, 16) => DataType::Float16,
        (FLOAT, 32) => DataType::Float32,
        (FLOAT, 64) => DataType::Float64,
        (BFLOAT, 16) => DataType::BFloat16,
        (COMPLEX, 64) => DataType::Complex64,
        (COMPLEX, 128) => DataType::Complex128,
        (code, bits) => {
            return Err(Error::DataType(format!(
                "DLPack type code {code} with {bits} bits has no zarrbuf data type"
            )));
        }
    })
}

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
        let read_only = tensor.flags() & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        let layout = ImportLayout::of(tensor.dl_tensor(), tensor.shape(), tensor.strides())?;
        import(tensor, layout, read_only)
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
        import(tensor, layout, false)
    }
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
    read_only: bool,
) -> Result<NDBuffer> {
    let buffer = if l.extent == 0 {
        // Nothing to view: the producer's memory is not needed.
        drop(tensor);
        Buffer::from_vec(Vec::new())
    } else {
        match l.device.device_type {
            DLDeviceType::CPU | DLDeviceType::CUDA_HOST if read_only => {
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
            DLDeviceType::CUDA if read_only => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BufferPrototype, Order};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn layout_of_views_round_trips() -> Result<()> {
        let a = NDBuffer::from_vec((0..24i32).collect(), &[2, 3, 4])?;
        for view in [
            a.clone(),
            a.transpose(&[2, 0, 1])?,
            a.get(&[1..2, 0..3, 1..3])?,
            a.get(&[0..2, 2..3, 0..4])?.transpose(&[1, 2, 0])?,
        ] {
            let t = view.to_dlpack()?;
            assert_eq!(t.device().device_type, DLDeviceType::CPU);
            assert_eq!(t.dl_tensor().byte_offset as usize, view.offset());
            let want: Vec<i64> = view.strides().iter().map(|&s| s as i64 / 4).collect();
            assert_eq!(t.strides(), Some(&want[..]));
            let back = NDBuffer::from_dlpack(t)?;
            assert_eq!(back.shape(), view.shape());
            assert_eq!(back.strides(), view.strides());
            assert_eq!(back.to_vec::<i32>()?, view.to_vec::<i32>()?);
            // Same memory: a write through the import is seen by the original.
            assert_eq!(back.buffer().host_ptr(), view.buffer().host_ptr());

            let back = NDBuffer::from_dlpack_legacy(view.to_dlpack_legacy()?)?;
            assert_eq!(back.to_vec::<i32>()?, view.to_vec::<i32>()?);
        }
        Ok(())
    }

    #[test]
    fn writes_through_the_import_reach_the_original() -> Result<()> {
        let a = NDBuffer::from_vec(vec![0u16; 6], &[2, 3])?;
        let mut b = NDBuffer::from_dlpack(a.to_dlpack()?)?;
        b.fill(&9u16.to_ne_bytes())?;
        drop(b);
        assert_eq!(a.to_vec::<u16>()?, vec![9; 6]);
        Ok(())
    }

    #[test]
    fn every_dlpack_dtype_round_trips() -> Result<()> {
        let proto = BufferPrototype::cpu();
        for dt in DataType::ALL {
            let a = NDBuffer::zeros(&[3, 2], dt, Order::F, &proto)?;
            let t = a.to_dlpack()?;
            assert_eq!(t.dtype().bits as usize, dt.size() * 8);
            let b = NDBuffer::from_dlpack(t)?;
            assert_eq!(
                (b.dtype(), b.shape(), b.strides()),
                (dt, a.shape(), a.strides())
            );
        }
        Ok(())
    }

    #[test]
    fn types_without_a_dlpack_code_are_errors() -> Result<()> {
        for dt in [
            DataType::RawBits(3),
            DataType::FixedBytes(4),
            DataType::FixedUtf32(2),
            DataType::DateTime64(crate::dtype::TimeUnit::Second, 1),
        ] {
            let a = NDBuffer::zeros(&[2], dt, Order::C, &BufferPrototype::cpu())?;
            let e = a.to_dlpack().unwrap_err();
            assert!(matches!(e, Error::DataType(_)), "{dt}: {e}");
            assert!(e.to_string().contains("no DLPack data type"), "{e}");
            assert!(a.to_dlpack_legacy().is_err());
        }
        Ok(())
    }

    #[test]
    fn non_native_byte_order_is_an_error_not_a_copy() -> Result<()> {
        let other = match ByteOrder::native() {
            ByteOrder::Little => ByteOrder::Big,
            ByteOrder::Big => ByteOrder::Little,
        };
        let b = Buffer::from_vec(vec![0u8; 8]);
        let a = NDBuffer::from_parts(b.clone(), DataType::Int32, &[2], &[4], 0, other)?;
        let e = a.to_dlpack().unwrap_err();
        assert!(e.to_string().contains("byte order"), "{e}");
        // Single bytes have no byte order.
        let u = NDBuffer::from_parts(b, DataType::UInt8, &[8], &[1], 0, other)?;
        assert!(u.to_dlpack().is_ok());
        Ok(())
    }

    #[test]
    fn byte_strides_that_are_not_whole_elements_are_errors() -> Result<()> {
        let b = Buffer::from_vec(vec![0u8; 16]);
        let a = NDBuffer::from_parts(b, DataType::Int32, &[2], &[6], 0, ByteOrder::native())?;
        let e = a.to_dlpack().unwrap_err();
        assert!(e.to_string().contains("not a multiple"), "{e}");
        Ok(())
    }

    #[test]
    fn the_owner_lives_until_the_deleter_runs() -> Result<()> {
        let a = NDBuffer::from_vec(vec![5i64; 4], &[4])?;
        let t = a.to_dlpack()?;
        let ptr = t.dl_tensor().data as *const i64;
        drop(a);
        // SAFETY: the tensor owns a clone of the NDBuffer, so the memory is still alive.
        assert_eq!(unsafe { *ptr.add(3) }, 5);
        let raw = t.into_raw();
        // SAFETY: `raw` came from into_raw; the deleter runs once, here.
        unsafe { ((*raw).deleter.unwrap())(raw) };
        Ok(())
    }

    /// A producer that is not zarrbuf: counts its deleter calls.
    #[repr(C)]
    struct Foreign {
        managed: DLManagedTensorVersioned,
        data: Vec<f32>,
        shape: Vec<i64>,
        deleted: Arc<AtomicUsize>,
    }

    unsafe extern "C" fn foreign_deleter(p: *mut DLManagedTensorVersioned) {
        // SAFETY: the test made `p` as the first field of a boxed `Foreign`.
        let f = unsafe { Box::from_raw(p.cast::<Foreign>()) };
        f.deleted.fetch_add(1, Ordering::SeqCst);
    }

    fn foreign(flags: u64, deleted: &Arc<AtomicUsize>) -> DlpackVersioned {
        let mut f = Box::new(Foreign {
            managed: DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(foreign_deleter),
                flags,
                dl_tensor: DLTensor {
                    data: std::ptr::null_mut(),
                    device: DLDevice {
                        device_type: DLDeviceType::CPU,
                        device_id: 0,
                    },
                    ndim: 2,
                    dtype: dlpack_dtype(DataType::Float32).unwrap(),
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(), // compact row-major
                    byte_offset: 4,
                },
            },
            data: (0..7).map(|x| x as f32).collect(),
            shape: vec![2, 3],
            deleted: deleted.clone(),
        });
        f.managed.dl_tensor.data = f.data.as_mut_ptr().cast();
        f.managed.dl_tensor.shape = f.shape.as_mut_ptr();
        let raw = Box::into_raw(f);
        // SAFETY: a live, fully initialised tensor handed over once (repr(C) first field).
        unsafe { DlpackVersioned::from_raw(raw.cast()).unwrap() }
    }

    // `Foreign` must start with the managed tensor for the cast above.
    const _: () = assert!(std::mem::offset_of!(Foreign, managed) == 0);

    #[test]
    fn foreign_tensors_import_without_copy_and_are_deleted_once() -> Result<()> {
        let deleted = Arc::new(AtomicUsize::new(0));
        let t = foreign(0, &deleted);
        let data = t.dl_tensor().data as usize;
        let a = NDBuffer::from_dlpack(t)?;
        assert_eq!(a.buffer().host_ptr().unwrap() as usize, data);
        assert_eq!(a.offset(), 4);
        assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let view = a.get(&[1..2, 0..3])?;
        drop(a);
        assert_eq!(deleted.load(Ordering::SeqCst), 0);
        assert_eq!(view.to_vec::<f32>()?, vec![4.0, 5.0, 6.0]);
        drop(view);
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
        Ok(())
    }

    #[test]
    fn read_only_imports_refuse_writes() -> Result<()> {
        let deleted = Arc::new(AtomicUsize::new(0));
        let mut a = NDBuffer::from_dlpack(foreign(DLPACK_FLAG_BITMASK_READ_ONLY, &deleted))?;
        assert_eq!(a.to_vec::<f32>()?[0], 1.0);
        assert!(a.fill(&0f32.to_ne_bytes()).is_err());
        // Re-exported read-only: the flag survives, the legacy ABI refuses.
        let t = a.to_dlpack()?;
        assert_eq!(t.flags() & DLPACK_FLAG_BITMASK_READ_ONLY, 1);
        assert!(a.to_dlpack_legacy().is_err());
        drop((a, t));
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
        Ok(())
    }

    #[test]
    fn failed_imports_still_delete() {
        let deleted = Arc::new(AtomicUsize::new(0));
        let t = foreign(0, &deleted);
        // SAFETY: the handle is live; changing the device type makes the import fail.
        unsafe { (*t.as_raw()).dl_tensor.device.device_type = DLDeviceType(4) };
        let e = NDBuffer::from_dlpack(t).unwrap_err();
        assert!(e.to_string().contains("device type 4"), "{e}");
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn negative_strides_and_wrong_versions_are_errors() {
        let deleted = Arc::new(AtomicUsize::new(0));
        let t = foreign(0, &deleted);
        // SAFETY: the handle is live.
        unsafe { (*t.as_raw()).version.major = 2 };
        assert!(
            NDBuffer::from_dlpack(t)
                .unwrap_err()
                .to_string()
                .contains("DLPack 2.0")
        );
        let t = foreign(0, &deleted);
        let mut strides = [-3i64, 1];
        // SAFETY: the handle is live and `strides` outlives the import attempt.
        unsafe { (*t.as_raw()).dl_tensor.strides = strides.as_mut_ptr() };
        assert!(
            NDBuffer::from_dlpack(t)
                .unwrap_err()
                .to_string()
                .contains("negative strides")
        );
        assert_eq!(deleted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn empty_and_scalar_arrays() -> Result<()> {
        let e = NDBuffer::zeros(
            &[0, 3],
            DataType::Float64,
            Order::C,
            &BufferPrototype::cpu(),
        )?;
        let b = NDBuffer::from_dlpack(e.to_dlpack()?)?;
        assert_eq!(b.shape(), &[0, 3]);
        let s = NDBuffer::from_vec(vec![42u32], &[])?;
        let t = s.to_dlpack()?;
        assert_eq!(t.shape(), &[] as &[i64]);
        assert_eq!(NDBuffer::from_dlpack(t)?.to_vec::<u32>()?, vec![42]);
        Ok(())
    }

    #[test]
    fn struct_layouts_match_dlpack_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(offset_of!(DLTensor, device), 8);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    }
}
