//! The staged read pipeline: fetch → CPU decompress into a staging slot → copy to the device
//! → device kernels (byte swap + transpose + scatter, fused into one strided copy; fill for
//! missing chunks).
//!
//! Staging slots form a ring: worker threads decode unit k+1.. into free slots while the
//! device copies and scatters unit k. A slot is reused only after the device work that read
//! it has finished (its event). Host memory is bounded by the slot count × slot size.
//!
//! The pipeline is written against [`DeviceOps`]; with [`crate::device::HostOps`] every step runs
//! on the host, which is how CI exercises this logic without a GPU.

use crate::buffer::Buffer;
use crate::codec_plan::EncodedLayout;
use crate::device::{DeviceOps, Event, Queue};
use crate::dtype::ByteOrder;
use crate::error::{Error, Result};
use crate::ndbuffer::NDBuffer;
use crate::options::{Progress, ProgressFn};
use crate::units::Unit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use zarrbuf_codecs::Strided;

/// What decoding one unit into a staging slot produced.
pub(crate) enum Produced {
    /// The unit is not stored: it reads as the fill value.
    Missing,
    /// This many bytes were written at the start of the slot.
    Decoded(usize),
}

/// Fetches and decodes one unit into the slot (called on worker threads).
pub(crate) type Producer<'a> = dyn Fn(&Unit, &mut [u8]) -> Result<Produced> + Sync + 'a;

/// One staging slot: host-side staging memory, device-side scratch, the queue its work uses,
/// and (for reads) the event that marks the end of the device work that last read it.
pub(crate) struct Slot {
    pub staging: Buffer,
    pub scratch: Buffer,
    pub queue: Queue,
    pub pending: Mutex<Option<Event>>,
}

/// The slot ring for `units` of `elem`-byte elements: slots as large as the largest unit, as
/// many as [`slot_count`] allows, taken from the slot pool first.
pub(crate) fn allocate_slots(
    ops: &dyn DeviceOps,
    units: &[Unit],
    elem: usize,
    budget: usize,
    threads: usize,
) -> Result<Vec<Slot>> {
    let slot_bytes = ring_slot_bytes(units, elem);
    let n = slot_count(budget, slot_bytes, threads, units.len());
    let mut slots = crate::slot_pool::take(ops.memory(), slot_bytes, n);
    while slots.len() < n {
        slots.push(Slot {
            staging: ops.alloc_staging(slot_bytes)?,
            scratch: ops.alloc(slot_bytes)?,
            queue: ops.new_queue()?,
            pending: Mutex::new(None),
        });
    }
    Ok(slots)
}

fn ring_slot_bytes(units: &[Unit], elem: usize) -> usize {
    units
        .iter()
        .map(|u| u.num_elements() * elem)
        .max()
        .unwrap_or(0)
}

/// Drains every slot's queue (no device work may outlive a pipeline run) and, when that
/// worked, parks the slots for the next run.
pub(crate) fn finish(
    ops: &dyn DeviceOps,
    slots: Vec<Slot>,
    units: &[Unit],
    elem: usize,
) -> Result<()> {
    drain(ops, &slots)?;
    for s in &slots {
        if let Ok(mut p) = s.pending.lock() {
            *p = None;
        }
    }
    crate::slot_pool::give_back(ops.memory(), ring_slot_bytes(units, elem), slots);
    Ok(())
}

/// Waits for every slot's queue: no device work may outlive a pipeline run.
fn drain(ops: &dyn DeviceOps, slots: &[Slot]) -> Result<()> {
    slots.iter().try_for_each(|s| ops.synchronize(&s.queue))
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
}

/// Number of slots: what fits in the budget, at least two (double buffering), at most what
/// the workers and the device can keep busy.
pub(crate) fn slot_count(budget: usize, slot_bytes: usize, threads: usize, units: usize) -> usize {
    let fits = budget / slot_bytes.max(1);
    fits.clamp(2, (2 * threads + 2).max(2)).min(units.max(1))
}

impl StagedRead<'_> {
    /// Runs the pipeline, writing every unit's region of the request into `out`.
    pub(crate) fn run(&self, out: &NDBuffer, produce: &Producer<'_>) -> Result<()> {
        if self.units.is_empty() {
            return Ok(());
        }
        let elem = out.dtype().size();
        let slots = allocate_slots(
            self.ops.as_ref(),
            self.units,
            elem,
            self.staging_bytes,
            self.threads,
        )?;
        let result = self.run_with_slots(out, produce, &slots);
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
        let (ready_tx, ready_rx) = mpsc::channel::<(usize, usize, Result<Produced>)>();
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let workers = self.threads.clamp(1, slots.len().max(1));

        std::thread::scope(|scope| {
            for _ in 0..workers {
                let ready_tx = ready_tx.clone();
                let (free_rx, next, abort) = (&free_rx, &next, &abort);
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
                        let result = waited.and_then(|()| {
                            slot.staging
                                .with_host_mut(|bytes| produce(&self.units[i], bytes))
                        });
                        if ready_tx.send((i, slot_id, result)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(ready_tx);
            let outcome = self.submit_all(out, slots, &ready_rx, &free_tx, elem_of(out));
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
        ready: &mpsc::Receiver<(usize, usize, Result<Produced>)>,
        free: &mpsc::Sender<usize>,
        elem: usize,
    ) -> Result<()> {
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
        for _ in 0..self.units.len() {
            let (i, slot_id, produced) = ready
                .recv()
                .map_err(|_| Error::Cancelled("a decoding thread stopped unexpectedly".into()))?;
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
                Produced::Missing => {
                    self.ops
                        .fill(&slot.queue, out.buffer(), dst, &region_shape, &fill)?;
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
                    self.ops.copy(&slot.queue, &staged, &scratch)?;
                    let shape = unit.shape_usize();
                    let src_strides = self.layout.decoded_strides(&shape, elem);
                    let src_offset = unit.offset_in_unit(&src_strides);
                    let src = Strided {
                        offset: src_offset,
                        strides: &src_strides,
                    };
                    self.ops.strided_copy(
                        &slot.queue,
                        &scratch,
                        src,
                        out.buffer(),
                        dst,
                        &region_shape,
                        elem,
                        swap,
                    )?;
                }
            }
            let event = self.ops.record(&slot.queue)?;
            if let Ok(mut p) = slot.pending.lock() {
                *p = Some(event);
            }
            let _ = free.send(slot_id);
            progress.chunks_done += 1;
            progress.bytes_done += (region_shape.iter().product::<usize>() * elem) as u64;
            if let Some(cb) = &self.progress {
                cb(progress);
            }
        }
        Ok(())
    }
}

fn elem_of(out: &NDBuffer) -> usize {
    out.dtype().size()
}

#[cfg(test)]
mod tests {
    use super::slot_count;

    #[test]
    fn slots_fit_the_budget_but_never_fewer_than_two() {
        assert_eq!(slot_count(256 << 20, 1 << 20, 2, 1000), 6);
        assert_eq!(slot_count(1 << 20, 4 << 20, 8, 1000), 2);
        assert_eq!(slot_count(256 << 20, 1 << 20, 2, 1), 1);
    }
}
