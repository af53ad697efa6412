//! The staged read pipeline: fetch → CPU decompress into a staging slot → copy to the device
//! → device kernels (byte swap + transpose + scatter, fused into one strided copy; fill for
//! missing chunks).
//!
//! Staging slots form a ring: worker threads decode unit k+1.. into free slots while the
//! device copies and scatters unit k. A slot is reused only after the device work that read
//! it has finished (its event). Host memory is bounded by the slot count × slot size.
//!
//! The workers take units from one queue ([`super::hybrid::WorkQueue`]). With a device
//! decoder (`DeviceDecode`) the device takes batches of units from its front, sized by the
//! batch plan ([`super::batch_plan`]); the workers fetch and check those and hand them over
//! still compressed, and the coordinator gathers them into the batch's input buffer on the
//! device, has the device decompress the whole batch at once (nvCOMP on CUDA; its host twin
//! on the host) and scatters them with the same kernel ([`super::device_batches`]). In
//! hybrid mode the workers also decode units from the back of the queue themselves, as the
//! hybrid policy decides.
//!
//! The pipeline is written against [`DeviceOps`]; with [`crate::device::HostOps`] every step runs
//! on the host, which is how CI exercises this logic without a GPU.

use super::batch_plan::batch_plan;
use super::device_batches::DeviceBatches;
use super::device_cache::ReadCache;
use super::device_parts::{Compressed, DeviceDecode, Scatter};
use super::hybrid::{BatchId, Split, Take, WorkQueue};
use super::tuning::Tuning;
use super::{Slot, allocate_slots, finish};
use crate::buffer::NDBuffer;
use crate::data_types::ByteOrder;
use crate::device::{DeviceOps, Queue};
use crate::errors::{Error, Result};
use crate::memory::Region;
use crate::options::{Progress, ProgressFn};
use crate::zarr::{EncodedLayout, STREAM_ALIGN, Unit};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use zarrbuf_codecs::Strided;

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

/// Which decoder a unit taken by a worker is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decoder {
    /// The CPU: the unit is decoded into its slot.
    Cpu,
    /// The device decoder: a chunk it can decode is left compressed in the slot.
    Device,
}

/// Fetches one unit and decodes it into the slot (called on worker threads), or for
/// [`Decoder::Device`] may leave the chunk compressed for the device decoder.
pub(crate) type Producer<'a> = dyn Fn(&Unit, &mut [u8], Decoder) -> Result<Produced> + Sync + 'a;

/// How the workers of the host route ([`super::host_scatter`]) take units from the read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// One at a time: the units come from the fetch-ahead stage, which hands them out in
    /// the order the workers ask, so a worker holding a run would wait for a fetch that is
    /// not started while the others' units are parked.
    OneByOne,
    /// Runs of consecutive units: each unit's fetch is the worker's own (a file read), and
    /// one message to the coordinator per run, not per unit, keeps small chunks cheap.
    Runs,
}

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
    /// The decoded-chunk cache in the device's memory, when the read has one
    /// ([`super::device_cache`]).
    pub cache: Option<&'a ReadCache>,
    /// How the host route's workers take units.
    pub claim: Claim,
}

/// What a worker hands the coordinator for one unit.
struct Ready {
    unit: usize,
    slot: usize,
    produced: Result<Produced>,
    /// The device batch the unit was fetched for.
    batch: Option<BatchId>,
}

impl StagedRead<'_> {
    /// Runs the pipeline, writing every unit's region of the request into `out`.
    pub(crate) fn run(&self, out: &NDBuffer, produce: &Producer<'_>) -> Result<()> {
        match self.cache {
            Some(cache) if !self.units.is_empty() => self.run_cached(cache, out, produce),
            _ => self.run_staged(out, produce),
        }
    }

    /// Runs the pipeline over every unit (with a cache: over its misses).
    pub(super) fn run_staged(&self, out: &NDBuffer, produce: &Producer<'_>) -> Result<()> {
        if self.units.is_empty() {
            return Ok(());
        }
        // The slots' queues do not consult the output's fences operation by operation:
        // whatever is in flight on it (its allocation, a copy) is waited for once, here.
        out.buffer().region()?.settle()?;
        let elem = out.dtype().size();
        // Device batches hold no slots: their chunks leave the slots as they come.
        let slots = allocate_slots(
            self.ops.as_ref(),
            self.units,
            elem,
            self.staging_bytes,
            self.threads,
            0,
        )?;
        // A cached read takes the general route on the host twin too: its misses are
        // decoded into buffers of their own for the cache ([`super::device_cache`]).
        let result = if self.cache.is_none() && self.scatters_on_workers(out) {
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
        let abort = AtomicBool::new(false);
        let workers = self.threads.clamp(1, slots.len().max(1));
        let slot_bytes = slots.first().map_or(0, |s| s.staging.len());
        let device = match &self.device_decode {
            Some(d) => {
                let input = self.batch_plan_input(slot_bytes)?;
                let plan = batch_plan(input);
                // Reads of one batch or less split too: sent whole to the device, 128
                // chunks of 8 MiB read at 0.71× the CPU's rate on an H200 (gpu-run-25).
                let split = if d.hybrid && self.units.len() > 1 {
                    Split::Both
                } else {
                    Split::Device
                };
                Some((
                    split,
                    DeviceBatches::new(self.ops.as_ref(), d, plan, input)?,
                ))
            }
            None => None,
        };
        let (split, max_batch, tuning) = match &device {
            Some((split, d)) => (*split, d.chunks_per_batch(), d.plan_input.tuning),
            None => (Split::Cpu, 1, Tuning::DEFAULT),
        };
        let queue = WorkQueue::new(self.units.len(), split, max_batch, workers).with_tuning(tuning);
        let mut device = device.map(|(_, d)| d);

        let outcome = std::thread::scope(|scope| {
            for _ in 0..workers {
                let ready_tx = ready_tx.clone();
                let (free_rx, abort, queue) = (&free_rx, &abort, &queue);
                scope.spawn(move || {
                    while !abort.load(Ordering::Relaxed) {
                        let Some(take) = queue.next() else {
                            break;
                        };
                        let slot_id = match free_rx.lock().map(|rx| rx.recv()) {
                            Ok(Ok(s)) => s,
                            _ => break,
                        };
                        let slot = &slots[slot_id];
                        let waited = match slot.pending.lock().map(|mut p| p.take()) {
                            Ok(Some(event)) => event.wait(),
                            _ => Ok(()),
                        };
                        let (i, batch, decoder) = match take {
                            Take::Cpu(i) => (i, None, Decoder::Cpu),
                            Take::Device { unit, batch } => (unit, Some(batch), Decoder::Device),
                        };
                        let unit = &self.units[i];
                        let started = Instant::now();
                        let produced = waited.and_then(|()| {
                            slot.staging.with_host_mut(|bytes| {
                                produce(unit, bytes, decoder)?.into_slot(bytes, unit)
                            })
                        });
                        match (batch, &produced) {
                            (None, Ok(_)) => queue.cpu_done(started.elapsed()),
                            (Some(_), Ok(Produced::Compressed(_))) | (None, Err(_)) => {}
                            (Some(b), _) => queue.device_skipped(b.id),
                        }
                        let ready = Ready {
                            unit: i,
                            slot: slot_id,
                            produced,
                            batch,
                        };
                        if ready_tx.send(ready).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(ready_tx);
            let outcome = self.submit_all(out, slots, &ready_rx, &free_tx, &queue, device.as_mut());
            if outcome.is_err() {
                abort.store(true, Ordering::Relaxed);
                queue.stop();
            }
            // Unblock workers waiting for a slot.
            drop(free_tx);
            outcome
        });
        // Whatever happened, the decoder's queues are drained before its buffers go.
        let drained = device
            .as_ref()
            .map_or(Ok(()), |d| d.drain(self.ops.as_ref()));
        outcome.and(drained)
    }

    /// The coordinating loop: takes decoded units as they come and queues their device work.
    fn submit_all(
        &self,
        out: &NDBuffer,
        slots: &[Slot],
        ready: &mpsc::Receiver<Ready>,
        free: &mpsc::Sender<usize>,
        queue: &WorkQueue,
        mut device: Option<&mut DeviceBatches>,
    ) -> Result<()> {
        let elem = out.dtype().size();
        let swap = if self.layout.endian == out.byte_order() {
            0
        } else {
            out.dtype().swap_unit()
        };
        let mut fill = self.fill_value.clone();
        if out.byte_order() != ByteOrder::native() {
            zarrbuf_codecs::host::byte_swap(&mut fill, out.dtype().swap_unit())?;
        }
        let mut progress = Progress {
            chunks_done: 0,
            chunks_total: self.units.len(),
            bytes_done: 0,
        };
        let stopped = || Error::Cancelled("a decoding thread stopped unexpectedly".into());
        let scatter = Scatter { out, elem, swap };
        for _ in 0..self.units.len() {
            if let Some(d) = device.as_deref_mut() {
                // Finished batches tell the queue the device's pace and make room for more.
                self.settle_finished(d, queue)?;
            }
            let message = loop {
                match ready.try_recv() {
                    Ok(m) => break m,
                    Err(TryRecvError::Disconnected) => return Err(stopped()),
                    Err(TryRecvError::Empty) => {}
                }
                let Some(d) = device.as_deref_mut() else {
                    break ready.recv().map_err(|_| stopped())?;
                };
                // Nothing ready: check finished batches (workers may be waiting for the
                // device to have room for another).
                self.settle_finished(d, queue)?;
                match ready.recv_timeout(std::time::Duration::from_micros(200)) {
                    Ok(m) => break m,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Err(stopped()),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
            };
            let Ready {
                unit: i,
                slot: slot_id,
                produced,
                batch,
            } = message;
            let unit = &self.units[i];
            let slot = &slots[slot_id];
            let region_shape = unit.region_shape();
            let dst_offset =
                unit.offset_in_request(&self.request_start, out.offset(), out.strides());
            let dst = Strided {
                offset: dst_offset,
                strides: out.strides(),
            };
            match produced? {
                Produced::Missing => self.place_missing(i, slot, dst, &fill, &scatter)?,
                Produced::Stored(_) => {
                    return Err(Error::InvalidArgument(
                        "stored bytes reached the coordinator (internal error: please report)"
                            .into(),
                    ));
                }
                Produced::Compressed(chunk) => {
                    let (Some(d), Some(batch)) = (device.as_deref_mut(), batch) else {
                        return Err(Error::InvalidArgument(
                            "a chunk was left compressed without a device decoder (internal error: please report)".into(),
                        ));
                    };
                    self.gather(
                        d,
                        batch,
                        i,
                        (slot_id, slot),
                        chunk,
                        free,
                        &scatter,
                        &mut progress,
                        queue,
                    )?;
                    self.arrived(d, batch, &scatter, &mut progress, queue)?;
                    continue;
                }
                Produced::Decoded(len) => self.place_staged(i, slot, len, &scatter)?,
            }
            let event = self.ops.record(&slot.queue)?;
            if let Ok(mut p) = slot.pending.lock() {
                *p = Some(event);
            }
            let _ = free.send(slot_id);
            self.report(&mut progress, &region_shape, elem);
            if let (Some(d), Some(batch)) = (device.as_deref_mut(), batch) {
                self.arrived(d, batch, &scatter, &mut progress, queue)?;
            }
        }
        if let Some(d) = device {
            self.finish_batches(d, &scatter, &mut progress, queue)?;
        }
        Ok(())
    }

    /// Enqueues the fill of missing unit `i`'s region (`dst` in the output) on its slot's
    /// queue; with a cache, the fill goes into the unit's cache buffer, kept, and is
    /// scattered from there.
    fn place_missing(
        &self,
        i: usize,
        slot: &Slot,
        dst: Strided<'_>,
        fill: &[u8],
        s: &Scatter<'_>,
    ) -> Result<()> {
        let unit = &self.units[i];
        match self.new_kept(unit, s.elem)? {
            None => self.ops.fill(
                &slot.queue,
                s.out.buffer().region()?,
                dst,
                &unit.region_shape(),
                fill,
            ),
            Some(kept) => {
                self.fill_kept(&slot.queue, unit, &kept, s.out)?;
                self.keep_now(&slot.queue, i, kept)
            }
        }
    }

    /// Enqueues the copy of unit `i`, decoded into the first `len` bytes of its slot, to the
    /// device and its scatter into the output, on the slot's queue; with a cache, through
    /// the unit's cache buffer, kept at once (the CPU decoded it: it succeeded).
    fn place_staged(&self, i: usize, slot: &Slot, len: usize, s: &Scatter<'_>) -> Result<()> {
        let unit = &self.units[i];
        let expected = unit.num_elements() * s.elem;
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
        match self.new_kept(unit, s.elem)? {
            None => {
                self.ops
                    .copy(&slot.queue, staged.region()?, scratch.region()?)?;
                self.scatter(&slot.queue, unit, scratch.region()?, s)
            }
            Some(kept) => {
                self.stage_kept(&slot.queue, unit, (&staged, &scratch), &kept, s.out)?;
                self.keep_now(&slot.queue, i, kept)
            }
        }
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
    pub(super) fn scatter(
        &self,
        q: &Queue,
        unit: &Unit,
        decoded: &crate::memory::Region,
        s: &Scatter<'_>,
    ) -> Result<()> {
        let one = self.decoded_scatter(unit, decoded, s);
        self.enqueue_scatters(q, &[one], s.out)
    }

    /// True when the whole unit, decoded, is exactly one contiguous run of `out`: nothing to
    /// transpose or swap (`swap` is the byte-swap unit, 0 for none), and the output's strides
    /// are the unit's C strides.
    pub(super) fn is_one_run(&self, unit: &Unit, out: &NDBuffer, swap: usize) -> bool {
        if !unit.is_whole() || self.layout.order.is_some() || swap != 0 {
            return false;
        }
        let shape = unit.shape_usize();
        let c = crate::data_types::Order::C.strides(&shape, out.dtype().size());
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
    pub(super) fn direct_target(
        &self,
        unit: &Unit,
        s: &Scatter<'_>,
        align: usize,
    ) -> Result<Option<Region>> {
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
}
