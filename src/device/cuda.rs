//! The CUDA implementation of the device trait: stream-ordered copies and NVRTC kernels.

use super::batch::{BatchDesc, BatchItem, DescLayout};
use super::compress::deflate_algorithm;
use super::copy_desc::CopyDescPool;
use super::mark::Mark;
use super::nvcomp::{CompressFormat, CompressOpts, Nvcomp, nvcomp};
use super::ops::{CopyBatch, StridedCast, StridedCopy, Unshuffle};
use super::{DeviceOps, Event, Queue, track};
use crate::compression_formats::Compression;
use crate::compression_formats::{CompressSettings, Compressor};
use crate::driver::cuda_context;
use crate::errors::{Error, Result};
use crate::memory::{Init, Region};
use crate::place::Memory;
use cudarc::driver::{CudaContext, CudaStream, sys};
use std::sync::Arc;
use zarrbuf_codecs::cuda::{CudaKernels, copy_batch_desc_bytes};
use zarrbuf_codecs::{CopyItem, Strided};

/// Device `ordinal`'s context; kernels are compiled on first use and cached per context.
pub(crate) struct CudaOps {
    ctx: Arc<CudaContext>,
    /// Descriptor memory of batched strided copies.
    copy_descs: CopyDescPool,
}

impl CudaOps {
    pub(crate) fn new(ordinal: usize) -> Result<Self> {
        Ok(CudaOps {
            ctx: cuda_context(ordinal)?,
            copy_descs: CopyDescPool::new(ordinal),
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
            Queue::Host(h) => Err(Error::InvalidArgument(format!(
                "a CUDA operation was given host queue {} (internal error: please report)",
                h.0
            ))),
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

    /// A batch's request arrays: written into `desc` on the host (this waits for the
    /// descriptor's last batch, whose fence is on it) and copied to the device on `q`.
    /// Returns the batch's stream, ordered after the work in flight on every region it uses.
    fn upload_requests<'q>(
        &self,
        q: &'q Queue,
        items: &[BatchItem],
        desc: &BatchDesc,
    ) -> Result<&'q CudaStream> {
        desc.write_requests(items, &|r| device_address(r, "batch chunk"))?;
        let l = DescLayout::new(desc.capacity);
        let (host, device) = (&desc.host, &desc.device);
        self.copy(q, &host.sub(0, l.out_actual), &device.sub(0, l.out_actual))?;
        let mut regions: Vec<&Region> = vec![host, device];
        regions.extend(items.iter().flat_map(|it| [&it.input, &it.output]));
        self.stream_after(q, &regions)
    }

    /// nvCOMP's scratch for a batch: the descriptor's, grown to at least `bytes`.
    fn batch_temp(&self, desc: &mut BatchDesc, bytes: usize) -> Result<Region> {
        if let Some(t) = desc.temp.as_ref().filter(|t| t.len() >= bytes) {
            return Ok(t.clone());
        }
        let t = Region::alloc_cuda(self.ctx.ordinal(), bytes.max(1), Init::Unwritten)?;
        t.settle()?;
        desc.temp = Some(t.clone());
        Ok(t)
    }

    /// Copies a batch's results (sizes, statuses) back to the descriptor's host half on `q`
    /// and leaves a fence on everything the batch used: whoever touches them next (the host
    /// reading results, the next batch writing requests, the allocator) waits for it.
    fn finish_batch(
        &self,
        q: &Queue,
        items: &[BatchItem],
        desc: &BatchDesc,
        temp: &Region,
    ) -> Result<()> {
        let l = DescLayout::new(desc.capacity);
        let (host, device) = (&desc.host, &desc.device);
        self.copy(
            q,
            &device.sub(l.out_actual, l.len),
            &host.sub(l.out_actual, l.len),
        )?;
        let mut tracked: Vec<&Region> = vec![host, device, temp];
        tracked.extend(items.iter().flat_map(|it| [&it.input, &it.output]));
        track(q, &tracked)
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

    fn strided_copy(&self, q: &Queue, op: StridedCopy<'_>) -> Result<()> {
        let StridedCopy {
            src,
            src_view,
            dst,
            dst_view,
            shape,
            elem_size,
            swap_unit,
        } = op;
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

    fn strided_copy_batch(&self, q: &Queue, op: CopyBatch<'_>) -> Result<()> {
        if op.items.is_empty() {
            return Ok(());
        }
        // Ordered after the work in flight on each storage the batch touches (once each:
        // a batch's items mostly share one scratch allocation).
        let mut seen = std::collections::HashSet::from([Arc::as_ptr(op.dst.storage())]);
        let mut storages: Vec<&Region> = vec![op.dst];
        for it in op.items {
            if seen.insert(Arc::as_ptr(it.src.storage())) {
                storages.push(it.src);
            }
        }
        let stream = self.stream_after(q, &storages)?;
        let d = device_address(op.dst, "destination")?;
        let items = op
            .items
            .iter()
            .map(|it| {
                Ok(CopyItem {
                    src: device_address(it.src, "source")?,
                    src_len: it.src.len(),
                    src_view: it.src_view,
                    dst_view: it.dst_view,
                    shape: it.shape,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let kernels = self.kernels()?;
        let desc = self.copy_descs.take(copy_batch_desc_bytes(items.len()))?;
        let dev = device_address(&desc.device, "batched copy descriptors")?;
        let r = desc.host.with_host_mut(|host| {
            // SAFETY: the sources and the destination are device-accessible regions of the
            // stated lengths, kept alive by the caller until the queue is synchronized;
            // every item's bounds and its disjointness from the destination are checked
            // inside before anything is enqueued. `host` is pinned memory and `dev` device
            // memory of the descriptor pair, which nobody else uses until the fences
            // tracked below have passed (the pool hands out only idle pairs).
            unsafe {
                kernels.strided_copy_batch(
                    stream,
                    &items,
                    d,
                    op.dst.len(),
                    op.elem_size,
                    op.swap_unit,
                    host,
                    dev,
                    desc.device.len(),
                )
            }
            .map_err(Error::from)
        });
        // Fenced even after an error: a copy may have been enqueued before it.
        let tracked = track(q, &[&desc.host, &desc.device]);
        self.copy_descs.give(desc);
        r.and(tracked)
    }

    fn blosc_unshuffle(&self, q: &Queue, op: Unshuffle<'_>) -> Result<()> {
        let Unshuffle {
            src,
            dst,
            nbytes,
            shuffle,
            typesize,
            blocksize,
        } = op;
        let stream = self.stream_after(q, &[src, dst])?;
        let (s, d) = (
            device_address(src, "source")?,
            device_address(dst, "destination")?,
        );
        // SAFETY: both addresses are device-accessible regions of the buffers' lengths, kept
        // alive by the caller until the queue is synchronized; lengths and overlap are checked
        // inside before anything is enqueued.
        unsafe {
            self.kernels()?.blosc_unshuffle(
                stream,
                s,
                src.len(),
                d,
                dst.len(),
                nbytes,
                shuffle,
                typesize,
                blocksize,
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

    fn cast(&self, q: &Queue, op: StridedCast<'_>) -> Result<()> {
        let StridedCast {
            src,
            src_view,
            src_kind,
            dst,
            dst_view,
            dst_kind,
            shape,
        } = op;
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

    fn adler32_pieces(
        &self,
        q: &Queue,
        src: &Region,
        nbytes: usize,
        piece: usize,
        out: &Region,
    ) -> Result<()> {
        let stream = self.stream_after(q, &[src, out])?;
        let (s, d) = (
            device_address(src, "Adler-32 source")?,
            device_address(out, "Adler-32 sums")?,
        );
        // SAFETY: both addresses are device-accessible regions of the buffers' lengths, kept
        // alive by the caller until the queue is synchronized; bounds, alignment and overlap
        // are checked inside.
        unsafe {
            self.kernels()?
                .adler32_pieces(stream, s, src.len(), nbytes, piece, d, out.len())?
        };
        Ok(())
    }

    fn sm_count(&self) -> Result<usize> {
        let n = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| Error::cuda("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", e))?;
        Ok(usize::try_from(n).unwrap_or(0).max(1))
    }

    fn wait_for(&self, q: &Queue, after: &Queue) -> Result<()> {
        let (stream, other) = (self.stream(q)?, self.stream(after)?);
        stream
            .join(other)
            .map_err(|e| Error::cuda("cuStreamWaitEvent", e))
    }

    fn batch_decoder(&self) -> std::result::Result<(), String> {
        nvcomp().map(|_| ()).map_err(str::to_string)
    }

    fn new_batch_desc(&self, capacity: usize) -> Result<BatchDesc> {
        let len = DescLayout::new(capacity).len;
        let n = self.ctx.ordinal();
        let device = Region::alloc_cuda(n, len, Init::Zeroed)?;
        device.settle()?;
        Ok(BatchDesc {
            capacity,
            host: Region::alloc_pinned(n, len, Init::Zeroed)?,
            device,
            temp: None,
        })
    }

    fn decompress_batch(
        &self,
        q: &Queue,
        format: Compression,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()> {
        let lib = nvcomp().map_err(|why| Error::DeviceUnavailable(why.to_string()))?;
        if items.is_empty() {
            return Ok(());
        }
        let api = match format {
            Compression::Zstd => lib.zstd,
            Compression::Deflate => lib.deflate,
            Compression::Lz4 => lib.lz4,
        };
        let stream = self.upload_requests(q, items, desc)?;
        let l = DescLayout::new(desc.capacity);
        let max_chunk = items.iter().map(|it| it.output.len()).max().unwrap_or(0);
        let total: usize = items.iter().map(|it| it.output.len()).sum();
        let temp_bytes = lib.temp_bytes(api, items.len(), max_chunk, total, stream.cu_stream())?;
        let temp = self.batch_temp(desc, temp_bytes)?;
        let base = device_address(&desc.device, "batch descriptor")?;
        // SAFETY: the descriptor arrays on the device hold the device addresses and sizes of
        // `items` (written above, copied on this stream before this call); every input and
        // output region and the temp buffer are live device memory of the stated sizes, kept
        // alive past the stream's completion of this call by the fences tracked below; the
        // pipeline validated each input's framing on the CPU before upload.
        unsafe {
            lib.decompress(
                api,
                base + l.in_ptrs as u64,
                base + l.in_bytes as u64,
                base + l.out_capacity as u64,
                base + l.out_actual as u64,
                items.len(),
                device_address(&temp, "nvCOMP scratch")?,
                temp.len(),
                base + l.out_ptrs as u64,
                base + l.statuses as u64,
                stream.cu_stream(),
            )?
        };
        self.finish_batch(q, items, desc, &temp)
    }

    fn batch_compressor(&self) -> std::result::Result<(), String> {
        let lib = nvcomp().map_err(str::to_string)?;
        lib.compressors().map(|_| ()).map_err(str::to_string)
    }

    fn max_compressed_size(&self, settings: CompressSettings, chunk_bytes: usize) -> Result<usize> {
        let (lib, api, opts) = compressor(settings)?;
        lib.max_compressed_bytes(api, chunk_bytes, opts)
    }

    fn compress_batch(
        &self,
        q: &Queue,
        settings: CompressSettings,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()> {
        let (lib, api, opts) = compressor(settings)?;
        if items.is_empty() {
            return Ok(());
        }
        let max_chunk = items.iter().map(|it| it.input.len()).max().unwrap_or(0);
        let total: usize = items.iter().map(|it| it.input.len()).sum();
        // nvCOMP takes no output capacities: every output must hold the worst case.
        let need = lib.max_compressed_bytes(api, max_chunk, opts)?;
        if let Some(small) = items.iter().find(|it| it.output.len() < need) {
            return Err(Error::InvalidArgument(format!(
                "a compression output of {} bytes where nvCOMP needs {need} (internal error: please report)",
                small.output.len()
            )));
        }
        // Request arrays as for decompression (the capacities are not read by nvCOMP).
        let stream = self.upload_requests(q, items, desc)?;
        let l = DescLayout::new(desc.capacity);
        let temp_bytes =
            lib.compress_temp_bytes(api, items.len(), max_chunk, total, opts, stream.cu_stream())?;
        let temp = self.batch_temp(desc, temp_bytes)?;
        let base = device_address(&desc.device, "batch descriptor")?;
        // SAFETY: the descriptor arrays on the device hold the device addresses and sizes of
        // `items` (written above, copied on this stream before this call); every input is
        // live device memory of its stated size, at most `max_chunk` bytes and starting an
        // allocation (aligned as nvCOMP requires); every output holds the worst case checked
        // above; the temp buffer holds what nvCOMP asked for; all are kept alive past the
        // stream's completion of this call by the fences tracked below.
        unsafe {
            lib.compress(
                api,
                base + l.in_ptrs as u64,
                base + l.in_bytes as u64,
                max_chunk,
                items.len(),
                device_address(&temp, "nvCOMP scratch")?,
                temp.len(),
                base + l.out_ptrs as u64,
                base + l.out_actual as u64,
                opts,
                base + l.statuses as u64,
                stream.cu_stream(),
            )?
        };
        self.finish_batch(q, items, desc, &temp)
    }

    fn describe_compress_status(&self, status: i32) -> String {
        self.describe_status(status)
    }

    fn describe_status(&self, status: i32) -> String {
        match nvcomp() {
            Ok(lib) => lib.describe(status),
            Err(_) => format!("nvCOMP status {status}"),
        }
    }

    fn record(&self, q: &Queue) -> Result<Event> {
        let stream = self.stream(q)?;
        stream
            .record_event(None)
            .map(|e| Event::Cuda(Arc::new(e)))
            .map_err(|e| Error::cuda("cuEventRecord", e))
    }

    fn mark(&self, q: &Queue) -> Result<Mark> {
        // CU_EVENT_DEFAULT: timing on (cudarc's default disables it).
        self.stream(q)?
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map(|e| Mark::Cuda(Arc::new(e)))
            .map_err(|e| Error::cuda("cuEventRecord", e))
    }

    fn synchronize(&self, q: &Queue) -> Result<()> {
        self.stream(q)?
            .synchronize()
            .map_err(|e| Error::cuda("cuStreamSynchronize", e))
    }
}

/// nvCOMP and its compressor and options for `settings`, or why they are missing.
fn compressor(
    settings: CompressSettings,
) -> Result<(&'static Nvcomp, CompressFormat, CompressOpts)> {
    let lib = nvcomp().map_err(|why| Error::DeviceUnavailable(why.to_string()))?;
    let c = lib
        .compressors()
        .map_err(|why| Error::DeviceUnavailable(why.to_string()))?;
    let deflate = CompressOpts::deflate(deflate_algorithm(settings.level));
    Ok(match settings.format {
        Compressor::Zstd => (lib, c.zstd, CompressOpts::DEFAULT),
        Compressor::Lz4 => (lib, c.lz4, CompressOpts::DEFAULT),
        Compressor::Deflate => (lib, c.deflate, deflate),
        Compressor::Gzip => (lib, c.gzip, deflate),
    })
}
