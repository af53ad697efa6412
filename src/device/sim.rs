//! A simulated device for tests: the host twin's memory, copies, kernels and batch decoder
//! (every byte is real), with the timing of a GPU. Each batch decompression occupies one
//! decoder engine for `batch_latency + decoded bytes / bytes_per_sec`, after whatever its
//! queue and the engine already hold; events and synchronisation wait for that simulated
//! time (sleeping, so the timing does not depend on free cores). Everything else completes
//! at once, as on the host.
//!
//! This is how CI tests what only asynchronous devices show — batches in flight, the ring
//! of batch entries, rates the hybrid scheduler measures — without a GPU.

use super::batch::{BatchDesc, BatchItem};
use super::ops::HostQueue;
use super::ops::{CopyBatch, StridedCast, StridedCopy, Unshuffle};
use super::{DeviceOps, Event, HostOps, Queue};
use crate::compression_formats::{CompressSettings, Compression};
use crate::errors::Result;
use crate::memory::Region;
use crate::place::Memory;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use zarrbuf_codecs::Strided;

/// A device with `sms` multiprocessors whose batch decoder takes `batch_latency` per batch
/// plus its decoded bytes at `bytes_per_sec`.
pub(crate) struct SimulatedOps {
    pub sms: usize,
    pub batch_latency: Duration,
    pub bytes_per_sec: f64,
    default_queue: HostQueue,
    state: Mutex<SimState>,
}

struct SimState {
    /// When the work enqueued so far on each of this device's queues is done. Host queues
    /// are numbered uniquely in the process: slots pooled by another device (simulated or
    /// the host) bring queues this one does not know, whose work is done.
    queues: HashMap<HostQueue, Instant>,
    /// When the decoder engine is free.
    engine_free: Instant,
    /// Chunks of every batch decompressed, in order.
    batches: Vec<usize>,
    /// Plain strided copies enqueued.
    strided_copies: usize,
    /// Items of every batched strided copy, in order.
    copy_batches: Vec<usize>,
}

impl SimulatedOps {
    pub(crate) fn new(sms: usize, batch_latency: Duration, bytes_per_sec: f64) -> Self {
        let now = Instant::now();
        SimulatedOps {
            sms,
            batch_latency,
            bytes_per_sec,
            default_queue: HostQueue::new(),
            state: Mutex::new(SimState {
                queues: HashMap::new(),
                engine_free: now,
                batches: Vec::new(),
                strided_copies: 0,
                copy_batches: Vec::new(),
            }),
        }
    }

    /// The chunk counts of the batches decompressed so far.
    pub(crate) fn batches(&self) -> Vec<usize> {
        self.state.lock().expect("sim state").batches.clone()
    }

    /// The plain strided copies enqueued so far, and the items of every batched one.
    pub(crate) fn copies(&self) -> (usize, Vec<usize>) {
        let s = self.state.lock().expect("sim state");
        (s.strided_copies, s.copy_batches.clone())
    }

    /// When `q`'s work is done.
    fn done_at(&self, q: &Queue) -> Instant {
        let s = self.state.lock().expect("sim state");
        match q {
            Queue::Host(i) => s.queues.get(i).copied().unwrap_or_else(Instant::now),
            _ => Instant::now(),
        }
    }
}

impl DeviceOps for SimulatedOps {
    fn memory(&self) -> Memory {
        Memory::Host
    }

    fn alloc(&self, len: usize) -> Result<Region> {
        HostOps.alloc(len)
    }

    fn alloc_staging(&self, len: usize) -> Result<Region> {
        HostOps.alloc_staging(len)
    }

    fn new_queue(&self) -> Result<Queue> {
        Ok(Queue::Host(HostQueue::new()))
    }

    fn default_queue(&self) -> Queue {
        Queue::Host(self.default_queue)
    }

    fn copy(&self, q: &Queue, src: &Region, dst: &Region) -> Result<()> {
        HostOps.copy(q, src, dst)
    }

    fn strided_copy(&self, q: &Queue, op: StridedCopy<'_>) -> Result<()> {
        self.state.lock().expect("sim state").strided_copies += 1;
        HostOps.strided_copy(q, op)
    }

    fn strided_copy_batch(&self, q: &Queue, op: CopyBatch<'_>) -> Result<()> {
        let items = op.items.len();
        self.state
            .lock()
            .expect("sim state")
            .copy_batches
            .push(items);
        HostOps.strided_copy_batch(q, op)
    }

    fn fill(
        &self,
        q: &Queue,
        dst: &Region,
        view: Strided<'_>,
        shape: &[usize],
        pattern: &[u8],
    ) -> Result<()> {
        HostOps.fill(q, dst, view, shape, pattern)
    }

    fn cast(&self, q: &Queue, op: StridedCast<'_>) -> Result<()> {
        HostOps.cast(q, op)
    }

    fn blosc_unshuffle(&self, q: &Queue, op: Unshuffle<'_>) -> Result<()> {
        HostOps.blosc_unshuffle(q, op)
    }

    fn adler32_pieces(
        &self,
        q: &Queue,
        src: &Region,
        nbytes: usize,
        piece: usize,
        out: &Region,
    ) -> Result<()> {
        HostOps.adler32_pieces(q, src, nbytes, piece, out)
    }

    fn sm_count(&self) -> Result<usize> {
        Ok(self.sms)
    }

    fn wait_for(&self, q: &Queue, after: &Queue) -> Result<()> {
        let after = self.done_at(after);
        let mut s = self.state.lock().expect("sim state");
        if let Queue::Host(i) = q {
            let t = s.queues.entry(*i).or_insert(after);
            *t = (*t).max(after);
        }
        Ok(())
    }

    fn batch_decoder(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn new_batch_desc(&self, capacity: usize) -> Result<BatchDesc> {
        HostOps.new_batch_desc(capacity)
    }

    fn decompress_batch(
        &self,
        q: &Queue,
        format: Compression,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()> {
        // The bytes are decoded now (the host twin); only the completion is simulated.
        HostOps.decompress_batch(q, format, items, desc)?;
        let bytes: usize = items.iter().map(|it| it.output.len()).sum();
        let busy = self.batch_latency + Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec);
        let now = Instant::now();
        let mut s = self.state.lock().expect("sim state");
        let queued = match q {
            Queue::Host(i) => s.queues.get(i).copied().unwrap_or(now),
            _ => now,
        };
        let done = now.max(queued).max(s.engine_free) + busy;
        s.engine_free = done;
        if let Queue::Host(i) = q {
            s.queues.insert(*i, done);
        }
        s.batches.push(items.len());
        Ok(())
    }

    fn describe_status(&self, status: i32) -> String {
        HostOps.describe_status(status)
    }

    fn batch_compressor(&self) -> std::result::Result<(), String> {
        HostOps.batch_compressor()
    }

    fn max_compressed_size(&self, settings: CompressSettings, chunk_bytes: usize) -> Result<usize> {
        HostOps.max_compressed_size(settings, chunk_bytes)
    }

    fn compress_batch(
        &self,
        q: &Queue,
        settings: CompressSettings,
        items: &[BatchItem],
        desc: &mut BatchDesc,
    ) -> Result<()> {
        HostOps.compress_batch(q, settings, items, desc)
    }

    fn describe_compress_status(&self, status: i32) -> String {
        HostOps.describe_compress_status(status)
    }

    fn record(&self, q: &Queue) -> Result<Event> {
        let at = self.done_at(q);
        Ok(if at > Instant::now() {
            Event::At(at)
        } else {
            Event::Complete
        })
    }

    fn synchronize(&self, q: &Queue) -> Result<()> {
        Event::At(self.done_at(q)).wait()
    }
}
