//! CUDA device memory: allocated and freed in stream order from the device's default memory
//! pool (`cuMemAllocAsync` / `cuMemFreeAsync`), or with `cuMemAlloc` on devices without pools.

use super::completion::Fence;
use super::init::Init;
use crate::driver::{alloc_stream, cuda_context};
use crate::errors::{Error, Result};
use crate::place::Device;
use cudarc::driver::{CudaContext, CudaStream, DriverError, result, sys};
use std::sync::Arc;

/// An owned device allocation.
pub(crate) struct CudaAlloc {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: Arc<CudaContext>,
    /// The stream it was allocated on and is freed on (`None`: `cuMemAlloc`, freed with
    /// `cuMemFree` after a host wait).
    stream: Option<Arc<CudaStream>>,
}

impl CudaAlloc {
    /// Allocates `len` bytes on device `ordinal`, set to zero when `init` says so, else with
    /// undefined contents (zarrbuf writes every byte before safe code can see them). The
    /// fence, when there is one, is where the memory becomes usable (stream order).
    pub(crate) fn new(ordinal: usize, len: usize, init: Init) -> Result<(Self, Option<Fence>)> {
        let stream = alloc_stream(ordinal)?;
        Self::new_with(ordinal, len, init, stream)
    }

    /// Allocates `len` bytes on device `ordinal` with `cuMemAlloc`, never from a memory pool,
    /// set to zero when `init` says so (the memset is complete when this returns). Legacy CUDA IPC
    /// (`cuIpcGetMemHandle`) can export such an allocation; it cannot export pool memory.
    pub(crate) fn new_unpooled(ordinal: usize, len: usize, init: Init) -> Result<Self> {
        let (alloc, _no_fence) = Self::new_with(ordinal, len, init, None)?;
        Ok(alloc)
    }

    /// Allocates on `stream` (stream-ordered, from the default pool) or, without one, with
    /// `cuMemAlloc`.
    fn new_with(
        ordinal: usize,
        len: usize,
        init: Init,
        stream: Option<Arc<CudaStream>>,
    ) -> Result<(Self, Option<Fence>)> {
        let ctx = cuda_context(ordinal)?;
        ctx.bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        let request = len.max(1);
        let ptr = match &stream {
            // SAFETY: a context is bound and `s` is a live stream of it; the memory is bytes,
            // valid in any state; every use is ordered after the fence recorded below.
            Some(s) => unsafe { result::malloc_async(s.cu_stream(), request) }
                .map_err(|e| map_alloc_error(e, Device::Cuda(ordinal), len, "cuMemAllocAsync"))?,
            // SAFETY: a context is bound to this thread; bytes are valid in any state.
            None => unsafe { result::malloc_sync(request) }
                .map_err(|e| map_alloc_error(e, Device::Cuda(ordinal), len, "cuMemAlloc"))?,
        };
        let alloc = CudaAlloc {
            ptr,
            len,
            ctx,
            stream,
        };
        let fence = match &alloc.stream {
            Some(s) => {
                if init == Init::Zeroed {
                    // SAFETY: [ptr, ptr+request) is this allocation, ordered on `s`.
                    unsafe { result::memset_d8_async(ptr, 0, request, s.cu_stream()) }
                        .map_err(|e| Error::cuda("cuMemsetD8Async", e))?;
                }
                Some(Fence::record(s)?)
            }
            None => {
                if init == Init::Zeroed {
                    // SAFETY: [ptr, ptr+request) is this allocation; the synchronous memset
                    // is complete when it returns for device memory.
                    unsafe { result::memset_d8_sync(ptr, 0, request) }
                        .map_err(|e| Error::cuda("cuMemsetD8", e))?;
                    alloc
                        .ctx
                        .synchronize()
                        .map_err(|e| Error::cuda("cuCtxSynchronize", e))?;
                }
                None
            }
        };
        Ok((alloc, fence))
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

    /// True when the memory came from a stream-ordered pool (`cuMemAllocAsync`), which
    /// legacy CUDA IPC cannot export.
    pub(crate) fn is_stream_ordered(&self) -> bool {
        self.stream.is_some()
    }

    /// Gets ready to be dropped after the work behind `fences`: the free is ordered after
    /// them on the allocation stream (pools), or the host waits for them (`cuMemAlloc`).
    /// `false` when that could not be arranged: the memory must then be leaked, not freed.
    pub(crate) fn release_after(&mut self, fences: &[Fence]) -> bool {
        match &self.stream {
            Some(s) => fences.iter().all(|f| f.order_before(s).is_ok()),
            None => fences.iter().all(|f| f.wait().is_ok()),
        }
    }
}

impl Drop for CudaAlloc {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        match &self.stream {
            Some(s) => {
                // SAFETY: ptr came from malloc_async on this stream and is freed exactly once;
                // the storage ordered every use of it before this point of the stream
                // (`release_after`).
                let _ = unsafe { result::free_async(self.ptr, s.cu_stream()) };
            }
            None => {
                // SAFETY: ptr came from malloc_sync in this context and is freed exactly once,
                // after the host saw every use of it complete (`release_after`).
                let _ = unsafe { result::free_sync(self.ptr) };
            }
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
