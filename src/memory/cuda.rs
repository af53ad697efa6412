//! CUDA device memory (`cuMemAlloc`), freed when the last view is dropped.

use crate::driver::cuda_context;
use crate::error::{Error, Result};
use crate::place::Device;
use cudarc::driver::{CudaContext, DriverError, result, sys};
use std::sync::Arc;

/// An owned device allocation.
pub(crate) struct CudaAlloc {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl CudaAlloc {
    /// Allocates `len` bytes on device `ordinal` (contents undefined).
    pub(crate) fn new(ordinal: usize, len: usize) -> Result<Self> {
        let ctx = cuda_context(ordinal)?;
        ctx.bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        // SAFETY: a context is bound to this thread; bytes are valid in any state.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }
            .map_err(|e| map_alloc_error(e, Device::Cuda(ordinal), len, "cuMemAlloc"))?;
        Ok(CudaAlloc { ptr, len, ctx })
    }

    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for CudaAlloc {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // cuMemFree waits for work using the pointer that was issued before it on the
            // legacy stream; our queues are synchronized before their buffers are released.
            // SAFETY: ptr came from malloc_sync in this context and is freed exactly once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Out-of-memory gets its own variant; everything else is a CUDA error naming the call.
pub(crate) fn map_alloc_error(
    err: DriverError,
    device: Device,
    requested: usize,
    call: &'static str,
) -> Error {
    if err.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory {
            device,
            requested,
            detail: format!("{call} reported CUDA_ERROR_OUT_OF_MEMORY"),
        }
    } else if err.0 == sys::CUresult::CUDA_ERROR_INVALID_VALUE {
        Error::InvalidSize(format!(
            "{call} rejected a request of {requested} bytes on {device}"
        ))
    } else {
        Error::cuda(call, err)
    }
}
