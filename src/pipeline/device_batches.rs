//! The device decoder's side of a staged read: chunks handed over still compressed are
//! gathered into batches, decompressed on the device (nvCOMP on CUDA, its host twin on the
//! host), checked chunk by chunk and scattered into the output.
//!
//! Batches are the hybrid queue's ([`super::hybrid::WorkQueue`]): the device takes a batch of
//! units, the workers fetch and check them, and each compressed chunk is copied — as it
//! comes in, on a queue of its own — from the worker's staging slot into the batch's input
//! buffer in device memory, at the next [`CHUNK_ALIGN`]-byte boundary. Its slot is free
//! again once that copy is done, so a batch holds compressed bytes only, and its size is
//! the batch plan's ([`super::batch_plan`]), not the slots'. Once every unit of the batch has
//! come in, the batch is submitted: decompress every chunk straight into the output where
//! the layout allows, into device scratch elsewhere, then the fused scatter kernel. Two
//! batches are in flight: the copies into one overlap the decompression of the other.

use super::batch_plan::{BatchPlan, BatchPlanInput};
use super::device_cache::Kept;
use super::device_parts::{Compressed, DeviceDecode, MAX_STREAMS_PER_CHUNK};
use super::hybrid::BatchId;
use crate::compression_formats::Compression;
use crate::device::{BatchDesc, DeviceOps, Event, Queue};
use crate::errors::Result;
use crate::memory::Region;
use std::time::Instant;

/// Most items (streams) one batch takes.
pub(super) const MAX_BATCH_ITEMS: usize = 65_536;

/// One entry of the ring of batches: descriptor memory, the device buffer the compressed
/// chunks are copied into, device scratch, and the batch last submitted with it.
pub(super) struct BatchSlot {
    pub(super) desc: BatchDesc,
    /// `plan.batch_bytes` of device memory.
    pub(super) input: Region,
    /// Decoded chunks that do not go straight into the output, and (a region of its own,
    /// as the unshuffle reads one and writes the other) blosc chunks unshuffled there
    /// before their scatter; grown on demand.
    pub(super) scratch: [Option<Region>; 2],
    pub(super) event: Option<Event>,
    /// (unit index, expected decoded size) of each item of the batch last submitted.
    pub(super) items: Vec<(usize, usize)>,
    /// The chunks of the batch last submitted, and the queue's batch it belongs to.
    pub(super) chunks: usize,
    pub(super) batch: Option<u64>,
    /// When the batch last submitted was.
    pub(super) submitted: Instant,
    /// The decoded chunks of the batch last submitted that go to the read's cache once the
    /// batch has finished and they were checked (unit index, device buffer).
    pub(super) kept: Vec<(usize, Kept)>,
}

/// A batch of the queue being gathered.
pub(super) struct Gathering {
    pub(super) batch: BatchId,
    /// Units of the batch that have come in (compressed or not).
    pub(super) arrived: usize,
    /// The ring entry whose input holds the chunks so far (taken at the first chunk).
    pub(super) entry: Option<usize>,
    /// (unit index, offset in the entry's input, chunk).
    pub(super) chunks: Vec<(usize, usize, Compressed)>,
    /// Bytes of the entry's input used, and the batch items the chunks take.
    pub(super) bytes: usize,
    pub(super) items: usize,
}

/// The device decoder's state in one read: the batches being gathered and the ring of
/// submitted ones.
pub(super) struct DeviceBatches {
    pub(super) compression: Compression,
    /// Where batches are decompressed and scattered.
    pub(super) queue: Queue,
    /// Where chunks are copied into the batches' input buffers.
    pub(super) copy_queue: Queue,
    pub(super) plan: BatchPlan,
    pub(super) plan_input: BatchPlanInput,
    /// Most items (streams) in one batch: the descriptors' capacity.
    pub(super) item_capacity: usize,
    pub(super) ring: Vec<BatchSlot>,
    pub(super) next: usize,
    pub(super) gathering: Vec<Gathering>,
    /// When the last batch checked was seen finished (a batch's device time starts at its
    /// submission or there, whichever is later).
    pub(super) last_done: Option<Instant>,
    /// The largest compressed chunk gathered so far, for the plan's estimate.
    pub(super) largest_seen: usize,
}

impl DeviceBatches {
    pub(super) fn new(
        ops: &dyn DeviceOps,
        decode: &DeviceDecode,
        plan: BatchPlan,
        plan_input: BatchPlanInput,
    ) -> Result<Self> {
        let item_capacity = if decode.blosc {
            (plan.chunks_per_batch * 32).clamp(MAX_STREAMS_PER_CHUNK, MAX_BATCH_ITEMS)
        } else {
            plan.chunks_per_batch
        };
        let now = Instant::now();
        let mut ring = Vec::with_capacity(plan.batches_in_flight);
        for _ in 0..plan.batches_in_flight {
            ring.push(BatchSlot {
                desc: ops.new_batch_desc(item_capacity)?,
                input: ops.alloc(plan.batch_bytes)?,
                scratch: [None, None],
                event: None,
                items: Vec::new(),
                chunks: 0,
                batch: None,
                submitted: now,
                kept: Vec::new(),
            });
        }
        for entry in &ring {
            entry.input.settle()?;
        }
        Ok(DeviceBatches {
            compression: decode.compression,
            queue: ops.new_queue()?,
            copy_queue: ops.new_queue()?,
            plan,
            plan_input,
            item_capacity,
            ring,
            next: 0,
            gathering: Vec::new(),
            last_done: None,
            largest_seen: 0,
        })
    }

    /// Most chunks in one batch (the plan's).
    pub(super) fn chunks_per_batch(&self) -> usize {
        self.plan.chunks_per_batch
    }

    /// The gathering of `batch`, begun if new.
    pub(super) fn gathering(&mut self, batch: BatchId) -> usize {
        if let Some(g) = self.gathering.iter().position(|g| g.batch == batch) {
            return g;
        }
        self.gathering.push(Gathering {
            batch,
            arrived: 0,
            entry: None,
            chunks: Vec::new(),
            bytes: 0,
            items: 0,
        });
        self.gathering.len() - 1
    }

    /// Waits for everything enqueued on the decoder's queues (no device work may outlive a
    /// read, whatever stopped it).
    pub(super) fn drain(&self, ops: &dyn DeviceOps) -> Result<()> {
        ops.synchronize(&self.copy_queue)?;
        ops.synchronize(&self.queue)
    }
}

/// Entry's scratch region `n`, grown to at least `bytes` (an empty region when none is
/// needed). The entry's last batch has finished (the entry was settled when the batch began
/// gathering), so a region it outgrew may go.
pub(super) fn scratch_for(
    ops: &dyn DeviceOps,
    entry: &mut BatchSlot,
    n: usize,
    bytes: usize,
) -> Result<Region> {
    if bytes == 0 {
        return Ok(entry.input.sub(0, 0));
    }
    if let Some(r) = entry.scratch[n].as_ref().filter(|r| r.len() >= bytes) {
        return Ok(r.clone());
    }
    let r = ops.alloc(bytes)?;
    r.settle()?;
    entry.scratch[n] = Some(r.clone());
    Ok(r)
}
