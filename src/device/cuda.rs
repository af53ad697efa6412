//! The CUDA implementation of the device trait: stream-ordered copies and NVRTC kernels.

use super::{DeviceOps, Event, Queue};
use crate::driver::cuda_context;
use crate::error::{Error, Result};
use crate::memory::{Init, Region};
use crate::place::Memory;
use cudarc::driver::{CudaContext, CudaStream, sys};
use std::sync::Arc;
use zarrbuf_codecs::cuda::CudaKernels;
use zarrbuf_codecs::{ScalarKind, Strided};

/// Device `ordinal`'s context; kernels are compiled on first use and cached per context.
pub(crate) struct CudaOps {
    ctx: Arc<CudaContext>,
}

impl CudaOps {
    pub(crate) fn new(ordinal: usize) -> Result<Self> {
        Ok(CudaOps {
            ctx: cuda_context(ordinal)?,
        })
    }

    fn kernels(&self) -> Result<Arc<CudaKernels>> {
        Ok(CudaKernels::for_context(&self.ctx)?)
    }

    fn stream<'q>(&self, q: &'q Queue) -> Result<&'q CudaStream> {
        match q {
            Queue::Cuda(s) => {
                self.bind()?;
                Ok(s)
            }
            Queue::Host => Err(Error::InvalidArgument(
                "a CUDA operation was given a host queue (internal error: please report)".into(),
            )),
        }
    }

    /// The stream of `q`, ordered after the device work in flight on `regions` from other
    /// streams (their allocation, an asynchronous copy): every operation starts with this.
    fn stream_after<'q>(&self, q: &'q Queue, regions: &[&Region]) -> Result<&'q CudaStream> {
        let stream = self.stream(q)?;
        for r in regions {
            r.storage().completion().order_before(stream)?;
        }
        Ok(stream)
    }

    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))
    }
}

/// The address a CUDA kernel or copy uses for a buffer's first byte.
fn device_address(b: &Region, role: &str) -> Result<u64> {
    b.device_addr().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{role} in {} is not device-accessible; copy it to the device first",
            b.memory()
        ))
    })
}

/// The address for cuMemcpyAsync: device, pinned or pageable host (unified addressing).
fn copy_address(b: &Region) -> u64 {
    b.device_addr()
        .or_else(|| b.host_ptr().map(|p| p as u64))
        .unwrap_or(0)
}

impl DeviceOps for CudaOps {
    fn memory(&self) -> Memory {
        Memory::Cuda(self.ctx.ordinal())
    }

    fn alloc(&self, len: usize) -> Result<Region> {
        Region::alloc_cuda(self.ctx.ordinal(), len, Init::Unwritten)
    }

    fn alloc_staging(&self, len: usize) -> Result<Region> {
        Region::alloc_pinned(self.ctx.ordinal(), len, Init::Unwritten)
    }

    fn new_queue(&self) -> Result<Queue> {
        let s = self
            .ctx
            .new_stream()
            .map_err(|e| Error::cuda("cuStreamCreate", e))?;
        Ok(Queue::Cuda(s))
    }

    fn default_queue(&self) -> Queue {
        Queue::Cuda(self.ctx.default_stream())
    }

    fn copy(&self, q: &Queue, src: &Region, dst: &Region) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::ShapeMismatch(format!(
                "copy of {} bytes into a buffer of {} bytes",
                src.len(),
                dst.len()
            )));
        }
        if src.is_empty() {
            return Ok(());
        }
        // The guards first (they wait for host-visible work in flight), then device order.
        let _guards = src.lock_pair(dst)?;
        let stream = self.stream_after(q, &[src, dst])?;
        // SAFETY: both addresses are live regions of len bytes (the buffers own them); with
        // unified addressing the driver infers the direction from the addresses.
        unsafe {
            sys::cuMemcpyAsync(
                copy_address(dst),
                copy_address(src),
                src.len(),
                stream.cu_stream(),
            )
        }
        .result()
        .map_err(|e| Error::cuda("cuMemcpyAsync", e))?;
        if !src.memory().is_device_accessible() || !dst.memory().is_device_accessible() {
            // Pageable host memory: the driver may still read/write it after returning.
            stream
                .synchronize()
                .map_err(|e| Error::cuda("cuStreamSynchronize", e))?;
        }
        Ok(())
    }

    fn strided_copy(
        &self,
        q: &Queue,
        src: &Region,
        src_view: Strided<'_>,
        dst: &Region,
        dst_view: Strided<'_>,
        shape: &[usize],
        elem_size: usize,
        swap_unit: usize,
    ) -> Result<()> {
        let stream = self.stream_after(q, &[src, dst])?;
        let (s, d) = (
            device_address(src, "source")?,
            device_address(dst, "destination")?,
        );
        // SAFETY: both addresses are device-accessible regions of the buffers' lengths,
        // kept alive by the caller until the queue is synchronized; bounds checked inside.
        unsafe {
            self.kernels()?.strided_copy(
                stream,
                s,
                src.len(),
                src_view,
                d,
                dst.len(),
                dst_view,
                shape,
                elem_size,
                swap_unit,
            )?
        };
        Ok(())
    }

    fn fill(
        &self,
        q: &Queue,
        dst: &Region,
        view: Strided<'_>,
        shape: &[usize],
        pattern: &[u8],
    ) -> Result<()> {
        let stream = self.stream_after(q, &[dst])?;
        let d = device_address(dst, "destination")?;
        // SAFETY: as in strided_copy.
        unsafe {
            self.kernels()?
                .fill(stream, d, dst.len(), view, shape, pattern)?
        };
        Ok(())
    }

    fn cast(
        &self,
        q: &Queue,
        src: &Region,
        src_view: Strided<'_>,
        src_kind: ScalarKind,
        dst: &Region,
        dst_view: Strided<'_>,
        dst_kind: ScalarKind,
        shape: &[usize],
    ) -> Result<()> {
        let stream = self.stream_after(q, &[src, dst])?;
        let (s, d) = (
            device_address(src, "source")?,
            device_address(dst, "destination")?,
        );
        // SAFETY: as in strided_copy.
        unsafe {
            self.kernels()?.cast(
                stream,
                s,
                src.len(),
                src_view,
                src_kind,
                d,
                dst.len(),
                dst_view,
                dst_kind,
                shape,
            )?
        };
        Ok(())
    }

    fn record(&self, q: &Queue) -> Result<Event> {
        let stream = self.stream(q)?;
        stream
            .record_event(None)
            .map(Event::Cuda)
            .map_err(|e| Error::cuda("cuEventRecord", e))
    }

    fn synchronize(&self, q: &Queue) -> Result<()> {
        self.stream(q)?
            .synchronize()
            .map_err(|e| Error::cuda("cuStreamSynchronize", e))
    }
}
