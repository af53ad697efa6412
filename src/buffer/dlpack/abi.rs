//! DLPack's C ABI as `dlpack.h` v1.0 writes it: the version, device and data type structs,
//! the tensor and the two managed tensors (versioned and legacy), and the owning handles
//! that call a managed tensor's deleter exactly once.

use crate::errors::{Error, Result};
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
pub(super) trait Managed {
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

            pub(super) fn managed(&self) -> &$raw {
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
