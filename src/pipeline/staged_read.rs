//! The staged read pipeline: fetch → CPU decompress into a staging slot → copy to the device
//! → device kernels (byte swap + transpose + scatter, fused into one strided copy; fill for
//! missing chunks).
//!
//! Staging slots form a ring: worker threads decode unit k+1.. into free slots while the
//! device copies and scatters unit k. A slot is reused only after the device work that read
//! it has finished (its event). Host memory is bounded by the slot count × slot size.
//!
//! With a device decoder (`DeviceDecode`), workers may hand a chunk over still compressed:
//! the coordinator gathers such chunks into batches, copies them to the device, has the
//! device decompress a whole batch at once into the slots' scratch (nvCOMP on CUDA; its host
//! twin on the host), then scatters them with the same kernel. In hybrid mode the CPU
//! workers and the device take chunks from the one queue of units: a worker decodes the
//! chunk itself whenever the device already has enough queued.
//!
//! The pipeline is written against [`DeviceOps`]; with [`crate::device::HostOps`] every step runs
//! on the host, which is how CI exercises this logic without a GPU.

use super::{Slot, allocate_slots, finish};
use crate::buffer::NDBuffer;
use crate::device::{BatchDesc, BatchItem, Compression, DeviceOps, Event, Queue};
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::memory::Region;
use crate::options::{Progress, ProgressFn};
use crate::zarr::{BloscFrame, EncodedLayout, STREAM_ALIGN, Unit};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use zarrbuf_codecs::Strided;
use zarrbuf_codecs::host::Shuffle;

/// What decoding one unit into a staging slot produced.
pub(crate) enum Produced {
    /// The unit is not stored: it reads as the fill value.
    Missing,
    /// This many bytes were written at the start of the slot.
    Decoded(usize),
    /// Still-compressed bytes (checked, framing removed) were written at the start of the
    /// slot, for the device decoder.
    Compressed(Compressed),
    /// The unit's decoded bytes are its stored bytes, handed over as fetched (a chain with no
    /// bytes-to-bytes codecs): the host route scatters from them without a copy into the
    /// slot; the other route copies them there first.
    Stored(Vec<u8>),
}

impl Produced {
    /// `Stored` bytes copied to the start of `slot`, as `Decoded`; every other outcome as it is.
    pub(crate) fn into_slot(self, slot: &mut [u8], unit: &Unit) -> Result<Produced> {
        let Produced::Stored(bytes) = self else {
            return Ok(self);
        };
        let capacity = slot.len();
        let dst = slot.get_mut(..bytes.len()).ok_or_else(|| {
            Error::ShapeMismatch(format!(
                "chunk {:?} holds {} bytes, more than the {capacity} a chunk of shape {:?} decodes to",
                unit.indices,
                bytes.len(),
                unit.shape
            ))
        })?;
        dst.copy_from_slice(&bytes);
        Ok(Produced::Decoded(bytes.len()))
    }
}

/// A chunk left compressed in its slot for the device decoder.
pub(crate) struct Compressed {
    /// The bytes at the start of the slot.
    pub len: usize,
    /// How they decode.
    pub parts: DeviceParts,
}

/// How a chunk's compressed bytes decode on the device.
pub(crate) enum DeviceParts {
    /// One stream that decompresses to the whole chunk.
    Whole,
    /// A blosc frame: its streams decompress (or are copied) into the shuffled chunk, which
    /// is then unshuffled.
    Blosc(Box<BloscFrame>),
}

impl DeviceParts {
    /// The batch items the chunk takes.
    fn items(&self) -> usize {
        match self {
            DeviceParts::Whole => 1,
            DeviceParts::Blosc(frame) => frame.compressed_streams(),
        }
    }
}

/// Most compressed streams a blosc chunk may have and still be decoded on the device (more
/// decode on the CPU): the batch descriptors hold at least this many.
pub(crate) const MAX_STREAMS_PER_CHUNK: usize = 4096;
/// Most items (streams) one batch takes.
const MAX_BATCH_ITEMS: usize = 65_536;

/// Fetches one unit and decodes it into the slot (called on worker threads). With
/// `to_device`, it may instead leave the chunk compressed for the device decoder.
pub(crate) type Producer<'a> = dyn Fn(&Unit, &mut [u8], bool) -> Result<Produced> + Sync + 'a;

/// The device decoder of one read.
pub(crate) struct DeviceDecode {
    /// What the device decompresses (every chunk of a read has the same codecs).
    pub compression: Compression,
    /// CPU workers decode too, whenever the device has enough queued.
    pub hybrid: bool,
    /// The chunks are blosc frames of many streams each: batches take more items.
    pub blosc: bool,
}

/// Most chunks the device decoder takes in one batch. nvCOMP decodes each zstd or DEFLATE
/// chunk with one thread block, so a batch's time is about one chunk's: the more chunks per
/// batch, the faster (measured on an H100: 64 chunks of 1 MiB per batch gave 5.4 GB/s).
const MAX_BATCH: usize = 1024;
/// Batches in flight on the device (one decoding while the next is gathered).
const BATCH_RING: usize = 2;

/// Everything a staged read needs besides the producer.
pub(crate) struct StagedRead<'a> {
    pub ops: Arc<dyn DeviceOps>,
    pub units: &'a [Unit],
    pub layout: EncodedLayout,
    /// Array coordinates of the output's element 0.
    pub request_start: Vec<u64>,
    /// One element of fill value, native byte order.
    pub fill_value: Vec<u8>,
    pub staging_bytes: usize,
    pub threads: usize,
    pub progress: Option<ProgressFn>,
    /// Decompression on the device, when this read uses it.
    pub device_decode: Option<DeviceDecode>,
    /// The error for a unit the device decoder rejected (names the array and chunk).
    pub unit_error: &'a (dyn Fn(&Unit, String) -> Error + Sync),
}

/// One entry of the ring of batches: descriptor memory, the device buffer the compressed
/// chunks are copied into, and the batch last submitted with it.
struct BatchSlot {
    desc: BatchDesc,
    input: crate::memory::Region,
    /// Byte stride of the chunks in `input`.
    stride: usize,
    event: Option<Event>,
    /// (unit index, expected decoded size) of each item of the batch last submitted.
    items: Vec<(usize, usize)>,
    /// The chunks of the batch last submitted.
    chunks: usize,
}

impl StagedRead<'_> {
    /// Runs the pipeline, writing every unit's region of the request into `out`.
    pub(crate) fn run(&self, out: &NDBuffer, produce: &Producer<'_>) -> Result<()> {
        if self.units.is_empty() {
            return Ok(());
        }
        // The slots' queues do not consult the output's fences operation by operation:
        // whatever is in flight on it (its allocation, a copy) is waited for once, here.
        out.buffer().region()?.settle()?;
        let elem = out.dtype().size();
        let in_batches = if self.device_decode.is_some() {
            BATCH_RING * MAX_BATCH
        } else {
            0
        };
        let slots = allocate_slots(
            self.ops.as_ref(),
            self.units,
            elem,
            self.staging_bytes,
            self.threads,
            in_batches,
        )?;
        let result = if self.scatters_on_workers(out) {
            self.run_host(out, produce, &slots)
        } else {
            self.run_with_slots(out, produce, &slots)
        };
        // Whatever happened, no device work may outlive this call.
        let drained = finish(self.ops.as_ref(), slots, self.units, elem);
        result.and(drained)
    }

    fn run_with_slots(&self, out: &NDBuffer, produce: &Producer<'_>, slots: &[Slot]) -> Result<()> {
        let (free_tx, free_rx) = mpsc::channel::<usize>();
        for i in 0..slots.len() {
            free_tx.send(i).expect("receiver alive");
        }
        let free_rx = Mutex::new(free_rx);
        let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        // Chunks handed to the device decoder and not yet decoded (hybrid routing).
        let on_device = AtomicUsize::new(0);
        let batch = self.batch_capacity(slots.len());
        let workers = self.threads.clamp(1, slots.len().max(1));

        std::thread::scope(|scope| {
            for _ in 0..workers {
                let ready_tx = ready_tx.clone();
                let (free_rx, next, abort, on_device) = (&free_rx, &next, &abort, &on_device);
                scope.spawn(move || {
                    loop {
                        if abort.load(Ordering::Relaxed) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= self.units.len() {
                            break;
                        }
                        let slot_id = match free_rx.lock().map(|rx| rx.recv()) {
                            Ok(Ok(s)) => s,
                            _ => break,
                        };
                        let slot = &slots[slot_id];
                        let waited = match slot.pending.lock().map(|mut p| p.take()) {
                            Ok(Some(event)) => event.wait(),
                            _ => Ok(()),
                        };
                        let to_device = match &self.device_decode {
                            None => false,
                            Some(d) if !d.hybrid => true,
                            // The device takes the chunk unless two batches already wait.
                            Some(_) => on_device.load(Ordering::Relaxed) < 2 * batch,
                        };
                        let unit = &self.units[i];
                        let result = waited.and_then(|()| {
                            slot.staging.with_host_mut(|bytes| {
                                produce(unit, bytes, to_device)?.into_slot(bytes, unit)
                            })
                        });
                        if matches!(result, Ok(Produced::Compressed(_))) {
                            on_device.fetch_add(1, Ordering::Relaxed);
                        }
                        if ready_tx.send((i, slot_id, result)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(ready_tx);
            let outcome =
                self.submit_all(out, slots, &ready_rx, &free_tx, elem_of(out), &on_device);
            if outcome.is_err() {
                abort.store(true, Ordering::Relaxed);
            }
            // Unblock workers waiting for a slot.
            drop(free_tx);
            outcome
        })
    }

    /// The coordinating loop: takes decoded units as they come and queues their device work.
    fn submit_all(
        &self,
        out: &NDBuffer,
        slots: &[Slot],
        ready: &mpsc::Receiver<Ready>,
        free: &mpsc::Sender<usize>,
        elem: usize,
        on_device: &AtomicUsize,
    ) -> Result<()> {
        let batch_capacity = self.batch_capacity(slots.len());
        let (swap, fill) = self.output_byte_order(out)?;
        let mut sub = Submit {
            slots,
            free,
            scatter: Scatter { out, elem, swap },
            progress: Progress {
                chunks_done: 0,
                chunks_total: self.units.len(),
                bytes_done: 0,
            },
            on_device,
        };
        let mut device = self.device_batches(batch_capacity, slots)?;
        for _ in 0..self.units.len() {
            if let Some(d) = device.as_mut() {
                // Keeps the count of chunks on the device current for the workers' routing.
                self.settle_finished(d, on_device)?;
            }
            let (i, slot_id, produced) = self.next_ready(ready, device.as_mut(), &mut sub)?;
            match produced? {
                Produced::Compressed(chunk) => {
                    self.gather_compressed(device.as_mut(), i, slot_id, chunk, &mut sub)?;
                }
                produced => self.submit_unit(i, slot_id, produced, &fill, &mut sub)?,
            }
        }
        if let Some(d) = device.as_mut() {
            self.flush(d, &mut sub)?;
            for k in 0..d.ring.len() {
                self.settle_batch(d, k, on_device)?;
            }
        }
        Ok(())
    }

    /// The byte-swap unit from the chain's encoded layout to the output's byte order (0 for
    /// none), and one element of fill value in the output's byte order.
    fn output_byte_order(&self, out: &NDBuffer) -> Result<(usize, Vec<u8>)> {
        let swap = if self.layout.endian == out.byte_order() {
            0
        } else {
            out.dtype().swap_unit()
        };
        let mut fill = self.fill_value.clone();
        if out.byte_order() != ByteOrder::native() {
            zarrbuf_codecs::host::byte_swap(&mut fill, out.dtype().swap_unit())?;
        }
        Ok((swap, fill))
    }

    /// The device decoder's batches, when this read decodes on the device.
    fn device_batches(&self, capacity: usize, slots: &[Slot]) -> Result<Option<DeviceBatches>> {
        let Some(d) = &self.device_decode else {
            return Ok(None);
        };
        let item_capacity = if d.blosc {
            (capacity * 32).clamp(MAX_STREAMS_PER_CHUNK, MAX_BATCH_ITEMS)
        } else {
            capacity
        };
        DeviceBatches::new(
            self.ops.as_ref(),
            d.compression,
            capacity,
            item_capacity,
            slots,
        )
        .map(Some)
    }

    /// The next unit a worker finished. While none is ready, with a device decoder: checks
    /// finished batches, and sends what is gathered to the device when it has room — never
    /// waiting for the device while workers may still hand in chunks they decoded themselves.
    fn next_ready(
        &self,
        ready: &mpsc::Receiver<Ready>,
        mut device: Option<&mut DeviceBatches>,
        sub: &mut Submit<'_>,
    ) -> Result<Ready> {
        let stopped = || Error::Cancelled("a decoding thread stopped unexpectedly".into());
        loop {
            match ready.try_recv() {
                Ok(m) => return Ok(m),
                Err(TryRecvError::Disconnected) => return Err(stopped()),
                Err(TryRecvError::Empty) => {}
            }
            let Some(d) = device.as_deref_mut() else {
                return ready.recv().map_err(|_| stopped());
            };
            self.settle_finished(d, sub.on_device)?;
            if !d.pending.is_empty() && d.has_room() {
                self.flush(d, sub)?;
                continue;
            }
            match ready.recv_timeout(std::time::Duration::from_micros(200)) {
                Ok(m) => return Ok(m),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(stopped()),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Adds a chunk left compressed in slot `slot_id` to the batch being gathered; a batch
    /// goes to the device when the chunk would overfill it, or once it is full.
    fn gather_compressed(
        &self,
        device: Option<&mut DeviceBatches>,
        i: usize,
        slot_id: usize,
        chunk: Compressed,
        sub: &mut Submit<'_>,
    ) -> Result<()> {
        let d = device.ok_or_else(|| {
            Error::InvalidArgument(
                "a chunk was left compressed without a device decoder (internal error: please report)".into(),
            )
        })?;
        let items = chunk.parts.items();
        if d.pending_items + items > d.item_capacity {
            self.flush(d, sub)?;
        }
        d.pending_items += items;
        d.pending.push((i, slot_id, chunk));
        if d.pending.len() >= d.capacity || d.pending_items >= d.item_capacity {
            self.flush(d, sub)?;
        }
        Ok(())
    }

    /// Queues the device work of unit `i`, which a worker decoded into slot `slot_id` (or
    /// found missing: a fill), and gives the slot back behind that work's event.
    fn submit_unit(
        &self,
        i: usize,
        slot_id: usize,
        produced: Produced,
        fill: &[u8],
        sub: &mut Submit<'_>,
    ) -> Result<()> {
        let unit = &self.units[i];
        let slot = &sub.slots[slot_id];
        let (out, elem) = (sub.scatter.out, sub.scatter.elem);
        let region_shape = unit.region_shape();
        match produced {
            Produced::Missing => {
                let dst = Strided {
                    offset: unit.offset_in_request(
                        &self.request_start,
                        out.offset(),
                        out.strides(),
                    ),
                    strides: out.strides(),
                };
                self.ops.fill(
                    &slot.queue,
                    out.buffer().region()?,
                    dst,
                    &region_shape,
                    fill,
                )?;
            }
            Produced::Stored(_) => {
                return Err(Error::InvalidArgument(
                    "stored bytes reached the coordinator (internal error: please report)".into(),
                ));
            }
            Produced::Compressed(_) => {
                return Err(Error::InvalidArgument(
                    "a compressed chunk reached the scatter (internal error: please report)".into(),
                ));
            }
            Produced::Decoded(len) => {
                let expected = unit.num_elements() * elem;
                if len != expected {
                    return Err(Error::ShapeMismatch(format!(
                        "chunk {:?} decoded to {len} bytes, expected {expected} for shape {:?}",
                        unit.indices, unit.shape
                    )));
                }
                let (staged, scratch) = (
                    slot.staging.try_slice(..len)?,
                    slot.scratch.try_slice(..len)?,
                );
                self.ops
                    .copy(&slot.queue, staged.region()?, scratch.region()?)?;
                self.scatter(&slot.queue, unit, scratch.region()?, &sub.scatter)?;
            }
        }
        let event = self.ops.record(&slot.queue)?;
        if let Ok(mut p) = slot.pending.lock() {
            *p = Some(event);
        }
        let _ = sub.free.send(slot_id);
        self.report(&mut sub.progress, &region_shape, elem);
        Ok(())
    }

    pub(super) fn report(&self, progress: &mut Progress, region_shape: &[usize], elem: usize) {
        progress.chunks_done += 1;
        progress.bytes_done += (region_shape.iter().product::<usize>() * elem) as u64;
        if let Some(cb) = &self.progress {
            cb(*progress);
        }
    }

    /// Enqueues the scatter of one decoded unit (in the chain's encoded layout, at the start
    /// of `decoded`) into its place in the output: byte swap + transpose + strided copy.
    fn scatter(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &crate::memory::Region,
        s: &Scatter<'_>,
    ) -> Result<()> {
        let shape = unit.shape_usize();
        let src_strides = self.layout.decoded_strides(&shape, s.elem);
        let src = Strided {
            offset: unit.offset_in_unit(&src_strides),
            strides: &src_strides,
        };
        let dst = Strided {
            offset: unit.offset_in_request(&self.request_start, s.out.offset(), s.out.strides()),
            strides: s.out.strides(),
        };
        self.ops.strided_copy(
            q,
            decoded,
            src,
            s.out.buffer().region()?,
            dst,
            &unit.region_shape(),
            s.elem,
            s.swap,
        )
    }

    /// True when the whole unit, decoded, is exactly one contiguous run of `out`: nothing to
    /// transpose or swap (`swap` is the byte-swap unit, 0 for none), and the output's strides
    /// are the unit's C strides.
    pub(super) fn is_one_run(&self, unit: &Unit, out: &NDBuffer, swap: usize) -> bool {
        if !unit.is_whole() || self.layout.order.is_some() || swap != 0 {
            return false;
        }
        let shape = unit.shape_usize();
        let c = crate::dtype::Order::C.strides(&shape, out.dtype().size());
        shape
            .iter()
            .zip(c.iter().zip(out.strides()))
            .all(|(&n, (&want, &have))| n <= 1 || want == have)
    }

    /// Where a unit's decoded bytes can go straight into the output, skipping the scratch
    /// slot and the scatter: the unit lies whole inside the request, its decoded bytes are one
    /// contiguous run of the output (same byte order, no transpose, the chunk spanning the
    /// output's inner dimensions), the output is in the device decoder's memory, and the run
    /// starts at an address aligned to `align` (nvCOMP's requirement, and 8 for blosc
    /// streams). `None`: decode into scratch and scatter.
    fn direct_target(&self, unit: &Unit, s: &Scatter<'_>, align: usize) -> Result<Option<Region>> {
        if s.out.memory() != self.ops.memory() || !self.is_one_run(unit, s.out, s.swap) {
            return Ok(None);
        }
        let region = s.out.buffer().region()?;
        let start = unit.offset_in_request(&self.request_start, s.out.offset(), s.out.strides());
        let Some(end) = start
            .checked_add(unit.num_elements() * s.elem)
            .filter(|&end| end <= region.len())
        else {
            return Ok(None);
        };
        let target = region.sub(start, end);
        let addr = target
            .device_addr()
            .or_else(|| target.host_ptr().map(|p| p as u64));
        let align = align.max(STREAM_ALIGN) as u64;
        Ok(addr.filter(|a| a.is_multiple_of(align)).map(|_| target))
    }

    /// The most chunks one device batch takes: the slots the workers do not need (two per
    /// worker), shared by the batches in flight.
    fn batch_capacity(&self, slots: usize) -> usize {
        let workers = 2 * self.threads + 2;
        (slots.saturating_sub(workers) / BATCH_RING).clamp(1, MAX_BATCH)
    }

    /// Sends the gathered compressed chunks to the device as one batch: copy them into the
    /// ring entry's input buffer, decompress them all into their slots' scratch, scatter
    /// each into the output, and release the slots behind one event.
    fn flush(&self, d: &mut DeviceBatches, sub: &mut Submit<'_>) -> Result<()> {
        if d.pending.is_empty() {
            return Ok(());
        }
        let k = d.next;
        d.next = (d.next + 1) % d.ring.len();
        self.settle_batch(d, k, sub.on_device)?;
        let pending = std::mem::take(&mut d.pending);
        d.pending_items = 0;
        let mut batch = BatchPlan {
            scatter: &sub.scatter,
            items: Vec::with_capacity(pending.len()),
            item_units: Vec::with_capacity(pending.len()),
            after: Vec::with_capacity(pending.len()),
        };
        for (n, (i, slot_id, chunk)) in pending.iter().enumerate() {
            let at = n * d.ring[k].stride;
            self.plan_chunk(d, k, at, (*i, &sub.slots[*slot_id], chunk), &mut batch)?;
        }
        if !batch.items.is_empty() {
            self.ops.decompress_batch(
                &d.queue,
                d.compression,
                &batch.items,
                &mut d.ring[k].desc,
            )?;
        }
        self.after_batch(&d.queue, &batch.after, batch.scatter)?;
        let event = self.ops.record(&d.queue)?;
        let item_units = batch.item_units;
        self.release_batch(&pending, &event, sub);
        let entry = &mut d.ring[k];
        entry.event = Some(event);
        entry.items = item_units;
        entry.chunks = pending.len();
        Ok(())
    }

    /// Plans one compressed chunk of the batch in ring entry `k`: copies it to `at` in the
    /// entry's input buffer, and adds its items (one stream, or a blosc frame's compressed
    /// streams; stored streams are copied) and what follows the batch for it.
    fn plan_chunk<'f>(
        &self,
        d: &DeviceBatches,
        k: usize,
        at: usize,
        (i, slot, chunk): (usize, &Slot, &'f Compressed),
        batch: &mut BatchPlan<'_, 'f>,
    ) -> Result<()> {
        let entry = &d.ring[k];
        let s = batch.scatter;
        let unit = &self.units[i];
        let expected = unit.num_elements() * s.elem;
        if chunk.len > entry.stride || expected > entry.stride {
            return Err(Error::InvalidArgument(format!(
                "a chunk of {} compressed, {expected} decoded bytes in a batch stride of {} \
                 (internal error: please report)",
                chunk.len, entry.stride
            )));
        }
        let input = entry.input.sub(at, at + chunk.len);
        let staged = slot.staging.try_slice(..chunk.len)?;
        self.ops.copy(&d.queue, staged.region()?, &input)?;
        // Straight into the output where the chunk is one aligned run of it.
        let direct = self.direct_target(unit, s, d.compression.required_alignment())?;
        let scratch = slot.scratch.try_slice(..expected)?.region()?.clone();
        let frame = match &chunk.parts {
            DeviceParts::Whole => {
                let output = direct.clone().unwrap_or(scratch);
                batch.items.push(BatchItem {
                    input,
                    output: output.clone(),
                });
                batch.item_units.push((i, expected));
                batch.after.push(match direct {
                    Some(_) => After::Done,
                    None => After::Scatter(i, output),
                });
                return Ok(());
            }
            DeviceParts::Blosc(frame) => frame,
        };
        // Unshuffled into the output, or into the chunk's own part of the input buffer (free
        // once the batch has decompressed it) and scattered from there; unshuffled streams go
        // where the chunk goes.
        let (streams_to, next) = match (frame.shuffle, direct) {
            (Some(shuffle), Some(target)) => (
                scratch.clone(),
                After::Unshuffle(i, shuffle, scratch, target, frame, false),
            ),
            (Some(shuffle), None) => (
                scratch.clone(),
                After::Unshuffle(
                    i,
                    shuffle,
                    scratch,
                    entry.input.sub(at, at + expected),
                    frame,
                    true,
                ),
            ),
            (None, Some(target)) => (target, After::Done),
            (None, None) => (scratch.clone(), After::Scatter(i, scratch)),
        };
        for stream in &frame.streams {
            let (from, to) = (
                input.sub(stream.input.start, stream.input.end),
                streams_to.sub(stream.output.start, stream.output.end),
            );
            if stream.stored {
                self.ops.copy(&d.queue, &from, &to)?;
            } else {
                batch.item_units.push((i, to.len()));
                batch.items.push(BatchItem {
                    input: from,
                    output: to,
                });
            }
        }
        batch.after.push(next);
        Ok(())
    }

    /// Queues what follows a batch's decompression for each of its chunks: nothing, a
    /// scatter, or blosc's unshuffle (and a scatter).
    fn after_batch(&self, q: &Queue, after: &[After<'_>], s: &Scatter<'_>) -> Result<()> {
        for next in after {
            match next {
                After::Done => {}
                After::Scatter(i, decoded) => self.scatter(q, &self.units[*i], decoded, s)?,
                After::Unshuffle(i, shuffle, from, to, frame, scatter) => {
                    self.ops.blosc_unshuffle(
                        q,
                        from,
                        to,
                        frame.nbytes,
                        *shuffle,
                        frame.typesize,
                        frame.blocksize,
                    )?;
                    if *scatter {
                        self.scatter(q, &self.units[*i], to, s)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Gives a batch's slots back to the workers behind the batch's `event`, and reports
    /// their units done.
    fn release_batch(
        &self,
        pending: &[(usize, usize, Compressed)],
        event: &Event,
        sub: &mut Submit<'_>,
    ) {
        for &(i, slot_id, _) in pending {
            if let Ok(mut p) = sub.slots[slot_id].pending.lock() {
                *p = Some(event.clone());
            }
            let _ = sub.free.send(slot_id);
            self.report(
                &mut sub.progress,
                &self.units[i].region_shape(),
                sub.scatter.elem,
            );
        }
    }

    /// Settles every ring entry whose batch has finished (never blocks).
    fn settle_finished(&self, d: &mut DeviceBatches, on_device: &AtomicUsize) -> Result<()> {
        for k in 0..d.ring.len() {
            if d.ring[k].event.as_ref().is_some_and(Event::is_complete) {
                self.settle_batch(d, k, on_device)?;
            }
        }
        Ok(())
    }

    /// Waits for ring entry `k`'s last batch and checks every chunk of it: decoded, and to
    /// exactly its size. A failure names the chunk.
    fn settle_batch(&self, d: &mut DeviceBatches, k: usize, on_device: &AtomicUsize) -> Result<()> {
        let entry = &mut d.ring[k];
        let Some(event) = entry.event.take() else {
            return Ok(());
        };
        event.wait()?;
        let items = std::mem::take(&mut entry.items);
        on_device.fetch_sub(std::mem::take(&mut entry.chunks), Ordering::Relaxed);
        let outcomes = entry
            .desc
            .outcomes(items.len(), &|st| self.ops.describe_status(st))?;
        for ((i, expected), outcome) in items.into_iter().zip(outcomes) {
            let unit = &self.units[i];
            match outcome {
                Ok(n) if n == expected => {}
                Ok(n) => {
                    return Err((self.unit_error)(
                        unit,
                        format!(
                            "the device decoder produced {n} bytes where the chunk's stream \
                             holds {expected}"
                        ),
                    ));
                }
                Err(why) => {
                    return Err((self.unit_error)(
                        unit,
                        format!("the device decoder ({}) failed: {why}", d.compression),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What follows a device batch for one of its chunks.
enum After<'f> {
    /// Decoded straight into the output.
    Done,
    /// Scatter unit `.0`'s decoded bytes into the output.
    Scatter(usize, Region),
    /// Undo blosc's shuffle from `.2` into `.3`, then (when `.5`) scatter unit `.0` from there.
    Unshuffle(usize, Shuffle, Region, Region, &'f BloscFrame, bool),
}

/// Where decoded units go.
struct Scatter<'a> {
    out: &'a NDBuffer,
    elem: usize,
    swap: usize,
}

/// A unit a worker finished: (unit index, slot, what decoding it produced).
type Ready = (usize, usize, Result<Produced>);

/// The coordinating loop's state in one read: the slots, the channel that gives them back to
/// the workers, where decoded units go, the progress so far, and the chunks on the device
/// (for the workers' hybrid routing).
struct Submit<'s> {
    slots: &'s [Slot],
    free: &'s mpsc::Sender<usize>,
    scatter: Scatter<'s>,
    progress: Progress,
    on_device: &'s AtomicUsize,
}

/// One device batch being planned by [`StagedRead::flush`]: the items the device
/// decompresses, the (unit, decoded size) of each, and what follows the batch for each chunk.
struct BatchPlan<'s, 'f> {
    scatter: &'s Scatter<'s>,
    items: Vec<BatchItem>,
    item_units: Vec<(usize, usize)>,
    after: Vec<After<'f>>,
}

/// The device decoder's state in one read: the batch being gathered and the ring of
/// submitted ones.
struct DeviceBatches {
    compression: Compression,
    queue: Queue,
    /// Most chunks in one batch.
    capacity: usize,
    /// Most items (streams) in one batch: the descriptors' capacity.
    item_capacity: usize,
    /// (unit index, slot, compressed chunk) gathered for the next batch.
    pending: Vec<(usize, usize, Compressed)>,
    /// The items of `pending`.
    pending_items: usize,
    ring: Vec<BatchSlot>,
    next: usize,
}

impl DeviceBatches {
    /// True when the next ring entry is free (its last batch finished and was checked, or
    /// it never ran one), so a flush would not wait for the device.
    fn has_room(&self) -> bool {
        self.ring[self.next]
            .event
            .as_ref()
            .is_none_or(Event::is_complete)
    }

    fn new(
        ops: &dyn DeviceOps,
        compression: Compression,
        capacity: usize,
        item_capacity: usize,
        slots: &[Slot],
    ) -> Result<Self> {
        // A compressed chunk is at most a slot long (longer ones are decoded on the CPU);
        // 256-byte strides keep every chunk aligned as nvCOMP requires.
        let slot_bytes = slots.first().map_or(0, |s| s.staging.len());
        let stride = slot_bytes.div_ceil(256).max(1) * 256;
        let mut ring = Vec::with_capacity(BATCH_RING);
        for _ in 0..BATCH_RING {
            ring.push(BatchSlot {
                desc: ops.new_batch_desc(item_capacity)?,
                input: ops.alloc(stride * capacity)?,
                stride,
                event: None,
                items: Vec::new(),
                chunks: 0,
            });
        }
        for entry in &ring {
            entry.input.settle()?;
        }
        Ok(DeviceBatches {
            compression,
            queue: ops.new_queue()?,
            capacity,
            item_capacity,
            pending: Vec::new(),
            pending_items: 0,
            ring,
            next: 0,
        })
    }
}

fn elem_of(out: &NDBuffer) -> usize {
    out.dtype().size()
}
