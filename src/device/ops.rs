//! The device trait: the handful of operations the pipeline and NDBuffer need from a device.
//!
//! Two implementations: [`super::CudaOps`] (streams, DMA, NVRTC kernels) and
//! [`super::HostOps`] (host memory, memcpy, the host twins of the kernels, everything done
//! immediately). CI has no GPU, so the host one is how every line of pipeline logic is tested.

use super::batch::{BatchDesc, BatchItem};
use super::mark::Mark;
use crate::compression_formats::{CompressSettings, Compression};
use crate::errors::Result;
use crate::memory::{Fence, Region};
use crate::place::Memory;
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::Arc;
use zarrbuf_codecs::host::Shuffle;
use zarrbuf_codecs::{ScalarKind, Strided};

/// An ordered queue of device work: a CUDA stream, or a host queue (whose work runs at once).
#[derive(Clone)]
pub(crate) enum Queue {
    Host(HostQueue),
    Cuda(Arc<CudaStream>),
}

/// A host queue. Host work runs at once, so a host queue holds no state; its number tells it
/// apart from the others, for a host implementation of [`DeviceOps`] that keeps time per
/// queue (the simulated device of the pipeline's timing tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HostQueue(pub(crate) usize);

impl HostQueue {
    /// The queue the host's operations use when given none.
    pub(crate) const DEFAULT: HostQueue = HostQueue(0);

    /// A queue no other host queue in this process has had.
    pub(crate) fn new() -> HostQueue {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        HostQueue(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// An element-wise strided copy: the elements of `shape` that `src_view` places in `src`
/// go where `dst_view` places them in `dst`, each of `elem_size` bytes and byte-swapped in
/// units of `swap_unit` bytes on the way (0: no swap).
#[derive(Clone, Copy)]
pub(crate) struct StridedCopy<'a> {
    pub src: &'a Region,
    pub src_view: Strided<'a>,
    pub dst: &'a Region,
    pub dst_view: Strided<'a>,
    pub shape: &'a [usize],
    pub elem_size: usize,
    pub swap_unit: usize,
}

/// One item of a [`CopyBatch`]: the elements of `shape` that `src_view` places in `src` go
/// where `dst_view` places them in the batch's destination.
#[derive(Clone, Copy)]
pub(crate) struct CopyBatchItem<'a> {
    pub src: &'a Region,
    pub src_view: Strided<'a>,
    pub dst_view: Strided<'a>,
    pub shape: &'a [usize],
}

/// Many strided copies into one destination region, all of `elem_size`-byte elements
/// byte-swapped in units of `swap_unit` bytes (0: no swap): one kernel launch on CUDA. Every
/// item is checked before anything is written; no source may overlap `dst`.
#[derive(Clone, Copy)]
pub(crate) struct CopyBatch<'a> {
    pub items: &'a [CopyBatchItem<'a>],
    pub dst: &'a Region,
    pub elem_size: usize,
    pub swap_unit: usize,
}

/// A converting copy: the elements of `shape` that `src_view` places in `src`, of
/// `src_kind`, converted to `dst_kind` where `dst_view` places them in `dst`.
#[derive(Clone, Copy)]
pub(crate) struct StridedCast<'a> {
    pub src: &'a Region,
    pub src_view: Strided<'a>,
    pub src_kind: ScalarKind,
    pub dst: &'a Region,
    pub dst_view: Strided<'a>,
    pub dst_kind: ScalarKind,
    pub shape: &'a [usize],
}

/// Undoing blosc's `shuffle` over the first `nbytes` bytes of `src` into `dst` (distinct
/// regions, each at least `nbytes` long), block by block: `blocksize`-byte blocks, the last
/// one possibly shorter, elements of `typesize` bytes.
#[derive(Clone, Copy)]
pub(crate) struct Unshuffle<'a> {
    pub src: &'a Region,
    pub dst: &'a Region,
    pub nbytes: usize,
    pub shuffle: Shuffle,
    pub typesize: usize,
    pub blocksize: usize,
}

/// A point in a queue; waiting on it blocks the host until the work before it is done.
/// Cheap to clone (one batch's event is shared by all the slots it used).
#[derive(Clone)]
pub(crate) enum Event {
    Complete,
    Cuda(Arc<CudaEvent>),
    /// The simulated device's work completes at this instant (`super::sim`).
    #[cfg(test)]
    At(std::time::Instant),
}

impl Event {
    pub(crate) fn wait(&self) -> Result<()> {
        match self {
            Event::Complete => Ok(()),
            Event::Cuda(e) => e
                .synchronize()
                .map_err(|e| crate::errors::Error::cuda("cuEventSynchronize", e)),
            #[cfg(test)]
            Event::At(t) => {
                std::thread::sleep(t.saturating_duration_since(std::time::Instant::now()));
                Ok(())
            }
        }
    }

    /// The event of a timing mark: the point of the queue it marks (the host's work is done
    /// when enqueued).
    pub(crate) fn of_mark(mark: &Mark) -> Event {
        match mark {
            Mark::Host(_) => Event::Complete,
            Mark::Cuda(e) => Event::Cuda(e.clone()),
        }
    }

    /// True once the work before the event is done (never blocks).
    pub(crate) fn is_complete(&self) -> bool {
        match self {
            Event::Complete => true,
            Event::Cuda(e) => e.is_complete(),
            #[cfg(test)]
            Event::At(t) => std::time::Instant::now() >= *t,
        }
    }
}

/// What a device offers the pipeline. Offsets in `Strided` views are relative to the
/// buffer handle's first byte; every method checks bounds before touching memory.
///
/// Ordering: every operation starts after the device work in flight on the regions it
/// touches (their completion fences). An operation may return before its work is done; the
/// caller then either synchronizes the queue before the regions can be reached by other
/// code, or leaves a fence on each of them with [`track`] (the pipeline does the former:
/// its staging memory is private and it drains every queue before it returns).
pub(crate) trait DeviceOps: Send + Sync {
    /// Memory that kernels of this device compute on.
    fn memory(&self) -> Memory;
    /// `len` bytes of this device's memory, contents undefined.
    fn alloc(&self, len: usize) -> Result<Region>;
    /// `len` bytes of host memory this device can DMA from and to (pinned for CUDA).
    fn alloc_staging(&self, len: usize) -> Result<Region>;
    /// A new queue for independent work.
    fn new_queue(&self) -> Result<Queue>;
    /// The queue for one-off synchronous operations (the device's default stream).
    fn default_queue(&self) -> Queue;
    /// Copies `src` into `dst` (equal lengths), between any memories this device can address.
    fn copy(&self, q: &Queue, src: &Region, dst: &Region) -> Result<()>;
    /// Element-wise strided copy with optional byte swap.
    fn strided_copy(&self, q: &Queue, op: StridedCopy<'_>) -> Result<()>;
    /// Many element-wise strided copies into one destination (see [`CopyBatch`]); the same
    /// result as one [`Self::strided_copy`] per item, in one operation.
    fn strided_copy_batch(&self, q: &Queue, op: CopyBatch<'_>) -> Result<()>;
    /// Writes `pattern` into every element of the view.
    fn fill(
        &self,
        q: &Queue,
        dst: &Region,
        view: Strided<'_>,
        shape: &[usize],
        pattern: &[u8],
    ) -> Result<()>;
    /// Converting copy between scalar kinds.
    fn cast(&self, q: &Queue, op: StridedCast<'_>) -> Result<()>;
    /// Undoes blosc's shuffle (see [`Unshuffle`]).
    fn blosc_unshuffle(&self, q: &Queue, op: Unshuffle<'_>) -> Result<()>;
    /// Writes the Adler-32 sums of each `piece`-byte piece of the first `nbytes` bytes of
    /// `src` into `out` (two `u32` per piece, native byte order; see
    /// `zarrbuf_codecs::host::adler32_pieces`), for zlib's checksum without the chunk leaving
    /// the device.
    fn adler32_pieces(
        &self,
        q: &Queue,
        src: &Region,
        nbytes: usize,
        piece: usize,
        out: &Region,
    ) -> Result<()>;
    /// The device's streaming multiprocessors: how many independent chunks it decodes at
    /// once, about (nvCOMP gives each zstd or DEFLATE chunk about one thread block). On
    /// CUDA the device's `MULTIPROCESSOR_COUNT`; on the host its CPU count (see
    /// [`host_sm_count`]). Sizes the device decoder's batches
    /// (`crate::pipeline` `batch_plan`). The default is the host's.
    fn sm_count(&self) -> Result<usize> {
        Ok(host_sm_count())
    }
    /// Orders the work enqueued on `q` from now on after the work enqueued on `after` so far
    /// (a CUDA stream waiting for an event of another; nothing to do on the host, whose
    /// work is done when enqueued, which is the default).
    fn wait_for(&self, _q: &Queue, _after: &Queue) -> Result<()> {
        Ok(())
    }
    /// Why this device cannot decompress batches itself (`Ok` when it can: always on the
    /// host, with nvCOMP on CUDA).
    fn batch_decoder(&self) -> std::result::Result<(), String>;
    /// Descriptor memory for batches of up to `capacity` chunks.
    fn new_batch_desc(&self, capacity: usize) -> Result<BatchDesc>;
    /// Enqueues the decompression of `items` (all in `format`) on `q`. Each chunk's outcome
    /// is in `desc` once the queue has passed this point ([`BatchDesc::outcomes`]).
    fn decompress_batch(
        &self,
        q: &Queue,
        format: Compression,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()>;
    /// A batch status code in words.
    fn describe_status(&self, status: i32) -> String;
    /// Why this device cannot compress batches itself (`Ok` when it can: always on the
    /// host, with nvCOMP 6 on CUDA).
    fn batch_compressor(&self) -> std::result::Result<(), String>;
    /// The output buffer each chunk of up to `chunk_bytes` bytes needs when compressed in
    /// `settings` (what the compressor may write in the worst case).
    fn max_compressed_size(&self, settings: CompressSettings, chunk_bytes: usize) -> Result<usize>;
    /// Enqueues the compression of `items` on `q`: each input (uncompressed, device memory)
    /// into its output (at least [`Self::max_compressed_size`] bytes). Each chunk's
    /// compressed size or failure is in `desc` once the queue has passed this point
    /// ([`BatchDesc::outcomes`]); the outputs hold the bare compressed streams.
    fn compress_batch(
        &self,
        q: &Queue,
        settings: CompressSettings,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()>;
    /// A compression status code in words.
    fn describe_compress_status(&self, status: i32) -> String;
    /// Marks the current end of the queue.
    fn record(&self, q: &Queue) -> Result<Event>;
    /// A timing mark at the current end of `q` (stage timings): a CUDA event with timing
    /// on; on the host, whose work is done when enqueued, the host clock now (the default).
    fn mark(&self, _q: &Queue) -> Result<Mark> {
        Ok(Mark::now())
    }
    /// Blocks until everything queued so far is done.
    fn synchronize(&self, q: &Queue) -> Result<()>;
}

/// Leaves a fence at the current end of `q` on every region in `regions`: whoever uses
/// them next (the host, another stream, the allocator) waits for the work enqueued so far.
/// Nothing to do on the host queue, whose work is done when enqueued.
pub(crate) fn track(q: &Queue, regions: &[&Region]) -> Result<()> {
    let Queue::Cuda(stream) = q else {
        return Ok(());
    };
    let fence = Fence::record(stream)?;
    for r in regions {
        r.storage().completion().add(fence.clone());
    }
    Ok(())
}

/// The host twin's "SM count", which sizes the batches of its device decoder: the
/// `ZARRBUF_HOST_SMS` environment variable when it holds a positive number (so a test or a
/// CI job can give the host twin a GPU's batch sizes: `ZARRBUF_HOST_SMS=132` batches as an
/// H100 does), otherwise the CPU count (`std::thread::available_parallelism`), otherwise 1.
pub(crate) fn host_sm_count() -> usize {
    std::env::var("ZARRBUF_HOST_SMS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}
