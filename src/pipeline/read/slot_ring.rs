//! The general route of a staged read: worker threads decode units into a ring of staging
//! slots, and the coordinator copies each to the device and scatters it into the output
//! (one strided-copy kernel: byte swap + transpose + scatter; a fill for a missing unit).
//!
//! Slots form a ring: the workers decode unit k+1.. into free slots while the device copies
//! and scatters unit k. A slot is reused only after the device work that read it has
//! finished (its event), so host memory is bounded by the slot count × slot size.
//!
//! The workers take units from one queue ([`crate::pipeline::gpu_decode::hybrid::WorkQueue`]). With a device
//! decoder (`DeviceDecode`) the device takes batches of units from its front, sized by the
//! batch plan ([`crate::pipeline::gpu_decode::batch_plan`]); the workers fetch and check those and hand them over
//! still compressed, and the coordinator gathers them into the batch's input buffer on the
//! device, has the device decompress the whole batch at once (nvCOMP on CUDA; its host twin
//! on the host) and scatters them with the same kernel ([`crate::pipeline::gpu_decode::device_batches`]). In
//! hybrid mode the workers also decode units from the back of the queue themselves, as the
//! hybrid policy decides. With a cache, each unit goes through a buffer of its own that
//! the cache keeps ([`crate::pipeline::cache::miss_keeper`]).

use super::scatter::{PendingScatter, Scatter};
use super::staged_read::{Decoder, Producer};
use crate::buffer::NDBuffer;
use crate::device::Queue;
use crate::errors::{Error, Result};
use crate::pipeline::cache::miss_keeper::MissKeeper;
use crate::pipeline::gpu_decode::device_batches::DeviceBatches;
use crate::pipeline::gpu_decode::device_parts::DeviceDecode;
use crate::pipeline::gpu_decode::hybrid::{BatchId, Split, Take, WorkQueue};
use crate::pipeline::gpu_decode::tuning::Tuning;
use crate::pipeline::{Produced, Slot, StagedRead};
use crate::zarr::Unit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::time::Instant;
use zarrbuf_codecs::Strided;

/// What a worker hands the coordinator for one unit.
struct Ready {
    unit: usize,
    slot: usize,
    produced: Result<Produced>,
    /// The device batch the unit was fetched for.
    batch: Option<BatchId>,
}

/// The general route of one read: the read, its ring of slots, the device decoder's
/// settings when it has one, and what keeps its units for a cache.
pub(super) struct SlotRing<'r> {
    pub(super) read: &'r StagedRead<'r>,
    pub(super) slots: &'r [Slot],
    pub(super) device_decode: Option<DeviceDecode>,
    pub(super) keep: MissKeeper<'r>,
}

impl SlotRing<'_> {
    /// Runs the route: the workers decode into the slots, this thread coordinates.
    pub(super) fn run(&self, out: &NDBuffer, produce: &Producer<'_>) -> Result<()> {
        let (read, slots) = (self.read, self.slots);
        let (free_tx, free_rx) = mpsc::channel::<usize>();
        for i in 0..slots.len() {
            free_tx.send(i).expect("receiver alive");
        }
        let free_rx = Mutex::new(free_rx);
        let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
        let abort = AtomicBool::new(false);
        let workers = read.threads.clamp(1, slots.len().max(1));
        let slot_bytes = slots.first().map_or(0, |s| s.staging.len());
        let device = match &self.device_decode {
            Some(d) => {
                // Reads of one batch or less split too: sent whole to the device, 128
                // chunks of 8 MiB read at 0.71× the CPU's rate on an H200 (gpu-run-25).
                let split = if d.hybrid && read.units.len() > 1 {
                    Split::Both
                } else {
                    Split::Device
                };
                Some((split, DeviceBatches::new(read, self.keep, d, slot_bytes)?))
            }
            None => None,
        };
        let (split, max_batch, tuning) = match &device {
            Some((split, d)) => (*split, d.chunks_per_batch(), d.tuning()),
            None => (Split::Cpu, 1, Tuning::DEFAULT),
        };
        let queue = WorkQueue::new(read.units.len(), split, max_batch, workers).with_tuning(tuning);
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
                        let unit = &read.units[i];
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
            let outcome = self.submit_all(out, &ready_rx, &free_tx, &queue, device.as_mut());
            if outcome.is_err() {
                abort.store(true, Ordering::Relaxed);
                queue.stop();
            }
            // Unblock workers waiting for a slot.
            drop(free_tx);
            outcome
        });
        // Whatever happened, the decoder's queues are drained before its buffers go.
        let drained = device.as_ref().map_or(Ok(()), |d| d.drain());
        outcome.and(drained)
    }

    /// The coordinating loop: takes decoded units as they come and queues their device work.
    fn submit_all(
        &self,
        out: &NDBuffer,
        ready: &mpsc::Receiver<Ready>,
        free: &mpsc::Sender<usize>,
        queue: &WorkQueue,
        mut device: Option<&mut DeviceBatches<'_>>,
    ) -> Result<()> {
        let read = self.read;
        let elem = out.dtype().size();
        let swap = read.swap_into(out);
        let fill = read.fill_for(out)?;
        let mut progress = read.no_progress();
        let stopped = || Error::Cancelled("a decoding thread stopped unexpectedly".into());
        let scatter = Scatter { out, elem, swap };
        for _ in 0..read.units.len() {
            if let Some(d) = device.as_deref_mut() {
                // Finished batches tell the queue the device's pace and make room for more.
                d.settle_finished(queue)?;
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
                d.settle_finished(queue)?;
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
            let unit = &read.units[i];
            let slot = &self.slots[slot_id];
            let region_shape = unit.region_shape();
            let dst_offset =
                unit.offset_in_request(&read.request_start, out.offset(), out.strides());
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
                    d.gather(
                        batch,
                        i,
                        (slot_id, slot),
                        chunk,
                        free,
                        &scatter,
                        &mut progress,
                        queue,
                    )?;
                    d.arrived(batch, &scatter, &mut progress, queue)?;
                    continue;
                }
                Produced::Decoded(len) => self.place_staged(i, slot, len, &scatter)?,
            }
            let event = read.ops.record(&slot.queue)?;
            if let Ok(mut p) = slot.pending.lock() {
                *p = Some(event);
            }
            let _ = free.send(slot_id);
            read.report(&mut progress, &region_shape, elem);
            if let (Some(d), Some(batch)) = (device.as_deref_mut(), batch) {
                d.arrived(batch, &scatter, &mut progress, queue)?;
            }
        }
        if let Some(d) = device {
            d.finish_batches(&scatter, &mut progress, queue)?;
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
        let unit = &self.read.units[i];
        match self.keep.new_kept(unit, s.elem)? {
            None => self.read.ops.fill(
                &slot.queue,
                s.out.buffer().region()?,
                dst,
                &unit.region_shape(),
                fill,
            ),
            Some(kept) => {
                self.keep.fill_kept(&slot.queue, unit, &kept, s.out)?;
                self.keep.keep_now(&slot.queue, i, kept)
            }
        }
    }

    /// Enqueues the copy of unit `i`, decoded into the first `len` bytes of its slot, to the
    /// device and its scatter into the output, on the slot's queue; with a cache, through
    /// the unit's cache buffer, kept at once (the CPU decoded it: it succeeded).
    fn place_staged(&self, i: usize, slot: &Slot, len: usize, s: &Scatter<'_>) -> Result<()> {
        let unit = &self.read.units[i];
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
        match self.keep.new_kept(unit, s.elem)? {
            None => {
                self.read
                    .ops
                    .copy(&slot.queue, staged.region()?, scratch.region()?)?;
                self.scatter(&slot.queue, unit, scratch.region()?, s)
            }
            Some(kept) => {
                self.keep
                    .stage_kept(&slot.queue, unit, (&staged, &scratch), &kept, s.out)?;
                self.keep.keep_now(&slot.queue, i, kept)
            }
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
        PendingScatter::decoded(self.read, unit, decoded, s).enqueue(
            self.read.ops.as_ref(),
            q,
            s.out,
        )
    }
}
