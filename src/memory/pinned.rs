//! Page-locked host memory (`cuMemHostAlloc` with flags 0).
//!
//! Flags 0, not write-combined: the CPU reads staging memory too (decompression writes it,
//! write-back reads it), and write-combined memory is very slow for CPU reads.

use super::cache::{self, BlockKind, Reusable};
use super::init::Init;
use crate::driver::cuda_context;
use crate::errors::{Error, Result};
use cudarc::driver::{CudaContext, result};
use std::sync::Arc;

/// An owned pinned host allocation, tied to the CUDA context that registered it.
pub(crate) struct PinnedAlloc {
    ptr: *mut u8,
    len: usize,
    capacity: usize,
    ctx: Arc<CudaContext>,
    /// Return the block to the cache on drop (false while it sits in the cache).
    recycle: bool,
}

// SAFETY: the allocation is exclusively owned; access is governed by the storage borrow flag.
unsafe impl Send for PinnedAlloc {}
// SAFETY: see Send above.
unsafe impl Sync for PinnedAlloc {}

impl PinnedAlloc {
    /// Allocates `len` page-locked bytes for device `ordinal`, set to zero when `init` says so
    /// (a recycled block otherwise holds its last user's bytes).
    pub(crate) fn new(ordinal: usize, len: usize, init: Init) -> Result<Self> {
        let a = Self::new_unwritten(ordinal, len)?;
        if init == Init::Zeroed {
            // SAFETY: [ptr, ptr+len) is this live, exclusively owned host allocation, and no
            // device work uses a block handed out by the cache or fresh from the driver.
            unsafe { std::ptr::write_bytes(a.ptr, 0, a.len) };
        }
        Ok(a)
    }

    fn new_unwritten(ordinal: usize, len: usize) -> Result<Self> {
        if let Some(block) = cache::take(BlockKind::Pinned(ordinal), len)
            && let Ok(mut a) = block.into_any().downcast::<PinnedAlloc>()
        {
            a.recycle = true;
            return Ok(*a);
        }
        let ctx = cuda_context(ordinal)?;
        ctx.bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        // Zero-length requests still get a real (one-byte) allocation so `ptr` is valid.
        let request = len.max(1);
        // SAFETY: a context is bound to this thread; flags 0 is a valid flag set. The memory
        // is uninitialised bytes, which is a valid state for u8.
        let raw = unsafe { result::malloc_host(request, 0) }.map_err(|e| {
            super::cuda::map_alloc_error(
                e,
                crate::place::Device::Cuda(ordinal),
                len,
                "cuMemHostAlloc",
            )
        })?;
        Ok(PinnedAlloc {
            ptr: raw.cast(),
            len,
            capacity: request,
            ctx,
            recycle: true,
        })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Reusable for PinnedAlloc {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn kind(&self) -> BlockKind {
        BlockKind::Pinned(self.ctx.ordinal())
    }

    fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl Drop for PinnedAlloc {
    fn drop(&mut self) {
        if std::mem::replace(&mut self.recycle, false) {
            let parked = PinnedAlloc {
                ptr: std::mem::replace(&mut self.ptr, std::ptr::null_mut()),
                len: self.len,
                capacity: self.capacity,
                ctx: self.ctx.clone(),
                recycle: false,
            };
            drop(cache::give(Box::new(parked)));
            return;
        }
        if self.ptr.is_null() {
            return;
        }
        // A failure here cannot be reported from drop; the context is torn down at exit anyway.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: ptr came from malloc_host in this context and is freed exactly once.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}
