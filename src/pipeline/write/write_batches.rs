//! Compression batches of the staged write: the gathered chunks a device compresses at once.
//!
//! Each staging slot gets a device output buffer (the compressor's worst case for a chunk)
//! (a slice of one device allocation) and a host buffer of the same size. A batch is the slots whose chunks were gathered since
//! the last one: the device compresses them (nvCOMP on CUDA, its host twin on the host), the
//! compressed sizes come back, and each chunk's compressed bytes — only those — are copied
//! into the slot's host buffer. The chunk then goes to a CPU worker, which frames and stores
//! it. All of a batch's device work runs on one queue, in order: gather, compress, copy back.
//! For zlib, whose Adler-32 is of the uncompressed chunk, the device also sums each chunk in
//! [`ADLER_PIECE`]-byte pieces (`zb_adler32_pieces`); the sums come back with the compressed
//! bytes and the worker combines them, so no chunk crosses back uncompressed.

use crate::buffer::Buffer;
use crate::compression_formats::CompressSettings;
use crate::device::{BatchDesc, BatchItem, DeviceOps, Event, Queue};
use crate::errors::{Error, Result};
use crate::pipeline::Slot;
use zarrbuf_codecs::host::adler32_piece_count;

/// Most chunks in one compression batch (nvCOMP compresses a chunk per thread block, so
/// larger batches keep more of the GPU busy; the slots bound it too).
pub(crate) const MAX_WRITE_BATCH: usize = 64;

/// The piece size of the device's Adler-32 sums (one device thread per piece).
pub(crate) const ADLER_PIECE: usize = 4096;

/// A chunk gathered into its slot's scratch, waiting for its batch.
struct Pending {
    unit: usize,
    slot: usize,
    len: usize,
}

/// A chunk whose compressed bytes are on their way to its slot's host buffer.
pub(crate) struct Compressed {
    pub unit: usize,
    pub slot: usize,
    /// Uncompressed size.
    pub len: usize,
    /// Compressed size (the first bytes of [`CompressBatches::host_out`]`[slot]`).
    pub compressed: usize,
    /// Marks the end of the copy into the host buffer.
    pub event: Event,
}

/// The compression batches of one staged write.
pub(crate) struct CompressBatches<'a> {
    ops: &'a dyn DeviceOps,
    settings: CompressSettings,
    queue: Queue,
    desc: BatchDesc,
    device_out: Vec<Buffer>,
    /// Per slot: host memory the slot's compressed chunk is copied into.
    pub host_out: Vec<Buffer>,
    max_out: usize,
    /// Per slot, when the chunks need their Adler-32: the device's piece sums, and host
    /// memory they are copied into.
    device_sums: Vec<Buffer>,
    /// Per slot: host memory the piece sums are copied into (empty without Adler-32).
    pub host_sums: Vec<Buffer>,
    pending: Vec<Pending>,
}

impl<'a> CompressBatches<'a> {
    /// Output buffers for `slots` slots of chunks up to `chunk_bytes`, and a descriptor; with
    /// `adler32`, buffers for each chunk's Adler-32 piece sums too.
    pub(crate) fn new(
        ops: &'a dyn DeviceOps,
        settings: CompressSettings,
        slots: usize,
        chunk_bytes: usize,
        adler32: bool,
    ) -> Result<Self> {
        let max_out = ops.max_compressed_size(settings, chunk_bytes)?;
        // The device side is one allocation, sliced per slot (slices start on 256-byte
        // boundaries, more than any compressor's alignment requirement). The host side is one
        // allocation per slot: workers read a slot's bytes while the next batch is copied
        // into other slots, and host borrows are tracked per allocation.
        let stride = max_out.next_multiple_of(256);
        let total = stride.checked_mul(slots).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{slots} compression outputs of {max_out} bytes overflow the address space"
            ))
        })?;
        let device = Buffer::from_region(ops.alloc(total)?);
        let mut device_out = Vec::with_capacity(slots);
        let mut host_out = Vec::with_capacity(slots);
        for i in 0..slots {
            device_out.push(device.try_slice(i * stride..i * stride + max_out)?);
            host_out.push(Buffer::from_region(ops.alloc_staging(max_out)?));
        }
        let (mut device_sums, mut host_sums) = (Vec::new(), Vec::new());
        if adler32 {
            let sums = 8 * adler32_piece_count(chunk_bytes, ADLER_PIECE).max(1);
            let stride = sums.next_multiple_of(256);
            let device = Buffer::from_region(ops.alloc(stride * slots)?);
            for i in 0..slots {
                device_sums.push(device.try_slice(i * stride..i * stride + sums)?);
                host_sums.push(Buffer::from_region(ops.alloc_staging(sums)?));
            }
        }
        Ok(CompressBatches {
            ops,
            settings,
            queue: ops.new_queue()?,
            desc: ops.new_batch_desc(slots.clamp(1, MAX_WRITE_BATCH))?,
            device_out,
            host_out,
            max_out,
            device_sums,
            host_sums,
            pending: Vec::new(),
        })
    }

    /// The queue every batch's gathers, compression and copies run on.
    pub(crate) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Whether no chunk waits for a batch.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Adds a chunk gathered (on [`Self::queue`]) into the first `len` bytes of `slot`'s
    /// scratch, enqueuing its Adler-32 sums when they are needed; returns whether the batch
    /// is full.
    pub(crate) fn push(
        &mut self,
        slots: &[Slot],
        unit: usize,
        slot: usize,
        len: usize,
    ) -> Result<bool> {
        if let Some(sums) = self.device_sums.get(slot) {
            let chunk = slots[slot].scratch.try_slice(..len)?;
            self.ops.adler32_pieces(
                &self.queue,
                chunk.region()?,
                len,
                ADLER_PIECE,
                sums.region()?,
            )?;
        }
        self.pending.push(Pending { unit, slot, len });
        Ok(self.pending.len() >= self.desc.capacity)
    }

    /// Compresses the pending chunks and hands each to `send` in order, with the event that
    /// marks its compressed bytes in host memory. A chunk the device fails on ends the batch
    /// there: the chunks before it are sent, the error (from `unit_error`, naming the chunk)
    /// is returned.
    pub(crate) fn flush(
        &mut self,
        slots: &[Slot],
        send: &mut dyn FnMut(Compressed) -> bool,
        unit_error: &dyn Fn(usize, String) -> Error,
    ) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let items = pending
            .iter()
            .map(|p| {
                Ok(BatchItem {
                    input: slots[p.slot].scratch.try_slice(..p.len)?.region()?.clone(),
                    output: self.device_out[p.slot].region()?.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.ops
            .compress_batch(&self.queue, self.settings, &items, &mut self.desc)?;
        // The sizes decide what crosses back: wait for them.
        self.ops.synchronize(&self.queue)?;
        let outcomes = self
            .desc
            .outcomes(pending.len(), &|s| self.ops.describe_compress_status(s))?;
        let mut ready = Vec::with_capacity(pending.len());
        let mut failure = None;
        for (p, outcome) in pending.iter().zip(outcomes) {
            match outcome {
                Ok(n) if n > 0 && n <= self.max_out => {
                    let from = self.device_out[p.slot].try_slice(..n)?;
                    let to = self.host_out[p.slot].try_slice(..n)?;
                    self.ops.copy(&self.queue, from.region()?, to.region()?)?;
                    if let (Some(from), Some(to)) =
                        (self.device_sums.get(p.slot), self.host_sums.get(p.slot))
                    {
                        self.ops.copy(&self.queue, from.region()?, to.region()?)?;
                    }
                    ready.push((p, n));
                }
                Ok(n) => {
                    failure = Some(unit_error(
                        p.unit,
                        format!(
                            "the device compressor ({}) reported {n} compressed bytes, outside 1..={} (internal error: please report)",
                            self.settings.format, self.max_out
                        ),
                    ));
                    break;
                }
                Err(why) => {
                    failure = Some(unit_error(
                        p.unit,
                        format!(
                            "the device compressor ({}) failed on the chunk: {why}; write with Compress::Cpu (--compress cpu) to compress on the CPU",
                            self.settings.format
                        ),
                    ));
                    break;
                }
            }
        }
        let event = self.ops.record(&self.queue)?;
        for (p, n) in ready {
            let sent = send(Compressed {
                unit: p.unit,
                slot: p.slot,
                len: p.len,
                compressed: n,
                event: event.clone(),
            });
            if !sent {
                break;
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
