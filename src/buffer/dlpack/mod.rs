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

mod abi;
mod dtypes;
mod export;
mod import;
#[cfg(test)]
mod tests;

pub use abi::{
    DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION,
    DLPACK_MINOR_VERSION, DLPackVersion, DLTensor, DlpackLegacy, DlpackVersioned, type_code,
};
pub use dtypes::{dlpack_dtype, dtype_from_dlpack};
